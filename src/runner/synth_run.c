/* synth_run.c -- the synthetic-task experiment (`longattn synth`, la_synth_run): train a
 * small GPT per synthetic task x attention spec at the training length, then measure
 * exact-match accuracy at 1x, 2x, 4x, ... the training length (ASEntmax paper, Vasylenko
 * et al. 2025, synthetic-task table). Writes results.csv, results.md, results.json and one
 * gnuplot PNG per task into the output folder; reports progress through a callback. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/dist.h"
#include "core/internal.h"
#include "io/files.h"
#include "longattn/experiments.h"
#include "runner/cells.h"
#include "runner/grid.h"
#include "runner/report.h"

#define MAX_TASKS 8
#define MAX_SPECS 16
#define MAX_MULTS 12 /* 1x .. 2048x */

typedef struct {
    int mult, content_len, tokens, n, correct; /* n = 0: skipped (too long) */
} eval_point;

typedef struct {
    la_task task;
    char spec[LA_SPEC_TEXT_MAX], canon[LA_SPEC_TEXT_MAX];
    int steps;
    uint64_t seed;
    size_t n_params;
    double train_s, eval_s, final_loss;
    int n_points;
    eval_point pt[MAX_MULTS];
} run_result;

typedef struct {
    const la_synth_opts *o;
    la_synth_progress_fn progress;
    void *user;
    char skipped[1024]; /* specs skipped because this build lacks their normaliser */
} synth_state;

la_synth_opts la_synth_opts_default(void) {
    la_synth_opts o;
    memset(&o, 0, sizeof o);
    snprintf(o.tasks, sizeof o.tasks, "flipflop");
    snprintf(o.specs, sizeof o.specs, "softmax+nape;softmax+logn+nape;entmax(alpha=1.5)+nape;asentmax+nape");
    snprintf(o.out, sizeof o.out, "runs/synth");
    o.steps = 3000;
    o.batch = 32;
    o.warmup = 30;
    o.layers = 2;
    o.heads = 8;
    o.d_model = 64;
    o.d_ff = 0;
    o.lr = 3e-3;
    o.optimizer = LA_OPT_ADAMW;
    o.muon_lr = 0.02;
    o.qk_gain = 1.0;
    o.n_symbols = 0; /* 0: the task's own default */
    o.min_len = 32;
    o.max_len = 64;
    o.mq_layout = LA_MQ_PAPER;
    o.eval_n = 100;
    o.max_mult = 32;
    o.max_eval_tokens = 1 << 17;
    o.threads = 0;
    o.seed = 1;
    o.curriculum = 8;
    o.ramp = 0.4;
    o.seeds = 1;
    return o;
}

void la_synth_opts_quick(la_synth_opts *o) {
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
    o->quick = 1;
}

