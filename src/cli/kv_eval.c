/* kv_eval.c -- `longattn kv-eval`: KV-cache policy evaluation (la_kv_eval_run,
 * src/runner/kv_eval_run.c): parse the options, run it with a progress printer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "longattn.h"

static const cli_doc DOC = {
    "longattn kv-eval --ckpt FILE --data DIR [options]",
    "Evaluate a byte-level checkpoint decoded through the KV cache under several policies:\n"
    "validation loss (bits per byte) and passkey accuracy at each length, and the cache size.",
    NULL,
    0,
};

static void on_progress(void *user, const la_kv_eval_progress *p) {
    if (p->event == LA_KV_EVAL_NOTE) {
        if (strstr(p->message, "gnuplot")) *(int *)user = 1; /* no kv_eval.png */
        fprintf(stderr, "longattn kv-eval: %s\n", p->message);
        return;
    }
    fprintf(stderr, "[kv-eval] %-28s len %6d: %.4f bits/byte, passkey %d/%d (digits %d/%d), cache %lld tokens (%.0f s)\n",
            p->policy, p->len, p->bits, p->hits, p->n_passkey, p->digit_hits, p->n_digits, (long long)p->cache_tokens,
            p->elapsed_s);
}

int cli_kv_eval(int argc, char **argv) {
    const char *cmd = "kv-eval", *lens_s = NULL;
    long seed = 1;
    la_kv_eval_opts o = la_kv_eval_opts_default(); /* the options' defaults */
    cli_arg args[] = {
        CLI_A_STR("--ckpt FILE", "model weights (from `longattn train` or `longattn study`)", &o.ckpt),
        CLI_A_STR("--passkey-ckpt F", "score the passkey with these weights instead (e.g. the study's\n"
                                      "passkey_<i>_<spec>.safetensors, fine-tuned on the task); same\n"
                                      "model config and spec as --ckpt. Losses always use --ckpt", &o.passkey_ckpt),
        CLI_A_STR("--data DIR", "text documents; DIR/val is used when it exists", &o.data),
        CLI_A_STR("--out DIR", "output folder (default runs/kv-eval): kv_eval.md, kv_eval.csv, kv_eval.png", &o.out),
        CLI_A_STR("--lens A,B,...", "context lengths (default L,2L,4L,8L,16L; L = the model's train_len)", &lens_s),
        CLI_A_STR("--policies P;Q;..", "cache policies separated by ';' (default, with L the training length:\n"
                                       "full; window(L); sinks(4,L-4); h2o(L/2,L/2); int8; sinks(4,L-4)+int8)",
                  &o.policies),
        CLI_A_INT("--windows N", "validation windows per length (default 4)", &o.windows, 1, 1000000),
        CLI_A_INT("--trials N", "passkey examples per length, depths spread over [0.1, 0.9] (default 6; 0 = off)",
                  &o.trials, 0, 1000000),
        CLI_A_INT("--chunk N", "tokens per decoding step under evicting policies (default 1 = exact\n"
                               "streaming; larger is faster: queries of a chunk share its eviction)",
                  &o.chunk, 1, 1000000),
        CLI_A_LONG("--seed S", "windows and passkeys (default 1)", &seed, 0, 1000000),
        CLI_A_FN("--kv-type TYPE", "element type of policies that name none: f32 | f16 | bf16 | int8 |\n"
                                   "int8(group=g) (default f32)", cli_kv_type_arg, &o.kv_type),
        CLI_A_END,
    };
    int rc = cli_parse(cmd, &DOC, args, argc, argv);
    if (rc >= 0) return rc;
    if (!o.ckpt) return cli_usage_error(cmd, "--ckpt FILE is required");
    if (!o.data) return cli_usage_error(cmd, "--data DIR is required");
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
    int no_png = 0;
    la_status st = la_kv_eval_run(&o, on_progress, &no_png);
    if (st == LA_ESPEC) return cli_usage_error(cmd, "%s: %s", o.kv_type ? "--policies / --kv-type" : "--policies", la_errmsg());
    if (st != LA_OK) {
        fprintf(stderr, "longattn kv-eval: %s\n", la_errmsg());
        return 1;
    }
    printf("wrote %s/kv_eval.md, %s/kv_eval.csv%s%s%s\n", o.out, o.out, no_png ? "" : ", ", no_png ? "" : o.out,
           no_png ? " (no plot: see the note above)" : "/kv_eval.png");
    return 0;
}
