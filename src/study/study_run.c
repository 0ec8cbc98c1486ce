/* study_run.c -- `longattn study`: train every attention variant of a study file with the
 * same data and seed, then evaluate validation loss at each length and passkey retrieval
 * after a short fine-tune (SPEC 8; the protocol of the scale-invariant attention paper,
 * Anson et al. 2025: train at L, validate at L, 4L, 16L, needle-in-a-haystack after
 * fine-tuning at L). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/files.h"
#include "core/dist.h"
#include "study/study_internal.h"
#include "runner/cells.h"
#include "runner/grid.h"

#define TAG_TRAIN 0x747261696e5f6f72ULL  /* "train_or": training window order */
#define TAG_FT 0x66696e6574756e65ULL     /* "finetune": passkey fine-tune examples */
#define TAG_MIX 0x706b5f6d69785f5fULL    /* "pk_mix__": passkey rows of pre-training batches */

la_study_opts la_study_opts_default(void) {
    la_study_opts o;
    memset(&o, 0, sizeof o);
    return o;
}

/* ---- progress and ETA ----
 * Work is counted in forward flops: a token at context T costs
 *   c(T) = 2 P_blocks + 2 C V + n_layer * 2 T C
 * (matrix products, LM head, and causal attention: on average T/2 keys, 2 products of
 * 2 C flops), a training token 3 c(L) (forward + backward). The rate measured so far
 * turns the flops left into seconds. */
typedef struct {
    const la_study *st;
    const la_study_opts *opts;
    la_study_progress p;
    double t0, flops_total, flops_done;
    double c_L;
    int vocab;
} tracker;

static double flops_per_token(const la_study *st, int vocab, int T) {
    double C = st->d_model, F = 4.0 * C, ckv = C * st->n_kv_head / st->n_head;
    double blocks = st->n_layer * (2 * C * C + 2 * C * ckv + 2 * C * F);
    return 2 * blocks + 2 * C * vocab + st->n_layer * 2.0 * T * C;
}

static double variant_flops(const la_study *st, int vocab) {
    double cL = flops_per_token(st, vocab, st->seq_len);
    double f = 3.0 * st->steps * st->batch * st->seq_len * cL;
    int span = st->eval_lens[st->n_eval_lens - 1], n_val = st->steps / st->val_every + 1;
    f += (double)n_val * ((st->eval_windows + 3) / 4) * span * cL;
    for (int i = 0; i < st->n_eval_lens; i++) /* every length scores eval_windows spans */
        f += (double)st->eval_windows * (span / st->eval_lens[i]) * st->eval_lens[i] *
             flops_per_token(st, vocab, st->eval_lens[i]);
    if (st->pk_trials > 0) {
        f += 3.0 * st->pk_steps * st->batch * st->seq_len * cL;
        for (int i = 0; i < st->n_pk_lens; i++)
            f += (double)st->n_pk_depths * st->pk_trials * st->pk_lens[i] *
                 flops_per_token(st, vocab, st->pk_lens[i]);
    }
    return f;
}

static void report(tracker *tk, double flops) {
    tk->flops_done += flops;
    double el = la_now_s() - tk->t0;
    tk->p.elapsed_s = el;
    tk->p.eta_s = el > 0.2 ? la_grid_eta(el, tk->flops_done, tk->flops_total) : NAN;
    if (tk->opts->progress) tk->opts->progress(tk->opts->user, &tk->p);
}

static void phase(tracker *tk, const char *name, int total) {
    tk->p.phase = name;
    tk->p.done = 0;
    tk->p.total = total;
    report(tk, 0);
}

/* ---- the model as an evaluation function (B = 1 windows) ---- */
typedef struct {
    la_model *m;
    tracker *tk;
} eval_ctx;

static la_status model_token_loss(void *ctx, const int32_t *inputs, const int32_t *targets, int T,
                                  float *loss) {
    eval_ctx *e = ctx;
    la_status st = la_model_eval(e->m, inputs, targets, 1, T, NULL, loss, NULL, NULL);
    if (st == LA_OK && e->tk) {
        e->tk->p.done++;
        report(e->tk, (double)T * flops_per_token(e->tk->st, e->tk->vocab, T));
    }
    return st;
}

/* ---- evaluation split over a variant's group of ranks (ranks_per_variant) ----
 * la_eval_loss runs twice on every rank of the group: first each rank scores its block of
 * the windows (the others' are left at zero), the blocks are exchanged (allgatherv), then
 * la_eval_loss runs again reading every window's token losses from that table: the same
 * floats summed in the same order as one process, so the result is bitwise the same. */
static void group_block(int n, int r, int G, int *lo, int *hi) {
    *lo = (int)((long long)n * r / G);
    *hi = (int)((long long)n * (r + 1) / G);
}

typedef struct {
    eval_ctx *e;
    float *mine; /* (hi - lo, T) this rank's windows */
    const float *all; /* (n_win, T) every window, for the replay; NULL while scoring */
    int w, lo, hi;
} split_ctx;

static la_status split_token_loss(void *ctx, const int32_t *inputs, const int32_t *targets, int T, float *loss) {
    split_ctx *x = ctx;
    int w = x->w++;
    if (x->all) {
        memcpy(loss, x->all + (size_t)w * T, (size_t)T * sizeof *loss);
        return LA_OK;
    }
    if (w < x->lo || w >= x->hi) {
        memset(loss, 0, (size_t)T * sizeof *loss);
        return LA_OK;
    }
    LA_TRY(model_token_loss(x->e, inputs, targets, T, loss));
    memcpy(x->mine + (size_t)(w - x->lo) * T, loss, (size_t)T * sizeof *loss);
    return LA_OK;
}

/* la_eval_loss(model_token_loss, e, ...) with its windows split over the group (collective
 * over the group; one rank: la_eval_loss itself). */
static la_status group_eval_loss(eval_ctx *e, const la_docs *val, int T, int span, int n, uint64_t seed, int bucket,
                                 double *loss, double *bucket_loss, int64_t *bucket_tokens) {
    int G = la_dist_size(), me = la_dist_rank();
    if (G == 1) return la_eval_loss(model_token_loss, e, val, T, span, n, seed, bucket, loss, bucket_loss, bucket_tokens);
    int nw = n * ((span ? span : T) / T); /* la_eval_loss's windows: floor(span / T) per span */
    split_ctx x = {e, NULL, NULL, 0, 0, 0};
    group_block(nw, me, G, &x.lo, &x.hi);
    float *all = la_malloc(((size_t)nw * T + 1) * sizeof *all);
    x.mine = la_malloc(((size_t)(x.hi - x.lo) * T + 1) * sizeof *x.mine);
    int *counts = la_malloc((size_t)G * sizeof *counts);
    la_status s = all && x.mine && counts ? LA_OK : la_fail(LA_ENOMEM, "study: out of memory (evaluation)");
    if (s == LA_OK) s = la_eval_loss(split_token_loss, &x, val, T, span, n, seed, bucket, loss, bucket_loss, bucket_tokens);
    if (s == LA_OK && x.w != nw)
        s = la_fail(LA_EINVAL, "study: evaluation visited %d windows, %d expected (internal)", x.w, nw);
    s = la_dist_agree(s);
    for (int r = 0; r < G && s == LA_OK; r++) {
        int lo, hi;
        group_block(nw, r, G, &lo, &hi);
        if ((double)nw * T > 2147483647.0) s = la_fail(LA_EINVAL, "study: evaluation of %d x %d tokens exceeds one exchange", nw, T);
        counts[r] = (hi - lo) * T;
    }
    if (s == LA_OK) s = la_dist_agree(la_dist_allgatherv_f32(x.mine, all, counts));
    if (s == LA_OK) {
        x.all = all;
        x.w = 0;
        x.e = NULL;
        s = la_dist_agree(la_eval_loss(split_token_loss, &x, val, T, span, n, seed, bucket, loss, bucket_loss,
                                       bucket_tokens));
    }
    free(all);
    free(x.mine);
    free(counts);
    return s;
}

