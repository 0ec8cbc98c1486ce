/* diagnose.c -- `longattn diagnose`: attention mass and entropy per distance range
 * [t, t*delta). The library runs both modes and writes their files (la_diagnose_ckpt_run,
 * la_diagnose_gaussian_run: src/runner/diagnose_run.c; accumulator: src/attn/diag_stats.c);
 * this file parses the options, calls them and prints the tables.
 *   --gaussian   the scale-invariance check under the Gaussian model of Anson et al. 2025:
 *                logits N(0,1) i.i.d. per key for a query at position N, transformed by each
 *                spec (default: plain softmax, logn, sinv), averaged over draws.
 *   --ckpt       a trained model on a text: per layer and head, mass and entropy per range
 *                of the model's own attention on N bytes of the text (la_model_diagnose:
 *                probabilities recomputed tile by tile, no N x N buffer).
 *   --passkey    a fine-tuned model on the study's passkey examples: per layer and head,
 *                the mass the answer rows put on the needle (la_diagnose_passkey_run). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "core/internal.h"
#include "longattn.h"

#define MAX_SPECS 16

static const char *DEFAULT_SPECS[] = {"softmax+causal", "softmax+logn(train=4096)+causal", "softmax+sinv(tau=10)+causal"};

static const cli_doc DOC = {
    "longattn diagnose --ckpt MODEL --text FILE|DIR [options]\n"
    "longattn diagnose --ckpt MODEL --passkey LENS [--data DIR] [--depths D,..]\n"
    "                  [--trials K] [--seed S] [--threads N] [--out DIR]\n"
    "longattn diagnose --gaussian [options]",
    "Attention mass and entropy (renormalised within the range) per distance range\n"
    "[t, t*delta) (Anson et al. 2025, scale-invariant attention: total attention per\n"
    "range roughly constant and entropy growing slower than log t).",
    "Gaussian-model checks, over the complete ranges with t >= delta: total attention per\n"
    "range roughly constant (max/min <= 2) and entropy growing slower than log t (slope of\n"
    "entropy against log t <= 0.5; uniform attention has slope 1).",
    0,
};

/* --spec (repeatable) into a spec_list */
typedef struct {
    const char *v[MAX_SPECS];
    int n;
} spec_list;

static int spec_arg(const char *cmd, const char *opt, const char *val, void *dest) {
    spec_list *l = dest;
    if (l->n == MAX_SPECS) return cli_usage_error(cmd, "at most %d %s options", MAX_SPECS, opt);
    l->v[l->n++] = val;
    return 0;
}

/* ---- checkpoint mode: la_diagnose_ckpt_run, then the per layer and head table ---- */

static void on_start(void *user, const la_diagnose_ckpt_result *r) {
    const la_diagnose_ckpt_opts *o = user;
    const la_model_config *cfg = &r->config;
    printf("model %s: %d layers, %d heads (%d kv), d_model %d, trained at %d, spec %s\n", o->ckpt, cfg->n_layer,
           cfg->n_head, cfg->n_kv_head ? cfg->n_kv_head : cfg->n_head, cfg->d_model, cfg->train_len, cfg->spec);
    printf("text %s: %d bytes from offset %lld; ranges [t, %gt)\n", r->text_path, (int)o->N, (long long)o->offset,
           o->delta);
    fflush(stdout);
}

