/* synth.c -- `longattn synth`: the synthetic-task experiment (la_synth_run,
 * src/runner/synth_run.c): parse the options, run it with a progress printer, print
 * results.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/dist.h"
#include "core/internal.h"
#include "longattn.h"

static const cli_doc DOC = {
    "longattn synth [options]",
    "Train a small GPT per task x attention spec at content lengths min-len..max-len,\n"
    "then report exact-match accuracy at 1x, 2x, 4x, ... max-len (whole target right).",
    NULL, 0,
};

/* --mq-layout paper|inline|echo into a la_mq_layout */
static int mq_layout_arg(const char *cmd, const char *opt, const char *v, void *dest) {
    if (!strcmp(v, "paper")) *(la_mq_layout *)dest = LA_MQ_PAPER;
    else if (!strcmp(v, "inline")) *(la_mq_layout *)dest = LA_MQ_INLINE;
    else if (!strcmp(v, "echo")) *(la_mq_layout *)dest = LA_MQ_ECHO;
    else return cli_usage_error(cmd, "%s must be paper, inline or echo, got '%s'", opt, v);
    return 0;
}

/* the options into *o: -1 to go on, 0 after --help, else the usage error's 2 */
static int parse_args(int argc, char **argv, la_synth_opts *o) {
    *o = la_synth_opts_default();
    /* --quick and --preset first, so that the other options change them wherever they stand */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) la_synth_opts_quick(o);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--preset") && la_synth_opts_preset(o, argv[++i]) != LA_OK)
            return cli_usage_error("synth", "--preset: %s", la_errmsg());
    const la_synth_opts d = la_synth_opts_default();
    char tasks_text[sizeof d.tasks + 64], specs_text[sizeof d.specs + 64], seeds_text[256];
    snprintf(tasks_text, sizeof tasks_text, "comma list of mqmtar,copy,reverse,sort,flipflop (default %s)", d.tasks);
    snprintf(specs_text, sizeof specs_text, "';' list of attention specs (default \"%s\")", d.specs);
    snprintf(seeds_text, sizeof seeds_text,
             "runs per task x spec with seeds S, S+1, ... (default 1, at most %d):\n"
             "the tables add how many seeds learned the task (>= 0.5 at 1x)\n"
             "and the mean +- std over those; the plots show it with error bars",
             LA_SYNTH_MAX_SEEDS);
    const char *tasks = NULL, *specs = NULL, *out = NULL, *preset = NULL;
    int quick = 0;
    cli_arg args[] = {
        CLI_A_STR("--tasks LIST", tasks_text, &tasks),
        CLI_A_STR("--specs LIST", specs_text, &specs),
        CLI_A_FLAG("--quick", "tiny CI configuration (seconds): flipflop,copy; softmax+nape and\n"
                              "softmax+logn+nape; lengths 8-16; 40 steps; 16 examples at 1x-4x", &quick),
        CLI_A_STR("--preset NAME", "a named configuration, which the other options then change:\n"
                                   "mq-contrast (docs/study.md \"Synthetic contrast\": MQMTAR, inline layout,\n"
                                   "softmax vs ASEntmax with p-RoPE, 12000 steps, 3 seeds, up to 64x;\n"
                                   "about 1 h on 2 cores)", &preset),
        CLI_A_STR("--out DIR", "output folder (default runs/synth)", &out),
        CLI_A_FLAG("--resume", "continue an interrupted run in the same --out: task x spec runs it\n"
                               "finished (DIR/cells/) are kept; refused when the options differ", &o->resume),
        CLI_A_INT("--steps N", "optimizer steps per run (default 3000)", &o->steps, 1, 1000000),
        CLI_A_INT("--batch B", "sequences per step (default 32)", &o->batch, 1, 4096),
        CLI_A_NUM_X("--lr X", "AdamW peak learning rate, cosine to lr/10 (default 3e-3)", &o->lr, 0, 1,
                    CLI_OPEN_LO | CLI_OPEN_HI),
        CLI_A_INT("--warmup N", "linear warm-up steps (default 30)", &o->warmup, 0, 1000000),
        CLI_A_FN("--optimizer NAME", "adamw | muon (Muon on the hidden matrices, default adamw)", cli_optimizer_arg,
                 &o->optimizer),
        CLI_A_NUM_X("--muon-lr X", "Muon peak learning rate, cosine to X/10 (default 0.02)", &o->muon_lr, 0, 10,
                    CLI_OPEN_LO | CLI_OPEN_HI),
        CLI_A_FN("--precision P", "f32 | bf16: bf16 matrix products and attention inputs with float32\n"
                                  "accumulation and master weights (default f32; docs/training.md)",
                 cli_precision_arg, &o->precision),
        CLI_A_INT("--layers N", "model layers (default 2)", &o->layers, 1, 64),
        CLI_A_INT("--heads H", "attention heads (default 8)", &o->heads, 1, 256),
        CLI_A_INT("--d-model C", "model width (default 64)", &o->d_model, 1, 8192),
        CLI_A_INT("--d-ff F", "MLP width (default 4C)", &o->d_ff, 0, 65536),
        CLI_A_NUM_X("--qk-gain X", "initial QK-norm gain (default 1; see the study's qk_gain)", &o->qk_gain, 0, 100,
                    CLI_OPEN_LO),
        CLI_A_NUM_X("--init-std X", "weight init standard deviation (default: the model's, 0.02)", &o->init_std, 0, 1,
                    CLI_OPEN_LO),
        CLI_A_INT("--n-symbols N", "task alphabet (default 16; mqmtar: key/value alphabet)", &o->n_symbols, 2, 1 << 20),
        CLI_A_INT("--min-len N", "shortest training content length (default 32)", &o->min_len, 4, 1 << 20),
        CLI_A_INT("--max-len N", "longest training content length (default 64)", &o->max_len, 4, 1 << 20),
        CLI_A_INT("--queries N", "mqmtar queries (default 4)", &o->queries, 1, 4096),
        CLI_A_INT("--k-len N", "mqmtar tokens per key (default 2)", &o->k_len, 1, 16),
        CLI_A_INT("--v-len N", "mqmtar tokens per value (default 2)", &o->v_len, 1, 16),
        CLI_A_NUM_X("--kv-frac F", "mqmtar share of the region given to key-value pairs (default 0.8;\n"
                                   "fewer pairs, more SPACE padding when lower)", &o->kv_frac, 0, 1, CLI_OPEN_LO),
        CLI_A_FN("--mq-layout L", "mqmtar query placement: paper (queries after the pairs, values\n"
                                  "as the target; default), inline (QSEP key value per query in\n"
                                  "the target, keys given and not scored, as Zoology's MQAR) or\n"
                                  "echo (paper source; target QSEP key value, all scored)", mq_layout_arg,
                 &o->mq_layout),
        CLI_A_NUM_X("--inline-share F", "mqmtar layout curriculum: train the first F share of the steps\n"
                                        "on the inline layout, then --echo-share on the echo layout,\n"
                                        "then the rest on --mq-layout (evaluated); default 0; the two\n"
                                        "shares sum below 1; other tasks ignore both", &o->inline_share, 0, 1,
                    CLI_OPEN_HI),
        CLI_A_NUM_X("--echo-share F", "the echo share of that curriculum (default 0)", &o->echo_share, 0, 1, CLI_OPEN_HI),
        CLI_A_INT("--eval-n N", "examples per evaluation length (default 100)", &o->eval_n, 1, 1000000),
        CLI_A_INT("--max-mult M", "largest length multiplier, a power of two <= 1024 (default 32)", &o->max_mult, 1, 1024),
        CLI_A_LONG("--max-eval-tokens N", "skip lengths whose sequences exceed N tokens (default 131072)",
                   &o->max_eval_tokens, 16, 1L << 30),
        CLI_A_INT("--curriculum L0", "train first on content lengths up to L0, raising the bound\n"
                                     "linearly to max-len over the first --ramp share of the steps\n"
                                     "(lower bound: half the upper one, at most min-len); 0: off (default 8)",
                  &o->curriculum, 0, 1 << 20),
        CLI_A_NUM_X("--ramp F", "share of the steps the curriculum ramps over (default 0.4)", &o->ramp, 0, 1, CLI_OPEN_LO),
        CLI_A_U64("--seed S", "model init and data seed (default 1)", &o->seed),
        CLI_A_INT("--seeds N", seeds_text, &o->seeds, 1, LA_SYNTH_MAX_SEEDS),
        CLI_A_INT("--threads N", "attention threads (default: OpenMP default)", &o->threads, 0, 1024),
        CLI_A_END,
    };
    int rc = cli_parse("synth", &DOC, args, argc, argv);
    if (rc >= 0) return rc;
    if (tasks) snprintf(o->tasks, sizeof o->tasks, "%s", tasks);
    if (specs) snprintf(o->specs, sizeof o->specs, "%s", specs);
    if (out) snprintf(o->out, sizeof o->out, "%s", out);
    if (o->max_mult & (o->max_mult - 1))
        return cli_usage_error("synth", "--max-mult must be a power of two (1, 2, 4, ... 1024), got %d",
                               o->max_mult);
    if (o->min_len > o->max_len)
        return cli_usage_error("synth", "--min-len %d exceeds --max-len %d", o->min_len, o->max_len);
    if (o->inline_share + o->echo_share >= 1)
        return cli_usage_error("synth", "--inline-share %g plus --echo-share %g leave no steps for "
                                        "the evaluated layout; make their sum < 1",
                               o->inline_share, o->echo_share);
    return -1;
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

