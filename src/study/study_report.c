/* study_report.c -- a study's numbers as files: CSV tables, results.json (cJSON), a
 * markdown summary, and PNG plots drawn by gnuplot from a generated script. Every file is
 * written atomically (temp file + rename), PNGs included. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "study/study_internal.h"
#include "runner/report.h"

void la_study_slug(const char *spec, char *buf, size_t n) {
    size_t j = 0;
    int under = 0;
    for (const char *c = spec; *c && j + 1 < n; c++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 *c == '.' || *c == '-';
        if (ok) { buf[j++] = *c; under = 0; }
        else if (!under && j > 0) { buf[j++] = '_'; under = 1; }
    }
    while (j > 0 && buf[j - 1] == '_') j--;
    if (n) buf[j] = '\0';
}

static la_status open_out(la_afile *af, const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return la_afile_open(af, path);
}

/* Mean, sample standard deviation (n - 1; 0 for n = 1), min and max of x[0..n). */
typedef struct { double mean, std, min, max; int n; } study_stat;
static study_stat stat_of(const double *x, int n) {
    study_stat r = {NAN, NAN, NAN, NAN, n};
    if (n < 1) return r;
    double sum = 0;
    r.min = r.max = x[0];
    for (int i = 0; i < n; i++) {
        sum += x[i];
        if (x[i] < r.min) r.min = x[i];
        if (x[i] > r.max) r.max = x[i];
    }
    r.mean = sum / n;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (x[i] - r.mean) * (x[i] - r.mean);
    r.std = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
    return r;
}

/* Index of the passkey length that counts as "at L": the longest passkey length <= seq_len
 * (the shortest one when all are longer). */
static int pk_ref_len(const la_study *st) {
    int ref = 0;
    for (int i = 0; i < st->n_pk_lens; i++)
        if (st->pk_lens[i] <= st->seq_len) ref = i;
    return ref;
}

static double pk_acc_len(const la_study *st, const study_variant *v, int li) {
    int c = 0;
    for (int di = 0; di < st->n_pk_depths; di++) c += v->correct[li][di];
    return (double)c / ((double)st->n_pk_depths * st->pk_trials);
}

/* Mean answer loss of the last 10% of fine-tune steps (bits per answer digit): smoother
 * than the last step alone. NAN without a curve. */
static double ft_tail(const study_variant *v) {
    if (v->n_ft < 1) return NAN;
    int from = v->n_ft - (v->n_ft / 10 > 0 ? v->n_ft / 10 : 1);
    double s = 0;
    for (int k = from; k < v->n_ft; k++) s += v->ft_curve[k];
    return s / (v->n_ft - from);
}

/* The numbers of one variant across its seeds (finished cells only). */
typedef struct {
    int n_trained, n_pk;         /* cells with losses / with a passkey grid */
    uint64_t seeds[LA_STUDY_MAX_SEEDS];
    size_t n_params;
    study_stat train, loss[LA_STUDY_MAX_LENS], pk[LA_STUDY_MAX_LENS], ft;
    double pk_depth_mean[LA_STUDY_MAX_LENS][LA_STUDY_MAX_DEPTHS], pk_depth_std[LA_STUDY_MAX_LENS][LA_STUDY_MAX_DEPTHS];
    double loss_x[LA_STUDY_MAX_LENS][LA_STUDY_MAX_SEEDS], pk_x[LA_STUDY_MAX_LENS][LA_STUDY_MAX_SEEDS];
    double train_x[LA_STUDY_MAX_SEEDS], ft_x[LA_STUDY_MAX_SEEDS];
    int has_pk;                  /* the study has a passkey grid and some cell finished it */
    int learned;                 /* mean passkey accuracy at L >= LA_STUDY_LEARNED_MIN */
} variant_agg;

static void aggregate(const study_results *r, int vi, variant_agg *a) {
    const la_study *st = r->st;
    memset(a, 0, sizeof *a);
    double x[LA_STUDY_MAX_SEEDS];
    for (int k = 0; k < st->n_seeds; k++) {
        const study_variant *v = &r->v[vi * st->n_seeds + k];
        if (!v->trained) continue;
        a->n_params = v->n_params;
        a->seeds[a->n_trained] = v->seed;
        a->train_x[a->n_trained] = v->final_train_bpb;
        for (int i = 0; i < st->n_eval_lens; i++) a->loss_x[i][a->n_trained] = v->loss[i];
        a->n_trained++;
        if (!v->passkey_done || st->pk_trials == 0) continue;
        for (int i = 0; i < st->n_pk_lens; i++) a->pk_x[i][a->n_pk] = pk_acc_len(st, v, i);
        a->ft_x[a->n_pk] = ft_tail(v);
        a->n_pk++;
    }
    a->train = stat_of(a->train_x, a->n_trained);
    for (int i = 0; i < st->n_eval_lens; i++) a->loss[i] = stat_of(a->loss_x[i], a->n_trained);
    a->has_pk = st->pk_trials > 0 && a->n_pk > 0;
    for (int i = 0; i < st->n_pk_lens; i++) a->pk[i] = stat_of(a->pk_x[i], a->n_pk);
    a->ft = stat_of(a->ft_x, a->n_pk);
    for (int li = 0; li < st->n_pk_lens && a->has_pk; li++)
        for (int di = 0; di < st->n_pk_depths; di++) {
            int n = 0;
            for (int k = 0; k < st->n_seeds; k++) {
                const study_variant *v = &r->v[vi * st->n_seeds + k];
                if (v->trained && v->passkey_done) x[n++] = (double)v->correct[li][di] / st->pk_trials;
            }
            study_stat d = stat_of(x, n);
            a->pk_depth_mean[li][di] = d.mean;
            a->pk_depth_std[li][di] = d.std;
        }
    a->learned = a->has_pk && a->pk[pk_ref_len(st)].mean >= LA_STUDY_LEARNED_MIN;
}

