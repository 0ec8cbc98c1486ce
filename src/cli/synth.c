/* synth.c -- `longattn synth`: the synthetic-task experiment (la_synth_run,
 * src/runner/synth_run.c): parse the options, run it with a progress printer, print
 * results.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/dist.h"
#include "longattn.h"

static void usage(FILE *f) {
    const la_synth_opts d = la_synth_opts_default();
    char tasks[sizeof d.tasks + 64], specs[sizeof d.specs + 64], seeds[256];
    snprintf(tasks, sizeof tasks, "comma list of mqmtar,copy,reverse,sort,flipflop (default %s)", d.tasks);
    snprintf(specs, sizeof specs, "';' list of attention specs (default \"%s\")", d.specs);
    snprintf(seeds, sizeof seeds,
             "runs per task x spec with seeds S, S+1, ... (default 1, at most %d):\n"
             "the tables add how many seeds learned the task (>= 0.5 at 1x)\n"
             "and the mean +- std over those; the plots show it with error bars",
             LA_SYNTH_MAX_SEEDS);
    const cli_opt opts[] = {
        {"--tasks LIST", tasks},
        {"--specs LIST", specs},
        {"--quick", "tiny CI configuration (seconds): flipflop,copy; softmax+nape and\n"
                    "softmax+logn+nape; lengths 8-16; 40 steps; 16 examples at 1x-4x"},
        {"--preset NAME", "a named configuration, which the other options then change:\n"
                          "mq-contrast (docs/study.md \"Synthetic contrast\": MQMTAR, inline layout,\n"
                          "softmax vs ASEntmax with p-RoPE, 12000 steps, 3 seeds, up to 64x;\n"
                          "about 1 h on 2 cores)"},
        {"--out DIR", "output folder (default runs/synth)"},
        {"--resume", "continue an interrupted run in the same --out: task x spec runs it\n"
                     "finished (DIR/cells/) are kept; refused when the options differ"},
        {"--steps N", "optimizer steps per run (default 3000)"},
        {"--batch B", "sequences per step (default 32)"},
        {"--lr X", "AdamW peak learning rate, cosine to lr/10 (default 3e-3)"},
        {"--warmup N", "linear warm-up steps (default 30)"},
        {"--optimizer NAME", "adamw | muon (Muon on the hidden matrices, default adamw)"},
        {"--muon-lr X", "Muon peak learning rate, cosine to X/10 (default 0.02)"},
        {"--precision P", "f32 | bf16: bf16 matrix products and attention inputs with float32\n"
                          "accumulation and master weights (default f32; docs/training.md)"},
        {"--layers N", "model layers (default 2)"},
        {"--heads H", "attention heads (default 8)"},
        {"--d-model C", "model width (default 64)"},
        {"--d-ff F", "MLP width (default 4C)"},
        {"--qk-gain X", "initial QK-norm gain (default 1; see the study's qk_gain)"},
        {"--init-std X", "weight init standard deviation (default: the model's, 0.02)"},
        {"--n-symbols N", "task alphabet (default 16; mqmtar: key/value alphabet)"},
        {"--min-len N", "shortest training content length (default 32)"},
        {"--max-len N", "longest training content length (default 64)"},
        {"--queries N", "mqmtar queries (default 4)"},
        {"--k-len N", "mqmtar tokens per key (default 2)"},
        {"--v-len N", "mqmtar tokens per value (default 2)"},
        {"--kv-frac F", "mqmtar share of the region given to key-value pairs (default 0.8;\n"
                        "fewer pairs, more SPACE padding when lower)"},
        {"--mq-layout L", "mqmtar query placement: paper (queries after the pairs, values\n"
                          "as the target; default), inline (QSEP key value per query in\n"
                          "the target, keys given and not scored, as Zoology's MQAR) or\n"
                          "echo (paper source; target QSEP key value, all scored)"},
        {"--inline-share F", "mqmtar layout curriculum: train the first F share of the steps\n"
                             "on the inline layout, then --echo-share on the echo layout,\n"
                             "then the rest on --mq-layout (evaluated); default 0; the two\n"
                             "shares sum below 1; other tasks ignore both"},
        {"--echo-share F", "the echo share of that curriculum (default 0)"},
        {"--eval-n N", "examples per evaluation length (default 100)"},
        {"--max-mult M", "largest length multiplier, a power of two <= 1024 (default 32)"},
        {"--max-eval-tokens N", "skip lengths whose sequences exceed N tokens (default 131072)"},
        {"--curriculum L0", "train first on content lengths up to L0, raising the bound\n"
                            "linearly to max-len over the first --ramp share of the steps\n"
                            "(lower bound: half the upper one, at most min-len); 0: off (default 8)"},
        {"--ramp F", "share of the steps the curriculum ramps over (default 0.4)"},
        {"--seed S", "model init and data seed (default 1)"},
        {"--seeds N", seeds},
        {"--threads N", "attention threads (default: OpenMP default)"},
        {NULL, NULL},
    };
    cli_help(f, "longattn synth [options]",
             "Train a small GPT per task x attention spec at content lengths min-len..max-len,\n"
             "then report exact-match accuracy at 1x, 2x, 4x, ... max-len (whole target right).",
             opts, NULL);
}

static int parse_args(int argc, char **argv, la_synth_opts *o) {
    *o = la_synth_opts_default();
    /* --quick and --preset first, so that the other options change them wherever they stand */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) la_synth_opts_quick(o);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--preset") && la_synth_opts_preset(o, argv[++i]) != LA_OK)
            return cli_usage_error("synth", "--preset: %s", la_errmsg());
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quick")) continue;
        if (!strcmp(a, "--preset") && i + 1 < argc) {
            i++;
            continue;
        }
        if (!strcmp(a, "--resume")) {
            o->resume = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        if (i + 1 >= argc) return cli_usage_error("synth", "option '%s' is unknown or lacks its value", a);
        const char *v = argv[++i];
        long long x;
        struct { const char *name; int *dst; long lo, hi; } ints[] = {
            {"--steps", &o->steps, 1, 1000000},      {"--batch", &o->batch, 1, 4096},
            {"--warmup", &o->warmup, 0, 1000000},    {"--layers", &o->layers, 1, 64},
            {"--heads", &o->heads, 1, 256},          {"--d-model", &o->d_model, 1, 8192},
            {"--d-ff", &o->d_ff, 0, 65536},          {"--n-symbols", &o->n_symbols, 2, 1 << 20},
            {"--min-len", &o->min_len, 4, 1 << 20},  {"--max-len", &o->max_len, 4, 1 << 20},
            {"--queries", &o->queries, 1, 4096},     {"--k-len", &o->k_len, 1, 16},
            {"--v-len", &o->v_len, 1, 16},           {"--eval-n", &o->eval_n, 1, 1000000},
            {"--max-mult", &o->max_mult, 1, 1024},   {"--threads", &o->threads, 0, 1024},
            {"--curriculum", &o->curriculum, 0, 1 << 20}, {"--seeds", &o->seeds, 1, LA_SYNTH_MAX_SEEDS},
        };
        int done = 0;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
            if (!strcmp(a, ints[k].name)) {
                if (cli_parse_int(v, ints[k].lo, ints[k].hi, &x))
                    return cli_usage_error("synth", "%s wants an integer in [%ld, %ld], got '%s'", a,
                                           ints[k].lo, ints[k].hi, v);
                *ints[k].dst = (int)x;
                done = 1;
            }
        /* real-valued options: lo < x < hi, or lo <= x / x <= hi where the flag says so */
        struct { const char *name; double *dst, lo, hi; int lo_in, hi_in; } dbls[] = {
            {"--lr", &o->lr, 0, 1, 0, 0},           {"--muon-lr", &o->muon_lr, 0, 10, 0, 0},
            {"--qk-gain", &o->qk_gain, 0, 100, 0, 1}, {"--init-std", &o->init_std, 0, 1, 0, 1},
            {"--ramp", &o->ramp, 0, 1, 0, 1},        {"--kv-frac", &o->kv_frac, 0, 1, 0, 1},
            {"--inline-share", &o->inline_share, 0, 1, 1, 0},
            {"--echo-share", &o->echo_share, 0, 1, 1, 0},
        };
        for (size_t k = 0; k < sizeof dbls / sizeof dbls[0] && !done; k++)
            if (!strcmp(a, dbls[k].name)) {
                double d = 0;
                int ok = !cli_parse_num(v, -HUGE_VAL, HUGE_VAL, &d) &&
                         (dbls[k].lo_in ? d >= dbls[k].lo : d > dbls[k].lo) &&
                         (dbls[k].hi_in ? d <= dbls[k].hi : d < dbls[k].hi);
                if (!ok)
                    return cli_usage_error("synth", "%s wants a number in %c%g, %g%c, got '%s'", a,
                                           dbls[k].lo_in ? '[' : '(', dbls[k].lo, dbls[k].hi,
                                           dbls[k].hi_in ? ']' : ')', v);
                *dbls[k].dst = d;
                done = 1;
            }
        if (done) continue;
        if (!strcmp(a, "--tasks")) snprintf(o->tasks, sizeof o->tasks, "%s", v);
        else if (!strcmp(a, "--specs")) snprintf(o->specs, sizeof o->specs, "%s", v);
        else if (!strcmp(a, "--out")) snprintf(o->out, sizeof o->out, "%s", v);
        else if (!strcmp(a, "--mq-layout")) {
            if (!strcmp(v, "paper")) o->mq_layout = LA_MQ_PAPER;
            else if (!strcmp(v, "inline")) o->mq_layout = LA_MQ_INLINE;
            else if (!strcmp(v, "echo")) o->mq_layout = LA_MQ_ECHO;
            else return cli_usage_error("synth", "--mq-layout must be paper, inline or echo, got '%s'", v);
        } else if (!strcmp(a, "--optimizer")) {
            if (!strcmp(v, "adamw")) o->optimizer = LA_OPT_ADAMW;
            else if (!strcmp(v, "muon")) o->optimizer = LA_OPT_MUON;
            else return cli_usage_error("synth", "--optimizer must be adamw or muon, got '%s'", v);
        } else if (!strcmp(a, "--precision")) {
            int r = cli_precision_opt("synth", v, &o->precision);
            if (r) return r;
        } else if (!strcmp(a, "--max-eval-tokens")) {
            if (cli_parse_int(v, 16, 1L << 30, &x))
                return cli_usage_error("synth", "--max-eval-tokens wants an integer >= 16, got '%s'", v);
            o->max_eval_tokens = (long)x;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(v, 0, 1LL << 62, &x))
                return cli_usage_error("synth", "--seed wants a non-negative integer, got '%s'", v);
            o->seed = (uint64_t)x;
        } else
            return cli_usage_error("synth", "unknown option '%s'", a);
    }
    if (o->max_mult & (o->max_mult - 1))
        return cli_usage_error("synth", "--max-mult must be a power of two (1, 2, 4, ... 1024), got %d",
                               o->max_mult);
    if (o->min_len > o->max_len)
        return cli_usage_error("synth", "--min-len %d exceeds --max-len %d", o->min_len, o->max_len);
    if (o->inline_share + o->echo_share >= 1)
        return cli_usage_error("synth", "--inline-share %g plus --echo-share %g leave no steps for "
                                        "the evaluated layout; make their sum < 1",
                               o->inline_share, o->echo_share);
    return 0;
}

