/* bench_train.c -- `longattn bench train`: training throughput of the GPT (tokens/s) and the
 * share of the step spent in attention (la_attn_forward/backward) vs matrix products
 * (cblas_sgemm), for a stated configuration. Random tokens; AdamW steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli/cli.h"
#include "core/internal.h"
#include "longattn.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: longattn bench train [options]\n"
            "  --layers N (4)  --d-model N (256)  --heads N (8)  --seq-len T (256)  --batch B (8)\n"
            "  --spec TEXT (softmax+rope+causal)  --steps N timed steps (5)  --optimizer adamw|muon\n"
            "  --study         the default study's size: 4 layers, d_model 128, 4 heads, T 128, B 16\n"
            "  --json          one JSON object: tokens_per_s, step_s, attention_share, matmul_share, config\n");
}

int bench_train(int argc, char **argv) {
    la_model_config mc = la_model_config_default();
    mc.n_layer = 4;
    mc.d_model = 256;
    mc.n_head = 8;
    int T = 256, B = 8, steps = 5, json = 0;
    la_optimizer opt = LA_OPT_ADAMW;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--study")) {
            mc.n_layer = 4; mc.d_model = 128; mc.n_head = 4; T = 128; B = 16;
            continue;
        }
        if (i + 1 >= argc) { fprintf(stderr, "longattn bench train: %s needs a value\n", a); return 2; }
        const char *v = argv[++i];
        int x = atoi(v);
        if (!strcmp(a, "--spec")) snprintf(mc.spec, sizeof mc.spec, "%s", v);
        else if (!strcmp(a, "--optimizer")) {
            if (!strcmp(v, "muon")) opt = LA_OPT_MUON;
            else if (strcmp(v, "adamw")) { fprintf(stderr, "longattn bench train: --optimizer adamw|muon\n"); return 2; }
        } else if (x < 1) { fprintf(stderr, "longattn bench train: %s expects a positive integer\n", a); return 2; }
        else if (!strcmp(a, "--layers")) mc.n_layer = x;
        else if (!strcmp(a, "--d-model")) mc.d_model = x;
        else if (!strcmp(a, "--heads")) mc.n_head = x;
        else if (!strcmp(a, "--seq-len")) T = x;
        else if (!strcmp(a, "--batch")) B = x;
        else if (!strcmp(a, "--steps")) steps = x;
        else { fprintf(stderr, "longattn bench train: unknown option '%s'\n", a); usage(stderr); return 2; }
    }
    mc.train_len = T;
    la_model *m = NULL;
    la_trainer *tr = NULL;
    if (la_model_new(&mc, 1, &m) != LA_OK) {
        fprintf(stderr, "longattn bench train: %s\n", la_errmsg());
        return 1;
    }
    la_train_config tc = la_train_config_default();
    tc.B = B;
    tc.T = T;
    tc.steps = steps + 1;
    tc.optimizer = opt;
    if (la_trainer_new(m, NULL, &tc, &tr) != LA_OK) {
        fprintf(stderr, "longattn bench train: %s\n", la_errmsg());
        la_model_free(m);
        return 1;
    }
    size_t N = (size_t)B * T;
    int32_t *tok = malloc(N * sizeof(int32_t)), *tgt = malloc(N * sizeof(int32_t));
    la_rng r;
    la_rng_seed(&r, 7);
    for (size_t i = 0; i < N; i++) {
        tok[i] = (int32_t)la_rng_below(&r, mc.vocab);
        tgt[i] = (int32_t)la_rng_below(&r, mc.vocab);
    }
    int rc = 0;
    la_step_info info;
    /* one untimed step: buffers are allocated and pages touched */
    if (la_trainer_step_batch(tr, tok, tgt, B, T, &info) != LA_OK) rc = 1;
    la_model_reset_timing(m);
    double *st = malloc(sizeof(double) * steps);
    double t0 = cli_now();
    for (int s = 0; s < steps && !rc; s++) {
        double a = cli_now();
        if (la_trainer_step_batch(tr, tok, tgt, B, T, &info) != LA_OK) rc = 1;
        st[s] = cli_now() - a;
    }
    double wall = cli_now() - t0;
    if (rc) {
        fprintf(stderr, "longattn bench train: %s\n", la_errmsg());
    } else {
        la_model_timing tm;
        la_model_get_timing(m, &tm);
        double step_s = bench_median(st, steps);
        double tps = (double)N * steps / wall;
        double attn = tm.attn_s / wall, mm = tm.matmul_s / wall;
        const la_model_config *c = la_model_get_config(m);
        if (json) {
            printf("{\"tokens_per_s\": %.1f, \"step_s\": %.4f, \"attention_share\": %.4f, "
                   "\"matmul_share\": %.4f, \"config\": {\"n_layer\": %d, \"d_model\": %d, "
                   "\"n_head\": %d, \"d_ff\": %d, \"vocab\": %d, \"T\": %d, \"B\": %d, "
                   "\"spec\": \"%s\", \"optimizer\": \"%s\", \"steps\": %d}}\n",
                   tps, step_s, attn, mm, c->n_layer, c->d_model, c->n_head, c->d_ff, c->vocab, T,
                   B, c->spec, opt == LA_OPT_MUON ? "muon" : "adamw", steps);
        } else {
            printf("train: %d layers, d_model %d, %d heads, T %d, B %d, %s, %s\n", c->n_layer,
                   c->d_model, c->n_head, T, B, c->spec, opt == LA_OPT_MUON ? "muon" : "adamw");
            printf("  %.0f tokens/s, median step %.3f s over %d steps\n", tps, step_s, steps);
            printf("  share of step time: attention %.1f%%, matrix products %.1f%%, other %.1f%%\n",
                   100 * attn, 100 * mm, 100 * (1 - attn - mm));
        }
    }
    free(st);
    free(tok);
    free(tgt);
    la_trainer_free(tr);
    la_model_free(m);
    return rc;
}