/* 1 if passkey length li of a variant is reported as "not learned" */
static int pk_hidden(const la_study *st, const variant_agg *a, int li) {
    return a->has_pk && !a->learned && li > pk_ref_len(st);
}

/* A row of summary.csv: spec (quoted), seeds, metric, length, then the four cells mean, std,
 * min, max (empty when there is no value; x NULL: "not learned") */
static void sum_row(la_table *t, const char *spec, int n, const char *metric, int len, const study_stat *x) {
    la_table_add_quoted(t, spec);
    la_table_row(t, "%d\t%s\t%d", n, metric, len);
    if (!x) la_table_row(t, "not learned\t\t\t");
    else if (x->n < 1 || isnan(x->mean)) la_table_row(t, "\t\t\t");
    else la_table_row(t, "%.6f\t%.6f\t%.6f\t%.6f", x->mean, x->std, x->min, x->max);
}

/* the first cells of a row: the spec (quoted) and the seed */
static void spec_seed(la_table *t, const char *spec, uint64_t seed) {
    la_table_add_quoted(t, spec);
    la_table_add(t, "%llu", (unsigned long long)seed);
}

static la_status write_csvs(const study_results *r, const char *dir) {
    const la_study *st = r->st;
    const char *unit = r->is_bytes ? "bpb" : "bpt";
    const int ns = st->n_seeds;
    int max_b = 0;
    for (int i = 0; i < st->n_eval_lens; i++) {
        int nb = (st->eval_lens[i] + st->seq_len - 1) / st->seq_len;
        if (nb > max_b) max_b = nb;
    }
    la_table t;
    /* per cell (variant x seed): the raw numbers */
    LA_TRY(la_table_init(&t, 6 + max_b, NULL, NULL));
    la_table_row(&t, "spec\tseed\teval_len\tloss_%s\twindows\ttokens", unit);
    for (int b = 0; b < max_b; b++) la_table_add(&t, "pos_%d", b * st->seq_len);
    for (int c = 0; c < la_study_n_cells(st); c++) {
        const study_variant *v = &r->v[c];
        if (!v->trained) continue;
        for (int i = 0; i < st->n_eval_lens; i++) {
            spec_seed(&t, st->specs[c / ns], v->seed);
            la_table_row(&t, "%d\t%.6f\t%d\t%lld", st->eval_lens[i], v->loss[i], st->eval_windows,
                         (long long)v->tokens[i]);
            for (int b = 0; b < max_b; b++) {
                if (b < v->n_bucket[i]) la_table_add(&t, "%.6f", v->bucket[i][b]);
                else la_table_add(&t, "%s", "");
            }
        }
    }
    LA_TRY(la_table_write_csv(&t, dir, "results.csv"));

    LA_TRY(la_table_begin(&t, "spec,seed,length,depth,trials,correct,passkey_acc", NULL));
    for (int c = 0; c < la_study_n_cells(st) && st->pk_trials > 0; c++) {
        const study_variant *v = &r->v[c];
        if (!v->passkey_done) continue;
        for (int li = 0; li < st->n_pk_lens; li++)
            for (int di = 0; di < st->n_pk_depths; di++) {
                spec_seed(&t, st->specs[c / ns], v->seed);
                la_table_row(&t, "%d\t%g\t%d\t%d\t%.4f", st->pk_lens[li], st->pk_depths[di], st->pk_trials,
                             v->correct[li][di], (double)v->correct[li][di] / st->pk_trials);
            }
    }
    LA_TRY(la_table_write_csv(&t, dir, "passkey.csv"));

    char tr_name[32], val_name[32];
    snprintf(tr_name, sizeof tr_name, "train_loss_%s", unit);
    snprintf(val_name, sizeof val_name, "val_loss_%s", unit);
    const char *const tr_head[] = {"spec", "seed", "step", tr_name, val_name, "elapsed_s"};
    LA_TRY(la_table_init(&t, 6, tr_head, NULL));
    for (int c = 0; c < la_study_n_cells(st); c++) {
        const study_variant *v = &r->v[c];
        for (int k = 0; k < v->n_log; k++) {
            spec_seed(&t, st->specs[c / ns], v->seed);
            char val_s[32] = "";
            if (!isnan(v->log[k].val_bpb)) snprintf(val_s, sizeof val_s, "%.6f", v->log[k].val_bpb);
            la_table_row(&t, "%d\t%.6f\t%s\t%.3f", v->log[k].step, v->log[k].train_bpb, val_s, v->log[k].elapsed_s);
        }
    }
    LA_TRY(la_table_write_csv(&t, dir, "training.csv"));

    /* the passkey fine-tune, step by step: loss on the five answer digits */
    LA_TRY(la_table_begin(&t, "spec,seed,step,answer_loss_bits_per_digit", NULL));
    for (int c = 0; c < la_study_n_cells(st); c++) {
        const study_variant *v = &r->v[c];
        for (int k = 0; k < v->n_ft; k++) {
            spec_seed(&t, st->specs[c / ns], v->seed);
            la_table_row(&t, "%d\t%.6f", k + 1, v->ft_curve[k]);
        }
    }
    LA_TRY(la_table_write_csv(&t, dir, "finetune.csv"));

    /* per variant over its seeds: mean, sample std, min, max (what results.md shows) */
    LA_TRY(la_table_begin(&t, "spec,seeds,metric,length,mean,std,min,max", NULL));
    for (int vi = 0; vi < st->n_specs; vi++) {
        variant_agg a;
        aggregate(r, vi, &a);
        if (!a.n_trained) continue;
        sum_row(&t, st->specs[vi], a.n_trained, tr_name, st->seq_len, &a.train);
        for (int i = 0; i < st->n_eval_lens; i++)
            sum_row(&t, st->specs[vi], a.n_trained, val_name, st->eval_lens[i], &a.loss[i]);
        if (!a.has_pk) continue;
        for (int i = 0; i < st->n_pk_lens; i++)
            sum_row(&t, st->specs[vi], a.n_pk, "passkey_acc", st->pk_lens[i], pk_hidden(st, &a, i) ? NULL : &a.pk[i]);
        if (st->pk_steps > 0)
            sum_row(&t, st->specs[vi], a.n_pk, "finetune_answer_loss_bits_per_digit", st->seq_len, &a.ft);
    }
    return la_table_write_csv(&t, dir, "summary.csv");
}

