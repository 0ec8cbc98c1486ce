/* kv_eval.c -- `longattn kv-eval`: KV-cache policy evaluation (la_kv_eval_run,
 * src/tasks/kv_eval_run.c): parse the options, run it with a progress printer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "longattn.h"

static void usage(FILE *f) {
    static const cli_opt opts[] = {
        {"--ckpt FILE", "model weights (from `longattn train` or `longattn study`)"},
        {"--passkey-ckpt F", "score the passkey with these weights instead (e.g. the study's\n"
                             "passkey_<i>_<spec>.safetensors, fine-tuned on the task); same\n"
                             "model config and spec as --ckpt. Losses always use --ckpt"},
        {"--data DIR", "text documents; DIR/val is used when it exists"},
        {"--out DIR", "output folder (default runs/kv-eval): kv_eval.md, kv_eval.csv, kv_eval.png"},
        {"--lens A,B,...", "context lengths (default L,2L,4L,8L,16L; L = the model's train_len)"},
        {"--policies P;Q;..", "cache policies separated by ';' (default, with L the training length:\n"
                              "full; window(L); sinks(4,L-4); h2o(L/2,L/2); int8; sinks(4,L-4)+int8)"},
        {"--windows N", "validation windows per length (default 4)"},
        {"--trials N", "passkey examples per length, depths spread over [0.1, 0.9] (default 6; 0 = off)"},
        {"--chunk N", "tokens per decoding step under evicting policies (default 1 = exact\n"
                      "streaming; larger is faster: queries of a chunk share its eviction)"},
        {"--seed S", "windows and passkeys (default 1)"},
        {NULL, NULL},
    };
    cli_help(f, "longattn kv-eval --ckpt FILE --data DIR [options]",
             "Evaluate a byte-level checkpoint decoded through the KV cache under several policies:\n"
             "validation loss (bits per byte) and passkey accuracy at each length, and the cache size.",
             opts, NULL);
}

static void on_progress(void *user, const la_kv_eval_progress *p) {
    (void)user;
    if (p->event == LA_KV_EVAL_NOTE) {
        fprintf(stderr, "longattn kv-eval: %s\n", p->message);
        return;
    }
    fprintf(stderr, "[kv-eval] %-28s len %6d: %.4f bits/byte, passkey %d/%d (digits %d/%d), cache %lld tokens (%.0f s)\n",
            p->policy, p->len, p->bits, p->hits, p->n_passkey, p->digit_hits, p->n_digits, (long long)p->cache_tokens,
            p->elapsed_s);
}

int cli_kv_eval(int argc, char **argv) {
    const char *cmd = "kv-eval", *ckpt = NULL, *pk_ckpt = NULL, *data = NULL, *out = "runs/kv-eval", *lens_s = NULL, *pols_s = NULL;
    long windows = 4, trials = 6, chunk_opt = 1, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) return cli_usage_error(cmd, "option '%s' needs a value (or is unknown)", a);
        const char *val = argv[++i];
        if (val[0] == '-' && val[1] == '-')
            return cli_usage_error(cmd, "option '%s' needs a value, got the option '%s'", a, val);
        if (!strcmp(a, "--ckpt")) ckpt = val;
        else if (!strcmp(a, "--passkey-ckpt")) pk_ckpt = val;
        else if (!strcmp(a, "--data")) data = val;
        else if (!strcmp(a, "--out")) out = val;
        else if (!strcmp(a, "--lens")) lens_s = val;
        else if (!strcmp(a, "--policies")) pols_s = val;
        else if (!strcmp(a, "--windows") || !strcmp(a, "--trials") || !strcmp(a, "--chunk") || !strcmp(a, "--seed")) {
            long long v;
            long lo = !strcmp(a, "--trials") || !strcmp(a, "--seed") ? 0 : 1;
            if (cli_parse_int(val, lo, 1000000, &v))
                return cli_usage_error(cmd, "%s expects an integer in [%ld, 1000000], got '%s'", a, lo, val);
            if (!strcmp(a, "--windows")) windows = v;
            else if (!strcmp(a, "--trials")) trials = v;
            else if (!strcmp(a, "--chunk")) chunk_opt = v;
            else seed = v;
        } else return cli_usage_error(cmd, "unknown option '%s'", a);
    }
    if (!ckpt) return cli_usage_error(cmd, "--ckpt FILE is required");
    if (!data) return cli_usage_error(cmd, "--data DIR is required");
    la_kv_eval_opts o = la_kv_eval_opts_default();
    o.ckpt = ckpt;
    o.passkey_ckpt = pk_ckpt;
    o.data = data;
    o.out = out;
    o.policies = pols_s;
    o.windows = (int)windows;
    o.trials = (int)trials;
    o.chunk = (int)chunk_opt;
    o.seed = (uint64_t)seed;
    if (lens_s) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", lens_s);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            long long v;
            if (cli_parse_int(t, 2, 1L << 24, &v) || o.n_lens >= LA_KV_EVAL_MAX_LENS ||
                (o.n_lens > 0 && v <= o.lens[o.n_lens - 1]))
                return cli_usage_error(cmd, "--lens: '%s' must be increasing integers >= 2 (at most %d)", lens_s,
                                       LA_KV_EVAL_MAX_LENS);
            o.lens[o.n_lens++] = (int)v;
        }
        if (o.n_lens == 0) return cli_usage_error(cmd, "--lens is empty");
    }
    la_status st = la_kv_eval_run(&o, on_progress, NULL);
    if (st == LA_ESPEC) return cli_usage_error(cmd, "--policies: %s", la_errmsg());
    if (st != LA_OK) {
        fprintf(stderr, "longattn kv-eval: %s\n", la_errmsg());
        return 1;
    }
    printf("wrote %s/kv_eval.md, %s/kv_eval.csv, %s/kv_eval.png\n", out, out, out);
    return 0;
}