la_status la_synth_opts_preset(la_synth_opts *o, const char *name) {
    if (!o || !name) return la_fail(LA_EINVAL, "la_synth_opts_preset: NULL argument");
    if (strcmp(name, "mq-contrast"))
        return la_fail(LA_EINVAL, "unknown synth preset '%s' (known: mq-contrast)", name);
    /* the configuration of docs/study.md "Synthetic contrast", run there seed by seed (--seed 1, 2, 3) */
    snprintf(o->tasks, sizeof o->tasks, "mqmtar");
    snprintf(o->specs, sizeof o->specs, "softmax+prope(p=0.25);asentmax+prope(p=0.25)");
    snprintf(o->out, sizeof o->out, "runs/mq-contrast");
    o->mq_layout = LA_MQ_INLINE;
    o->queries = 2;
    o->k_len = 1;
    o->v_len = 1;
    o->n_symbols = 8;
    o->heads = 4;
    o->init_std = 0.07;
    o->curriculum = 12;
    o->ramp = 0.6;
    o->steps = 12000;
    o->max_mult = 64;
    o->eval_n = 50;
    o->seed = 1;
    o->seeds = 3;
    return LA_OK;
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

static la_task_params task_params(const la_synth_opts *o, la_task t) {
    la_task_params p = la_task_params_default(t);
    if (o->n_symbols) p.n_symbols = o->n_symbols;
    p.min_len = o->min_len;
    p.max_len = o->max_len;
    if (o->queries) p.n_queries = o->queries;
    if (o->k_len) p.k_len = o->k_len;
    if (o->v_len) p.v_len = o->v_len;
    p.mq_layout = o->mq_layout;
    if (o->kv_frac > 0) p.kv_frac = o->kv_frac;
    if (t == LA_TASK_MQMTAR && o->quick && !o->queries) p.n_queries = 1; /* fits lengths 8-16 */
    return p;
}

/* Task params of a training step under the curriculum: content lengths in
 * [max(4, hi/2) capped at min_len, hi], hi rising linearly from --curriculum to max_len over
 * the first ramp * steps steps; the full [min_len, max_len] afterwards (and when off). */
static la_task_params curriculum_params(const la_synth_opts *o, const la_task_params *p, int step) {
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

/* MQMTAR layout of a training step: inline for the first --inline-share of the steps, echo
 * for the next --echo-share, then the evaluated layout p->mq_layout. */
static la_mq_layout layout_at(const la_synth_opts *o, const la_task_params *p, int step) {
    if (p->task != LA_TASK_MQMTAR) return p->mq_layout;
    if (step < (int)(o->inline_share * o->steps)) return LA_MQ_INLINE;
    if (step < (int)((o->inline_share + o->echo_share) * o->steps)) return LA_MQ_ECHO;
    return p->mq_layout;
}

/* Train one model on task p with spec text, then evaluate it at every multiplier. */
static la_status run_one(synth_state *S, const la_task_params *p, const char *spec, uint64_t seed, run_result *r) {
    const la_synth_opts *o = S->o;
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
    if (s != LA_OK) return la_fail(s, "task %s: %s", la_task_name(p->task), la_errmsg());
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
    s = la_model_new(&mc, seed, &m);
    if (s != LA_OK) return la_fail(s, "spec '%s': %s", spec, la_errmsg());
    memset(r, 0, sizeof *r);
    r->task = p->task;
    r->seed = seed;
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
    tc.seed = seed;
    tc.n_threads = o->threads;
    tc.precision = o->precision;
    s = la_trainer_new(m, NULL, &tc, &tr);
    int32_t *in = la_malloc((size_t)o->batch * T * sizeof *in);
    int32_t *tg = la_malloc((size_t)o->batch * T * sizeof *tg);
    if (s == LA_OK && (!in || !tg)) s = la_fail(LA_ENOMEM, "out of memory for a %d x %d batch", o->batch, T);
    double t0 = la_now_s(), ema = NAN;
    const uint64_t train_seed = seed * 1000003ULL + 17 * (uint64_t)p->task;
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
        if (((step + 1) % 50 == 0 || step + 1 == o->steps) && S->progress) {
            la_synth_progress pr = {.event = LA_SYNTH_TRAINING, .task = p->task, .spec = spec,
                                    .step = step + 1, .steps = o->steps, .loss = ema,
                                    .elapsed_s = la_now_s() - t0, .seed = seed};
            S->progress(S->user, &pr);
        }
    }
    r->steps = o->steps;
    r->train_s = la_now_s() - t0;
    r->final_loss = ema;
    free(in);
    free(tg);
    double t1 = la_now_s();
    const uint64_t eval_seed = seed * 7919ULL + 1000 + 31 * (uint64_t)p->task;
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
        if (s == LA_OK && S->progress) {
            la_synth_progress pr = {.event = LA_SYNTH_EVALUATED, .task = p->task, .spec = spec,
                                    .mult = mult, .content_len = e->content_len, .tokens = e->tokens,
                                    .correct = e->correct, .n = e->n, .seed = seed};
            S->progress(S->user, &pr);
        }
    }
    r->eval_s = la_now_s() - t1;
    la_trainer_free(tr);
    la_model_free(m);
    if (s == LA_EUNSUPPORTED) return s; /* the caller skips the spec, la_errmsg() says why */
    if (s != LA_OK) return la_fail(s, "%s x '%s': %s", la_task_name(p->task), spec, la_errmsg());
    return LA_OK;
}

/* A task x spec's runs over its seeds: n consecutive runs in cell order. A seed "learned"
 * the task when its exact match at 1x is at least LEARNED_MIN; the longer lengths are
 * summarised over the seeds that learned it only, since a seed that never learned the task
 * says nothing about length generalisation. */
#define LEARNED_MIN 0.5
typedef struct {
    int n, learned;
    int n_at[MAX_MULTS];            /* learned seeds with a point at each multiplier */
    double mean[MAX_MULTS], sd[MAX_MULTS]; /* over those (sample std; 0 for one seed) */
    double all_mean[MAX_MULTS], all_sd[MAX_MULTS]; /* over every seed with a point there
                                                      ([0]: the 1x score over all seeds) */
} seed_group;

static double acc_of(const eval_point *e) { return (double)e->correct / e->n; }

static int learned(const run_result *r) {
    return r->n_points > 0 && r->pt[0].n > 0 && acc_of(&r->pt[0]) >= LEARNED_MIN;
}