/* {"mean", "std", "min", "max", "values": [per seed]} */
static cJSON *stat_json(const study_stat *x, const double *values) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "mean", x->mean);
    cJSON_AddNumberToObject(o, "std", x->std);
    cJSON_AddNumberToObject(o, "min", x->min);
    cJSON_AddNumberToObject(o, "max", x->max);
    la_json_put(o, "values", cJSON_CreateDoubleArray(values, x->n));
    return o;
}

static cJSON *study_json(const study_results *r) {
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    const la_study *st = r->st;
    const int ns = st->n_seeds;
    cJSON *root = cJSON_CreateObject();
    cJSON *s = cJSON_AddObjectToObject(root, "study");
    cJSON_AddStringToObject(s, "name", st->name);
    cJSON_AddStringToObject(s, "data", st->data);
    cJSON *m = cJSON_AddObjectToObject(s, "model");
    cJSON_AddNumberToObject(m, "n_layer", st->n_layer);
    cJSON_AddNumberToObject(m, "d_model", st->d_model);
    cJSON_AddNumberToObject(m, "n_head", st->n_head);
    cJSON_AddNumberToObject(m, "n_kv_head", st->n_kv_head);
    cJSON_AddNumberToObject(m, "qk_gain", st->qk_gain);
    cJSON_AddNumberToObject(s, "steps", st->steps);
    cJSON_AddNumberToObject(s, "batch", st->batch);
    cJSON_AddNumberToObject(s, "seq_len", st->seq_len);
    cJSON_AddNumberToObject(s, "lr", st->lr);
    cJSON_AddNumberToObject(s, "warmup", st->warmup);
    cJSON_AddNumberToObject(s, "seed", (double)st->seed);
    cJSON_AddNumberToObject(s, "seeds", ns);
    la_json_put(s, "eval_lens", cJSON_CreateIntArray(st->eval_lens, st->n_eval_lens));
    cJSON_AddNumberToObject(s, "eval_windows", st->eval_windows);
    cJSON_AddNumberToObject(s, "val_every", st->val_every);
    cJSON *pk = cJSON_AddObjectToObject(s, "passkey");
    cJSON_AddNumberToObject(pk, "pretrain_mix", st->pk_mix);
    cJSON_AddStringToObject(pk, "pretrain_targets", st->pk_mix_all ? "all" : "answer");
    cJSON_AddNumberToObject(pk, "finetune_steps", st->pk_steps);
    cJSON_AddNumberToObject(pk, "finetune_lr", st->pk_lr);
    la_json_put(pk, "lens", cJSON_CreateIntArray(st->pk_lens, st->n_pk_lens));
    la_json_put(pk, "depths", cJSON_CreateDoubleArray(st->pk_depths, st->n_pk_depths));
    cJSON_AddNumberToObject(pk, "trials", st->pk_trials);
    cJSON *specs = cJSON_AddArrayToObject(s, "specs");
    for (int vi = 0; vi < st->n_specs; vi++) la_json_push(specs, cJSON_CreateString(st->specs[vi]));

    cJSON_AddStringToObject(root, "loss_unit", r->is_bytes ? "bits per byte" : "bits per token");
    cJSON *d = cJSON_AddObjectToObject(root, "data");
    cJSON_AddNumberToObject(d, "train_docs", r->train_docs);
    cJSON_AddNumberToObject(d, "train_tokens", (double)r->train_tokens);
    cJSON_AddNumberToObject(d, "val_docs", r->val_docs);
    cJSON_AddNumberToObject(d, "val_tokens", (double)r->val_tokens);
    cJSON_AddNumberToObject(d, "vocab", r->vocab);
    cJSON_AddNumberToObject(root, "wall_seconds", r->wall_s);

    /* per cell (variant x seed), every number as measured */
    cJSON *vars = cJSON_AddArrayToObject(root, "variants");
    cJSON *loss = cJSON_AddArrayToObject(root, "loss");
    cJSON *pks = cJSON_AddArrayToObject(root, "passkey");
    for (int c = 0; c < la_study_n_cells(st); c++) {
        const study_variant *v = &r->v[c];
        const char *spec = st->specs[c / ns];
        if (!v->trained) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "spec", spec);
        cJSON_AddNumberToObject(o, "seed", (double)v->seed);
        cJSON_AddStringToObject(o, "canonical", v->canon);
        cJSON_AddNumberToObject(o, "params", (double)v->n_params);
        cJSON_AddNumberToObject(o, "final_train_loss", v->final_train_bpb);
        cJSON_AddNumberToObject(o, "train_seconds", v->train_s);
        cJSON_AddNumberToObject(o, "eval_seconds", v->eval_s);
        cJSON_AddNumberToObject(o, "passkey_seconds", v->passkey_s);
        if (v->error[0]) cJSON_AddStringToObject(o, "error", v->error);
        if (st->pk_trials > 0 && st->pk_steps > 0 && v->passkey_done) {
            cJSON_AddNumberToObject(o, "finetune_loss_first", v->ft_first_bpb);
            cJSON_AddNumberToObject(o, "finetune_loss_last", v->ft_last_bpb);
            /* no curve (ft_curve NULL): no key, as before; la_json_put frees the array when
             * the insertion fails, where cJSON_AddItemToObject leaked it */
            if (v->ft_curve) la_json_put(o, "finetune_curve", cJSON_CreateDoubleArray(v->ft_curve, v->n_ft));
        }
        cJSON *log = cJSON_AddArrayToObject(o, "training");
        for (int k = 0; k < v->n_log; k++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "step", v->log[k].step);
            cJSON_AddNumberToObject(e, "train_loss", v->log[k].train_bpb);
            if (!isnan(v->log[k].val_bpb)) cJSON_AddNumberToObject(e, "val_loss", v->log[k].val_bpb);
            la_json_push(log, e);
        }
        la_json_push(vars, o);
        for (int i = 0; i < st->n_eval_lens; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "spec", spec);
            cJSON_AddNumberToObject(e, "seed", (double)v->seed);
            cJSON_AddNumberToObject(e, "eval_len", st->eval_lens[i]);
            cJSON_AddNumberToObject(e, "loss", v->loss[i]);
            cJSON_AddNumberToObject(e, "windows", st->eval_windows);
            cJSON_AddNumberToObject(e, "tokens", (double)v->tokens[i]);
            cJSON *bk = cJSON_AddArrayToObject(e, "buckets");
            for (int b = 0; b < v->n_bucket[i]; b++) {
                cJSON *x = cJSON_CreateObject();
                cJSON_AddNumberToObject(x, "start", b * st->seq_len);
                int end = (b + 1) * st->seq_len;
                cJSON_AddNumberToObject(x, "end", end < st->eval_lens[i] ? end : st->eval_lens[i]);
                cJSON_AddNumberToObject(x, "loss", v->bucket[i][b]);
                cJSON_AddNumberToObject(x, "tokens", (double)v->bucket_tokens[i][b]);
                la_json_push(bk, x);
            }
            la_json_push(loss, e);
        }
        if (!v->passkey_done || st->pk_trials == 0) continue;
        for (int li = 0; li < st->n_pk_lens; li++)
            for (int di = 0; di < st->n_pk_depths; di++) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "spec", spec);
                cJSON_AddNumberToObject(e, "seed", (double)v->seed);
                cJSON_AddNumberToObject(e, "length", st->pk_lens[li]);
                cJSON_AddNumberToObject(e, "depth", st->pk_depths[di]);
                cJSON_AddNumberToObject(e, "trials", st->pk_trials);
                cJSON_AddNumberToObject(e, "correct", v->correct[li][di]);
                cJSON_AddNumberToObject(e, "passkey_acc", (double)v->correct[li][di] / st->pk_trials);
                la_json_push(pks, e);
            }
    }
    /* per variant over its seeds: mean, sample std (n - 1), min, max and the values */
    cJSON *sum = cJSON_AddArrayToObject(root, "summary");
    for (int vi = 0; vi < st->n_specs; vi++) {
        variant_agg a;
        aggregate(r, vi, &a);
        if (!a.n_trained) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "spec", st->specs[vi]);
        double sd[LA_STUDY_MAX_SEEDS];
        for (int k = 0; k < a.n_trained; k++) sd[k] = (double)a.seeds[k];
        la_json_put(o, "seeds", cJSON_CreateDoubleArray(sd, a.n_trained));
        la_json_put(o, "train_loss", stat_json(&a.train, a.train_x));
        cJSON *ls = cJSON_AddArrayToObject(o, "loss");
        for (int i = 0; i < st->n_eval_lens; i++) {
            cJSON *e = stat_json(&a.loss[i], a.loss_x[i]);
            cJSON_AddNumberToObject(e, "eval_len", st->eval_lens[i]);
            la_json_push(ls, e);
        }
        if (a.has_pk) {
            /* the raw numbers stay here even where the tables print "not learned" */
            cJSON_AddBoolToObject(o, "passkey_learned", a.learned);
            cJSON_AddNumberToObject(o, "passkey_learned_at", st->pk_lens[pk_ref_len(st)]);
            cJSON_AddNumberToObject(o, "passkey_learned_min", LA_STUDY_LEARNED_MIN);
            cJSON *pa = cJSON_AddArrayToObject(o, "passkey");
            for (int i = 0; i < st->n_pk_lens; i++) {
                cJSON *e = stat_json(&a.pk[i], a.pk_x[i]);
                cJSON_AddNumberToObject(e, "length", st->pk_lens[i]);
                la_json_push(pa, e);
            }
            if (st->pk_steps > 0) la_json_put(o, "finetune_answer_loss", stat_json(&a.ft, a.ft_x));
        }
        la_json_push(sum, o);
    }
    return la_json_end(saved_json, root);
}

