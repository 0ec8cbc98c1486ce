/* synth.c -- `longattn synth`: train a small GPT per synthetic task x attention spec at the
 * training length, then measure exact-match accuracy at 1x, 2x, 4x, ... the training
 * length (ASEntmax paper, Vasylenko et al. 2025, synthetic-task table). Writes
 * results.csv, results.md, results.json and one gnuplot PNG per task into --out. */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "core/internal.h"

#define MAX_TASKS 8
#define MAX_SPECS 16
#define MAX_MULTS 12 /* 1x .. 2048x */

/* Defaults: see the README section "Synthetic tasks" for how they were sized. */
#define DEFAULT_TASKS "flipflop"
#define DEFAULT_SPECS "softmax+nape;softmax+logn+nape;entmax(alpha=1.5)+nape;asentmax+nape"

typedef struct {
    char tasks[256], specs[1024], out[1024];
    int steps, batch, warmup, layers, heads, d_model, d_ff;
    double lr, muon_lr;
    int optimizer;  /* la_optimizer: LA_OPT_ADAMW or LA_OPT_MUON */
    double qk_gain; /* initial QK-norm gain (la_model_config.qk_gain) */
    double init_std; /* weight init std (la_model_config.init_std); 0: the model's default */
    int n_symbols, min_len, max_len, queries, k_len, v_len;
    int mq_layout;  /* la_mq_layout */
    double inline_share; /* mqmtar: share of the steps first trained on the inline layout */
    double echo_share;   /* mqmtar: share of the steps then trained on the echo layout */
    double kv_frac;      /* mqmtar share of the region given to pairs; 0: the task default */
    int eval_n, max_mult, threads;
    int curriculum; /* start length of the curriculum; 0: off */
    double ramp;    /* share of the steps over which the curriculum ramps */
    long max_eval_tokens;
    uint64_t seed;
    int quick;
} synth_opts;

typedef struct {
    int mult, content_len, tokens, n, correct; /* n = 0: skipped (too long) */
} eval_point;

typedef struct {
    la_task task;
    char spec[LA_SPEC_TEXT_MAX], canon[LA_SPEC_TEXT_MAX];
    int steps;
    size_t n_params;
    double train_s, eval_s, final_loss;
    int n_points;
    eval_point pt[MAX_MULTS];
} run_result;

/* specs skipped because this build lacks their normaliser (LA_EUNSUPPORTED) */
static char g_skipped[1024];

static void defaults(synth_opts *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->tasks, sizeof o->tasks, "%s", DEFAULT_TASKS);
    snprintf(o->specs, sizeof o->specs, "%s", DEFAULT_SPECS);
    snprintf(o->out, sizeof o->out, "runs/synth");
    o->steps = 3000;
    o->batch = 32;
    o->warmup = 30;
    o->layers = 2;
    o->heads = 8;
    o->d_model = 64;
    o->d_ff = 0;
    o->lr = 3e-3;
    o->optimizer = LA_OPT_ADAMW;
    o->muon_lr = 0.02;
    o->qk_gain = 1.0;
    o->n_symbols = 0; /* 0: the task's own default */
    o->min_len = 32;
    o->max_len = 64;
    o->queries = 0;
    o->k_len = 0;
    o->v_len = 0;
    o->eval_n = 100;
    o->max_mult = 32;
    o->max_eval_tokens = 1 << 17;
    o->threads = 0;
    o->seed = 1;
    o->curriculum = 8;
    o->ramp = 0.4;
}