static void mean_sd(const double *x, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = n ? s / n : NAN;
    for (int i = 0; i < n; i++) q += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* The group starting at rs[first] (the next at most n_seeds runs of its task and spec;
 * g->n >= 1 when first < nr). */
static void seed_group_at(const run_result *rs, int nr, int first, int n_seeds, seed_group *g) {
    memset(g, 0, sizeof *g);
    const run_result *r0 = &rs[first];
    while (first + g->n < nr && g->n < n_seeds && r0[g->n].task == r0->task && !strcmp(r0[g->n].spec, r0->spec))
        g->n++;
    for (int s = 0; s < g->n; s++) g->learned += learned(&r0[s]);
    for (int k = 0; k < MAX_MULTS; k++) {
        double x[LA_SYNTH_MAX_SEEDS], xa[LA_SYNTH_MAX_SEEDS];
        int m = 0, ma = 0;
        for (int s = 0; s < g->n; s++) {
            const run_result *r = &r0[s];
            if (r->n_points <= k || r->pt[k].n == 0) continue;
            xa[ma++] = acc_of(&r->pt[k]);
            if (learned(r)) x[m++] = acc_of(&r->pt[k]);
        }
        g->n_at[k] = m;
        mean_sd(x, m, &g->mean[k], &g->sd[k]);
        mean_sd(xa, ma, &g->all_mean[k], &g->all_sd[k]);
    }
}

/* A markdown table whose first n columns are named by first (aligned left, the rest
 * right), then one column per length: "ID (L)", "2x (2L)", ... (maxp of them). */
static la_status md_table(la_table *t, const char *const *first, int n, const la_synth_opts *o, int maxp) {
    char names[MAX_MULTS + 8][32], align[MAX_MULTS + 8 + 1];
    const char *head[MAX_MULTS + 8];
    for (int j = 0; j < n; j++) head[j] = first[j], align[j] = j < 2 ? 'l' : 'r';
    for (int j = 0, m = 1; j < maxp; j++, m *= 2) {
        if (m == 1) snprintf(names[j], sizeof names[j], "ID (%d)", o->max_len);
        else snprintf(names[j], sizeof names[j], "%dx (%d)", m, m * o->max_len);
        head[n + j] = names[j], align[n + j] = 'r';
    }
    return la_table_init(t, n + maxp, head, align);
}

static la_status write_results(const synth_state *S, const run_result *rs, int nr) {
    const la_synth_opts *o = S->o;
    /* CSV: one row per run x length */
    static const char *const csv_head[] = {"task", "spec", "mult", "content_len", "tokens", "n", "correct",
                                           "exact_match", "train_steps", "train_s", "final_loss", "seed"};
    la_table t;
    LA_TRY(la_table_init(&t, 12, csv_head, NULL));
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < rs[i].n_points; j++) {
            const eval_point *e = &rs[i].pt[j];
            char acc[32] = "";
            if (e->n) snprintf(acc, sizeof acc, "%.4f", (double)e->correct / e->n);
            la_table_add(&t, "%s", la_task_name(rs[i].task));
            la_table_add_quoted(&t, rs[i].spec);
            la_table_row(&t, "%d\t%d\t%d\t%d\t%d\t%s\t%d\t%.1f\t%.5f\t%llu", e->mult, e->content_len, e->tokens,
                         e->n, e->correct, acc, rs[i].steps, rs[i].train_s, rs[i].final_loss,
                         (unsigned long long)rs[i].seed);
        }
    la_status rc = la_table_write_csv(&t, o->out, "results.csv");

    /* Markdown: one row per run, one column per length */
    la_sbuf md = {0};
    int maxp = 0;
    for (int i = 0; i < nr; i++) maxp = rs[i].n_points > maxp ? rs[i].n_points : maxp;
    const int nk = o->seeds; /* validated: >= 1 */
    static const char *const head1[] = {"task", "spec", "steps", "train s", "final loss"};
    static const char *const head1_seed[] = {"task", "spec", "seed", "steps", "train s", "final loss"};
    la_table t1;
    LA_TRY(md_table(&t1, nk > 1 ? head1_seed : head1, nk > 1 ? 6 : 5, o, maxp)); /* rc keeps the CSV's status */
    for (int i = 0; i < nr; i++) {
        la_table_row(&t1, "%s\t`%s`", la_task_name(rs[i].task), rs[i].spec);
        if (nk > 1) la_table_add(&t1, "%llu", (unsigned long long)rs[i].seed);
        la_table_row(&t1, "%d\t%.0f\t%.4f", rs[i].steps, rs[i].train_s, rs[i].final_loss);
        for (int j = 0; j < maxp; j++) { /* '-': skipped; empty: no such length */
            if (j >= rs[i].n_points) la_table_add(&t1, "%s", "");
            else if (rs[i].pt[j].n == 0) la_table_add(&t1, "-");
            else la_table_add(&t1, "%.3f", acc_of(&rs[i].pt[j]));
        }
    }
    la_table_md(&t1, &md);
    la_table_free(&t1);
    la_sbuf_printf(&md, "\nExact match (whole target right) on %d examples per length (fewer above 16x); "
                   "columns: multiple of the training length (content tokens); '-' = skipped (too long).\n",
              o->eval_n);
    if (nk > 1) { /* one row per task x spec over its seeds */
        la_sbuf_printf(&md, "\nOver the seeds (%llu..%llu):\n\n", (unsigned long long)o->seed,
                       (unsigned long long)(o->seed + (uint64_t)nk - 1));
        static const char *const head2[] = {"task", "spec", "seeds", "learned"};
        la_table t2;
        la_status mt = md_table(&t2, head2, 4, o, maxp);
        if (mt != LA_OK) {
            free(md.s);
            return mt;
        }
        seed_group g;
        for (int i = 0; i < nr; i += g.n) {
            seed_group_at(rs, nr, i, nk, &g);
            la_table_row(&t2, "%s\t`%s`\t%d\t%d", la_task_name(rs[i].task), rs[i].spec, g.n, g.learned);
            for (int j = 0; j < maxp; j++) {
                if (j == 0 && isfinite(g.all_mean[0])) la_table_add(&t2, "%.2f ± %.2f", g.all_mean[0], g.all_sd[0]);
                else if (j == 0) la_table_add(&t2, "-");
                else if (!g.learned) la_table_add(&t2, "not learned");
                else if (!g.n_at[j]) la_table_add(&t2, "-");
                else la_table_add(&t2, "%.2f ± %.2f", g.mean[j], g.sd[j]);
            }
        }
        la_table_md(&t2, &md);
        la_table_free(&t2);
        la_sbuf_printf(&md, "\nlearned: seeds whose exact match at 1x (ID) is at least %.1f. ID: mean ± sample std "
                       "over all the seeds; longer lengths: over the seeds that learned the task (\"not learned\" "
                       "when none did).\n", LEARNED_MIN);
    }
    if (*S->skipped) la_sbuf_printf(&md, "\nSkipped (not built into this library): %s\n", S->skipped);
    if (rc == LA_OK) rc = la_report_write(o->out, "results.md", &md);
    free(md.s);

    /* JSON */
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
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
    if (o->precision != LA_DTYPE_F32) cJSON_AddStringToObject(cfg, "precision", la_dtype_name(o->precision));
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
    cJSON_AddNumberToObject(cfg, "seeds", nk);
    cJSON_AddNumberToObject(cfg, "curriculum", o->curriculum);
    cJSON_AddNumberToObject(cfg, "ramp", o->ramp);
    cJSON_AddBoolToObject(cfg, "quick", o->quick);
    cJSON_AddStringToObject(root, "skipped_specs", S->skipped);
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
        cJSON_AddNumberToObject(j, "seed", (double)r->seed);
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
            la_json_push(ev, x);
        }
        la_json_push(runs, j);
    }
    if (nk > 1) {
        cJSON *sum = cJSON_AddArrayToObject(root, "over_seeds");
        seed_group g;
        for (int i = 0; i < nr; i += g.n) {
            seed_group_at(rs, nr, i, nk, &g);
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "task", la_task_name(rs[i].task));
            cJSON_AddStringToObject(j, "spec", rs[i].spec);
            cJSON_AddNumberToObject(j, "seeds", g.n);
            cJSON_AddNumberToObject(j, "learned", g.learned);
            la_json_put(j, "id_mean", la_cells_num(g.all_mean[0]));
            la_json_put(j, "id_sd", la_cells_num(g.all_sd[0]));
            cJSON *pts = cJSON_AddArrayToObject(j, "learned_eval"); /* over the seeds that learned */
            for (int k = 0; k < rs[i].n_points; k++) {
                cJSON *x = cJSON_CreateObject();
                cJSON_AddNumberToObject(x, "mult", rs[i].pt[k].mult);
                cJSON_AddNumberToObject(x, "n_seeds", g.n_at[k]);
                la_json_put(x, "mean", la_cells_num(g.mean[k]));
                la_json_put(x, "sd", la_cells_num(g.sd[k]));
                la_json_push(pts, x);
            }
            la_json_push(sum, j);
        }
    }
    root = la_json_end(saved_json, root);
    if (rc == LA_OK) rc = la_report_write_json(o->out, "results.json", root, 0);
    cJSON_Delete(root);
    return rc;
}