/* The first item of a sep-separated list given twice (spaces around items ignored; specs
 * compared in canonical form), or NULL: a cell file is kept per task x spec, so a repeat would
 * train twice into one file. The answer points into canon. */
static const char *repeated(const char *list, char sep, char (*canon)[LA_SPEC_TEXT_MAX], int max) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", list);
    int k = 0;
    for (char *p = buf, *e; p && k < max; p = e ? e + 1 : NULL) {
        if ((e = strchr(p, sep))) *e = 0;
        la_spec sp;
        if (sep != ';' || la_spec_parse(p, &sp) != LA_OK || la_spec_format(&sp, canon[k], LA_SPEC_TEXT_MAX) < 0)
            snprintf(canon[k], LA_SPEC_TEXT_MAX, "%s", p + strspn(p, " "));
        for (size_t l = strlen(canon[k]); l && canon[k][l - 1] == ' ';) canon[k][--l] = 0;
        for (int i = 0; i < k && canon[k][0]; i++)
            if (!strcmp(canon[i], canon[k])) return canon[k];
        k++;
    }
    return NULL;
}

int cli_synth(int argc, char **argv) {
    la_synth_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc >= 0) return prc; /* --help, or a usage error */
    /* every name, spec and parameter set is checked before training anything */
    if (la_synth_validate(&o) != LA_OK) return cli_usage_error("synth", "%s", la_errmsg());
    char canon[64][LA_SPEC_TEXT_MAX];
    const char *dup = repeated(o.tasks, ',', canon, 64);
    if (dup) return cli_usage_error("synth", "--tasks names %s twice; give each task once", dup);
    if ((dup = repeated(o.specs, ';', canon, 64)))
        return cli_usage_error("synth", "--specs gives %s twice; give each spec once", dup);
    double t0 = cli_now();
    if (o.precision != LA_DTYPE_F32 && la_dist_rank() == 0)
        fprintf(stderr, "longattn synth: %s\n", cli_precision_note(o.precision));
    if (la_synth_run(&o, on_progress, &o, NULL) != LA_OK) {
        if (la_dist_rank() == 0) fprintf(stderr, "longattn synth: %s\n", la_errmsg()); /* the same on every rank */
        return 1;
    }
    if (la_dist_rank() != 0) return 0; /* rank 0 wrote and prints the results */
    char path[1200], *md = NULL;
    snprintf(path, sizeof path, "%s/results.md", o.out);
    if (la_read_file(path, 0, &md, NULL) == LA_OK) fputs(md, stdout);
    free(md);
    printf("\nwrote %s/results.{md,csv,json} and synth_<task>.png in %.0f s\n", o.out, cli_now() - t0);
    return 0;
}