static void apply_quick(synth_opts *o) {
    snprintf(o->tasks, sizeof o->tasks, "flipflop,copy");
    snprintf(o->specs, sizeof o->specs, "softmax+nape;softmax+logn+nape");
    o->steps = 40;
    o->batch = 16;
    o->warmup = 5;
    o->d_model = 32;
    o->min_len = 8;
    o->max_len = 16;
    o->eval_n = 16;
    o->max_mult = 4;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: longattn synth [options]\n"
            "Train a small GPT per task x attention spec at content lengths min-len..max-len,\n"
            "then report exact-match accuracy at 1x, 2x, 4x, ... max-len (whole target right).\n"
            "  --tasks LIST        comma list of mqmtar,copy,reverse,sort,flipflop (default %s)\n"
            "  --specs LIST        ';' list of attention specs (default \"%s\")\n"
            "  --quick             tiny CI configuration (seconds): flipflop,copy; softmax+nape and\n"
            "                      softmax+logn+nape; lengths 8-16; 40 steps; 16 examples at 1x-4x\n"
            "  --out DIR           output folder (default runs/synth)\n"
            "  --steps N           optimizer steps per run (default 3000)\n"
            "  --batch B           sequences per step (default 32)\n"
            "  --lr X              AdamW peak learning rate, cosine to lr/10 (default 3e-3)\n"
            "  --warmup N          linear warm-up steps (default 30)\n"
            "  --optimizer NAME    adamw | muon (Muon on the hidden matrices, default adamw)\n"
            "  --muon-lr X         Muon peak learning rate, cosine to X/10 (default 0.02)\n"
            "  --layers N --heads H --d-model C --d-ff F   model size (default 2, 8, 64, 4C)\n"
            "  --qk-gain X         initial QK-norm gain (default 1; see the study's qk_gain)\n"
            "  --init-std X        weight init standard deviation (default: the model's, 0.02)\n"
            "  --n-symbols N       task alphabet (default 16; mqmtar: key/value alphabet)\n"
            "  --min-len N --max-len N   training content lengths (default 32, 64)\n"
            "  --queries N --k-len N --v-len N   mqmtar queries and key/value tokens (4, 2, 2)\n"
            "  --kv-frac F         mqmtar share of the region given to key-value pairs (default 0.8;\n"
            "                      fewer pairs, more SPACE padding when lower)\n"
            "  --mq-layout L       mqmtar query placement: paper (queries after the pairs, values\n"
            "                      as the target; default), inline (QSEP key value per query in\n"
            "                      the target, keys given and not scored, as Zoology's MQAR) or\n"
            "                      echo (paper source; target QSEP key value, all scored)\n"
            "  --inline-share F    mqmtar layout curriculum: train the first F share of the steps\n"
            "                      on the inline layout, then --echo-share on the echo layout,\n"
            "  --echo-share F      then the rest on --mq-layout (evaluated); defaults 0, 0, the\n"
            "                      sum below 1; other tasks ignore both\n"
            "  --eval-n N          examples per evaluation length (default 100)\n"
            "  --max-mult M        largest length multiplier, a power of two <= 1024 (default 32)\n"
            "  --max-eval-tokens N skip lengths whose sequences exceed N tokens (default 131072)\n"
            "  --curriculum L0     train first on content lengths up to L0, raising the bound\n"
            "                      linearly to max-len over the first --ramp share of the steps\n"
            "                      (lower bound: half the upper one, at most min-len); 0: off (default 8)\n"
            "  --ramp F            share of the steps the curriculum ramps over (default 0.4)\n"
            "  --seed S            model init and data seed (default 1)\n"
            "  --threads N         attention threads (default: OpenMP default)\n",
            DEFAULT_TASKS, DEFAULT_SPECS);
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, synth_opts *o) {
    defaults(o);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) {
            apply_quick(o);
            o->quick = 1;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quick")) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        if (i + 1 >= argc) return cli_usage_error("synth", "option '%s' is unknown or lacks its value", a);
        const char *v = argv[++i];
        long x;
        struct { const char *name; int *dst; long lo, hi; } ints[] = {
            {"--steps", &o->steps, 1, 1000000},      {"--batch", &o->batch, 1, 4096},
            {"--warmup", &o->warmup, 0, 1000000},    {"--layers", &o->layers, 1, 64},
            {"--heads", &o->heads, 1, 256},          {"--d-model", &o->d_model, 1, 8192},
            {"--d-ff", &o->d_ff, 0, 65536},          {"--n-symbols", &o->n_symbols, 2, 1 << 20},
            {"--min-len", &o->min_len, 4, 1 << 20},  {"--max-len", &o->max_len, 4, 1 << 20},
            {"--queries", &o->queries, 1, 4096},     {"--k-len", &o->k_len, 1, 16},
            {"--v-len", &o->v_len, 1, 16},           {"--eval-n", &o->eval_n, 1, 1000000},
            {"--max-mult", &o->max_mult, 1, 1024},   {"--threads", &o->threads, 0, 1024},
            {"--curriculum", &o->curriculum, 0, 1 << 20},
        };
        int done = 0;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
            if (!strcmp(a, ints[k].name)) {
                if (parse_int(v, ints[k].lo, ints[k].hi, &x))
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
                char *end;
                double d = strtod(v, &end);
                int ok = end != v && !*end && (dbls[k].lo_in ? d >= dbls[k].lo : d > dbls[k].lo) &&
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
        } else if (!strcmp(a, "--max-eval-tokens")) {
            if (parse_int(v, 16, 1L << 30, &x))
                return cli_usage_error("synth", "--max-eval-tokens wants an integer >= 16, got '%s'", v);
            o->max_eval_tokens = x;
        } else if (!strcmp(a, "--seed")) {
            if (parse_int(v, 0, 1L << 62, &x))
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

/* Split s at sep into at most max trimmed, non-empty items (modifies s). */
static int split_list(char *s, char sep, char **items, int max) {
    int n = 0;
    char *p = s;
    while (p && *p) {
        char *e = strchr(p, sep);
        if (e) *e = '\0';
        while (*p == ' ') p++;
        size_t l = strlen(p);
        while (l && p[l - 1] == ' ') p[--l] = '\0';
        if (*p) {
            if (n == max) return -1;
            items[n++] = p;
        }
        p = e ? e + 1 : NULL;
    }
    return n;
}

static la_task_params task_params(const synth_opts *o, la_task t) {
    la_task_params p = la_task_params_default(t);
    if (o->n_symbols) p.n_symbols = o->n_symbols;
    p.min_len = o->min_len;
    p.max_len = o->max_len;
    if (o->queries) p.n_queries = o->queries;
    if (o->k_len) p.k_len = o->k_len;
    if (o->v_len) p.v_len = o->v_len;
    p.mq_layout = (la_mq_layout)o->mq_layout;
    if (o->kv_frac > 0) p.kv_frac = o->kv_frac;
    if (t == LA_TASK_MQMTAR && o->quick && !o->queries) p.n_queries = 1; /* fits lengths 8-16 */
    return p;
}

/* Task params of a training step under the curriculum: content lengths in
 * [max(4, hi/2) capped at min_len, hi], hi rising linearly from --curriculum to max_len over
 * the first ramp * steps steps; the full [min_len, max_len] afterwards (and when off). */
static la_task_params curriculum_params(const synth_opts *o, const la_task_params *p, int step) {
    la_task_params c = *p;
    int ramp_steps = (int)(o->ramp * o->steps);
    if (!o->curriculum || o->curriculum >= p->max_len || step >= ramp_steps) return c;
    int hi = o->curriculum + (int)((double)(p->max_len - o->curriculum) * step / ramp_steps);
    int lo = hi / 2 < 4 ? 4 : hi / 2;
    if (lo > p->min_len) lo = p->min_len;
    c.min_len = lo;
    c.max_len = hi;
    /* the shortest lengths may not hold enough MQMTAR pairs: raise them until valid */
    while (la_task_validate(&c) != LA_OK && c.min_len < p->min_len) {
        c.min_len++;
        if (c.max_len < c.min_len) c.max_len = c.min_len;
    }
    return la_task_validate(&c) == LA_OK ? c : *p;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* MQMTAR layout of a training step: inline for the first --inline-share of the steps, echo
 * for the next --echo-share, then the evaluated layout p->mq_layout. */
static la_mq_layout layout_at(const synth_opts *o, const la_task_params *p, int step) {
    if (p->task != LA_TASK_MQMTAR) return p->mq_layout;
    if (step < (int)(o->inline_share * o->steps)) return LA_MQ_INLINE;
    if (step < (int)((o->inline_share + o->echo_share) * o->steps)) return LA_MQ_ECHO;
    return p->mq_layout;
}

/* Train one model on task p with spec text, then evaluate it at every multiplier. */
static int run_one(const synth_opts *o, const la_task_params *p, const char *spec, run_result *r) {
    la_task_vocab voc;
    la_status s = la_task_get_vocab(p, &voc);
    int n_max = 0;
    if (s == LA_OK) s = la_task_tokens_at(p, p->max_len, &n_max);
    /* batches hold the longest sequence any trained layout makes (echo: n_queries * k_len
     * tokens longer than the paper's); step 0 and the two phase starts cover every phase */
    int n_buf = n_max; /* 0 if the task failed: the loop below is skipped */
    const int phase_start[3] = {0, (int)(o->inline_share * o->steps),
                                (int)((o->inline_share + o->echo_share) * o->steps)};
    for (int k = 0; k < 3 && s == LA_OK; k++) {
        la_task_params lp = *p;
        lp.mq_layout = layout_at(o, p, phase_start[k] < o->steps ? phase_start[k] : o->steps - 1);
        int n = 0;
        s = la_task_tokens_at(&lp, lp.max_len, &n);
        if (n > n_buf) n_buf = n;
    }
    if (s != LA_OK) {
        fprintf(stderr, "longattn synth: task %s: %s\n", la_task_name(p->task), la_errmsg());
        return 1;
    }
    const int T = n_buf - 1;
    la_model_config mc = la_model_config_default();
    mc.n_layer = o->layers;
    mc.n_head = o->heads;
    mc.d_model = o->d_model;
    mc.d_ff = o->d_ff;
    mc.vocab = voc.vocab_size;
    mc.train_len = n_max;
    mc.qk_gain = (float)o->qk_gain;
    if (o->init_std > 0) mc.init_std = (float)o->init_std;
    snprintf(mc.spec, sizeof mc.spec, "%s", spec);
    la_model *m = NULL;
    la_trainer *tr = NULL;
    s = la_model_new(&mc, o->seed, &m);
    if (s != LA_OK) {
        fprintf(stderr, "longattn synth: spec '%s': %s: %s\n", spec, la_status_name(s), la_errmsg());
        return 1;
    }
    memset(r, 0, sizeof *r);
    r->task = p->task;
    snprintf(r->spec, sizeof r->spec, "%s", spec);
    snprintf(r->canon, sizeof r->canon, "%s", la_model_get_config(m)->spec);
    r->n_params = la_model_num_params(m);
    la_train_config tc = la_train_config_default();
    tc.steps = o->steps;
    tc.B = o->batch;
    tc.T = T;
    tc.lr = o->lr;
    tc.min_lr = o->lr / 10;
    tc.warmup = o->warmup < o->steps ? o->warmup : 0;
    tc.weight_decay = 0.0; /* as the paper's synthetic configs */
    tc.optimizer = (la_optimizer)o->optimizer;
    tc.muon_lr = o->muon_lr;
    tc.seed = o->seed;
    tc.n_threads = o->threads;
    s = la_trainer_new(m, NULL, &tc, &tr);
    int32_t *in = malloc((size_t)o->batch * T * sizeof *in);
    int32_t *tg = malloc((size_t)o->batch * T * sizeof *tg);
    if (s == LA_OK && (!in || !tg)) s = la_fail(LA_ENOMEM, "out of memory for a %d x %d batch", o->batch, T);
    double t0 = now_s(), ema = NAN;
    const uint64_t train_seed = o->seed * 1000003ULL + 17 * (uint64_t)p->task;
    for (int step = 0; step < o->steps && s == LA_OK; step++) {
        la_step_info info;
        la_task_params cp = curriculum_params(o, p, step);
        /* layout schedule: the inline layout first teaches the key-value lookup, the echo
         * layout then the hop to the query key, each with its own supervision */
        cp.mq_layout = layout_at(o, p, step);
        int n_cur = n_max;
        s = la_task_tokens_at(&cp, cp.max_len, &n_cur);
        const int Tc = n_cur - 1; /* shorter batches early in the curriculum */
        if (s == LA_OK)
            s = la_task_batch(&cp, 0, train_seed, (uint64_t)step * (uint64_t)o->batch, o->batch, Tc, in, tg, NULL);
        if (s == LA_OK) s = la_trainer_step_batch(tr, in, tg, o->batch, Tc, &info);
        if (s != LA_OK) break;
        ema = isnan(ema) ? info.loss : 0.9 * ema + 0.1 * info.loss;
        if ((step + 1) % 50 == 0 || step + 1 == o->steps)
            fprintf(stderr, "  %-8s %-28s step %5d/%d  loss %.4f  (%.1f s)\n", la_task_name(p->task), spec,
                    step + 1, o->steps, ema, now_s() - t0);
    }
    r->steps = o->steps;
    r->train_s = now_s() - t0;
    r->final_loss = ema;
    free(in);
    free(tg);
    double t1 = now_s();
    const uint64_t eval_seed = o->seed * 7919ULL + 1000 + 31 * (uint64_t)p->task;
    for (int mult = 1; mult <= o->max_mult && s == LA_OK; mult *= 2) {
        eval_point *e = &r->pt[r->n_points++];
        e->mult = mult;
        e->content_len = mult * p->max_len;
        s = la_task_tokens_at(p, e->content_len, &e->tokens);
        if (s != LA_OK) break;
        if (e->tokens > o->max_eval_tokens) continue; /* skipped: n = 0 */
        /* fewer examples at the longest lengths: the cost grows as tokens^2 */
        e->n = o->eval_n;
        if (mult > 16) e->n = o->eval_n * 16 / mult > 10 ? o->eval_n * 16 / mult : (o->eval_n < 10 ? o->eval_n : 10);
        s = la_task_eval(m, p, e->content_len, e->n, eval_seed + (uint64_t)mult, 16384, &e->correct);
        if (s == LA_OK)
            fprintf(stderr, "  %-8s %-28s %5dx (L=%d, %d tokens): %d/%d exact\n", la_task_name(p->task), spec,
                    mult, e->content_len, e->tokens, e->correct, e->n);
    }
    r->eval_s = now_s() - t1;
    la_trainer_free(tr);
    la_model_free(m);
    if (s == LA_EUNSUPPORTED) {
        fprintf(stderr, "longattn synth: %s x '%s' skipped: %s\n", la_task_name(p->task), spec, la_errmsg());
        return 3;
    }
    if (s != LA_OK) {
        fprintf(stderr, "longattn synth: %s x '%s': %s: %s\n", la_task_name(p->task), spec, la_status_name(s),
                la_errmsg());
        return 1;
    }
    return 0;
}

static const char *fmt_acc(const eval_point *e, char *buf, size_t n) {
    if (e->n == 0) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.3f", (double)e->correct / e->n);
    return buf;
}

static int write_text(const char *path, const char *text) {
    la_afile af;
    if (la_afile_open(&af, path) != LA_OK) {
        fprintf(stderr, "longattn synth: %s\n", la_errmsg());
        return 1;
    }
    fputs(text, af.f);
    if (la_afile_commit(&af) != LA_OK) {
        fprintf(stderr, "longattn synth: %s\n", la_errmsg());
        return 1;
    }
    return 0;
}

/* Growable string for the table writers. */
typedef struct { char *s; size_t n, cap; } sbuf;
static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = (b->cap + (size_t)k + 1) * 2;
        char *ns = realloc(b->s, nc);
        if (!ns) return;
        b->s = ns;
        b->cap = nc;
    }
}

static int write_results(const synth_opts *o, const run_result *rs, int nr) {
    char path[1200];
    int rc = 0;
    /* CSV: one row per run x length */
    sbuf csv = {0};
    sb_printf(&csv, "task,spec,mult,content_len,tokens,n,correct,exact_match,train_steps,train_s,final_loss\n");
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < rs[i].n_points; j++) {
            const eval_point *e = &rs[i].pt[j];
            char acc[32];
            if (e->n) snprintf(acc, sizeof acc, "%.4f", (double)e->correct / e->n);
            else acc[0] = '\0';
            sb_printf(&csv, "%s,\"%s\",%d,%d,%d,%d,%d,%s,%d,%.1f,%.5f\n", la_task_name(rs[i].task), rs[i].spec,
                      e->mult, e->content_len, e->tokens, e->n, e->correct, acc, rs[i].steps, rs[i].train_s,
                      rs[i].final_loss);
        }
    snprintf(path, sizeof path, "%s/results.csv", o->out);
    rc |= write_text(path, csv.s ? csv.s : "");
    free(csv.s);

    /* Markdown: one row per run, one column per length */
    sbuf md = {0};
    int maxp = 0;
    for (int i = 0; i < nr; i++) maxp = rs[i].n_points > maxp ? rs[i].n_points : maxp;
    sb_printf(&md, "| task | spec | steps | train s | final loss |");
    for (int j = 0, m = 1; j < maxp; j++, m *= 2) {
        if (m == 1) sb_printf(&md, " ID (%d) |", o->max_len);
        else sb_printf(&md, " %dx (%d) |", m, m * o->max_len);
    }
    sb_printf(&md, "\n|---|---|---:|---:|---:|");
    for (int j = 0; j < maxp; j++) sb_printf(&md, "---:|");
    sb_printf(&md, "\n");
    for (int i = 0; i < nr; i++) {
        sb_printf(&md, "| %s | `%s` | %d | %.0f | %.4f |", la_task_name(rs[i].task), rs[i].spec, rs[i].steps,
                  rs[i].train_s, rs[i].final_loss);
        for (int j = 0; j < maxp; j++) {
            char acc[32] = "";
            if (j < rs[i].n_points) fmt_acc(&rs[i].pt[j], acc, sizeof acc);
            sb_printf(&md, " %s |", acc);
        }
        sb_printf(&md, "\n");
    }
    sb_printf(&md, "\nExact match (whole target right) on %d examples per length (fewer above 16x); "
                   "columns: multiple of the training length (content tokens); '-' = skipped (too long).\n",
              o->eval_n);
    if (*g_skipped) sb_printf(&md, "\nSkipped (not built into this library): %s\n", g_skipped);
    snprintf(path, sizeof path, "%s/results.md", o->out);
    rc |= write_text(path, md.s ? md.s : "");
    free(md.s);

    /* JSON */
    cJSON *root = cJSON_CreateObject();
    cJSON *cfg = cJSON_AddObjectToObject(root, "config");
    cJSON_AddStringToObject(cfg, "tasks", o->tasks);
    cJSON_AddStringToObject(cfg, "specs", o->specs);
    cJSON_AddNumberToObject(cfg, "steps", o->steps);
    cJSON_AddNumberToObject(cfg, "batch", o->batch);
    cJSON_AddNumberToObject(cfg, "lr", o->lr);
    cJSON_AddNumberToObject(cfg, "inline_share", o->inline_share);
    cJSON_AddNumberToObject(cfg, "echo_share", o->echo_share);
    cJSON_AddNumberToObject(cfg, "init_std", o->init_std > 0 ? o->init_std : la_model_config_default().init_std);
    cJSON_AddStringToObject(cfg, "optimizer", o->optimizer == LA_OPT_MUON ? "muon" : "adamw");
    if (o->optimizer == LA_OPT_MUON) cJSON_AddNumberToObject(cfg, "muon_lr", o->muon_lr);
    cJSON_AddNumberToObject(cfg, "warmup", o->warmup);
    cJSON_AddNumberToObject(cfg, "layers", o->layers);
    cJSON_AddNumberToObject(cfg, "heads", o->heads);
    cJSON_AddNumberToObject(cfg, "d_model", o->d_model);
    cJSON_AddNumberToObject(cfg, "d_ff", o->d_ff ? o->d_ff : 4 * o->d_model);
    cJSON_AddNumberToObject(cfg, "min_len", o->min_len);
    cJSON_AddNumberToObject(cfg, "max_len", o->max_len);
    cJSON_AddNumberToObject(cfg, "eval_n", o->eval_n);
    cJSON_AddNumberToObject(cfg, "max_mult", o->max_mult);
    cJSON_AddNumberToObject(cfg, "seed", (double)o->seed);
    cJSON_AddNumberToObject(cfg, "curriculum", o->curriculum);
    cJSON_AddNumberToObject(cfg, "ramp", o->ramp);
    cJSON_AddBoolToObject(cfg, "quick", o->quick);
    cJSON_AddStringToObject(root, "skipped_specs", g_skipped);
    cJSON *runs = cJSON_AddArrayToObject(root, "runs");
    for (int i = 0; i < nr; i++) {
        const run_result *r = &rs[i];
        la_task_params p = task_params(o, r->task);
        la_task_vocab voc;
        la_task_get_vocab(&p, &voc);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "task", la_task_name(r->task));
        cJSON_AddStringToObject(j, "spec", r->spec);
        cJSON_AddStringToObject(j, "spec_canonical", r->canon);
        cJSON *tp = cJSON_AddObjectToObject(j, "task_params");
        cJSON_AddNumberToObject(tp, "n_symbols", p.n_symbols);
        cJSON_AddNumberToObject(tp, "vocab_size", voc.vocab_size);
        if (r->task == LA_TASK_MQMTAR) {
            cJSON_AddNumberToObject(tp, "n_queries", p.n_queries);
            cJSON_AddNumberToObject(tp, "k_len", p.k_len);
            cJSON_AddNumberToObject(tp, "v_len", p.v_len);
            cJSON_AddNumberToObject(tp, "kv_frac", p.kv_frac);
            cJSON_AddStringToObject(tp, "layout", p.mq_layout == LA_MQ_INLINE ? "inline"
                                                  : p.mq_layout == LA_MQ_ECHO ? "echo" : "paper");
        }
        if (r->task == LA_TASK_FLIPFLOP) cJSON_AddNumberToObject(tp, "write_prob", p.write_prob);
        cJSON_AddNumberToObject(j, "n_params", (double)r->n_params);
        cJSON_AddNumberToObject(j, "train_steps", r->steps);
        cJSON_AddNumberToObject(j, "train_seconds", r->train_s);
        cJSON_AddNumberToObject(j, "eval_seconds", r->eval_s);
        cJSON_AddNumberToObject(j, "final_loss", r->final_loss);
        cJSON *ev = cJSON_AddArrayToObject(j, "eval");
        for (int k = 0; k < r->n_points; k++) {
            const eval_point *e = &r->pt[k];
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "mult", e->mult);
            cJSON_AddNumberToObject(x, "content_len", e->content_len);
            cJSON_AddNumberToObject(x, "tokens", e->tokens);
            cJSON_AddNumberToObject(x, "n", e->n);
            cJSON_AddNumberToObject(x, "correct", e->correct);
            if (e->n) cJSON_AddNumberToObject(x, "exact_match", (double)e->correct / e->n);
            else cJSON_AddNullToObject(x, "exact_match");
            cJSON_AddItemToArray(ev, x);
        }
        cJSON_AddItemToArray(runs, j);
    }
    char *js = cJSON_Print(root);
    snprintf(path, sizeof path, "%s/results.json", o->out);
    rc |= write_text(path, js ? js : "{}");
    free(js);
    cJSON_Delete(root);
    return rc;
}