/* One PNG per task: accuracy vs content length (log2 x axis), a line per spec. */
static la_status write_plots(const la_synth_opts *o, const run_result *rs, int nr, char **tasks, int nt) {
    la_status rc = LA_OK, plot_rc = LA_OK; /* plot_rc: the first gnuplot failure; the other tasks go on */
    for (int ti = 0; ti < nt && rc == LA_OK; ti++) {
        la_task t;
        la_task_from_name(tasks[ti], &t);
        /* one line per spec: its run, or with several seeds the mean over the seeds that
         * learned the task with the sample std as error bars (over all seeds where none did:
         * the title says how many learned) */
        const int nk = o->seeds;
        int idx[MAX_SPECS], ns = 0;
        seed_group grp[MAX_SPECS], sg;
        for (int i = 0; i < nr && ns < MAX_SPECS; i += sg.n) {
            seed_group_at(rs, nr, i, nk, &sg);
            if (rs[i].task == t) grp[ns] = sg, idx[ns++] = i;
        }
        if (!ns) continue;
        char dat[1200], gp[1200], png[1200];
        snprintf(dat, sizeof dat, "%s/synth_%s.dat", o->out, la_task_name(t));
        snprintf(gp, sizeof gp, "%s/synth_%s.gp", o->out, la_task_name(t));
        snprintf(png, sizeof png, "%s/synth_%s.png", o->out, la_task_name(t));
        la_sbuf d = {0};
        la_sbuf_printf(&d, "content_len");
        for (int s = 0; s < ns; s++) {
            la_sbuf_printf(&d, "\t%s", rs[idx[s]].spec);
            if (nk > 1) la_sbuf_printf(&d, " (%d/%d learned)\tstd", grp[s].learned, grp[s].n);
        }
        la_sbuf_printf(&d, "\n");
        for (int k = 0; k < rs[idx[0]].n_points; k++) {
            la_sbuf_printf(&d, "%d", rs[idx[0]].pt[k].content_len);
            for (int s = 0; s < ns; s++) {
                const run_result *r = &rs[idx[s]];
                if (nk > 1 && grp[s].learned && grp[s].n_at[k])
                    la_sbuf_printf(&d, "\t%.4f\t%.4f", grp[s].mean[k], grp[s].sd[k]);
                else if (nk > 1 && !grp[s].learned && isfinite(grp[s].all_mean[k]))
                    la_sbuf_printf(&d, "\t%.4f\t%.4f", grp[s].all_mean[k], grp[s].all_sd[k]);
                else if (nk > 1) la_sbuf_printf(&d, "\tNaN\tNaN");
                else if (k < r->n_points && r->pt[k].n) la_sbuf_printf(&d, "\t%.4f", (double)r->pt[k].correct / r->pt[k].n);
                else la_sbuf_printf(&d, "\tNaN");
            }
            la_sbuf_printf(&d, "\n");
        }
        rc = la_report_write(NULL, dat, &d);
        free(d.s);
        la_sbuf g = {0};
        la_sbuf_printf(&g,
                  "set terminal pngcairo size 800,500 noenhanced\nset output '%s'\n"
                  "set datafile separator '\\t'\nset datafile missing 'NaN'\n"
                  "set title 'longattn synth: %s (trained at content length %d-%d)'\n"
                  "set logscale x 2\nset xlabel 'content length (tokens)'\nset ylabel 'exact match'\n"
                  "set yrange [-0.02:1.02]\nset key bottom left\nset grid\n",
                  png, la_task_name(t), o->min_len, o->max_len);
        if (nk > 1)
            la_sbuf_printf(&g, "set ylabel 'exact match, mean +- std (learned seeds)'\nset offsets graph 0.03, graph 0.03, 0, 0\n"
                           "plot for [i=0:%d] '%s' using 1:(column(2+2*i)):(column(3+2*i)) with yerrorlines lw 2 "
                           "title columnheader(2+2*i)\n", ns - 1, dat);
        else
            la_sbuf_printf(&g, "plot for [i=2:%d] '%s' using 1:i with linespoints lw 2 title columnheader(i)\n",
                           ns + 1, dat);
        if (rc == LA_OK) rc = la_report_write(NULL, gp, &g);
        free(g.s);
        if (rc != LA_OK) break;
        /* gnuplot's messages go to a log next to the script, quoted on failure, then removed */
        char said[600] = "";
        int st = la_report_plot(NULL, NULL, gp, NULL, NULL, 0, NULL, said, sizeof said);
        if (st != 0 && plot_rc == LA_OK)
            plot_rc = la_fail(LA_EIO, "gnuplot failed on %s (exit %d%s%s; install gnuplot-nox: scripts/setup.sh); "
                         "tables are written", gp, st, *said ? ": " : "", said);
    }
    return rc != LA_OK ? rc : plot_rc;
}