/* "2.285" for one seed, "2.285 ± 0.012" for several; range: "2.271–2.301" (min–max) */
static void md_stat(la_table *t, const study_stat *x, int digits, int several, int range) {
    if (x->n < 1 || isnan(x->mean)) la_table_add(t, "-");
    else if (range) la_table_add(t, "%.*f–%.*f", digits, x->min, digits, x->max);
    else if (several) la_table_add(t, "%.*f ± %.*f", digits, x->mean, digits, x->std);
    else la_table_add(t, "%.*f", digits, x->mean);
}

/* Markdown summary table (the content of results.md). Returns a malloc'ed string. */
static char *study_markdown(const study_results *r) {
    const la_study *st = r->st;
    const char *u = r->is_bytes ? "bpb" : "bits/token";
    const int several = st->n_seeds > 1, ref = pk_ref_len(st);
    const int show_ft = st->pk_trials > 0 && st->pk_steps > 0;
    la_sbuf b = {0};
    la_sbuf_printf(&b, "## Study \"%s\": trained at L = %d, evaluated up to %d\n\n", st->name, st->seq_len,
              st->eval_lens[st->n_eval_lens - 1]);
    char seeds[96];
    if (several)
        snprintf(seeds, sizeof seeds, "seeds %llu-%llu (%d per variant)", (unsigned long long)st->seed,
                 (unsigned long long)(st->seed + (uint64_t)st->n_seeds - 1), st->n_seeds);
    else
        snprintf(seeds, sizeof seeds, "seed %llu", (unsigned long long)st->seed);
    la_sbuf_printf(&b, "Data `%s`: %d training documents (%lld %s), %d validation documents (%lld %s). "
              "Model: %d layers, d_model %d, %d heads (%d kv), %s vocabulary. Training: %d steps of %d x %d, "
              "lr %g, %s; same windows in the same order for every variant.\n\n",
              st->data, r->train_docs, (long long)r->train_tokens, r->is_bytes ? "bytes" : "tokens", r->val_docs,
              (long long)r->val_tokens, r->is_bytes ? "bytes" : "tokens", st->n_layer, st->d_model, st->n_head,
              st->n_kv_head, r->is_bytes ? "byte (256)" : "GPT-2", st->steps, st->batch, st->seq_len, st->lr, seeds);
    la_table t;
    const int n_pk = st->pk_trials > 0 ? st->n_pk_lens : 0;
    int any_hidden = 0;
    for (int pass = 0; pass < 1 + several; pass++) { /* pass 1: min-max over seeds, the same header */
        if (la_table_init(&t, 3 + st->n_eval_lens + n_pk + show_ft, NULL, NULL) != LA_OK) {
            free(b.s);
            return NULL;
        }
        la_table_row(&t, "spec\t%s\ttrain %s", several ? "seeds" : "params", u);
        for (int i = 0; i < st->n_eval_lens; i++) la_table_add(&t, "val %s @%d", u, st->eval_lens[i]);
        for (int i = 0; i < n_pk; i++) la_table_add(&t, "passkey @%d", st->pk_lens[i]);
        if (show_ft) la_table_add(&t, "answer bits/digit");
        for (int vi = 0; vi < st->n_specs; vi++) {
            variant_agg a;
            aggregate(r, vi, &a);
            if (!a.n_trained) continue;
            if (several) la_table_row(&t, "`%s`\t%d", st->specs[vi], a.n_trained);
            else la_table_row(&t, "`%s`\t%zu", st->specs[vi], a.n_params);
            md_stat(&t, &a.train, 3, several, pass);
            for (int i = 0; i < st->n_eval_lens; i++) md_stat(&t, &a.loss[i], 3, several, pass);
            for (int i = 0; i < n_pk; i++) {
                if (!a.has_pk) la_table_add(&t, "-");
                else if (pk_hidden(st, &a, i)) { la_table_add(&t, "not learned"); any_hidden = 1; }
                else md_stat(&t, &a.pk[i], 2, several, pass);
            }
            if (show_ft && !a.has_pk) la_table_add(&t, "-");
            else if (show_ft) md_stat(&t, &a.ft, 2, several, pass);
        }
        if (pass) la_sbuf_printf(&b, "\nRange over the seeds (min–max):\n\n");
        la_table_md(&t, &b);
        la_table_free(&t);
    }
    la_sbuf_printf(&b, "\nLosses are %s on %d validation windows per length (lower is better; "
              "val @%d is in-distribution). Passkey: exact-match accuracy of greedy decoding of the 5-digit key, "
              "%d trials x %d depths per length, after %d fine-tune steps at L.",
              r->is_bytes ? "bits per byte" : "bits per token", st->eval_windows, st->seq_len, st->pk_trials,
              st->n_pk_depths, st->pk_steps);
    if (show_ft)
        la_sbuf_printf(&b, " Answer bits/digit: loss on the five answer digits over the last 10%% of the fine-tune "
                       "(guessing: 3.32).");
    if (several)
        la_sbuf_printf(&b, " Each number is the mean ± sample standard deviation (n - 1) over the seeds; the second "
                       "table gives min–max; per-seed numbers are in results.csv, passkey.csv and results.json.");
    if (any_hidden)
        la_sbuf_printf(&b, " \"not learned\": the variant's passkey accuracy at %d%s is below %.1f, so its accuracy "
                       "at longer lengths would measure an untrained skill, not length generalisation (the raw "
                       "numbers are in passkey.csv and results.json).", st->pk_lens[ref],
                       several ? " (mean over seeds)" : "", LA_STUDY_LEARNED_MIN);
    la_sbuf_printf(&b, "\n");
    if (st->pk_trials > 0) {
        la_sbuf_printf(&b, "\nPasskey accuracy by needle depth (0 = start of the haystack, 1 = just before the "
                       "question)%s:\n\n", several ? ", mean ± std over seeds" : "");
        if (la_table_init(&t, 2 + st->n_pk_depths, NULL, NULL) != LA_OK) {
            free(b.s);
            return NULL;
        }
        la_table_row(&t, "spec\tlength");
        for (int di = 0; di < st->n_pk_depths; di++) la_table_add(&t, "%g", st->pk_depths[di]);
        for (int vi = 0; vi < st->n_specs; vi++) {
            variant_agg a;
            aggregate(r, vi, &a);
            if (!a.has_pk) continue;
            for (int li = 0; li < st->n_pk_lens; li++) {
                la_table_row(&t, "`%s`\t%d", st->specs[vi], st->pk_lens[li]);
                for (int di = 0; di < st->n_pk_depths; di++) {
                    if (pk_hidden(st, &a, li)) la_table_add(&t, "%s", di ? "" : "not learned");
                    else if (several) la_table_add(&t, "%.2f ± %.2f", a.pk_depth_mean[li][di], a.pk_depth_std[li][di]);
                    else la_table_add(&t, "%.2f", a.pk_depth_mean[li][di]);
                }
            }
        }
        la_table_md(&t, &b);
        la_table_free(&t);
    }
    for (int c = 0; c < la_study_n_cells(st); c++) {
        char seed[40] = ""; /* named with several seeds */
        if (several) snprintf(seed, sizeof seed, " (seed %llu)", (unsigned long long)r->v[c].seed);
        if (r->v[c].error[0])
            la_sbuf_printf(&b, "\n**`%s`%s failed**%s: %s\n", st->specs[c / st->n_seeds], seed,
                           r->v[c].trained ? " after its loss evaluation" : "", r->v[c].error);
    }
    la_sbuf_printf(&b, "\nWall time %.0f s.\n", r->wall_s);
    if (b.oom) { free(b.s); return NULL; }
    return b.s;
}