/* One PNG per task: accuracy vs content length (log2 x axis), a line per spec. */
static int write_plots(const synth_opts *o, const run_result *rs, int nr, char **tasks, int nt) {
    int rc = 0;
    for (int ti = 0; ti < nt; ti++) {
        la_task t;
        la_task_from_name(tasks[ti], &t);
        int idx[MAX_SPECS], ns = 0;
        for (int i = 0; i < nr && ns < MAX_SPECS; i++)
            if (rs[i].task == t) idx[ns++] = i;
        if (!ns) continue;
        char dat[1200], gp[1200], png[1200];
        snprintf(dat, sizeof dat, "%s/synth_%s.dat", o->out, la_task_name(t));
        snprintf(gp, sizeof gp, "%s/synth_%s.gp", o->out, la_task_name(t));
        snprintf(png, sizeof png, "%s/synth_%s.png", o->out, la_task_name(t));
        sbuf d = {0};
        sb_printf(&d, "content_len");
        for (int s = 0; s < ns; s++) sb_printf(&d, "\t%s", rs[idx[s]].spec);
        sb_printf(&d, "\n");
        for (int k = 0; k < rs[idx[0]].n_points; k++) {
            sb_printf(&d, "%d", rs[idx[0]].pt[k].content_len);
            for (int s = 0; s < ns; s++) {
                const run_result *r = &rs[idx[s]];
                if (k < r->n_points && r->pt[k].n) sb_printf(&d, "\t%.4f", (double)r->pt[k].correct / r->pt[k].n);
                else sb_printf(&d, "\tNaN");
            }
            sb_printf(&d, "\n");
        }
        rc |= write_text(dat, d.s ? d.s : "");
        free(d.s);
        sbuf g = {0};
        sb_printf(&g,
                  "set terminal pngcairo size 800,500 noenhanced\nset output '%s'\n"
                  "set datafile separator '\\t'\nset datafile missing 'NaN'\n"
                  "set title 'longattn synth: %s (trained at content length %d-%d)'\n"
                  "set logscale x 2\nset xlabel 'content length (tokens)'\nset ylabel 'exact match'\n"
                  "set yrange [-0.02:1.02]\nset key bottom left\nset grid\n"
                  "plot for [i=2:%d] '%s' using 1:i with linespoints lw 2 title columnheader(i)\n",
                  png, la_task_name(t), o->min_len, o->max_len, ns + 1, dat);
        rc |= write_text(gp, g.s ? g.s : "");
        free(g.s);
        char cmd[2600];
        snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", gp);
        FILE *pp = popen(cmd, "r");
        char line[512];
        int printed = 0;
        while (pp && fgets(line, sizeof line, pp)) {
            if (!printed++) fprintf(stderr, "longattn synth: gnuplot says:\n");
            fputs(line, stderr);
        }
        int st = pp ? pclose(pp) : -1;
        if (st != 0) {
            fprintf(stderr, "longattn synth: gnuplot failed on %s (install gnuplot-nox: scripts/setup.sh); "
                            "tables are written\n", gp);
            rc = 1;
        }
    }
    return rc;
}