/* ---- resume: a finished task x spec run is one cell (runner/cells.h) ---- */

/* Every option that decides the numbers (all but out and resume). */
static cJSON *synth_fingerprint(const la_synth_opts *o) {
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    cJSON *f = cJSON_CreateObject();
    if (!f) return NULL;
    cJSON_AddStringToObject(f, "tasks", o->tasks);
    cJSON_AddStringToObject(f, "specs", o->specs);
    cJSON_AddNumberToObject(f, "steps", o->steps);
    cJSON_AddNumberToObject(f, "batch", o->batch);
    cJSON_AddNumberToObject(f, "warmup", o->warmup);
    cJSON_AddNumberToObject(f, "layers", o->layers);
    cJSON_AddNumberToObject(f, "heads", o->heads);
    cJSON_AddNumberToObject(f, "d_model", o->d_model);
    cJSON_AddNumberToObject(f, "d_ff", o->d_ff);
    la_json_put(f, "lr", la_cells_num(o->lr));
    la_json_put(f, "muon_lr", la_cells_num(o->muon_lr));
    cJSON_AddStringToObject(f, "optimizer", o->optimizer == LA_OPT_MUON ? "muon" : "adamw");
    if (o->precision != LA_DTYPE_F32) /* absent: f32 (older runs' cells) */
        cJSON_AddStringToObject(f, "precision", la_dtype_name(o->precision));
    la_json_put(f, "qk_gain", la_cells_num(o->qk_gain));
    la_json_put(f, "init_std", la_cells_num(o->init_std));
    cJSON_AddNumberToObject(f, "n_symbols", o->n_symbols);
    cJSON_AddNumberToObject(f, "min_len", o->min_len);
    cJSON_AddNumberToObject(f, "max_len", o->max_len);
    cJSON_AddNumberToObject(f, "queries", o->queries);
    cJSON_AddNumberToObject(f, "k_len", o->k_len);
    cJSON_AddNumberToObject(f, "v_len", o->v_len);
    cJSON_AddNumberToObject(f, "mq_layout", o->mq_layout);
    la_json_put(f, "inline_share", la_cells_num(o->inline_share));
    la_json_put(f, "echo_share", la_cells_num(o->echo_share));
    la_json_put(f, "kv_frac", la_cells_num(o->kv_frac));
    cJSON_AddNumberToObject(f, "eval_n", o->eval_n);
    cJSON_AddNumberToObject(f, "max_mult", o->max_mult);
    cJSON_AddNumberToObject(f, "max_eval_tokens", (double)o->max_eval_tokens);
    cJSON_AddNumberToObject(f, "threads", o->threads);
    cJSON_AddNumberToObject(f, "curriculum", o->curriculum);
    la_json_put(f, "ramp", la_cells_num(o->ramp));
    la_json_put(f, "seed", la_cells_u64(o->seed));
    cJSON_AddBoolToObject(f, "quick", o->quick);
    if (o->seeds > 1) cJSON_AddNumberToObject(f, "seeds", o->seeds); /* absent for one: older runs resume */
    return la_json_end(saved_json, f);
}