la_status la_study_write_tables(const study_results *r, const char *dir) {
    LA_TRY(write_csvs(r, dir));
    cJSON *root = study_json(r);
    if (!root) return la_fail(LA_ENOMEM, "study: out of memory for results.json");
    la_status s = la_report_write_json(dir, "results.json", root, 1);
    cJSON_Delete(root);
    if (s != LA_OK) return s;
    char *md = study_markdown(r);
    if (!md) return la_fail(LA_ENOMEM, "study: out of memory for results.md");
    la_sbuf b = {md, 0, 0, 0};
    s = la_report_write(dir, "results.md", &b);
    free(md);
    return s;
}

/* ---- plots ---- */

/* gnuplot double-quoted string: escape backslash and quote */
static void gp_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Write plots.gp for terminal term; fills names[] with the PNGs it makes. With several
 * seeds every curve is the mean over the seeds with error bars of one sample standard
 * deviation (the .dat files also hold min and max). */
static la_status write_script(const study_results *r, const char *dir, const char *term,
                              char names[][160], int *n_names) {
    const la_study *st = r->st;
    const char *u = r->is_bytes ? "bits per byte" : "bits per token";
    const int several = st->n_seeds > 1, ns = st->n_seeds;
    la_afile af;
    *n_names = 0;
    variant_agg *agg = la_malloc((size_t)st->n_specs * sizeof *agg);
    if (!agg) return la_fail(LA_ENOMEM, "study: out of memory (plots)");
    for (int vi = 0; vi < st->n_specs; vi++) aggregate(r, vi, &agg[vi]);
    la_status s = LA_OK;
    /* data: one gnuplot block per variant (separated by two blank lines) */
    if ((s = open_out(&af, dir, "loss_vs_length.dat")) != LA_OK) goto done;
    for (int vi = 0; vi < st->n_specs; vi++) {
        fprintf(af.f, "# %s: length, mean loss, sample std, min, max over %d seeds\n", st->specs[vi], agg[vi].n_trained);
        for (int i = 0; i < st->n_eval_lens && agg[vi].n_trained; i++)
            fprintf(af.f, "%d %.6f %.6f %.6f %.6f\n", st->eval_lens[i], agg[vi].loss[i].mean, agg[vi].loss[i].std,
                    agg[vi].loss[i].min, agg[vi].loss[i].max);
        fprintf(af.f, "\n\n");
    }
    if ((s = la_afile_commit(&af)) != LA_OK) goto done;
    int last = st->n_eval_lens - 1;
    if ((s = open_out(&af, dir, "loss_by_position.dat")) != LA_OK) goto done;
    for (int vi = 0; vi < st->n_specs; vi++) {
        fprintf(af.f, "# %s at length %d: bucket start, bucket middle, mean loss, sample std over seeds\n",
                st->specs[vi], st->eval_lens[last]);
        int nb = 0;
        for (int k = 0; k < ns; k++)
            if (r->v[vi * ns + k].trained) nb = r->v[vi * ns + k].n_bucket[last];
        for (int b = 0; b < nb; b++) {
            double x[LA_STUDY_MAX_SEEDS];
            int n = 0;
            for (int k = 0; k < ns; k++) {
                const study_variant *v = &r->v[vi * ns + k];
                if (v->trained && b < v->n_bucket[last]) x[n++] = v->bucket[last][b];
            }
            study_stat t = stat_of(x, n);
            fprintf(af.f, "%d %.1f %.6f %.6f\n", b * st->seq_len, (b + 0.5) * st->seq_len, t.mean, t.std);
        }
        fprintf(af.f, "\n\n");
    }
    if ((s = la_afile_commit(&af)) != LA_OK) goto done;
    int any_pk = 0, any_ft = 0;
    for (int vi = 0; vi < st->n_specs; vi++) any_pk |= agg[vi].has_pk;
    for (int c = 0; c < la_study_n_cells(st); c++) any_ft |= r->v[c].n_ft > 0;
    if (any_pk) {
        if ((s = open_out(&af, dir, "passkey_vs_length.dat")) != LA_OK) goto done;
        for (int vi = 0; vi < st->n_specs; vi++) {
            fprintf(af.f, "# %s: length, mean accuracy, sample std, min, max over %d seeds\n", st->specs[vi],
                    agg[vi].n_pk);
            for (int i = 0; i < st->n_pk_lens && agg[vi].has_pk; i++)
                fprintf(af.f, "%d %.4f %.4f %.4f %.4f\n", st->pk_lens[i], agg[vi].pk[i].mean, agg[vi].pk[i].std,
                        agg[vi].pk[i].min, agg[vi].pk[i].max);
            fprintf(af.f, "\n\n");
        }
        if ((s = la_afile_commit(&af)) != LA_OK) goto done;
    }
    int ft_every = st->pk_steps / 20 > 0 ? st->pk_steps / 20 : 1;
    if (any_ft) {
        /* mean over seeds of the answer loss, smoothed over ft_every steps */
        if ((s = open_out(&af, dir, "finetune.dat")) != LA_OK) goto done;
        for (int vi = 0; vi < st->n_specs; vi++) {
            fprintf(af.f, "# %s: fine-tune step, answer loss (bits per digit, mean of %d steps), sample std over seeds\n",
                    st->specs[vi], ft_every);
            int nft = 0;
            for (int k = 0; k < ns; k++) if (r->v[vi * ns + k].n_ft > nft) nft = r->v[vi * ns + k].n_ft;
            for (int s0 = 0; s0 + ft_every <= nft; s0 += ft_every) {
                double x[LA_STUDY_MAX_SEEDS];
                int n = 0;
                for (int k = 0; k < ns; k++) {
                    const study_variant *v = &r->v[vi * ns + k];
                    if (v->n_ft < s0 + ft_every) continue;
                    double m = 0;
                    for (int j = s0; j < s0 + ft_every; j++) m += v->ft_curve[j];
                    x[n++] = m / ft_every;
                }
                study_stat t = stat_of(x, n);
                fprintf(af.f, "%d %.5f %.5f\n", s0 + ft_every, t.mean, t.std);
            }
            fprintf(af.f, "\n\n");
        }
        if ((s = la_afile_commit(&af)) != LA_OK) goto done;
    }

    if ((s = open_out(&af, dir, "plots.gp")) != LA_OK) goto done;
    FILE *f = af.f;
    fprintf(f, "# generated by `longattn study`; rerun with: cd <this folder> && gnuplot plots.gp\n");
    fprintf(f, "set terminal %s size 960,640\nset termoption noenhanced\nset key below\n"
               "set grid\n", term);
    fprintf(f, "titles = \"");
    for (int vi = 0; vi < st->n_specs; vi++) fprintf(f, "%s%d", vi ? " " : "", vi);
    fprintf(f, "\"\n");
    fprintf(f, "array spec[%d]\n", st->n_specs);
    for (int vi = 0; vi < st->n_specs; vi++) {
        fprintf(f, "spec[%d] = ", vi + 1);
        gp_str(f, st->specs[vi]);
        fprintf(f, "\n");
    }
    /* with several seeds: mean and error bars of one sample std */
    const char *style = several ? "using 1:2:3 with yerrorlines" : "using 1:2 with linespoints";
    char spread[96] = "";
    if (several) snprintf(spread, sizeof spread, " (mean, error bars: sample std over %d seeds)", ns);
    snprintf(names[(*n_names)++], 160, "loss_vs_length.png");
    fprintf(f, "set output 'loss_vs_length.png.tmp'\nset logscale x 2\nset xlabel 'evaluation length (tokens)'\n"
               "set ylabel 'validation loss (%s)'\nset title ", u);
    char title[512];
    snprintf(title, sizeof title, "%s: trained at L = %d%s", st->name, st->seq_len, spread);
    gp_str(f, title);
    fprintf(f, "\nset xtics (");
    for (int i = 0; i < st->n_eval_lens; i++) fprintf(f, "%s\"%d\" %d", i ? ", " : "", st->eval_lens[i], st->eval_lens[i]);
    fprintf(f, ")\nset xrange [%g:%g]\n", st->eval_lens[0] / 1.25, st->eval_lens[st->n_eval_lens - 1] * 1.25);
    fprintf(f, "set arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 2\n", st->seq_len, st->seq_len);
    fprintf(f, "plot for [i=1:%d] 'loss_vs_length.dat' index (i-1) %s lw 2 pt 7 title spec[i]\n", st->n_specs, style);
    fprintf(f, "unset arrow 1\n");

    if (any_pk) {
        snprintf(names[(*n_names)++], 160, "passkey_vs_length.png");
        fprintf(f, "set output 'passkey_vs_length.png.tmp'\nset ylabel 'passkey accuracy'\nset yrange [-0.05:1.05]\n"
                   "set title ");
        snprintf(title, sizeof title, "%s: passkey accuracy, fine-tuned at L = %d%s", st->name, st->seq_len, spread);
        gp_str(f, title);
        fprintf(f, "\nset xtics (");
        for (int i = 0; i < st->n_pk_lens; i++) fprintf(f, "%s\"%d\" %d", i ? ", " : "", st->pk_lens[i], st->pk_lens[i]);
        fprintf(f, ")\nset xrange [%g:%g]\n", st->pk_lens[0] / 1.25, st->pk_lens[st->n_pk_lens - 1] * 1.25);
        fprintf(f, "array pktitle[%d]\n", st->n_specs);
        for (int vi = 0; vi < st->n_specs; vi++) {
            char t[320];
            snprintf(t, sizeof t, "%s%s", st->specs[vi], agg[vi].has_pk && !agg[vi].learned ? " (not learned at L)" : "");
            fprintf(f, "pktitle[%d] = ", vi + 1);
            gp_str(f, t);
            fprintf(f, "\n");
        }
        fprintf(f, "plot for [i=1:%d] 'passkey_vs_length.dat' index (i-1) %s lw 2 pt 7 title pktitle[i]\n"
                   "set autoscale y\n", st->n_specs, style);
    }
    fprintf(f, "unset logscale x\nset xtics autofreq\nset autoscale x\n");

    snprintf(names[(*n_names)++], 160, "loss_by_position.png");
    fprintf(f, "set output 'loss_by_position.png.tmp'\nset xlabel 'position in the window (tokens)'\n"
               "set ylabel 'loss in buckets of %d positions (%s)'\nset title ", st->seq_len, u);
    snprintf(title, sizeof title, "%s: loss by position at length %d (trained at %d)%s", st->name,
             st->eval_lens[last], st->seq_len, spread);
    gp_str(f, title);
    fprintf(f, "\nset xrange [0:%d]\nset arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 2\n",
            st->eval_lens[last], st->seq_len, st->seq_len);
    fprintf(f, "plot for [i=1:%d] 'loss_by_position.dat' index (i-1) using 2:3%s with %s lw 2 pt 7 "
               "title spec[i]\nunset arrow 1\n", st->n_specs, several ? ":4" : "", several ? "yerrorlines" : "linespoints");

    if (any_ft) {
        snprintf(names[(*n_names)++], 160, "finetune_loss.png");
        fprintf(f, "set output 'finetune_loss.png.tmp'\nset xlabel 'passkey fine-tune step'\n"
                   "set ylabel 'answer loss (bits per digit; guessing 3.32)'\nset autoscale x\nset yrange [0:*]\n"
                   "set title ");
        snprintf(title, sizeof title, "%s: passkey fine-tune at L = %d, mean of every %d steps%s", st->name,
                 st->seq_len, ft_every, spread);
        gp_str(f, title);
        fprintf(f, "\nplot for [i=1:%d] 'finetune.dat' index (i-1) %s lw 2 pt 7 ps 0.6 title spec[i]\n"
                   "set autoscale y\n", st->n_specs, style);
    }

    if (any_pk) {
        fprintf(f, "set palette defined (0 '#b2182b', 0.5 '#f7f7f7', 1 '#2166ac')\nset cbrange [0:1]\n"
                   "set cblabel 'passkey accuracy%s'\nunset key\nunset grid\nset xlabel 'length (tokens)'\n"
                   "set ylabel 'needle depth'\n", several ? " (mean over seeds)" : "");
        fprintf(f, "set xrange [-0.5:%g]\nset yrange [%g:-0.5]\nset xtics (", st->n_pk_lens - 0.5,
                st->n_pk_depths - 0.5); /* depth 0 at the top, as in NIAH heatmaps */
        for (int i = 0; i < st->n_pk_lens; i++) fprintf(f, "%s\"%d\" %d", i ? ", " : "", st->pk_lens[i], i);
        fprintf(f, ")\nset ytics (");
        for (int i = 0; i < st->n_pk_depths; i++) fprintf(f, "%s\"%g\" %d", i ? ", " : "", st->pk_depths[i], i);
        fprintf(f, ")\n");
        for (int vi = 0; vi < st->n_specs; vi++) {
            if (!agg[vi].has_pk) continue;
            char slug[128], dat[160];
            la_study_slug(st->specs[vi], slug, sizeof slug);
            snprintf(names[*n_names], 160, "passkey_%d_%s.png", vi + 1, slug);
            snprintf(dat, sizeof dat, "passkey_%d.dat", vi + 1);
            la_afile df;
            if ((s = open_out(&df, dir, dat)) != LA_OK) { la_afile_abort(&af); goto done; }
            fprintf(df.f, "# %s: length index, depth index, accuracy (mean over seeds), sample std\n", st->specs[vi]);
            for (int li = 0; li < st->n_pk_lens; li++)
                for (int di = 0; di < st->n_pk_depths; di++)
                    fprintf(df.f, "%d %d %.4f %.4f\n", li, di, agg[vi].pk_depth_mean[li][di], agg[vi].pk_depth_std[li][di]);
            if ((s = la_afile_commit(&df)) != LA_OK) { la_afile_abort(&af); goto done; }
            fprintf(f, "set output '%s.tmp'\nset title ", names[*n_names]);
            snprintf(title, sizeof title, "passkey accuracy: %s (trained at %d, %d trials per cell%s)%s",
                     st->specs[vi], st->seq_len, st->pk_trials, several ? " and seed; label: mean / sd" : "",
                     agg[vi].learned ? "" : ", not learned at L");
            gp_str(f, title);
            if (several)
                fprintf(f, "\nplot '%s' using 1:2:3 with image, '' using 1:2:(sprintf('%%.2f\\nsd %%.2f', $3, $4)) "
                           "with labels font ',12'\n", dat);
            else
                fprintf(f, "\nplot '%s' using 1:2:3 with image, '' using 1:2:(sprintf('%%.2f', $3)) with labels "
                           "font ',14'\n", dat);
            (*n_names)++;
        }
    }
    fprintf(f, "unset output\n");
    s = la_afile_commit(&af);
done:
    free(agg);
    return s;
}