static la_status log_row(study_variant *v, int step, double train_bpb, double val_bpb, double el) {
    if (v->n_log == v->cap_log) {
        int cap = v->cap_log ? 2 * v->cap_log : 64;
        study_log_row *l = la_realloc(v->log, (size_t)cap * sizeof *l);
        if (!l) return la_fail(LA_ENOMEM, "study: out of memory for the training log");
        v->log = l;
        v->cap_log = cap;
    }
    v->log[v->n_log++] = (study_log_row){step, train_bpb, val_bpb, el};
    return LA_OK;
}

/* ---- resume: a finished variant is one cell (runner/cells.h) ---- */

/* Everything that decides a variant's numbers: a --resume with other settings is refused. */
static cJSON *study_fingerprint(const la_study *st, const char *data, const study_results *r) {
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    cJSON *f = cJSON_CreateObject();
    if (!f) return NULL;
    cJSON_AddStringToObject(f, "name", st->name);
    cJSON_AddStringToObject(f, "data", data);
    cJSON_AddNumberToObject(f, "train_tokens", (double)r->train_tokens);
    cJSON_AddNumberToObject(f, "val_tokens", (double)r->val_tokens);
    cJSON_AddNumberToObject(f, "train_docs", r->train_docs);
    cJSON_AddNumberToObject(f, "val_docs", r->val_docs);
    cJSON_AddNumberToObject(f, "vocab", r->vocab);
    cJSON_AddNumberToObject(f, "threads", r->n_threads);
    cJSON *m = cJSON_AddObjectToObject(f, "model");
    cJSON_AddNumberToObject(m, "n_layer", st->n_layer);
    cJSON_AddNumberToObject(m, "d_model", st->d_model);
    cJSON_AddNumberToObject(m, "n_head", st->n_head);
    cJSON_AddNumberToObject(m, "n_kv_head", st->n_kv_head);
    la_json_put(m, "qk_gain", la_cells_num(st->qk_gain));
    cJSON_AddNumberToObject(f, "steps", st->steps);
    cJSON_AddNumberToObject(f, "batch", st->batch);
    cJSON_AddNumberToObject(f, "seq_len", st->seq_len);
    if (st->accum != 1) cJSON_AddNumberToObject(f, "accum", st->accum); /* absent: 1 (older runs' cells) */
    if (st->precision != LA_DTYPE_F32) /* absent: f32 (older runs' cells) */
        cJSON_AddStringToObject(f, "precision", la_dtype_name(st->precision));
    la_json_put(f, "lr", la_cells_num(st->lr));
    cJSON_AddNumberToObject(f, "warmup", st->warmup);
    la_json_put(f, "seed", la_cells_u64(st->seed));
    if (st->n_seeds > 1) cJSON_AddNumberToObject(f, "seeds", st->n_seeds); /* 1: as before seeds existed */
    la_json_put(f, "eval_lens", cJSON_CreateIntArray(st->eval_lens, st->n_eval_lens));
    cJSON_AddNumberToObject(f, "eval_windows", st->eval_windows);
    cJSON_AddNumberToObject(f, "val_every", st->val_every);
    cJSON *pk = cJSON_AddObjectToObject(f, "passkey");
    la_json_put(pk, "pretrain_mix", la_cells_num(st->pk_mix));
    if (st->pk_mix_all) cJSON_AddStringToObject(pk, "pretrain_targets", "all"); /* absent: the default */
    cJSON_AddNumberToObject(pk, "finetune_steps", st->pk_steps);
    la_json_put(pk, "finetune_lr", la_cells_num(st->pk_lr));
    la_json_put(pk, "lens", cJSON_CreateIntArray(st->pk_lens, st->n_pk_lens));
    la_json_put(pk, "depths", cJSON_CreateDoubleArray(st->pk_depths, st->n_pk_depths));
    cJSON_AddNumberToObject(pk, "trials", st->pk_trials);
    cJSON *sp = cJSON_AddArrayToObject(f, "specs");
    for (int i = 0; i < st->n_specs; i++) la_json_push(sp, cJSON_CreateString(st->specs[i]));
    return la_json_end(saved_json, f);
}

/* Name of cell (vi, seed index k): "variant_<vi+1>_<slug>", with "_seed<seed>" appended
 * when the study has more than one seed (a one-seed study keeps the names it always had);
 * what: the prefix ("variant"; save_weights names its files with "model" and "passkey"). */
static void variant_key(const la_study *st, const char *what, int vi, int k, char *buf, size_t n) {
    char slug[128], tail[48] = "";
    la_study_slug(st->specs[vi], slug, sizeof slug);
    if (st->n_seeds > 1) snprintf(tail, sizeof tail, "_seed%llu", (unsigned long long)(st->seed + (uint64_t)k));
    snprintf(buf, n, "%s_%d_%s%s", what, vi + 1, slug, tail);
}

/* o["log"] = v's training log, rows [step, train_bpb, val_bpb, elapsed_s] (the finished
 * cell and the mid-training checkpoint's side file both carry it) */
static void put_log(cJSON *o, const study_variant *v) {
    cJSON *log = cJSON_AddArrayToObject(o, "log");
    for (int k = 0; k < v->n_log; k++) {
        cJSON *row = cJSON_CreateArray();
        la_json_push(row, cJSON_CreateNumber(v->log[k].step));
        la_json_push(row, la_cells_num(v->log[k].train_bpb));
        la_json_push(row, la_cells_num(v->log[k].val_bpb));
        la_json_push(row, la_cells_num(v->log[k].elapsed_s));
        la_json_push(log, row);
    }
}