static void on_progress(void *user, const la_synth_progress *p) {
    const char *task = la_task_name(p->task);
    if (la_dist_size() > 1) fprintf(stderr, "[rank %d]", la_dist_rank()); /* each rank runs its own cells */
    const int several = user && ((const la_synth_opts *)user)->seeds > 1;
    char seed[40] = "";
    if (several) snprintf(seed, sizeof seed, " seed %llu", (unsigned long long)p->seed);
    if (p->event == LA_SYNTH_TRAINING)
        fprintf(stderr, "  %-8s %-28s%s step %5d/%d  loss %.4f  (%.1f s)\n", task, p->spec, seed, p->step, p->steps,
                p->loss, p->elapsed_s);
    else if (p->event == LA_SYNTH_EVALUATED)
        fprintf(stderr, "  %-8s %-28s%s %5dx (L=%d, %d tokens): %d/%d exact\n", task, p->spec, seed, p->mult,
                p->content_len, p->tokens, p->correct, p->n);
    else if (p->event == LA_SYNTH_SKIPPED)
        fprintf(stderr, "longattn synth: %s x '%s' skipped: %s\n", task, p->spec, p->message);
}

int cli_synth(int argc, char **argv) {
    la_synth_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc < 0) return 0; /* --help */
    if (prc) return prc;
    /* every name, spec and parameter set is checked before training anything */
    if (la_synth_validate(&o) != LA_OK) return cli_usage_error("synth", "%s", la_errmsg());
    double t0 = cli_now();
    if (o.precision != LA_DTYPE_F32 && la_dist_rank() == 0)
        fprintf(stderr, "longattn synth: %s\n", cli_precision_note(o.precision));
    if (la_synth_run(&o, on_progress, &o, NULL) != LA_OK) {
        if (la_dist_rank() == 0) fprintf(stderr, "longattn synth: %s\n", la_errmsg()); /* the same on every rank */
        return 1;
    }
    if (la_dist_rank() != 0) return 0; /* rank 0 wrote and prints the results */
    char path[1200];
    snprintf(path, sizeof path, "%s/results.md", o.out);
    FILE *f = fopen(path, "r");
    char line[2048];
    while (f && fgets(line, sizeof line, f)) fputs(line, stdout);
    if (f) fclose(f);
    printf("\nwrote %s/results.{md,csv,json} and synth_<task>.png in %.0f s\n", o.out, cli_now() - t0);
    return 0;
}