/* with_seed 0 (one seed per task x spec): the key older runs used, so that they resume */
static void cell_key(la_task t, int spec_index, const char *spec, int with_seed, uint64_t seed, char *buf, size_t n) {
    int k = snprintf(buf, n, "%s_%d_%s", la_task_name(t), spec_index + 1, spec); /* la_cells_save makes it file-safe */
    if (with_seed && k + 1 < (int)n) snprintf(buf + k, n - (size_t)k, "_seed%llu", (unsigned long long)seed);
}

static cJSON *run_to_json(const run_result *r) {
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "task", la_task_name(r->task));
    cJSON_AddStringToObject(o, "spec", r->spec);
    cJSON_AddStringToObject(o, "canon", r->canon);
    cJSON_AddNumberToObject(o, "steps", r->steps);
    la_json_put(o, "seed", la_cells_u64(r->seed));
    cJSON_AddNumberToObject(o, "n_params", (double)r->n_params);
    la_json_put(o, "train_s", la_cells_num(r->train_s));
    la_json_put(o, "eval_s", la_cells_num(r->eval_s));
    la_json_put(o, "final_loss", la_cells_num(r->final_loss));
    cJSON *pts = cJSON_AddArrayToObject(o, "points"); /* [mult, content_len, tokens, n, correct] */
    for (int k = 0; k < r->n_points; k++) {
        const eval_point *e = &r->pt[k];
        int v[5] = {e->mult, e->content_len, e->tokens, e->n, e->correct};
        la_json_push(pts, cJSON_CreateIntArray(v, 5));
    }
    return la_json_end(saved_json, o);
}

static la_status run_from_json(const cJSON *o, la_task t, const char *spec, uint64_t seed, const char *key,
                               run_result *r) {
    memset(r, 0, sizeof *r);
    const cJSON *canon = cJSON_GetObjectItemCaseSensitive(o, "canon");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(o, "spec");
    const cJSON *pts = cJSON_GetObjectItemCaseSensitive(o, "points");
    int np = cJSON_GetArraySize(pts);
    if (!cJSON_IsString(canon) || !cJSON_IsString(sp) || strcmp(sp->valuestring, spec) || !cJSON_IsArray(pts) ||
        np > MAX_MULTS)
        return la_fail(LA_EFORMAT, "the saved result of %s does not match this run (damaged?); delete it to "
                       "rerun that cell", key);
    r->task = t;
    r->seed = seed; /* the key names the seed (older cells lack the field) */
    snprintf(r->spec, sizeof r->spec, "%s", spec);
    snprintf(r->canon, sizeof r->canon, "%s", canon->valuestring);
    r->steps = (int)la_cells_get_num(o, "steps");
    r->n_params = (size_t)la_cells_get_num(o, "n_params");
    r->train_s = la_cells_get_num(o, "train_s");
    r->eval_s = la_cells_get_num(o, "eval_s");
    r->final_loss = la_cells_get_num(o, "final_loss");
    r->n_points = np;
    for (int k = 0; k < np; k++) {
        const cJSON *a = cJSON_GetArrayItem(pts, k);
        if (cJSON_GetArraySize(a) != 5)
            return la_fail(LA_EFORMAT, "the saved result of %s has a malformed point; delete it to rerun that cell", key);
        eval_point *e = &r->pt[k];
        int *v[5] = {&e->mult, &e->content_len, &e->tokens, &e->n, &e->correct}; /* run_to_json's order */
        for (int q = 0; q < 5; q++) *v[q] = (int)la_cells_num_value(cJSON_GetArrayItem(a, q));
    }
    return LA_OK;
}

/* tasks and specs of o split into lists (in the caller's buffers) */
static la_status split_opts(const la_synth_opts *o, char *tbuf, size_t tn, char *sbuf_, size_t sn, char **tasks,
                            int *nt, char **specs, int *ns) {
    snprintf(tbuf, tn, "%s", o->tasks);
    snprintf(sbuf_, sn, "%s", o->specs);
    *nt = split_list(tbuf, ',', tasks, MAX_TASKS);
    *ns = split_list(sbuf_, ';', specs, MAX_SPECS);
    if (*nt <= 0) return la_fail(LA_EINVAL, "tasks needs 1..%d task names (got '%s')", MAX_TASKS, o->tasks);
    if (*ns <= 0) return la_fail(LA_EINVAL, "specs needs 1..%d specs separated by ';' (got '%s')", MAX_SPECS, o->specs);
    return LA_OK;
}