static cJSON *variant_to_json(const la_study *st, const study_variant *v) {
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "canon", v->canon);
    cJSON_AddNumberToObject(o, "n_params", (double)v->n_params);
    cJSON_AddNumberToObject(o, "trained", v->trained);
    cJSON_AddNumberToObject(o, "passkey_done", v->passkey_done);
    la_json_put(o, "train_s", la_cells_num(v->train_s));
    la_json_put(o, "eval_s", la_cells_num(v->eval_s));
    la_json_put(o, "passkey_s", la_cells_num(v->passkey_s));
    la_json_put(o, "final_train_bpb", la_cells_num(v->final_train_bpb));
    la_json_put(o, "ft_first_bpb", la_cells_num(v->ft_first_bpb));
    la_json_put(o, "ft_last_bpb", la_cells_num(v->ft_last_bpb));
    la_json_put(o, "seed", la_cells_u64(v->seed));
    cJSON *ft = cJSON_AddArrayToObject(o, "ft_curve");
    for (int k = 0; k < v->n_ft; k++) la_json_push(ft, la_cells_num(v->ft_curve[k]));
    cJSON *lens = cJSON_AddArrayToObject(o, "lens");
    for (int i = 0; i < st->n_eval_lens; i++) {
        cJSON *l = cJSON_CreateObject();
        la_json_put(l, "loss", la_cells_num(v->loss[i]));
        cJSON_AddNumberToObject(l, "tokens", (double)v->tokens[i]);
        cJSON *b = cJSON_AddArrayToObject(l, "bucket"), *bt = cJSON_AddArrayToObject(l, "bucket_tokens");
        for (int k = 0; k < v->n_bucket[i]; k++) {
            la_json_push(b, la_cells_num(v->bucket[i][k]));
            la_json_push(bt, cJSON_CreateNumber((double)v->bucket_tokens[i][k]));
        }
        la_json_push(lens, l);
    }
    cJSON *pk = cJSON_AddArrayToObject(o, "correct");
    for (int i = 0; i < st->n_pk_lens; i++)
        la_json_push(pk, cJSON_CreateIntArray(v->correct[i], st->n_pk_depths));
    put_log(o, v);
    return la_json_end(saved_json, o);
}

/* v (zeroed, owning nothing) from a saved cell; checks the shapes against the study. */
static la_status variant_from_json(const la_study *st, const cJSON *o, const char *key, study_variant *v) {
    const cJSON *canon = cJSON_GetObjectItemCaseSensitive(o, "canon");
    const cJSON *lens = cJSON_GetObjectItemCaseSensitive(o, "lens");
    const cJSON *pk = cJSON_GetObjectItemCaseSensitive(o, "correct");
    const cJSON *log = cJSON_GetObjectItemCaseSensitive(o, "log");
    if (!cJSON_IsString(canon) || cJSON_GetArraySize(lens) != st->n_eval_lens ||
        cJSON_GetArraySize(pk) != st->n_pk_lens || !cJSON_IsArray(log))
        goto bad;
    snprintf(v->canon, sizeof v->canon, "%s", canon->valuestring);
    v->n_params = (size_t)la_cells_get_num(o, "n_params");
    v->trained = (int)la_cells_get_num(o, "trained");
    v->passkey_done = (int)la_cells_get_num(o, "passkey_done");
    v->train_s = la_cells_get_num(o, "train_s");
    v->eval_s = la_cells_get_num(o, "eval_s");
    v->passkey_s = la_cells_get_num(o, "passkey_s");
    v->final_train_bpb = la_cells_get_num(o, "final_train_bpb");
    v->ft_first_bpb = la_cells_get_num(o, "ft_first_bpb");
    v->ft_last_bpb = la_cells_get_num(o, "ft_last_bpb");
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
    const cJSON *ft = cJSON_GetObjectItemCaseSensitive(o, "ft_curve");
    /* cells saved before seeds and fine-tune curves existed have neither: the caller sets
     * the seed, and the curve stays empty */
    if ((seed && !cJSON_IsString(seed)) || (ft && !cJSON_IsArray(ft))) goto bad;
    if (seed) v->seed = strtoull(seed->valuestring, NULL, 10);
    v->n_ft = ft ? cJSON_GetArraySize(ft) : 0;
    if (v->n_ft > 0) {
        if (!(v->ft_curve = malloc((size_t)v->n_ft * sizeof *v->ft_curve))) return la_fail(LA_ENOMEM, "study: out of memory");
        for (int k = 0; k < v->n_ft; k++) v->ft_curve[k] = la_cells_num_value(cJSON_GetArrayItem(ft, k));
    }
    for (int i = 0; i < st->n_eval_lens; i++) {
        const cJSON *l = cJSON_GetArrayItem(lens, i);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(l, "bucket");
        const cJSON *bt = cJSON_GetObjectItemCaseSensitive(l, "bucket_tokens");
        int nb = cJSON_GetArraySize(b);
        if (nb < 1 || cJSON_GetArraySize(bt) != nb) goto bad;
        v->loss[i] = la_cells_get_num(l, "loss");
        v->tokens[i] = (int64_t)la_cells_get_num(l, "tokens");
        v->n_bucket[i] = nb;
        v->bucket[i] = la_malloc((size_t)nb * sizeof *v->bucket[i]);
        v->bucket_tokens[i] = la_malloc((size_t)nb * sizeof *v->bucket_tokens[i]);
        if (!v->bucket[i] || !v->bucket_tokens[i]) return la_fail(LA_ENOMEM, "study: out of memory");
        for (int k = 0; k < nb; k++) {
            v->bucket[i][k] = la_cells_num_value(cJSON_GetArrayItem(b, k));
            v->bucket_tokens[i][k] = (int64_t)la_cells_num_value(cJSON_GetArrayItem(bt, k));
        }
    }
    for (int i = 0; i < st->n_pk_lens; i++) {
        const cJSON *row = cJSON_GetArrayItem(pk, i);
        if (cJSON_GetArraySize(row) != st->n_pk_depths) goto bad;
        for (int d = 0; d < st->n_pk_depths; d++) v->correct[i][d] = (int)la_cells_num_value(cJSON_GetArrayItem(row, d));
    }
    for (const cJSON *row = log->child; row; row = row->next) {
        if (cJSON_GetArraySize(row) != 4) goto bad;
        LA_TRY(log_row(v, (int)la_cells_num_value(cJSON_GetArrayItem(row, 0)),
                       la_cells_num_value(cJSON_GetArrayItem(row, 1)), la_cells_num_value(cJSON_GetArrayItem(row, 2)),
                       la_cells_num_value(cJSON_GetArrayItem(row, 3))));
    }
    return LA_OK;
bad:
    return la_fail(LA_EFORMAT, "the saved result of %s does not match the study's shape (damaged?); delete it "
                   "to rerun that variant", key);
}

/* ---- resume inside a variant: a pre-training checkpoint every val_every steps ----
 * cells/<key>.train.safetensors (+ .state: la_trainer_save: weights, AdamW moments, step)
 * and cells/<key>.train.json: the loop's own state (data-order and passkey-mix generators,
 * tail loss sum, log rows). Trainer checkpoints resume bitwise (tests/python/test_resume.py
 * kills `longattn train` mid-write), so a variant continued from one ends with the numbers
 * of an uninterrupted run. Removed once the variant's result is saved. */