la_status la_study_write_plots(const study_results *r, const char *dir, const char *gnuplot, int *ok,
                            char *warn, size_t warn_n) {
    *ok = 0;
    warn[0] = '\0';
    char names[4 + LA_STUDY_MAX_SPECS][160];
    const char *pngs[4 + LA_STUDY_MAX_SPECS];
    int n = 0, rc = 0, good = 0;
    static const char *const terms[] = {"pngcairo", "png"};
    for (int t = 0; t < 2; t++) {
        LA_TRY(write_script(r, dir, terms[t], names, &n));
        for (int i = 0; i < n; i++) pngs[i] = names[i];
        rc = la_report_plot(gnuplot, dir, "plots.gp", "gnuplot.log", pngs, n, &good, NULL, 0);
        if (rc == 0 || rc == 127) break; /* done, or no gnuplot at all */
    }
    if (rc == 127)
        snprintf(warn, warn_n, "no plots: could not run '%s' (install gnuplot-nox, e.g. with scripts/setup.sh); "
                 "the tables are complete, and %s/plots.gp draws the plots later", gnuplot, dir);
    else if (rc != 0 || good != n)
        snprintf(warn, warn_n, "gnuplot failed (exit %d, %d of %d PNGs made): see %s/gnuplot.log", rc, good, n, dir);
    *ok = rc == 0 && good == n;
    return LA_OK;
}