la_status la_synth_validate(const la_synth_opts *o) {
    if (!o) return la_fail(LA_EINVAL, "la_synth_validate: NULL options");
    char tbuf[256], sbuf_[1024];
    char *tasks[MAX_TASKS], *specs[MAX_SPECS];
    int nt, ns;
    LA_TRY(split_opts(o, tbuf, sizeof tbuf, sbuf_, sizeof sbuf_, tasks, &nt, specs, &ns));
    if (o->steps < 1 || o->batch < 1 || o->layers < 1 || o->heads < 1 || o->d_model < 1 || o->eval_n < 1)
        return la_fail(LA_EINVAL, "steps, batch, layers, heads, d_model and eval_n must be >= 1");
    if (o->max_mult < 1 || o->max_mult > 1024 || (o->max_mult & (o->max_mult - 1)))
        return la_fail(LA_EINVAL, "max_mult must be a power of two (1, 2, 4, ... 1024), got %d", o->max_mult);
    if (o->min_len > o->max_len)
        return la_fail(LA_EINVAL, "min_len %d exceeds max_len %d", o->min_len, o->max_len);
    if (!(o->inline_share >= 0 && o->echo_share >= 0 && o->inline_share + o->echo_share < 1))
        return la_fail(LA_EINVAL, "inline_share %g plus echo_share %g leave no steps for the evaluated "
                       "layout; make their sum < 1", o->inline_share, o->echo_share);
    /* check every name, spec and parameter set before training anything */
    for (int i = 0; i < nt; i++) {
        la_task t;
        LA_TRY(la_task_from_name(tasks[i], &t));
        la_task_params p = task_params(o, t);
        LA_TRY(la_task_validate(&p));
    }
    for (int i = 0; i < ns; i++) {
        la_spec sp;
        LA_TRY(la_spec_parse(specs[i], &sp));
        if (strlen(specs[i]) >= LA_SPEC_TEXT_MAX)
            return la_fail(LA_EINVAL, "spec '%s' is longer than %d characters", specs[i], LA_SPEC_TEXT_MAX - 1);
    }
    if (o->d_model % o->heads)
        return la_fail(LA_EINVAL, "heads %d must divide d_model %d", o->heads, o->d_model);
    if (o->seeds < 1 || o->seeds > LA_SYNTH_MAX_SEEDS)
        return la_fail(LA_EINVAL, "seeds must be 1..%d, got %d", LA_SYNTH_MAX_SEEDS, o->seeds);
    return LA_OK;
}

/* A cell (task, spec) of the experiment and what became of it. */
enum { CELL_NOT_RUN = 0, CELL_DONE, CELL_SKIPPED };
typedef struct {
    int state;
    run_result r;
} synth_cell;

/* The finished cells [0, n) in cell order into rs (what a one-process run accumulates), and
 * the skipped specs into S->skipped. Returns the number of results. */
static int compact(synth_state *S, const synth_cell *cells, int n, char **specs, int ns, int nk, run_result *rs) {
    int nr = 0;
    S->skipped[0] = 0;
    for (int c = 0; c < n; c++) {
        if (cells[c].state == CELL_DONE) rs[nr++] = cells[c].r;
        const char *sp = specs[(c / nk) % ns];
        if (cells[c].state == CELL_SKIPPED && !strstr(S->skipped, sp) &&
            strlen(S->skipped) + strlen(sp) + 4 < sizeof S->skipped) {
            if (*S->skipped) strcat(S->skipped, "; ");
            strcat(S->skipped, sp);
        }
    }
    return nr;
}

/* The grid's callbacks (la_grid_run): cell c is (task i, spec j, seed k),
 * c = (i * ns + j) * nk + k. */
typedef struct {
    synth_state *S;
    char **tasks, **specs;
    int ns, nk, N;
    synth_cell *cells;
    run_result *rs;
    int nr;
    la_task t; /* the current cell's task, params and seed (set by cell_begin) */
    la_task_params p;
    uint64_t seed;
} synth_grid;

static void cell_begin(void *user, int c, char *key, size_t n) {
    synth_grid *G = user;
    const int i = c / (G->ns * G->nk), j = (c / G->nk) % G->ns;
    G->seed = G->S->o->seed + (uint64_t)(c % G->nk);
    la_task_from_name(G->tasks[i], &G->t);
    G->p = task_params(G->S->o, G->t);
    cell_key(G->t, j, G->specs[j], G->nk > 1, G->seed, key, n);
}

static la_status cell_restore(void *user, int c, const cJSON *saved, const char *key) {
    synth_grid *G = user;
    return run_from_json(saved, G->t, G->specs[(c / G->nk) % G->ns], G->seed, key, &G->cells[c].r);
}

static la_status cell_run(void *user, int c, const char *key) {
    synth_grid *G = user;
    (void)key;
    return run_one(G->S, &G->p, G->specs[(c / G->nk) % G->ns], G->seed, &G->cells[c].r);
}

static cJSON *cell_to_json(void *user, int c) { return run_to_json(&((synth_grid *)user)->cells[c].r); }