static void train_ckpt_paths(const la_cells *cells, const char *key, char *ck, size_t ck_n, char *side, size_t side_n) {
    snprintf(ck, ck_n, "%s/%s.train.safetensors", cells->dir, key);
    snprintf(side, side_n, "%s.train", key);
}

static cJSON *rng_json(const la_rng *g) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < 4; i++) {
        char h[24];
        snprintf(h, sizeof h, "%016llx", (unsigned long long)g->s[i]);
        la_json_push(a, cJSON_CreateString(h));
    }
    return a;
}

static int rng_from_json(const cJSON *a, la_rng *g) {
    if (cJSON_GetArraySize(a) != 4) return -1;
    for (int i = 0; i < 4; i++) {
        const cJSON *h = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsString(h)) return -1;
        char *end;
        g->s[i] = strtoull(h->valuestring, &end, 16);
        if (*end) return -1;
    }
    return 0;
}

static cJSON *side_state(int step, const la_rng *order, const la_rng *mix, double tail_sum, int tail_n,
                         double train_s, const study_variant *v) {
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "step", step);
    la_json_put(o, "order_rng", rng_json(order));
    la_json_put(o, "mix_rng", rng_json(mix));
    la_json_put(o, "tail_sum", la_cells_num(tail_sum));
    cJSON_AddNumberToObject(o, "tail_n", tail_n);
    la_json_put(o, "train_s", la_cells_num(train_s));
    put_log(o, v);
    return la_json_end(saved_json, o);
}

static la_status side_restore(const cJSON *o, la_rng *order, la_rng *mix, double *tail_sum, int *tail_n,
                              double *train_s, study_variant *v) {
    const cJSON *log = cJSON_GetObjectItemCaseSensitive(o, "log");
    if (rng_from_json(cJSON_GetObjectItemCaseSensitive(o, "order_rng"), order) ||
        rng_from_json(cJSON_GetObjectItemCaseSensitive(o, "mix_rng"), mix) || !cJSON_IsArray(log))
        return la_fail(LA_EFORMAT, "damaged training checkpoint record");
    *tail_sum = la_cells_get_num(o, "tail_sum");
    *tail_n = (int)la_cells_get_num(o, "tail_n");
    *train_s = la_cells_get_num(o, "train_s");
    v->n_log = 0;
    for (const cJSON *row = log->child; row; row = row->next) {
        if (cJSON_GetArraySize(row) != 4) return la_fail(LA_EFORMAT, "damaged training checkpoint record");
        LA_TRY(log_row(v, (int)la_cells_num_value(cJSON_GetArrayItem(row, 0)),
                       la_cells_num_value(cJSON_GetArrayItem(row, 1)), la_cells_num_value(cJSON_GetArrayItem(row, 2)),
                       la_cells_num_value(cJSON_GetArrayItem(row, 3))));
    }
    return LA_OK;
}

static void remove_train_ckpt(const la_cells *cells, const char *key) {
    char ck[2600], side[240], p[2800];
    train_ckpt_paths(cells, key, ck, sizeof ck, side, sizeof side);
    const char *suffix[] = {"", ".state", ".state.new"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", ck, suffix[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/%s.json", cells->dir, side);
    unlink(p);
}

/* Weights of variant vi as <out_dir>/<what>_<vi+1>_<spec slug>[_seed<seed>].safetensors
 * (atomic; the seed only in studies of several seeds), for kv-eval, generate and diagnose. */