static int run_ckpt(const la_diagnose_ckpt_opts *o) {
    if (o->N > 65536) return cli_usage_error("diagnose", "--n %lld: the checkpoint mode takes at most 65536 tokens", (long long)o->N);
    if (o->N < 2) return cli_usage_error("diagnose", "--n %lld: the checkpoint mode needs at least 2 tokens", (long long)o->N);
    la_diagnose_ckpt_result r;
    if (la_diagnose_ckpt_run(o, on_start, (void *)o, &r) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        return 1;
    }
    const int L = r.config.n_layer, H = r.config.n_head, N = (int)o->N;
    const int64_t lo_min = (int64_t)ceil(o->delta);
    printf("la_model_diagnose: %.1f s (%d layers x %d heads, N = %d)\n\n", r.seconds, L, H, N);
    printf("per layer and head, over the complete ranges with t >= %lld (mass max/min; slope of the\n"
           "entropy against log t, uniform attention = 1):\n", (long long)lo_min);
    printf("  layer head  mass_ratio  entropy_slope  ranges   mass per range [lo..]\n");
    for (int i = 0; i < L * H; i++) {
        double ratio, slope;
        int used = 0;
        la_diag_summary(r.diag[i], lo_min, &ratio, &slope, &used);
        if (used >= 2) printf("  %5d %4d  %10.3g  %13.3f  %6d  ", i / H, i % H, ratio, slope, used);
        else printf("  %5d %4d  %10s  %13s  %6d  ", i / H, i % H, "n/a", "n/a", used); /* < 2 ranges */
        for (int rg = 0; rg < la_diag_num_ranges(r.diag[i]); rg++) {
            la_diag_result res;
            la_diag_get(r.diag[i], rg, &res);
            if (res.rows) printf(" %.3g", res.mass);
        }
        printf("\n");
    }
    printf("\nwrote %s/diagnose.csv\nwrote %s/summary.csv\n", o->out, o->out);
    if (r.config.spec[0] && strstr(r.config.spec, "+sink")) /* issue 31: sinks.csv, the sink mass by span */
        printf("wrote %s/sinks.csv\n", o->out);
    if (o->plot) {
        if (r.gnuplot_exit == 0) printf("wrote %s/diagnose.png\n", o->out);
        else fprintf(stderr, "longattn diagnose: gnuplot failed (exit %d); the data is in %s/diagnose.csv, the script in "
                     "%s/diagnose.gp\n", r.gnuplot_exit, o->out, o->out);
    }
    la_diagnose_ckpt_free(&r);
    return 0;
}

/* ---- passkey mode: la_diagnose_passkey_run, then per length the heads' needle mass ---- */

/* "a,b,c" into out (at most cap numbers in [lo, hi]); returns the count, -1 on a bad list */
static int parse_list(const char *s, double lo, double hi, double *out, int cap) {
    int n = 0;
    char buf[64];
    while (*s) {
        const char *c = strchr(s, ',');
        size_t len = c ? (size_t)(c - s) : strlen(s);
        if (n == cap || len == 0 || len >= sizeof buf) return -1;
        memcpy(buf, s, len), buf[len] = '\0';
        if (cli_parse_num(buf, lo, hi, &out[n++])) return -1;
        s += len + (c ? 1 : 0);
        if (c && !*s) return -1;
    }
    return n;
}

static int run_passkey(const la_diagnose_passkey_opts *o) {
    la_diagnose_passkey_result r;
    if (la_diagnose_passkey_run(o, &r) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        return 1;
    }
    const la_model_config *cfg = &r.config;
    const int NL = cfg->n_layer, NH = cfg->n_head, LH = NL * NH, per_len = o->n_depths * o->trials;
    printf("model %s: %d layers, %d heads, d_model %d, trained at %d, spec %s\n", o->ckpt, NL, NH, cfg->d_model,
           cfg->train_len, cfg->spec);
    printf("haystacks %s/val (%lld docs, %lld bytes), seed %llu, %d depths x %d trials per length, %.1f s\n",
           o->data, (long long)r.val_docs, (long long)r.val_tokens, (unsigned long long)o->seed, o->n_depths, o->trials,
           r.seconds);
    printf("attention mass of the 5 answer rows on the needle's key digits (uniform attention in brackets)\n");
    for (int li = 0; li < o->n_lens; li++) {
        int best = 0;
        for (int i = 1; i < LH; i++)
            if (r.digits_ans[(size_t)li * LH + i] > r.digits_ans[(size_t)li * LH + best]) best = i;
        const double *d = r.digits_ans + (size_t)li * LH;
        int bt = 0;
        for (int i = 1; i < LH; i++)
            if (r.target_ans[(size_t)li * LH + i] > r.target_ans[(size_t)li * LH + bt]) bt = i;
        printf("\nlength %d: passkey %d/%d; best head L%dH%d: digits %.3f (uniform %.4f), needle %.3f "
               "(uniform %.4f), question's last row %.3f; on the digit to output: L%dH%d %.3f (uniform %.4f)\n",
               o->lens[li], r.correct[li], per_len, best / NH, best % NH, d[best], r.uniform_digits[li],
               r.needle_ans[(size_t)li * LH + best], r.uniform_needle[li], r.digits_q[(size_t)li * LH + best],
               bt / NH, bt % NH, r.target_ans[(size_t)li * LH + bt], r.uniform_target[li]);
        printf("  layer");
        for (int h = 0; h < NH; h++) printf("   head %d", h);
        printf("\n");
        for (int l = 0; l < NL; l++) {
            printf("  %5d", l);
            for (int h = 0; h < NH; h++) printf("  %7.4f", d[l * NH + h]);
            printf("\n");
        }
    }
    printf("\nwrote %s/passkey_needle.csv\nwrote %s/passkey_summary.csv\n", o->out, o->out);
    la_diagnose_passkey_free(&r);
    return 0;
}