static la_status cell_done(void *user, int c, const char *key, la_status st, int restored) {
    synth_grid *G = user;
    synth_state *S = G->S;
    if (st == LA_EUNSUPPORTED) { /* a normaliser this build lacks: say so, go on */
        G->cells[c].state = CELL_SKIPPED;
        if (S->progress) {
            la_synth_progress pr = {.event = LA_SYNTH_SKIPPED, .task = G->t, .spec = G->specs[(c / G->nk) % G->ns],
                                    .message = la_errmsg(), .seed = G->seed};
            S->progress(S->user, &pr);
        }
        return LA_OK;
    }
    if (st == LA_OK) G->cells[c].state = CELL_DONE;
    if (G->N == 1) { /* partial results survive an interruption */
        G->nr = compact(S, G->cells, c + 1, G->specs, G->ns, G->nk, G->rs);
        la_status w = write_results(S, G->rs, G->nr);
        if (st == LA_OK) st = w;
    }
    return st;
}

la_status la_synth_run(const la_synth_opts *o, la_synth_progress_fn progress, void *user, int *n_runs) {
    if (n_runs) *n_runs = 0;
    LA_TRY(la_synth_validate(o));
    char tbuf[256], sbuf_[1024];
    char *tasks[MAX_TASKS], *specs[MAX_SPECS];
    int nt, ns;
    LA_TRY(split_opts(o, tbuf, sizeof tbuf, sbuf_, sizeof sbuf_, tasks, &nt, specs, &ns));
    LA_TRY(la_mkdir_p(o->out));
    synth_state S = {.o = o, .progress = progress, .user = user};
    const int nk = o->seeds;
    run_result *rs = la_calloc((size_t)nt * ns * nk, sizeof *rs);
    if (!rs) return la_fail(LA_ENOMEM, "la_synth_run: out of memory");
    /* cells (task i, spec j, seed k), c = (i * ns + j) * nk + k; under mpirun each rank runs the cells
     * la_dist_assign gives it (estimated cost: training tokens + evaluation tokens), rank 0
     * gathers them and writes what one process writes, in cell order */
    const int nc = nt * ns * nk, N = la_dist_size(), me = la_dist_rank();
    synth_cell *cells = la_calloc((size_t)nc, sizeof *cells);
    double *cost = la_calloc((size_t)nc, sizeof *cost);
    la_status st = cells && cost ? LA_OK : la_fail(LA_ENOMEM, "la_synth_run: out of memory");
    for (int c = 0; c < nc && st == LA_OK; c++) {
        la_task t;
        la_task_from_name(tasks[c / (ns * nk)], &t);
        la_task_params p = task_params(o, t);
        double eval = 0;
        for (int mult = 1; mult <= o->max_mult; mult *= 2) {
            double len = (double)mult * p.max_len;
            eval += (double)o->eval_n * len * len / p.max_len; /* attention grows as length^2 */
        }
        cost[c] = (double)o->steps * o->batch * (p.min_len + p.max_len) + eval;
    }
    la_grid g = {0};
    if (st == LA_OK) st = la_grid_init(&g, "synth", cost, nc, N, me);
    free(cost);
    /* finished cells are saved in out/cells/ as they finish (by the rank that ran them),
     * and those of an interrupted run are loaded instead of rerun (o->resume), whatever the
     * number of ranks then and now */
    la_cells store;
    cJSON *fp = st == LA_OK ? synth_fingerprint(o) : NULL;
    if (st == LA_OK && !fp) st = la_fail(LA_ENOMEM, "la_synth_run: out of memory");
    if (N > 1) st = la_dist_agree(st);
    if (st == LA_OK) st = la_grid_open(&store, o->out, "synth", fp, o->resume);
    cJSON_Delete(fp);
    synth_grid G = {.S = &S, .tasks = tasks, .specs = specs, .ns = ns, .nk = nk, .N = N, .cells = cells, .rs = rs};
    if (st == LA_OK) {
        g.store = &store;
        g.test_point = "synth-cell";
        const la_grid_fns fns = {.begin = cell_begin, .restore = cell_restore, .run = cell_run,
                                 .to_json = cell_to_json, .done = cell_done};
        st = la_grid_run(&g, &fns, &G);
    }
    int nr = G.nr;
    if (N > 1) {
        /* a failing rank stops every rank here, named; then rank 0 collects the cells and
         * writes, and its write status is every rank's */
        st = la_dist_agree(st);
        if (st == LA_OK) st = la_dist_agree(la_grid_gather(cells, sizeof *cells, g.owner, nc, 0, "synth"));
        la_status w = LA_OK;
        if (st == LA_OK && me == 0) {
            nr = compact(&S, cells, nc, specs, ns, nk, rs);
            w = write_results(&S, rs, nr);
            if (w == LA_OK && nr) w = write_plots(o, rs, nr, tasks, nt);
        }
        if (st == LA_OK) st = la_dist_agree(w);
    } else if (st == LA_OK && nr) {
        st = write_plots(o, rs, nr, tasks, nt);
    }
    if (n_runs) *n_runs = nr; /* 0 on the ranks other than 0: cell_done compacts in one process only */
    la_grid_free(&g);
    free(cells);
    free(rs);
    return st;
}