static la_status save_weights(const la_model *m, const char *out_dir, const char *what, int vi, const la_study *st) {
    char name[256], path[2048];
    variant_key(st, what, vi, 0, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s.safetensors", out_dir, name);
    return la_model_save(m, path);
}

/* One training row that is a passkey example at length L from the training documents, at a
 * depth and seed drawn from rng, scored on the answer digits only (the targets before them
 * are -1) or, with all = 1, on every byte: the rows mixed into pre-training and the
 * fine-tune's rows. ex: (L+1) scratch; inp, tgt: (L) the row. */
static la_status passkey_row(const la_docs *train, int L, la_rng *rng, int all, int32_t *ex, int32_t *inp,
                             int32_t *tgt) {
    la_passkey pk;
    double depth = la_rng_uniform(rng);
    LA_TRY(la_passkey_make(train, L, depth, la_rng_u64(rng), ex, &pk));
    memcpy(inp, ex, (size_t)L * sizeof *inp);
    for (int t = 0; t < L; t++) tgt[t] = all || t >= pk.answer_pos - 1 ? ex[t + 1] : -1;
    return LA_OK;
}

/* One cell: variant vi of st, trained with st->seed (the caller passes a copy of the study
 * whose seed is the cell's: a cell of a several-seed study computes exactly what a one-seed
 * study with that seed computes). Train, evaluate, fine-tune, passkey; results into v. */
static la_status run_variant(const la_study *st, int vi, study_variant *v, const la_docs *train, const la_docs *val,
                             const char *out_dir, la_cells *cells, const char *key, int *resumed_step,
                             const study_results *r, tracker *tk, int32_t *batch /* (B, L+1) */,
                             int32_t *inp /* (B, L) */, int32_t *tgt /* (B, L) */,
                             int32_t *ex /* (max len + 1) */, int32_t *pred /* (max len) */) {
    v->seed = st->seed;
    const int B = st->batch, L = st->seq_len;
    /* under mpirun the variant's group (la_dist_group_begin) runs this together: every rank
     * draws the same rows (and trains its block of the micro-batches), the evaluations are
     * split over the group (group_eval_loss, the passkey grid); the group's rank 0 writes */
    const int leader = la_dist_rank() == 0;
    const double bits = 1.0 / log(2.0);
    la_model_config mc = la_model_config_default();
    mc.n_layer = st->n_layer;
    mc.d_model = st->d_model;
    mc.n_head = st->n_head;
    mc.n_kv_head = st->n_kv_head;
    mc.vocab = r->vocab;
    mc.train_len = L;
    mc.qk_gain = (float)st->qk_gain;
    snprintf(mc.spec, sizeof mc.spec, "%s", st->specs[vi]);
    la_model *m = NULL;
    la_trainer *tr = NULL;
    la_status s = la_model_new(&mc, st->seed, &m);
    if (s != LA_OK) return s;
    v->n_params = la_model_num_params(m);
    la_spec_format(la_model_spec(m), v->canon, sizeof v->canon);

    /* ---- pre-training on B x L windows, the same ones in the same order for every spec */
    la_train_config tc = la_train_config_default();
    tc.steps = st->steps;
    tc.B = B / st->accum; /* the batch as accum micro-batches: split over the group's ranks */
    tc.grad_accum = st->accum;
    tc.T = L;
    tc.lr = st->lr;
    tc.min_lr = st->lr / 10;
    tc.warmup = st->warmup;
    tc.seed = st->seed;
    tc.n_threads = r->n_threads;
    tc.precision = st->precision;
    tc.seq_parallel = r->seq_parallel; /* where the numbers are computed, not what they are */
    if ((s = la_trainer_new(m, NULL, &tc, &tr)) != LA_OK) goto out;
    la_rng order;
    la_rng_seed(&order, st->seed ^ TAG_TRAIN);
    double t0 = la_now_s(), tail_sum = 0;
    int tail_n = 0, tail_from = st->steps - (st->steps / 10 > 0 ? st->steps / 10 : 1);
    eval_ctx ec = {m, NULL};
    /* every length scores the same text: spans of the longest length, cut into windows */
    const int span = st->eval_lens[st->n_eval_lens - 1];
    const int n_val = (st->eval_windows + 3) / 4; /* validation during training: a quarter */
    const double train_flops = 3.0 * B * L * tk->c_L;
    /* the first n_mix rows of every batch are passkey examples at L from the training
     * documents, scored on the five answer digits only (as the fine-tune below): retrieval
     * is learned alongside the language model, so the short fine-tune only sharpens it */
    const int n_mix = (int)(st->pk_mix * B + 0.5);
    la_rng mix_rng;
    la_rng_seed(&mix_rng, st->seed ^ TAG_MIX);
    /* a pre-training checkpoint of an interrupted run (every val_every steps): continue from it */
    char ck[2600], side_key[240];
    train_ckpt_paths(cells, key, ck, sizeof ck, side_key, sizeof side_key);
    int first_step = 0;
    double t_before = 0; /* training seconds before the interruption */
    cJSON *side = NULL;
    if ((s = la_cells_load(cells, side_key, &side)) != LA_OK) goto out;
    if (side) {
        int k = (int)la_cells_get_num(side, "step");
        if (k > 0 && k <= st->steps && la_trainer_load(tr, ck) == LA_OK && la_trainer_step_count(tr) == k &&
            side_restore(side, &order, &mix_rng, &tail_sum, &tail_n, &t_before, v) == LA_OK) {
            first_step = k;
            *resumed_step = k;
        } else { /* killed between the two files, or damaged: rerun the variant from its start */
            v->n_log = 0;
            tail_sum = 0;
            tail_n = 0;
            t_before = 0;
            la_rng_seed(&order, st->seed ^ TAG_TRAIN);
            la_rng_seed(&mix_rng, st->seed ^ TAG_MIX);
            la_trainer_free(tr);
            tr = NULL;
            la_model_free(m);
            m = NULL;
            if ((s = la_model_new(&mc, st->seed, &m)) != LA_OK) { cJSON_Delete(side); goto out; }
            if ((s = la_trainer_new(m, NULL, &tc, &tr)) != LA_OK) { cJSON_Delete(side); goto out; }
            ec.m = m;
        }
        cJSON_Delete(side);
    }
    tk->flops_done += first_step * train_flops;
    phase(tk, "train", st->steps);
    tk->p.done = first_step;
    for (int step = first_step; step < st->steps; step++) {
        for (int b = 0; b < B; b++) {
            if (b < n_mix) {
                if ((s = passkey_row(train, L, &mix_rng, st->pk_mix_all, ex, inp + (size_t)b * L, tgt + (size_t)b * L)) != LA_OK)
                    goto out;
                continue;
            }
            int64_t start = (int64_t)la_rng_below(&order, (uint64_t)(train->n_tokens - L));
            memcpy(batch + (size_t)b * (L + 1), train->tokens + start, (size_t)(L + 1) * sizeof *batch);
            memcpy(inp + (size_t)b * L, batch + (size_t)b * (L + 1), (size_t)L * sizeof *inp);
            memcpy(tgt + (size_t)b * L, batch + (size_t)b * (L + 1) + 1, (size_t)L * sizeof *tgt);
        }
        la_step_info info;
        if ((s = la_trainer_step_rows(tr, inp, tgt, &info)) != LA_OK) goto out;
        double tb = info.loss * bits;
        if (step >= tail_from) { tail_sum += tb; tail_n++; }
        tk->p.loss = tb;
        tk->p.done = step + 1;
        double vb = NAN;
        if ((step + 1) % st->val_every == 0 || step + 1 == st->steps) {
            double vl;
            if ((s = group_eval_loss(&ec, val, L, span, n_val, st->seed, L, &vl, NULL, NULL)) != LA_OK)
                goto out;
            vb = vl;
            tk->p.val_loss = vb;
            tk->flops_done += (double)n_val * span * tk->c_L;
        }
        if ((s = log_row(v, step + 1, tb, vb, t_before + la_now_s() - t0)) != LA_OK) goto out;
        report(tk, train_flops);
        if ((step + 1) % st->val_every == 0 || step + 1 == st->steps) {
            /* trainer checkpoint first, then what the loop keeps besides: a kill between the
             * two leaves steps that differ, and the variant then reruns (above) */
            if ((s = la_dist_agree(leader ? la_trainer_save(tr, ck) : LA_OK)) != LA_OK) goto out;
            cJSON *j = side_state(step + 1, &order, &mix_rng, tail_sum, tail_n, t_before + la_now_s() - t0, v);
            s = j ? LA_OK : la_fail(LA_ENOMEM, "study: out of memory");
            if (s == LA_OK && leader) s = la_cells_save(cells, side_key, j);
            cJSON_Delete(j);
            if ((s = la_dist_agree(s)) != LA_OK) goto out;
            la_test_point("study-ckpt");
        }
    }
    v->final_train_bpb = tail_sum / tail_n;
    v->train_s = t_before + la_now_s() - t0;
    la_trainer_free(tr);
    tr = NULL;

    /* ---- validation loss at every evaluation length, buckets of L positions */
    t0 = la_now_s();
    ec.tk = tk;
    int n_eval_windows = 0;
    for (int i = 0; i < st->n_eval_lens; i++) { /* this rank's share of them (group_eval_loss) */
        int lo, hi;
        group_block(span / st->eval_lens[i] * st->eval_windows, la_dist_rank(), la_dist_size(), &lo, &hi);
        n_eval_windows += hi - lo;
    }
    phase(tk, "eval", n_eval_windows);
    for (int i = 0; i < st->n_eval_lens; i++) {
        int T = st->eval_lens[i], nb = (T + L - 1) / L;
        v->n_bucket[i] = nb;
        v->bucket[i] = la_malloc((size_t)nb * sizeof *v->bucket[i]);
        v->bucket_tokens[i] = la_malloc((size_t)nb * sizeof *v->bucket_tokens[i]);
        if (!v->bucket[i] || !v->bucket_tokens[i]) { s = la_fail(LA_ENOMEM, "study: out of memory"); goto out; }
        if ((s = group_eval_loss(&ec, val, T, span, st->eval_windows, st->seed, L, &v->loss[i],
                              v->bucket[i], v->bucket_tokens[i])) != LA_OK)
            goto out;
        v->tokens[i] = (int64_t)(span / T) * T * st->eval_windows;
    }
    v->eval_s = la_now_s() - t0;
    v->trained = 1;
    /* the pre-trained weights whose losses are in the table (the passkey fine-tune, scored
     * on the answer digits only, does not keep the language model) */
    if ((s = la_dist_agree(leader ? save_weights(m, out_dir, "model", vi, st) : LA_OK)) != LA_OK) goto out;

    /* ---- passkey: fine-tune at L on the answer digits, then the exact-match grid */
    if (st->pk_trials > 0) {
        t0 = la_now_s();
        if (st->pk_steps > 0) {
            la_train_config fc = tc;
            fc.steps = st->pk_steps;
            fc.lr = st->pk_lr;
            fc.min_lr = st->pk_lr / 10;
            fc.warmup = st->pk_steps / 10;
            if ((s = la_trainer_new(m, NULL, &fc, &tr)) != LA_OK) goto out;
            la_rng fr;
            la_rng_seed(&fr, st->seed ^ TAG_FT);
            free(v->ft_curve);
            v->n_ft = 0;
            if (!(v->ft_curve = la_malloc((size_t)st->pk_steps * sizeof *v->ft_curve))) {
                s = la_fail(LA_ENOMEM, "study: out of memory");
                goto out;
            }
            phase(tk, "finetune", st->pk_steps);
            for (int step = 0; step < st->pk_steps; step++) {
                for (int b = 0; b < B; b++)
                    if ((s = passkey_row(train, L, &fr, 0, ex, inp + (size_t)b * L, tgt + (size_t)b * L)) != LA_OK) goto out;
                la_step_info info;
                if ((s = la_trainer_step_rows(tr, inp, tgt, &info)) != LA_OK) goto out;
                if (step == 0) v->ft_first_bpb = info.loss * bits;
                v->ft_last_bpb = info.loss * bits;
                v->ft_curve[v->n_ft++] = info.loss * bits; /* bits per answer digit */
                tk->p.loss = info.loss * bits;
                tk->p.done = step + 1;
                report(tk, train_flops);
            }
            la_trainer_free(tr);
            tr = NULL;
        }
        /* the grid's examples (length, depth, trial) in that order; under a group each rank
         * scores a block of them and the hits (0/1, summed exactly) are exchanged */
        const int n_pk = st->n_pk_lens * st->n_pk_depths * st->pk_trials, G = la_dist_size();
        int lo, hi;
        group_block(n_pk, la_dist_rank(), G, &lo, &hi);
        phase(tk, "passkey", hi - lo);
        float *hit = la_malloc(((size_t)n_pk + 1) * sizeof *hit), *mine = la_malloc(((size_t)(hi - lo) + 1) * sizeof *mine);
        int *counts = la_malloc((size_t)G * sizeof *counts);
        if (!hit || !mine || !counts) s = la_fail(LA_ENOMEM, "study: out of memory (passkey)");
        for (int e = lo; e < hi && s == LA_OK; e++) {
            int li = e / (st->n_pk_depths * st->pk_trials), di = e / st->pk_trials % st->n_pk_depths, k = e % st->pk_trials;
            int T = st->pk_lens[li];
            /* the same examples for every spec */
            uint64_t seed = la_study_passkey_seed(st->seed, li, di, k);
            la_passkey pk;
            if ((s = la_passkey_make(val, T, st->pk_depths[di], seed, ex, &pk)) != LA_OK) break;
            if ((s = la_model_eval(m, ex, NULL, 1, T, NULL, NULL, pred, NULL)) != LA_OK) break;
            mine[e - lo] = (float)la_passkey_exact(pred, ex, &pk);
            tk->p.done++;
            report(tk, (double)T * flops_per_token(st, r->vocab, T));
        }
        if (G > 1) {
            s = la_dist_agree(s);
            for (int q = 0; q < G && s == LA_OK; q++) {
                int l2, h2;
                group_block(n_pk, q, G, &l2, &h2);
                counts[q] = h2 - l2;
            }
            if (s == LA_OK) s = la_dist_agree(la_dist_allgatherv_f32(mine, hit, counts));
        } else if (s == LA_OK && n_pk) {
            memcpy(hit, mine, (size_t)n_pk * sizeof *hit);
        }
        for (int e = 0; e < n_pk && s == LA_OK; e++) {
            int li = e / (st->n_pk_depths * st->pk_trials), di = e / st->pk_trials % st->n_pk_depths;
            if (e % st->pk_trials == 0) v->correct[li][di] = 0;
            v->correct[li][di] += (int)hit[e];
        }
        free(hit);
        free(mine);
        free(counts);
        if (s != LA_OK) goto out;
        v->passkey_s = la_now_s() - t0;
    }
    v->passkey_done = 1;
    if (st->pk_trials > 0 && st->pk_steps > 0 &&
        (s = la_dist_agree(leader ? save_weights(m, out_dir, "passkey", vi, st) : LA_OK)) != LA_OK)
        goto out;
out:
    la_trainer_free(tr);
    la_model_free(m);
    return s;
}

/* ---- the cells on the grid runner (la_grid_run): cell c is spec vi = c / n_seeds with
 * seed index k = c % n_seeds ---- */
typedef struct {
    const la_study *st;
    la_study cell_st; /* the study with the current cell's seed */
    study_results *r;
    tracker *tk;
    la_grid *g;
    la_cells *cells;
    const la_docs *train, *val;
    const char *out_dir;
    int32_t *batch, *inp, *tgt, *ex, *pred;
    int leader, n_resumed, n_continued;
    double t_start;
} study_grid;

static void cell_begin(void *user, int c, char *key, size_t n) {
    study_grid *G = user;
    const int vi = c / G->st->n_seeds, k = c % G->st->n_seeds;
    G->cell_st.seed = G->st->seed + (uint64_t)k;
    G->tk->p.spec_index = vi;
    G->tk->p.spec = G->st->specs[vi];
    G->tk->p.seed_index = k;
    G->tk->p.seed = G->cell_st.seed;
    G->tk->p.loss = G->tk->p.val_loss = NAN;
    variant_key(G->st, "variant", vi, k, key, n);
}

/* finished before the interruption: its numbers, not a rerun */
static la_status cell_restore(void *user, int c, const cJSON *saved, const char *key) {
    study_grid *G = user;
    G->r->v[c].seed = G->cell_st.seed;
    return variant_from_json(G->st, saved, key, &G->r->v[c]);
}

static la_status cell_run(void *user, int c, const char *key) {
    study_grid *G = user;
    int resumed_step = 0;
    la_status vs = run_variant(&G->cell_st, c / G->st->n_seeds, &G->r->v[c], G->train, G->val, G->out_dir, G->cells,
                               key, &resumed_step, G->r, G->tk, G->batch, G->inp, G->tgt, G->ex, G->pred);
    if (resumed_step) G->n_continued++;
    /* failures inside are the whole group's (its collectives agree); anything that hit one
     * rank only still fails the variant on all of them */
    if (la_dist_size() > 1 && la_dist_any(vs != LA_OK) && vs == LA_OK)
        vs = la_fail(LA_EIO, "another rank of this variant's group failed (see its message)");
    return vs;
}

static cJSON *cell_to_json(void *user, int c) {
    study_grid *G = user;
    return variant_to_json(G->st, &G->r->v[c]);
}

static void cell_stored(void *user, int c, const char *key) {
    study_grid *G = user;
    if (G->leader) remove_train_ckpt(G->cells, key);
}

static la_status cell_done(void *user, int c, const char *key, la_status vs, int restored) {
    study_grid *G = user;
    study_results *r = G->r;
    if (restored) {
        G->n_resumed++;
        if (G->leader) remove_train_ckpt(G->cells, key); /* killed between saving the result and this */
    }
    if (vs != LA_OK) {
        snprintf(r->v[c].error, sizeof r->v[c].error, "%s", la_errmsg());
        r->v[c].status = vs;
        r->v[c].seed = G->cell_st.seed;
    }
    /* keep the ETA honest whatever the flop model missed for this variant */
    G->tk->flops_done = G->g->done;
    r->wall_s = la_now_s() - G->t_start;
    if (la_dist_world_size() == 1) return la_study_write_tables(r, G->out_dir); /* finished variants are kept */
    return LA_OK;
}

la_status la_study_run(const la_study *st, const char *out_dir, const la_study_opts *opts_in,
                       la_study_summary *summary) {
    if (!st || !out_dir) return la_fail(LA_EINVAL, "la_study_run: NULL argument");
    la_study_opts opts = opts_in ? *opts_in : la_study_opts_default();
    if (summary) memset(summary, 0, sizeof *summary);
    const char *data = opts.data ? opts.data : st->data;
    double t_start = la_now_s();
    char path[4096];
    la_docs train = {0}, val = {0};
    study_results *r = la_calloc(1, sizeof *r);
    if (!r) return la_fail(LA_ENOMEM, "study: out of memory");
    int32_t *batch = NULL, *inp = NULL, *tgt = NULL, *ex = NULL, *pred = NULL;
    la_grid g;
    memset(&g, 0, sizeof g);
    la_status s;

    snprintf(path, sizeof path, "%s/train", data);
    const int L = st->seq_len, B = st->batch;
    if ((s = la_docs_load(path, &train)) != LA_OK) goto pre;
    snprintf(path, sizeof path, "%s/val", data);
    if ((s = la_docs_load(path, &val)) != LA_OK) goto pre;
    /* everything that can be checked before hours of training is checked now */
    if (train.is_bytes != val.is_bytes || train.vocab != val.vocab) {
        s = la_fail(LA_EFORMAT, "%s/train and %s/val hold different kinds of data (text vs token shards)", data, data);
        goto pre;
    }
    if (train.n_tokens < (int64_t)L + 2) {
        s = la_fail(LA_ESHAPE, "%s/train holds %lld tokens, fewer than one training window of %d; add data or "
                    "lower seq_len", data, (long long)train.n_tokens, L + 1);
        goto pre;
    }
    int64_t longest = la_docs_longest(&val);
    int max_eval = st->eval_lens[st->n_eval_lens - 1];
    if (longest < (int64_t)max_eval + 1) {
        s = la_fail(LA_ESHAPE, "key \"eval_lens\": evaluating at %d tokens needs a validation document of %d tokens; "
                    "the longest in %s/val has %lld: lower eval_lens or add longer documents",
                    max_eval, max_eval + 1, data, (long long)longest);
        goto pre;
    }
    if ((st->pk_trials > 0 || st->pk_mix > 0) && !val.is_bytes) {
        s = la_fail(LA_EINVAL, "the passkey task needs byte-level text (token shards cannot spell its question); "
                    "set \"passkey\": {\"trials\": 0, \"pretrain_mix\": 0} for shard data");
        goto pre;
    }
    if ((s = la_mkdir_p(out_dir)) != LA_OK) goto pre;

    r->st = st;
    r->is_bytes = train.is_bytes;
    r->vocab = train.vocab;
    r->train_tokens = train.n_tokens;
    r->val_tokens = val.n_tokens;
    r->train_docs = train.n_docs;
    r->val_docs = val.n_docs;
    r->n_threads = opts.n_threads;
    int max_len = L;
    for (int i = 0; i < st->n_pk_lens; i++) if (st->pk_lens[i] > max_len) max_len = st->pk_lens[i];
    batch = la_malloc((size_t)B * (L + 1) * sizeof *batch); // (B, L+1)
    inp = la_malloc((size_t)B * L * sizeof *inp);           // (B, L)
    tgt = la_malloc((size_t)B * L * sizeof *tgt);           // (B, L)
    ex = la_malloc(((size_t)max_len + 1) * sizeof *ex);     // (max_len + 1)
    pred = la_malloc((size_t)max_len * sizeof *pred);       // (max_len)
    if (!batch || !inp || !tgt || !ex || !pred) { s = la_fail(LA_ENOMEM, "study: out of memory"); goto pre; }

pre:
    /* under mpirun every rank loads the data; one that cannot stops them all, named */
    if ((s = la_dist_agree(s)) != LA_OK) goto out;
    const int me = la_dist_rank(), writer = me == 0, W = la_dist_size();
    /* groups of rpv ranks, each training its variants data-parallel */
    const int rpv = opts.ranks_per_variant > 0 ? opts.ranks_per_variant : st->ranks_per_variant;
    if (W % rpv) {
        s = la_fail(LA_EINVAL, "ranks_per_variant is %d but %d rank%s started: the ranks form groups of %d, one "
                    "variant per group; start a multiple of %d ranks (mpirun -np %d) or lower ranks_per_variant "
                    "to a divisor of %d (longattn study --ranks-per-variant N)", rpv, W, W > 1 ? "s were" : " was", rpv,
                    rpv, rpv * (W / rpv + 1), W);
        goto out;
    }
    /* seq_parallel: sp ranks of a group share each sequence, so a group has rpv / sp units
     * that split the micro-batches */
    const int sp = opts.seq_parallel > 0 ? opts.seq_parallel : st->seq_parallel;
    if (rpv % sp) {
        s = la_fail(LA_EINVAL, "seq_parallel is %d but ranks_per_variant is %d: the ranks sharing a sequence are part of "
                    "one variant's group; make ranks_per_variant a multiple of %d, or lower seq_parallel (one process: "
                    "longattn study --ranks-per-variant 1 --seq-parallel 1)", sp, rpv, sp);
        goto out;
    }
    if (st->accum < rpv / sp && sp == 1) {
        s = la_fail(LA_EINVAL, "ranks_per_variant is %d but \"accum\" is %d: each rank of a group trains a block of "
                    "a step's accum micro-batches, so %d rank%s would have nothing to do; set \"accum\" to a "
                    "multiple of %d (it must divide \"batch\" %d; the numbers depend on accum, not on the ranks)",
                    rpv, st->accum, rpv - st->accum, rpv - st->accum > 1 ? "s" : "", rpv, st->batch);
        goto out;
    }
    if (st->accum < rpv / sp) {
        s = la_fail(LA_EINVAL, "ranks_per_variant is %d with seq_parallel %d (%d sets of ranks sharing a sequence) but "
                    "\"accum\" is %d: each set trains a block of a step's accum micro-batches, so %d would have "
                    "nothing to do; set \"accum\" to a multiple of %d (it must divide \"batch\" %d)", rpv, sp,
                    rpv / sp, st->accum, rpv / sp - st->accum, rpv / sp, st->batch);
        goto out;
    }
    r->seq_parallel = sp;
    const int n_groups = W / rpv, group = me / rpv;
    /* cells: spec vi with seed index k is cell vi * n_seeds + k, each run (and spread over
     * the groups, and resumed) on its own */
    const int n_cells = la_study_n_cells(st), n_seeds = st->n_seeds;
    int sender[LA_STUDY_MAX_SPECS * LA_STUDY_MAX_SEEDS]; /* rank 0 of the group of cell c */
    {
        double cost[LA_STUDY_MAX_SPECS * LA_STUDY_MAX_SEEDS];
        for (int c = 0; c < n_cells; c++) cost[c] = variant_flops(st, r->vocab);
        if ((s = la_dist_agree(la_grid_init(&g, "study", cost, n_cells, n_groups, group))) != LA_OK) goto out;
        for (int c = 0; c < n_cells; c++) sender[c] = g.owner[c] * rpv;
    }

    tracker tk = {.st = st, .opts = &opts, .t0 = t_start, .vocab = r->vocab, .c_L = flops_per_token(st, r->vocab, L),
                  .flops_total = g.total, /* this group's share */
                  .p = {.n_specs = st->n_specs, .n_seeds = n_seeds, .loss = NAN, .val_loss = NAN}};
    /* finished variants of an interrupted run (--resume) are loaded instead of rerun */
    la_cells cells;
    {
        /* under mpirun rank 0 opens (a fresh run empties cells/) before the others join in
         * resume mode, which only checks the fingerprint: no rank deletes another's cell */
        cJSON *fp = study_fingerprint(st, data, r);
        s = la_dist_agree(fp ? LA_OK : la_fail(LA_ENOMEM, "study: out of memory"));
        if (s == LA_OK) s = la_grid_open(&cells, out_dir, "study", fp, opts.resume);
        cJSON_Delete(fp);
        if (s != LA_OK) goto out;
    }
    /* from here to la_dist_group_end the collectives (the trainer's, la_dist_agree) are
     * the group's; a group that fails leaves its loop and meets the others below */
    int gi, ng;
    if ((s = la_dist_agree(la_dist_group_begin(rpv, &gi, &ng))) != LA_OK) goto out;
    /* a variant that fails (e.g. diverges) is recorded and the others still run */
    study_grid G = {.st = st, .cell_st = *st, .r = r, .tk = &tk, .g = &g, .cells = &cells, .train = &train,
                    .val = &val, .out_dir = out_dir, .batch = batch, .inp = inp, .tgt = tgt, .ex = ex,
                    .pred = pred, .leader = la_dist_rank() == 0, .t_start = t_start};
    g.store = &cells;
    g.collective = 1; /* a group of rpv ranks runs each cell */
    g.test_point = "study-cell";
    const la_grid_fns fns = {.begin = cell_begin, .restore = cell_restore, .run = cell_run,
                             .to_json = cell_to_json, .stored = cell_stored, .done = cell_done};
    s = la_grid_run(&g, &fns, &G);
    int n_resumed = G.n_resumed, n_continued = G.n_continued, n_bad = 0;
    la_status first_bad = LA_OK; /* the first variant that failed, and its message */
    char first_msg[1024] = "";
    la_dist_group_end();
    /* every group is here: one that failed stops them all, named */
    if ((s = la_dist_agree(s)) != LA_OK) goto out;
    /* under mpirun: rank 0 gathers the other groups' variants and writes everything */
    if ((s = la_study_gather(r, sender)) != LA_OK) goto out;
    for (int c = 0; c < n_cells && writer; c++)
        if (r->v[c].status != LA_OK && !n_bad++) {
            first_bad = r->v[c].status;
            snprintf(first_msg, sizeof first_msg, "variant %d (%s, seed %llu) failed: %s", c / n_seeds + 1,
                     st->specs[c / n_seeds], (unsigned long long)r->v[c].seed, r->v[c].error);
        }
    tk.p.phase = "write";
    report(&tk, 0);
    int plots_ok = 0;
    char warn[512] = "";
    if (!writer)
        snprintf(warn, sizeof warn, "rank %d: tables and plots are written by rank 0", me);
    else if (!(opts.gnuplot && !opts.gnuplot[0]))
        s = la_study_write_plots(r, out_dir, opts.gnuplot ? opts.gnuplot : "gnuplot", &plots_ok, warn, sizeof warn);
    else
        snprintf(warn, sizeof warn, "plots switched off");
    r->wall_s = la_now_s() - t_start;
    if (s == LA_OK && writer) s = la_study_write_tables(r, out_dir); /* with the final wall time */
    /* rank 0's outcome (write errors, failed variants) is every rank's */
    if (la_dist_size() > 1) {
        s = la_dist_agree(s);
        struct { int n_bad, first_bad; char msg[1024]; } o = {n_bad, (int)first_bad, ""};
        snprintf(o.msg, sizeof o.msg, "%s", first_msg);
        if (s == LA_OK) s = la_dist_agree(la_dist_bcast(&o, sizeof o, 0));
        n_bad = o.n_bad;
        first_bad = (la_status)o.first_bad;
        snprintf(first_msg, sizeof first_msg, "%s", o.msg);
    }
    if (s == LA_OK && n_bad)
        s = la_fail(first_bad, "%s%s; the results of the other variants are in %s", first_msg,
                    n_bad > 1 ? " (and more: see results.md)" : "", out_dir);
    if (summary) {
        summary->wall_s = r->wall_s;
        summary->plots_ok = plots_ok;
        summary->n_resumed = n_resumed;
        summary->n_continued = n_continued;
        snprintf(summary->warning, sizeof summary->warning, "%s", warn);
    }
out:
    la_grid_free(&g);
    for (int c = 0; c < LA_STUDY_MAX_SPECS * LA_STUDY_MAX_SEEDS; c++) {
        for (int i = 0; i < LA_STUDY_MAX_LENS; i++) {
            free(r->v[c].bucket[i]);
            free(r->v[c].bucket_tokens[i]);
        }
        free(r->v[c].log);
        free(r->v[c].ft_curve);
    }
    free(r);
    free(batch);
    free(inp);
    free(tgt);
    free(ex);
    free(pred);
    la_docs_free(&train);
    la_docs_free(&val);
    return s;
}