int cli_diagnose(int argc, char **argv) {
    int gaussian = 0, no_plot = 0, threads = 0, draws = 1000;
    long N = 65536, offset = 0, trials = 10;
    double delta = 10;
    uint64_t seed = 1;
    spec_list sl = {{NULL}, 0};
    const char *out = "runs/diagnose", *ckpt = NULL, *text = NULL;
    const char *pk_lens = NULL, *pk_depths = NULL, *data = "data/pydoc";
    cli_arg args[] = {
        CLI_A_GROUP("checkpoint mode (per layer and head of a trained byte-level model):"),
        CLI_A_STR("--ckpt PATH", "model.safetensors written by `longattn train` or `longattn study`", &ckpt),
        CLI_A_STR("--text PATH", "text file, or a folder: the first file (name order, non-hidden) with\n"
                                 "at least offset + N bytes", &text),
        CLI_A_LONG("--n N", "tokens (bytes) of context (default 16384, at most 65536)", &N, 1, 1L << 30),
        CLI_A_LONG("--offset K", "skip the first K bytes of the text (default 0)", &offset, 0, LONG_MAX),
        CLI_A_NUM_X("--delta X", "range ratio (default 10)", &delta, 1, HUGE_VAL, CLI_OPEN_LO),
        CLI_A_INT("--threads N", "attention threads (default: OpenMP default)", &threads, 1, 4096),
        CLI_A_STR("--out DIR", "output folder (default runs/diagnose): diagnose.csv (layer, head,\n"
                               "range_lo, range_hi, rows, keys, mass, mass_se, entropy, entropy_se),\n"
                               "summary.csv (per layer and head: mass ratio, entropy slope),\n"
                               "diagnose.gp, diagnose.png", &out),
        CLI_A_FLAG("--no-plot", "do not run gnuplot", &no_plot),
        CLI_A_GROUP("The summary uses the complete ranges with t >= delta: mass max/min and the slope of\n"
                    "entropy against log t (uniform attention: 1).\n"
                    "\n"
                    "passkey mode (where the rows that predict a passkey's answer attend; with --ckpt,\n"
                    "--threads and --out as above):"),
        CLI_A_STR("--passkey LENS", "example lengths, e.g. 128,512,2048 (the study's passkey \"lens\")", &pk_lens),
        CLI_A_STR("--data DIR", "corpus folder holding val/ for the haystacks (default data/pydoc)", &data),
        CLI_A_STR("--depths D,..", "needle depths in [0,1] (default 0,0.25,0.5,0.75,1)", &pk_depths),
        CLI_A_LONG("--trials K", "examples per length and depth (default 10)", &trials, 1, 100000),
        CLI_A_U64("--seed S", "the study cell's seed (default 1337): with the study's lens, depths\n"
                              "(same order) and data the examples are exactly the ones it scored", &seed),
        CLI_A_GROUP("Per example: greedy exact match, and per layer and head the attention mass of the\n"
                    "five rows that predict the answer digits (the first is the question's last byte)\n"
                    "on the needle's key digits (both places, 10 bytes), on the digit the row must\n"
                    "output (its 2 places) and on the whole needle sentence, next to uniform\n"
                    "attention's share (span / visible keys). Writes\n"
                    "passkey_needle.csv (every example, layer, head and row) and passkey_summary.csv\n"
                    "(per length, layer and head) into --out.\n"
                    "\n"
                    "Gaussian-model mode (no checkpoint): a query at position N whose base logits are\n"
                    "i.i.d. N(0,1), under each spec's logit transform:"),
        CLI_A_FLAG("--gaussian", "select this mode", &gaussian),
        CLI_A_ALSO("--n N", "query position / context (default 65536; keys at distances 0..N)"),
        CLI_A_INT("--draws K", "independent rows averaged (default 1000)", &draws, 1, 10000000),
        CLI_A_ALSO("--delta X", "range ratio (default 10)"),
        CLI_A_ALSO("--seed S", "random seed (default 1)"),
        CLI_A_FN("--spec SPEC", "a spec to diagnose (repeatable; default: softmax+causal,\n"
                                "softmax+logn(train=4096)+causal, softmax+sinv(tau=10)+causal)", spec_arg, &sl),
        CLI_A_ALSO("--out DIR", "output folder (default runs/diagnose): gaussian.csv, gaussian.gp,\n"
                                "gaussian.png"),
        CLI_A_ALSO("--no-plot", "do not run gnuplot"),
        CLI_A_END,
    };
    int prc = cli_parse("diagnose", &DOC, args, argc, argv);
    if (prc >= 0) return prc;
    const int plot = !no_plot, n_set = cli_given(args, "--n") > 0, offset_set = cli_given(args, "--offset") > 0,
              delta_set = cli_given(args, "--delta") > 0, draws_set = cli_given(args, "--draws") > 0,
              trials_set = cli_given(args, "--trials") > 0, seed_set = cli_given(args, "--seed") > 0;
    if (!pk_lens && (pk_depths || trials_set || cli_given(args, "--data")))
        return cli_usage_error("diagnose", "--depths, --trials and --data belong to the passkey mode (--passkey LENS)");
    if (pk_lens) {
        if (gaussian || text)
            return cli_usage_error("diagnose", "--passkey builds its own examples: it takes --ckpt, not --text or --gaussian");
        if (!ckpt) return cli_usage_error("diagnose", "--passkey needs --ckpt MODEL (a fine-tuned passkey_<i>_<spec>.safetensors)");
        if (sl.n || n_set || offset_set || delta_set || draws_set)
            return cli_usage_error("diagnose", "--spec, --n, --offset, --delta and --draws do not apply to --passkey");
        la_diagnose_passkey_opts o = {.ckpt = ckpt, .data = data, .out = out, .trials = (int)trials, .threads = threads};
        o.seed = seed_set ? (uint64_t)seed : 1337; /* the study's default seed */
        double tmp[LA_STUDY_MAX_DEPTHS];
        int n = parse_list(pk_lens, la_passkey_min_len(), 65536, tmp, LA_STUDY_MAX_LENS);
        if (n < 1) return cli_usage_error("diagnose", "--passkey wants 1..%d comma-separated lengths in %d..65536, e.g. "
                                          "128,512,2048; got '%s'", LA_STUDY_MAX_LENS, la_passkey_min_len(), pk_lens);
        for (int x = 0; x < n; x++) {
            if (tmp[x] != floor(tmp[x])) return cli_usage_error("diagnose", "--passkey: length %g is not an integer", tmp[x]);
            o.lens[x] = (int)tmp[x];
        }
        o.n_lens = n;
        static const double DEF_DEPTHS[] = {0, 0.25, 0.5, 0.75, 1};
        if (pk_depths) {
            n = parse_list(pk_depths, 0, 1, o.depths, LA_STUDY_MAX_DEPTHS);
            if (n < 1) return cli_usage_error("diagnose", "--depths wants 1..%d comma-separated numbers in [0,1], got '%s'",
                                              LA_STUDY_MAX_DEPTHS, pk_depths);
            o.n_depths = n;
        } else {
            o.n_depths = 5;
            memcpy(o.depths, DEF_DEPTHS, sizeof DEF_DEPTHS);
        }
        return run_passkey(&o);
    }
    if (gaussian && (ckpt || text))
        return cli_usage_error("diagnose", "--gaussian takes no --ckpt/--text (it diagnoses a model of logits, not a checkpoint)");
    if (!gaussian) {
        if (!ckpt || !text)
            return cli_usage_error("diagnose", "pass --ckpt MODEL --text FILE|DIR (checkpoint mode) or --gaussian; "
                                               "see longattn diagnose --help");
        if (sl.n) return cli_usage_error("diagnose", "--spec belongs to --gaussian; a checkpoint carries its own spec");
        la_diagnose_ckpt_opts o = {ckpt, text, out, n_set ? N : 16384, offset, delta, threads, plot};
        return run_ckpt(&o);
    }
    if (sl.n == 0) {
        sl.n = 3;
        for (int k = 0; k < 3; k++) sl.v[k] = DEFAULT_SPECS[k];
    }
    la_spec parsed;
    for (int k = 0; k < sl.n; k++)
        if (la_spec_parse(sl.v[k], &parsed) != LA_OK) return cli_usage_error("diagnose", "--spec: %s", la_errmsg());
    la_diag *d[MAX_SPECS];
    int gp_exit = -1;
    if (la_diagnose_gaussian_run(sl.v, sl.n, N, draws, delta, seed, out, plot, d, &gp_exit) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        return 1;
    }
    printf("Gaussian model: query at position N=%lld, base logits N(0,1), %d draws, delta=%g\n", (long long)N, draws, delta);
    printf("checks over complete ranges with t >= %g: mass max/min <= 2, entropy slope vs log t <= 0.5\n\n", delta);
    for (int k = 0; k < sl.n; k++) {
        printf("%s\n  %-16s %6s %10s %10s %10s %10s\n", sl.v[k], "range", "keys", "mass", "+-se", "entropy", "log(keys)");
        for (int r = 0; r < la_diag_num_ranges(d[k]); r++) {
            la_diag_result res;
            la_diag_get(d[k], r, &res);
            int complete = res.hi - 1 <= N;
            char rng[48];
            snprintf(rng, sizeof rng, "[%lld,%lld)%s", (long long)res.lo, (long long)res.hi, complete ? "" : "*");
            printf("  %-16s %6.0f %10.4f %10.4f %10.4f %10.4f\n", rng, res.keys, res.mass, res.mass_se, res.entropy,
                   log(res.keys));
        }
        for (int r = 0; r < la_diag_num_ranges(d[k]); r++) { /* issue 31: softmax+sink(fixed=v) */
            int64_t sn = 0;
            double sm, sse;
            la_diag_get_sink(d[k], r, &sn, &sm, &sse);
            if (sn) printf("  %-16s %6s %10.4f %10.4f   (mass on the sink logit, rows seeing N keys)\n", "sink", "", sm, sse);
        }
        double ratio, slope;
        int used;
        la_diag_summary(d[k], (int64_t)ceil(delta), &ratio, &slope, &used);
        if (used < 2) {
            /* a check needs two complete ranges: say so instead of printing nan and FAIL */
            char fix[96] = "lower --delta (--n takes at most 2^30)";
            if (ceil(delta) * delta * delta <= 0x1p30)
                snprintf(fix, sizeof fix, "raise --n to at least %.0f or lower --delta", ceil(delta) * delta * delta);
            printf("  (* partial range)  n/a: only %d complete range(s) with t >= %g at N = %d; the checks need\n"
                   "  two: %s\n\n", used, delta, (int)N, fix);
        } else {
            printf("  (* partial range)  over %d complete ranges: mass max/min = %.3f, entropy slope = %.3f per e-fold of t\n",
                   used, ratio, slope);
            printf("  %s total attention per range roughly constant in t (max/min <= 2)\n", ratio <= 2 ? "PASS" : "FAIL");
            printf("  %s entropy per range grows slower than log t (slope <= 0.5)\n\n", slope <= 0.5 ? "PASS" : "FAIL");
        }
        la_diag_free(d[k]);
    }
    printf("wrote %s/gaussian.csv\n", out);
    if (plot) {
        if (gp_exit == 0) printf("wrote %s/gaussian.png\n", out);
        else fprintf(stderr, "longattn diagnose: gnuplot failed (exit %d); the data is in %s/gaussian.csv, the script in "
                     "%s/gaussian.gp\n", gp_exit, out, out);
    }
    return 0;
}