static int mkdir_p(const char *dir) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
            *p = '/';
        }
    if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
    return 0;
}

int cli_synth(int argc, char **argv) {
    synth_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc < 0) return 0; /* --help */
    if (prc) return prc;
    char tbuf[256], sbuf_[1024];
    snprintf(tbuf, sizeof tbuf, "%s", o.tasks);
    snprintf(sbuf_, sizeof sbuf_, "%s", o.specs);
    char *tasks[MAX_TASKS], *specs[MAX_SPECS];
    int nt = split_list(tbuf, ',', tasks, MAX_TASKS), ns = split_list(sbuf_, ';', specs, MAX_SPECS);
    if (nt <= 0) return cli_usage_error("synth", "--tasks needs 1..%d task names", MAX_TASKS);
    if (ns <= 0) return cli_usage_error("synth", "--specs needs 1..%d specs separated by ';'", MAX_SPECS);
    /* check every name, spec and parameter set before training anything */
    for (int i = 0; i < nt; i++) {
        la_task t;
        if (la_task_from_name(tasks[i], &t) != LA_OK) return cli_usage_error("synth", "%s", la_errmsg());
        la_task_params p = task_params(&o, t);
        if (la_task_validate(&p) != LA_OK) return cli_usage_error("synth", "%s", la_errmsg());
    }
    for (int i = 0; i < ns; i++) {
        la_spec sp;
        if (la_spec_parse(specs[i], &sp) != LA_OK) return cli_usage_error("synth", "%s", la_errmsg());
        if (strlen(specs[i]) >= LA_SPEC_TEXT_MAX)
            return cli_usage_error("synth", "spec '%s' is longer than %d characters", specs[i], LA_SPEC_TEXT_MAX - 1);
    }
    if (o.d_model % o.heads)
        return cli_usage_error("synth", "--heads %d must divide --d-model %d", o.heads, o.d_model);
    if (mkdir_p(o.out)) {
        fprintf(stderr, "longattn synth: cannot create output folder '%s': %s\n", o.out, strerror(errno));
        return 1;
    }
    run_result *rs = calloc((size_t)nt * ns, sizeof *rs);
    if (!rs) return 1;
    int nr = 0, rc = 0;
    double t0 = now_s();
    for (int i = 0; i < nt && !rc; i++) {
        la_task t;
        la_task_from_name(tasks[i], &t);
        la_task_params p = task_params(&o, t);
        for (int j = 0; j < ns && !rc; j++) {
            rc = run_one(&o, &p, specs[j], &rs[nr]);
            if (rc == 3) { /* a normaliser this build lacks: say so, go on */
                rc = 0;
                if (!strstr(g_skipped, specs[j]) && strlen(g_skipped) + strlen(specs[j]) + 4 < sizeof g_skipped) {
                    if (*g_skipped) strcat(g_skipped, "; ");
                    strcat(g_skipped, specs[j]);
                }
                continue;
            }
            if (!rc) nr++;
            rc |= write_results(&o, rs, nr); /* partial results survive an interruption */
        }
    }
    if (nr) rc |= write_plots(&o, rs, nr, tasks, nt);
    if (!rc) {
        char path[1200];
        snprintf(path, sizeof path, "%s/results.md", o.out);
        FILE *f = fopen(path, "r");
        char line[2048];
        while (f && fgets(line, sizeof line, f)) fputs(line, stdout);
        if (f) fclose(f);
        printf("\nwrote %s/results.{md,csv,json} and synth_<task>.png in %.0f s\n", o.out, now_s() - t0);
    }
    free(rs);
    return rc ? 1 : 0;
}
