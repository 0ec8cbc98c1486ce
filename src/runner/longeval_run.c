/* longeval_run.c -- the long-context evaluation runner (issue #15): study file, the cells
 * on the grid runner (progress and ETA, one stored file per finished cell that --resume
 * reads back), results.json, longeval.csv, longeval.md and gnuplot PNGs. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/dist.h"
#include "core/internal.h"
#include "longattn/experiments.h"
#include "longattn/llama.h"
#include "longattn/longeval.h"
#include "runner/cells.h"
#include "runner/grid.h"
#include "runner/report.h"
#include "tasks/longeval_cell.h"

void openblas_set_num_threads(int);

/* The default (also studies/longeval.json, issue #28): as-trained, YaRN, dynamic NTK,
 * SelfExtend and StreamingLLM sinks at 0.5C and 2C, six documents x five depths = 30
 * passkey needles per cell in real-text haystacks (docs/longeval.md: cost). The full
 * method set is studies/longeval-full.json. */
static const char *const DEFAULT_METHODS[] = {
    "as-trained",
    "yarn({s},{C})",
    "dynamic-ntk({s},{C})",
    "selfextend(8,1024)",
    "as-trained | sinks(4,2044)",
};
static const double DEFAULT_LENGTHS[] = {0.5, 2};

la_longeval_opts la_longeval_opts_default(void) {
    la_longeval_opts o;
    memset(&o, 0, sizeof o);
    o.docs = LE_DOCS_DEFAULT;
    o.n_depths = 5;
    for (int d = 0; d < 5; d++) o.depths[d] = 0.1 + 0.2 * d;
    o.trials = 1;
    o.distractors = -1;
    o.buckets = 8;
    o.chunk = 512;
    o.seed = 1;
    o.n_docs = 6;
    o.resamples = 2000;
    o.n_methods = (int)(sizeof DEFAULT_METHODS / sizeof DEFAULT_METHODS[0]);
    for (int i = 0; i < o.n_methods; i++) o.methods[i] = DEFAULT_METHODS[i];
    o.n_lengths = (int)(sizeof DEFAULT_LENGTHS / sizeof DEFAULT_LENGTHS[0]);
    memcpy(o.lengths, DEFAULT_LENGTHS, sizeof DEFAULT_LENGTHS);
    return o;
}

static la_status num_array(const cJSON *a, const char *key, const char *path, double *out, int *n, double lo,
                           double hi) {
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > LA_LONGEVAL_MAX)
        return la_fail(LA_EFORMAT, "%s: \"%s\" must be an array of 1..%d numbers", path, key, LA_LONGEVAL_MAX);
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= lo && e->valuedouble <= hi))
            return la_fail(LA_EFORMAT, "%s: \"%s\"[%d] must be a number in [%g, %g]", path, key, k, lo, hi);
        out[k++] = e->valuedouble;
    }
    *n = k;
    return LA_OK;
}

static la_status int_key(const cJSON *root, const char *key, const char *path, int *out, int lo, int hi) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return LA_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return la_fail(LA_EFORMAT, "%s: \"%s\" must be a whole number in [%d, %d]", path, key, lo, hi);
    *out = (int)v->valuedouble;
    return LA_OK;
}

la_status la_longeval_load(const char *path, la_longeval_opts *o) {
    if (!path || !o) return la_fail(LA_EINVAL, "la_longeval_load: NULL argument");
    char *text;
    LA_TRY(la_read_file(path, 0, &text, NULL));
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return la_fail(LA_EFORMAT, "%s: not a JSON object (bad JSON?)", path);
    }
    static const char *const known[] = {"methods", "lengths", "depths", "trials", "distractors", "buckets",
                                        "chunk", "seed", "docs", "comment", "haystack", "documents",
                                        "resamples", "cost", "kv_type"};
    const cJSON *e;
    la_status st = LA_OK;
    cJSON_ArrayForEach(e, root) {
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= !strcmp(e->string, known[i]);
        if (!ok && st == LA_OK) st = la_fail(LA_EFORMAT, "%s: unknown key \"%s\"", path, e->string);
    }
    /* one block for every string of this file: [link to the previous block][strings...] */
    size_t need = sizeof(char *);
    cJSON_ArrayForEach(e, root) {
        const cJSON *x;
        if (cJSON_IsString(e)) need += strlen(e->valuestring) + 1;
        cJSON_ArrayForEach(x, e) if (cJSON_IsString(x)) need += strlen(x->valuestring) + 1;
    }
    char *block = la_malloc(need), *w = block ? block + sizeof(char *) : NULL;
    if (!block && st == LA_OK) st = la_fail(LA_ENOMEM, "%s: out of memory", path);
    if (block) {
        memcpy(block, &o->owned, sizeof(char *));
        o->owned = block;
    }
#define KEEP(str) (strcpy(w, (str)), w += strlen(w) + 1, w - strlen(str) - 1)
    const cJSON *v;
    if (st == LA_OK && (v = cJSON_GetObjectItemCaseSensitive(root, "methods"))) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 || cJSON_GetArraySize(v) > LA_LONGEVAL_MAX)
            st = la_fail(LA_EFORMAT, "%s: \"methods\" must be an array of 1..%d strings", path, LA_LONGEVAL_MAX);
        int k = 0;
        cJSON_ArrayForEach(e, v) {
            if (st != LA_OK) break;
            if (!cJSON_IsString(e)) st = la_fail(LA_EFORMAT, "%s: \"methods\"[%d] must be a string", path, k);
            else o->methods[k++] = KEEP(e->valuestring);
        }
        if (st == LA_OK) o->n_methods = k;
    }
    if (st == LA_OK && (v = cJSON_GetObjectItemCaseSensitive(root, "lengths")))
        st = num_array(v, "lengths", path, o->lengths, &o->n_lengths, 1e-3, 1e3);
    if (st == LA_OK && (v = cJSON_GetObjectItemCaseSensitive(root, "depths")))
        st = num_array(v, "depths", path, o->depths, &o->n_depths, 0, 1);
    if (st == LA_OK) st = int_key(root, "trials", path, &o->trials, 0, 1000);
    if (st == LA_OK) st = int_key(root, "distractors", path, &o->distractors, -1, 20);
    if (st == LA_OK) st = int_key(root, "buckets", path, &o->buckets, 1, LA_LONGEVAL_MAX);
    if (st == LA_OK) st = int_key(root, "chunk", path, &o->chunk, 1, 1 << 20);
    if (st == LA_OK) st = int_key(root, "documents", path, &o->n_docs, 0, LA_LONGEVAL_MAX_DOCS);
    if (st == LA_OK) st = int_key(root, "resamples", path, &o->resamples, 1000, 1000000);
    int seed = (int)o->seed;
    if (st == LA_OK) st = int_key(root, "seed", path, &seed, 0, 1 << 30);
    o->seed = (uint64_t)seed;
    if (st == LA_OK && (v = cJSON_GetObjectItemCaseSensitive(root, "docs"))) {
        if (!cJSON_IsString(v)) st = la_fail(LA_EFORMAT, "%s: \"docs\" must be a folder name", path);
        else o->docs = KEEP(v->valuestring);
    }
    if (st == LA_OK && (v = cJSON_GetObjectItemCaseSensitive(root, "kv_type"))) {
        la_kv_params kp = la_kv_params_default();
        kp.D = 0; /* the group is checked against the model's D in each cell */
        if (!cJSON_IsString(v)) st = la_fail(LA_EFORMAT, "%s: \"kv_type\" must be a string (f32, f16, bf16, int8)", path);
        else if (la_kv_type_parse(v->valuestring, &kp) != LA_OK)
            st = la_fail(LA_EFORMAT, "%s: \"kv_type\": %s", path, la_errmsg());
        else o->kv_type = KEEP(v->valuestring);
    }
    if (st == LA_OK && (v = cJSON_GetObjectItemCaseSensitive(root, "haystack"))) {
        if (!cJSON_IsString(v) || (strcmp(v->valuestring, "text") && strcmp(v->valuestring, "filler")))
            st = la_fail(LA_EFORMAT, "%s: \"haystack\" must be \"text\" or \"filler\"", path);
        else o->filler = !strcmp(v->valuestring, "filler");
    }
#undef KEEP
    cJSON_Delete(root);
    return st;
}

void la_longeval_opts_release(la_longeval_opts *o) {
    if (!o) return;
    while (o->owned) {
        char *next;
        memcpy(&next, o->owned, sizeof(char *));
        free(o->owned);
        o->owned = next;
    }
}

/* ---- cell files ---- */

static cJSON *cell_json(const la_longeval_opts *o, const la_longeval_cell *c) {
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "method", c->method_text);
    cJSON_AddStringToObject(j, "spec", c->spec);
    cJSON_AddStringToObject(j, "kv", c->kv);
    cJSON_AddNumberToObject(j, "length_x_C", o->lengths[c->length]);
    cJSON_AddNumberToObject(j, "L", (double)c->L);
    cJSON_AddNumberToObject(j, "bits_per_token", c->ppl_bits_token);
    cJSON_AddNumberToObject(j, "bits_per_byte", c->ppl_bits_byte);
    la_json_put(j, "bucket_bits_per_token", cJSON_CreateDoubleArray(c->bucket_bits_token, c->n_buckets));
    la_json_put(j, "bucket_bits_per_byte", cJSON_CreateDoubleArray(c->bucket_bits_byte, c->n_buckets));
    cJSON_AddNumberToObject(j, "passkey_hits", c->passkey_hits);
    cJSON_AddNumberToObject(j, "passkey_n", c->passkey_n);
    cJSON_AddNumberToObject(j, "multikey_hits", c->multikey_hits);
    cJSON_AddNumberToObject(j, "multikey_n", c->multikey_n);
    la_json_put(j, "passkey_hits_by_depth", cJSON_CreateIntArray(c->depth_hits, o->n_depths));
    la_json_put(j, "multikey_hits_by_depth", cJSON_CreateIntArray(c->depth_mk_hits, o->n_depths));
    cJSON_AddNumberToObject(j, "seconds", c->seconds);
    cJSON_AddNumberToObject(j, "shared_prefix", c->shared);
    if (o->seq_parallel) cJSON_AddNumberToObject(j, "seq_parallel", 1);
    cJSON_AddNumberToObject(j, "prefill_tokens", c->prefill_tokens);
    cJSON_AddNumberToObject(j, "n_docs", c->n_docs);
    cJSON *docs = cJSON_AddArrayToObject(j, "docs"); /* per document: per bucket bits, bytes, predictions */
    for (int k = 0; k < c->n_docs; k++) {
        cJSON *d = cJSON_CreateObject();
        la_json_put(d, "bits", cJSON_CreateDoubleArray(c->doc_bits[k], c->n_buckets));
        la_json_put(d, "bytes", cJSON_CreateDoubleArray(c->doc_bytes[k], c->n_buckets));
        cJSON *z = cJSON_AddArrayToObject(d, "n");
        for (int b = 0; b < c->n_buckets; b++) la_json_push(z, cJSON_CreateNumber((double)c->doc_n[k][b]));
        la_json_push(docs, d);
    }
    /* per example (index ((doc * depths) + depth) * trials + trial): hit, first token's logit */
    cJSON_AddNumberToObject(j, "n_examples", c->n_ex);
    cJSON *ph = cJSON_AddArrayToObject(j, "passkey_example_hits"), *pt = cJSON_AddArrayToObject(j, "passkey_example_top");
    cJSON *mh = cJSON_AddArrayToObject(j, "multikey_example_hits"), *mt = cJSON_AddArrayToObject(j, "multikey_example_top");
    for (int e = 0; e < c->n_ex; e++) {
        if (c->passkey_n) la_json_push(ph, cJSON_CreateNumber(c->pk_hit[e])), la_json_push(pt, cJSON_CreateNumber(c->pk_top[e]));
        if (c->multikey_n) la_json_push(mh, cJSON_CreateNumber(c->mk_hit[e])), la_json_push(mt, cJSON_CreateNumber(c->mk_top[e]));
    }
    return la_json_end(saved_json, j);
}

/* The first n numbers of the array name of j into x (la_cells_num_value's rules: NaN when missing). */
static void get_nums(const cJSON *j, const char *name, double *x, int n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, name);
    for (int i = 0; i < n; i++) x[i] = la_cells_num_value(cJSON_GetArrayItem(a, i));
}

/* A stored cell (the grid's restore, --resume) read into *c, whose method, length and L
 * cell_begin set: it must describe the same cell (path: its file, in the message). */
static la_status cell_from_json(const cJSON *j, const char *path, const la_longeval_opts *o, la_longeval_cell *c) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "method");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(j, "spec");
    if (!cJSON_IsString(m) || !cJSON_IsString(sp) || strcmp(m->valuestring, c->method_text) ||
        la_cells_get_num(j, "L") != (double)c->L || (la_cells_get_num(j, "seq_parallel") == 1) != (o->seq_parallel != 0))
        return la_fail(LA_EFORMAT, "--resume: %s is not this run's cell (method '%s', L = %lld%s); use another --out "
                       "or delete it", path, c->method_text, (long long)c->L,
                       o->seq_parallel ? ", --seq-parallel" : ", without --seq-parallel");
    snprintf(c->spec, sizeof c->spec, "%s", sp->valuestring);
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(j, "kv");
    if (cJSON_IsString(kv)) snprintf(c->kv, sizeof c->kv, "%s", kv->valuestring);
    c->ppl_bits_token = la_cells_get_num(j, "bits_per_token");
    c->ppl_bits_byte = la_cells_get_num(j, "bits_per_byte");
    const cJSON *bt = cJSON_GetObjectItemCaseSensitive(j, "bucket_bits_per_token");
    c->n_buckets = cJSON_GetArraySize(bt) < LA_LONGEVAL_MAX ? cJSON_GetArraySize(bt) : LA_LONGEVAL_MAX;
    get_nums(j, "bucket_bits_per_token", c->bucket_bits_token, c->n_buckets);
    get_nums(j, "bucket_bits_per_byte", c->bucket_bits_byte, c->n_buckets);
    c->passkey_hits = (int)la_cells_get_num(j, "passkey_hits");
    c->passkey_n = (int)la_cells_get_num(j, "passkey_n");
    c->multikey_hits = (int)la_cells_get_num(j, "multikey_hits");
    c->multikey_n = (int)la_cells_get_num(j, "multikey_n");
    const cJSON *dh = cJSON_GetObjectItemCaseSensitive(j, "passkey_hits_by_depth");
    const cJSON *dm = cJSON_GetObjectItemCaseSensitive(j, "multikey_hits_by_depth");
    for (int d = 0; d < o->n_depths; d++) {
        const cJSON *x = cJSON_GetArrayItem(dh, d), *y = cJSON_GetArrayItem(dm, d);
        c->depth_hits[d] = cJSON_IsNumber(x) ? (int)x->valuedouble : 0;
        c->depth_mk_hits[d] = cJSON_IsNumber(y) ? (int)y->valuedouble : 0;
    }
    c->seconds = la_cells_get_num(j, "seconds");
    c->shared = (int)la_cells_get_num(j, "shared_prefix");
    c->prefill_tokens = la_cells_get_num(j, "prefill_tokens");
    const cJSON *docs = cJSON_GetObjectItemCaseSensitive(j, "docs");
    c->n_docs = cJSON_GetArraySize(docs) < LA_LONGEVAL_MAX_DOCS ? cJSON_GetArraySize(docs) : LA_LONGEVAL_MAX_DOCS;
    for (int k = 0; k < c->n_docs; k++) {
        const cJSON *d = cJSON_GetArrayItem(docs, k), *z = cJSON_GetObjectItemCaseSensitive(d, "n");
        get_nums(d, "bits", c->doc_bits[k], c->n_buckets);
        get_nums(d, "bytes", c->doc_bytes[k], c->n_buckets);
        for (int b = 0; b < c->n_buckets; b++) {
            const cJSON *zb = cJSON_GetArrayItem(z, b);
            c->doc_n[k][b] = cJSON_IsNumber(zb) ? (int64_t)zb->valuedouble : 0;
        }
    }
    double ne = la_cells_get_num(j, "n_examples");
    c->n_ex = ne >= 0 && ne <= LA_LONGEVAL_MAX_EX ? (int)ne : 0;
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(j, "passkey_example_hits");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(j, "passkey_example_top");
    const cJSON *mh = cJSON_GetObjectItemCaseSensitive(j, "multikey_example_hits");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "multikey_example_top");
    for (int e = 0; e < c->n_ex; e++) {
        const cJSON *a = cJSON_GetArrayItem(ph, e), *b = cJSON_GetArrayItem(pt, e);
        const cJSON *mk = cJSON_GetArrayItem(mh, e), *n = cJSON_GetArrayItem(mt, e);
        c->pk_hit[e] = cJSON_IsNumber(a) ? (unsigned char)a->valuedouble : 0;
        c->pk_top[e] = cJSON_IsNumber(b) ? (float)b->valuedouble : 0;
        c->mk_hit[e] = cJSON_IsNumber(mk) ? (unsigned char)mk->valuedouble : 0;
        c->mk_top[e] = cJSON_IsNumber(n) ? (float)n->valuedouble : 0;
    }
    c->resumed = 1;
    return LA_OK;
}

/* ---- report ---- */

/* "0.60 [0.39, 0.78], n = 20": accuracy with its Wilson 95 % interval (SPEC 10) */
static void acc_text(int hits, int n, char *buf, size_t sz) {
    double lo, hi;
    if (n == 0 || la_stats_wilson(hits, n, 1.96, &lo, &hi) != LA_OK) snprintf(buf, sz, "-");
    else snprintf(buf, sz, "%.2f [%.2f, %.2f], n = %d", (double)hits / n, lo, hi, n);
}

/* The reference of the comparisons: the first method written exactly "as-trained"; -1 if none. */
static int ref_method(const la_longeval_opts *o) {
    for (int m = 0; m < o->n_methods; m++) {
        const char *t = o->methods[m];
        while (*t == ' ') t++;
        size_t n = strlen(t);
        while (n && t[n - 1] == ' ') n--;
        if (n == 10 && !strncmp(t, "as-trained", 10)) return m;
    }
    return -1;
}

/* One method against the reference on the same examples and tokens (the same length):
 * perplexity difference (bits per byte, method - reference) with a paired bootstrap over
 * (document, position bucket) units, and exact McNemar on the paired retrieval results. */
typedef struct {
    int ok;                     /* both cells run with the same documents and examples */
    double d_bpb, d_lo, d_hi;   /* bits per byte difference and its 95 % bootstrap interval */
    int pk_b, pk_c, mk_b, mk_c; /* b: reference right, method wrong; c: the reverse */
    double pk_p, mk_p;          /* exact McNemar p-values (NaN: no examples) */
    double pk_d[3], mk_d[3];    /* accuracy difference and its 95 % bootstrap over documents (doc_boot) */
} le_cmp;

#define LE_BOOT_SEED 0x6c6f6e67ULL /* fixed: the same tables on every run */

/* The accuracy of one retrieval kind (multikey 0: passkey) of cell c, or (ref non-NULL) the
 * paired difference c - ref, with its 95 % percentile bootstrap over documents: the
 * examples of one document share its text, so they are not independent trials, and the
 * Wilson interval and McNemar test, which assume they are, can be too narrow when the hits
 * gather in a few documents. The documents are resampled (the cluster bootstrap; with
 * few documents, six in the default, it is itself on the narrow side), each with all of its
 * examples: d[0] estimate, d[1], d[2] bounds. NaN without examples or with one document. */
static void doc_boot(const la_longeval_opts *o, const la_longeval_cell *c, const la_longeval_cell *ref, int multikey,
                     double d[3]) {
    d[0] = d[1] = d[2] = NAN;
    const int per = o->n_depths * o->trials, nd = c->n_docs;
    if (nd < 2 || nd > LA_LONGEVAL_MAX_DOCS || per < 1 || (multikey ? !c->multikey_n : !c->passkey_n) ||
        c->n_ex != nd * per || (ref && ref->n_ex != c->n_ex))
        return;
    double a[LA_LONGEVAL_MAX_DOCS] = {0}, b[LA_LONGEVAL_MAX_DOCS] = {0}, w[LA_LONGEVAL_MAX_DOCS];
    for (int k = 0; k < nd; k++) { /* example index ((doc * depths) + depth) * trials + trial */
        w[k] = per;
        for (int e = k * per; e < (k + 1) * per; e++) {
            a[k] += multikey ? c->mk_hit[e] : c->pk_hit[e];
            if (ref) b[k] += multikey ? ref->mk_hit[e] : ref->pk_hit[e];
        }
    }
    if (la_stats_bootstrap_diff(a, b, w, nd, o->resamples > 0 ? o->resamples : 2000, LE_BOOT_SEED, &d[0], &d[1],
                                &d[2]) != LA_OK)
        d[0] = d[1] = d[2] = NAN;
}

/* m against the reference r; r NULL (no reference) or cells not comparable: ok = 0, every statistic NaN */
static le_cmp compare(const la_longeval_opts *o, const la_longeval_cell *r, const la_longeval_cell *m) {
    le_cmp k;
    memset(&k, 0, sizeof k);
    k.d_bpb = k.d_lo = k.d_hi = k.pk_p = k.mk_p = NAN;
    k.pk_d[0] = k.pk_d[1] = k.pk_d[2] = k.mk_d[0] = k.mk_d[1] = k.mk_d[2] = NAN;
    if (!r || r->L == 0 || m->L == 0 || r->n_docs != m->n_docs || r->n_buckets != m->n_buckets || r->n_ex != m->n_ex)
        return k;
    k.ok = 1;
    int nu = r->n_docs * r->n_buckets;
    double *a = la_malloc(sizeof(double) * 3 * (size_t)(nu > 0 ? nu : 1));
    if (a && nu > 0) {
        double *b = a + nu, *w = b + nu;
        for (int d = 0; d < r->n_docs; d++)
            for (int q = 0; q < r->n_buckets; q++) {
                int u = d * r->n_buckets + q;
                a[u] = m->doc_bits[d][q], b[u] = r->doc_bits[d][q], w[u] = r->doc_bytes[d][q];
            }
        if (la_stats_bootstrap_diff(a, b, w, nu, o->resamples > 0 ? o->resamples : 2000, LE_BOOT_SEED, &k.d_bpb,
                                    &k.d_lo, &k.d_hi) != LA_OK)
            k.d_bpb = k.d_lo = k.d_hi = NAN;
    }
    free(a);
    for (int e = 0; e < r->n_ex; e++) {
        k.pk_b += r->pk_hit[e] && !m->pk_hit[e], k.pk_c += !r->pk_hit[e] && m->pk_hit[e];
        k.mk_b += r->mk_hit[e] && !m->mk_hit[e], k.mk_c += !r->mk_hit[e] && m->mk_hit[e];
    }
    if (r->passkey_n) k.pk_p = la_stats_mcnemar_exact(k.pk_b, k.pk_c);
    if (r->multikey_n) k.mk_p = la_stats_mcnemar_exact(k.mk_b, k.mk_c);
    doc_boot(o, m, r, 0, k.pk_d);
    doc_boot(o, m, r, 1, k.mk_d);
    return k;
}

/* A verdict only where the statistics say so: the perplexity interval excludes 0, the
 * McNemar p-value is below 0.05. */
static const char *ppl_verdict(const le_cmp *k) {
    if (!(k->d_hi == k->d_hi)) return "-";
    return k->d_hi < 0 ? "lower" : k->d_lo > 0 ? "higher" : "no difference shown";
}
static const char *ret_verdict(double p, int b, int c, const double d[3]) {
    if (!(p == p)) return "-";
    if (p >= 0.05) return "no difference shown";
    /* and the interval over documents excludes 0 (one document: McNemar alone) */
    if (d[1] == d[1] && d[1] <= 0 && d[2] >= 0) return "not across documents";
    return c > b ? "more found" : "fewer found";
}

/* " +0.13 [+0.03, +0.23] |" or " - |" */
static void d_text(const double d[3], char *buf, size_t n) {
    if (d[0] == d[0]) snprintf(buf, n, "%+.2f [%+.2f, %+.2f]", d[0], d[1], d[2]);
    else snprintf(buf, n, "-");
}

int la_longeval_table(const la_longeval_opts *o, const la_longeval_cell *cells, int64_t C, char *buf, size_t n) {
    size_t len = 0;
#define PUT(...)                                                                                        \
    do {                                                                                                \
        int w_ = snprintf(len < n ? buf + len : NULL, len < n ? n - len : 0, __VA_ARGS__);              \
        if (w_ > 0) len += (size_t)w_;                                                                  \
    } while (0)
    if (buf && n) buf[0] = '\0';
    PUT("| method |");
    for (int l = 0; l < o->n_lengths; l++) PUT(" %gC = %lld |", o->lengths[l], (long long)llround(o->lengths[l] * C));
    PUT("\n|---|");
    for (int l = 0; l < o->n_lengths; l++) PUT("---|");
    PUT("\n");
    for (int m = 0; m < o->n_methods; m++) {
        PUT("| `");
        for (const char *q = o->methods[m]; *q; q++) PUT(*q == '|' ? "\\%c" : "%c", *q); /* '|' escaped in markdown */
        PUT("` |");
        for (int l = 0; l < o->n_lengths; l++) {
            const la_longeval_cell *c = &cells[m * o->n_lengths + l];
            if (c->L == 0) {
                PUT(" (not run) |");
                continue;
            }
            char a[64], b[64];
            acc_text(c->passkey_hits, c->passkey_n, a, sizeof a);
            acc_text(c->multikey_hits, c->multikey_n, b, sizeof b);
            PUT(" %.3f / %s / %s |", c->ppl_bits_byte, a, b);
        }
        PUT("\n");
    }
    /* each method against as-trained, on the same tokens and examples */
    int r = ref_method(o);
    if (r >= 0 && o->n_methods > 1) {
        PUT("\nAgainst `as-trained` at the same length (same tokens, same examples): bits per byte difference "
            "(method - as-trained) with its 95 %% paired bootstrap interval over (document, position bucket) units "
            "(%d resamples, fixed seed); retrieval: discordant pairs b (as-trained right, method wrong) / c (the "
            "reverse) and the exact McNemar p; d: the accuracy difference with its 95 %% bootstrap interval over "
            "documents (the examples of one document are not independent). Verdicts: perplexity only where its "
            "interval excludes 0; retrieval only where p < 0.05 and the interval over documents excludes 0 (\"not "
            "across documents\": p < 0.05, but that interval includes 0).\n\n",
            o->resamples > 0 ? o->resamples : 2000);
        PUT("| method | length | d bits/byte [95 %%] | perplexity | passkey b / c, p | d passkey [95 %%, documents] | "
            "passkey | multi-key b / c, p | d multi-key [95 %%, documents] | multi-key |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n");
        for (int m = 0; m < o->n_methods; m++) {
            if (m == r) continue;
            for (int l = 0; l < o->n_lengths; l++) {
                const la_longeval_cell *cr = &cells[r * o->n_lengths + l], *cm = &cells[m * o->n_lengths + l];
                le_cmp k = compare(o, cr, cm);
                if (!k.ok) continue;
                PUT("| `");
                for (const char *q = o->methods[m]; *q; q++) PUT(*q == '|' ? "\\%c" : "%c", *q);
                PUT("` | %gC | %+.4f [%+.4f, %+.4f] | %s |", o->lengths[l], k.d_bpb, k.d_lo, k.d_hi, ppl_verdict(&k));
                char dp[64], dm[64];
                d_text(k.pk_d, dp, sizeof dp);
                d_text(k.mk_d, dm, sizeof dm);
                if (cr->passkey_n)
                    PUT(" %d / %d, p = %.3g | %s | %s |", k.pk_b, k.pk_c, k.pk_p, dp, ret_verdict(k.pk_p, k.pk_b, k.pk_c, k.pk_d));
                else PUT(" - | - | - |");
                if (cr->multikey_n)
                    PUT(" %d / %d, p = %.3g | %s | %s |", k.mk_b, k.mk_c, k.mk_p, dm, ret_verdict(k.mk_p, k.mk_b, k.mk_c, k.mk_d));
                else PUT(" - | - | - |");
                PUT("\n");
            }
        }
    }
#undef PUT
    return (int)len;
}

/* the first cells of a longeval.csv row: method, spec and KV policy, quoted */
static void csv_names(la_table *t, const la_longeval_cell *c) {
    la_table_add_quoted(t, c->method_text);
    la_table_add_quoted(t, c->spec);
    la_table_add_quoted(t, c->kv);
}

static la_status write_outputs(const la_longeval_opts *o, const la_longeval_cell *cells, int64_t C,
                               const le_stream *s) {
    char path[4096];
    int nc = o->n_methods * o->n_lengths;
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", o->model);
    cJSON_AddNumberToObject(root, "C", (double)C);
    cJSON_AddStringToObject(root, "docs", o->docs);
    cJSON_AddNumberToObject(root, "stream_tokens", (double)s->n);
    cJSON_AddNumberToObject(root, "stream_bytes", (double)s->text_bytes);
    cJSON_AddStringToObject(root, "haystack", o->filler ? "filler" : "text");
    cJSON_AddNumberToObject(root, "trials", o->trials);
    cJSON_AddNumberToObject(root, "distractors", o->distractors);
    cJSON_AddNumberToObject(root, "seed", (double)o->seed);
    if (o->seq_parallel) cJSON_AddNumberToObject(root, "seq_parallel", 1); /* absent: the chunked prefill */
    cJSON *dp = cJSON_AddArrayToObject(root, "depths");
    for (int d = 0; d < o->n_depths; d++) la_json_push(dp, cJSON_CreateNumber(o->depths[d]));
    cJSON *arr = cJSON_AddArrayToObject(root, "cells");
    for (int i = 0; i < nc; i++) la_json_push(arr, cell_json(o, &cells[i]));
    root = la_json_end(saved_json, root);
    la_status st = la_report_write_json(o->out_dir, "results.json", root, 1);
    cJSON_Delete(root);
    LA_TRY(st);

    /* one row per cell (doc "all") and one per (cell, document); the statistics columns
     * (Wilson bounds, the difference to as-trained and the McNemar p) on the cell rows */
    la_table t;
    LA_TRY(la_table_begin(&t, "method,spec,kv,length_x_C,L,doc,bits_per_token,bits_per_byte,passkey_hits,passkey_n,"
                          "passkey_lo,passkey_hi,multikey_hits,multikey_n,multikey_lo,multikey_hi,d_bits_per_byte,d_lo,"
                          "d_hi,passkey_b,passkey_c,passkey_p,multikey_b,multikey_c,multikey_p,seconds,prefill_tokens,"
                          "passkey_doc_lo,passkey_doc_hi,d_passkey,d_passkey_lo,d_passkey_hi,multikey_doc_lo,"
                          "multikey_doc_hi,d_multikey,d_multikey_lo,d_multikey_hi", NULL));
    int ref = ref_method(o);
    for (int i = 0; i < nc; i++) {
        const la_longeval_cell *c = &cells[i];
        double pl = NAN, ph = NAN, ml = NAN, mh = NAN;
        if (c->passkey_n) la_stats_wilson(c->passkey_hits, c->passkey_n, 1.96, &pl, &ph);
        if (c->multikey_n) la_stats_wilson(c->multikey_hits, c->multikey_n, 1.96, &ml, &mh);
        le_cmp k = compare(o, ref >= 0 && c->method != ref ? &cells[ref * o->n_lengths + c->length] : NULL, c);
        double pa[3], ma[3]; /* the accuracies' intervals over documents */
        doc_boot(o, c, NULL, 0, pa);
        doc_boot(o, c, NULL, 1, ma);
        csv_names(&t, c);
        la_table_row(&t, "%g\t%lld\tall\t%.6f\t%.6f\t%d\t%d\t%.4f\t%.4f\t%d\t%d\t%.4f\t%.4f\t%.6f\t%.6f\t%.6f\t%d\t%d\t"
                     "%.6g\t%d\t%d\t%.6g\t%.1f\t%.0f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f",
                     o->lengths[c->length], (long long)c->L, c->ppl_bits_token, c->ppl_bits_byte, c->passkey_hits,
                     c->passkey_n, pl, ph, c->multikey_hits, c->multikey_n, ml, mh, k.d_bpb, k.d_lo, k.d_hi, k.pk_b,
                     k.pk_c, k.pk_p, k.mk_b, k.mk_c, k.mk_p, c->seconds, c->prefill_tokens, pa[1], pa[2], k.pk_d[0],
                     k.pk_d[1], k.pk_d[2], ma[1], ma[2], k.mk_d[0], k.mk_d[1], k.mk_d[2]);
        for (int d = 0; d < c->n_docs; d++) {
            double bt = 0, bb = 0, bn = 0;
            for (int b = 0; b < c->n_buckets; b++) bt += c->doc_bits[d][b], bb += c->doc_bytes[d][b], bn += (double)c->doc_n[d][b];
            int ph_ = 0, pn = 0, mh_ = 0, mn = 0;
            for (int e = d * o->n_depths * o->trials; e < (d + 1) * o->n_depths * o->trials && e < c->n_ex; e++) {
                if (c->passkey_n) ph_ += c->pk_hit[e], pn++;
                if (c->multikey_n) mh_ += c->mk_hit[e], mn++;
            }
            double a1 = NAN, a2 = NAN, b1 = NAN, b2 = NAN;
            if (pn) la_stats_wilson(ph_, pn, 1.96, &a1, &a2);
            if (mn) la_stats_wilson(mh_, mn, 1.96, &b1, &b2);
            csv_names(&t, c);
            la_table_row(&t, "%g\t%lld\t%d\t%.6f\t%.6f\t%d\t%d\t%.4f\t%.4f\t%d\t%d\t%.4f\t%.4f\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t",
                         o->lengths[c->length], (long long)c->L, d + 1, bn > 0 ? bt / bn : NAN,
                         bb > 0 ? bt / bb : NAN, ph_, pn, a1, a2, mh_, mn, b1, b2);
        }
    }
    LA_TRY(la_table_write_csv(&t, o->out_dir, "longeval.csv"));

    const int tn = la_longeval_table(o, cells, C, NULL, 0) + 1; /* its length, then the table */
    char *tab = la_malloc((size_t)tn);
    if (!tab) return la_fail(LA_ENOMEM, "longeval: out of memory");
    la_longeval_table(o, cells, C, tab, (size_t)tn);
    la_sbuf md = {0};
    la_sbuf_printf(&md, "Cells: bits per byte (whole context, every document) / passkey accuracy / multi-key accuracy, "
                   "each accuracy with its Wilson 95 %% interval and n. C = %lld.\n\n%s", (long long)C, tab);
    free(tab);
    st = la_report_write(o->out_dir, "longeval.md", &md);
    free(md.s);
    LA_TRY(st);

    la_afile af;
    /* plots: data files, then one gnuplot script */
    snprintf(path, sizeof path, "%s/ppl_by_position.dat", o->out_dir);
    LA_TRY(la_afile_open(&af, path));
    int ll = o->n_lengths - 1;
    for (int m = 0; m < o->n_methods; m++) {
        const la_longeval_cell *c = &cells[m * o->n_lengths + ll];
        fprintf(af.f, "# %s at L = %lld: bucket centre, bits per token over the documents, its 95 %% bootstrap "
                      "interval over documents\n", o->methods[m], (long long)c->L);
        for (int b = 0; b < c->n_buckets; b++) {
            double a[LA_LONGEVAL_MAX_DOCS], z[LA_LONGEVAL_MAX_DOCS] = {0}, w[LA_LONGEVAL_MAX_DOCS], e, lo = NAN, hi = NAN;
            for (int d = 0; d < c->n_docs; d++) a[d] = c->doc_bits[d][b], w[d] = (double)c->doc_n[d][b];
            if (c->n_docs < 1 || la_stats_bootstrap_diff(a, z, w, c->n_docs, o->resamples > 0 ? o->resamples : 2000,
                                                         LE_BOOT_SEED, &e, &lo, &hi) != LA_OK)
                lo = hi = c->bucket_bits_token[b];
            fprintf(af.f, "%.1f %.5f %.5f %.5f\n", (b + 0.5) * (double)c->L / c->n_buckets, c->bucket_bits_token[b], lo, hi);
        }
        fprintf(af.f, "\n\n");
    }
    LA_TRY(la_afile_commit(&af));
    for (int m = 0; m < o->n_methods; m++) {
        snprintf(path, sizeof path, "%s/passkey_%d.dat", o->out_dir, m + 1);
        LA_TRY(la_afile_open(&af, path));
        for (int l = 0; l < o->n_lengths; l++)
            for (int d = 0; d < o->n_depths; d++)
                fprintf(af.f, "%d %d %.4f\n", l, d,
                        cells[m * o->n_lengths + l].n_docs > 0 && o->trials > 0
                            ? (double)cells[m * o->n_lengths + l].depth_hits[d] / (cells[m * o->n_lengths + l].n_docs * o->trials)
                            : 0.0);
        LA_TRY(la_afile_commit(&af));
    }
    /* retrieval accuracy by length with Wilson intervals: one block per method */
    snprintf(path, sizeof path, "%s/retrieval.dat", o->out_dir);
    LA_TRY(la_afile_open(&af, path));
    for (int m = 0; m < o->n_methods; m++) {
        fprintf(af.f, "# %s: length index (offset per method), passkey accuracy, Wilson 95 %% lo, hi, multi-key "
                      "accuracy, lo, hi\n", o->methods[m]);
        for (int l = 0; l < o->n_lengths; l++) {
            const la_longeval_cell *c = &cells[m * o->n_lengths + l];
            double a = NAN, al = NAN, ah = NAN, b = NAN, bl = NAN, bh = NAN;
            if (c->passkey_n) a = (double)c->passkey_hits / c->passkey_n, la_stats_wilson(c->passkey_hits, c->passkey_n, 1.96, &al, &ah);
            if (c->multikey_n) b = (double)c->multikey_hits / c->multikey_n, la_stats_wilson(c->multikey_hits, c->multikey_n, 1.96, &bl, &bh);
            fprintf(af.f, "%.3f %.4f %.4f %.4f %.4f %.4f %.4f\n", l + 0.3 * ((m + 0.5) / o->n_methods - 0.5), a, al, ah, b, bl, bh);
        }
        fprintf(af.f, "\n\n");
    }
    LA_TRY(la_afile_commit(&af));
    snprintf(path, sizeof path, "%s/plots.gp", o->out_dir);
    LA_TRY(la_afile_open(&af, path));
    FILE *f = af.f;
    fprintf(f, "set terminal pngcairo size 960,640\nset termoption noenhanced\nset key below\nset grid\n");
    fprintf(f, "set output 'ppl_by_position.png.tmp'\nset xlabel 'position (tokens)'\nset ylabel 'bits per token'\n"
               "set title 'perplexity by position at %gC (C = %lld)'\n", o->lengths[ll], (long long)C);
    fprintf(f, "set arrow 1 from %lld, graph 0 to %lld, graph 1 nohead dt 2\nplot ", (long long)C, (long long)C);
    for (int m = 0; m < o->n_methods; m++)
        fprintf(f, "%s'ppl_by_position.dat' index %d using 1:2:3:4 with yerrorlines lw 2 title '%s'", m ? ", " : "", m,
                o->methods[m]);
    fprintf(f, "\nunset arrow 1\nset output 'retrieval.png.tmp'\nset title 'passkey accuracy with Wilson 95%% intervals'\n"
               "set xlabel 'length'\nset ylabel 'accuracy'\nset yrange [-0.05:1.05]\nset xrange [-0.5:%g]\nset xtics (",
            o->n_lengths - 0.5);
    for (int l = 0; l < o->n_lengths; l++) fprintf(f, "%s\"%gC\" %d", l ? ", " : "", o->lengths[l], l);
    fprintf(f, ")\nplot ");
    for (int m = 0; m < o->n_methods; m++)
        fprintf(f, "%s'retrieval.dat' index %d using 1:2:3:4 with yerrorbars pt 7 lw 2 title '%s'", m ? ", " : "", m,
                o->methods[m]);
    fprintf(f, "\nset autoscale y\nset xtics autofreq\nunset key\nunset grid\nset palette defined (0 '#b2182b', 0.5 '#f7f7f7', 1 '#2166ac')\n"
               "set cbrange [0:1]\nset xlabel 'length'\nset ylabel 'needle depth'\nset xrange [-0.5:%g]\n"
               "set yrange [%g:-0.5]\nset xtics (", o->n_lengths - 0.5, o->n_depths - 0.5);
    for (int l = 0; l < o->n_lengths; l++) fprintf(f, "%s\"%gC\" %d", l ? ", " : "", o->lengths[l], l);
    fprintf(f, ")\nset ytics (");
    for (int d = 0; d < o->n_depths; d++) fprintf(f, "%s\"%g\" %d", d ? ", " : "", o->depths[d], d);
    fprintf(f, ")\n");
    for (int m = 0; m < o->n_methods; m++)
        fprintf(f, "set output 'passkey_%d.png.tmp'\nset title 'passkey accuracy: %s'\nplot 'passkey_%d.dat' using "
                   "1:2:(0.5):(0.5):3 with boxxyerror fs solid lc palette, '' using 1:2:(sprintf('%%.2f', $3)) "
                   "with labels\n",
                m + 1, o->methods[m], m + 1);
    fprintf(f, "unset output\n");
    LA_TRY(la_afile_commit(&af));
    return LA_OK;
}

/* ---- the cells on the grid runner (la_grid_run): method mi at length li is cell
 * mi * n_lengths + li, its cost L^2 (attention dominates at long L) ---- */
typedef struct {
    le_ctx *c;
    const la_longeval_opts *o;
    la_longeval_cell *cells;
    const la_grid *g;
    la_longeval_progress_fn fn;
    void *user;
    double t0, ts, run_s; /* the run's start, the cell's start, seconds spent running cells */
    int n_mine, n_done, cur;
    int keep_space; /* a token's bytes counted with LA_TOK_KEEP_SPACE differ (SentencePiece) */
} le_grid;

/* Progress inside a cell (after each document): the cell's share done, the elapsed time
 * and an ETA from the time per unit of cost (L^2) so far, this cell's part included. */
static void on_tick(void *user, double frac) {
    const le_grid *G = user;
    if (!G->fn || frac >= 1) return; /* the cell's own line follows at frac = 1 */
    const la_longeval_cell *cell = &G->cells[G->cur];
    double cell_s = la_now_s() - G->ts, work = G->g->done + frac * G->g->cost[G->cur];
    double eta = work > 0 ? la_grid_eta(G->run_s + cell_s, work, G->g->total) : 0;
    char note[1536];
    snprintf(note, sizeof note, "cell %d/%d (%s, L = %lld): %.0f%% done (elapsed %.0f s, ETA %.0f s)", G->n_done + 1,
             G->n_mine, cell->method_text, (long long)cell->L, 100 * frac, la_now_s() - G->t0, eta);
    la_longeval_progress p = {G->n_mine, G->n_done, NULL, la_now_s() - G->t0, eta, note};
    G->fn(G->user, &p);
}

static void cell_begin(void *user, int i, char *key, size_t n) {
    le_grid *G = user;
    la_longeval_cell *cell = &G->cells[i];
    const int mi = i / G->o->n_lengths, li = i % G->o->n_lengths;
    memset(cell, 0, sizeof *cell);
    cell->method = mi;
    cell->length = li;
    snprintf(cell->method_text, sizeof cell->method_text, "%s", G->o->methods[mi]);
    cell->L = (int64_t)llround(G->o->lengths[li] * (double)G->c->C);
    snprintf(key, n, "m%d_l%d", mi, li); /* cells/m<i>_l<j>.json */
}

/* kv_type and docs as this version stores them, from the option text (also what cells of
 * earlier versions stored: "" for no --kv-type): the resolved type's name ("f16",
 * "int8(group=8)"), and the folder's real path (a trailing '/' or another spelling of it
 * is the same folder) */
static void settings_norm(cJSON *s) {
    cJSON *k = cJSON_GetObjectItemCaseSensitive(s, "kv_type"), *d = cJSON_GetObjectItemCaseSensitive(s, "docs");
    la_kv_params kp = la_kv_params_default();
    kp.D = 0; /* the group was checked against the model's head size before any cell */
    char t[96], rp[PATH_MAX];
    if (cJSON_IsString(k) && (*k->valuestring ? la_kv_type_parse(k->valuestring, &kp)
                                              : la_kv_params_set_type(&kp, la_llama_default_kv_type(), 0)) == LA_OK) {
        kp.policy = LA_KV_FULL;
        la_kv_policy_format(&kp, t, sizeof t); /* "full", "full+f16", ... */
        cJSON_SetValuestring(k, t[4] == '+' ? t + 5 : "f32");
    }
    if (cJSON_IsString(d) && realpath(d->valuestring, rp)) cJSON_SetValuestring(d, rp);
}

/* The options that decide a cell's numbers besides its method and L (the model's file name
 * and size, the documents, depths, trials, distractors, buckets, chunk, streaming, seed, haystack, C and
 * the KV type), stored with each cell so that --resume refuses a cell computed under other
 * ones instead of mixing it into this run's tables. --no-share, --threads and --resamples
 * are left out: they do not change a cell. */
static cJSON *cell_settings(const le_grid *G) {
    const la_longeval_opts *o = G->o;
    const char *model = strrchr(o->model, '/') ? strrchr(o->model, '/') + 1 : o->model;
    struct stat sb;
    int saved_json = la_json_begin();
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "model", model);
    cJSON_AddNumberToObject(s, "model_bytes", stat(o->model, &sb) == 0 ? (double)sb.st_size : -1);
    cJSON_AddStringToObject(s, "docs", o->docs ? o->docs : "");
    cJSON_AddNumberToObject(s, "documents", o->n_docs);
    cJSON *d = cJSON_AddArrayToObject(s, "depths");
    for (int k = 0; k < o->n_depths; k++) la_json_push(d, cJSON_CreateNumber(o->depths[k]));
    cJSON_AddNumberToObject(s, "trials", o->trials);
    cJSON_AddNumberToObject(s, "distractors", o->distractors);
    cJSON_AddNumberToObject(s, "buckets", o->buckets);
    cJSON_AddNumberToObject(s, "chunk", o->chunk);
    cJSON_AddNumberToObject(s, "exact_stream", o->exact_stream);
    la_json_put(s, "seed", la_cells_u64(o->seed)); /* all 64 bits */
    cJSON_AddStringToObject(s, "haystack", o->filler ? "filler" : "text");
    cJSON_AddNumberToObject(s, "C", (double)G->c->C);
    cJSON_AddStringToObject(s, "kv_type", o->kv_type ? o->kv_type : "");
    /* bits per byte of a SentencePiece model count each piece's space since 2026-12-05 (eaa9d38):
     * its earlier cells lack this key and are refused; other vocabularies' counts did not change */
    if (G->keep_space) cJSON_AddStringToObject(s, "token_bytes", "keep-space");
    settings_norm(s);
    return la_json_end(saved_json, s);
}

static cJSON *cell_to_json(void *user, int i) {
    const le_grid *G = user;
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    cJSON *j = cell_json(G->o, &G->cells[i]);
    if (j) la_json_put(j, "settings", cell_settings(G));
    return la_json_end(saved_json, j);
}

static la_status cell_restore(void *user, int i, const cJSON *saved, const char *key) {
    le_grid *G = user;
    char path[4200];
    snprintf(path, sizeof path, "%s/cells/%s.json", G->o->out_dir, key);
    LA_TRY(cell_from_json(saved, path, G->o, &G->cells[i]));
    /* cells stored before the settings were (no "settings") are taken as they were, and so
     * is a setting stored only by later versions (model_bytes) */
    const cJSON *saved_settings = cJSON_GetObjectItemCaseSensitive(saved, "settings");
    if (!saved_settings) return LA_OK;
    cJSON *now = cell_settings(G), *was = cJSON_Duplicate(saved_settings, 1);
    if (!now || !was) {
        cJSON_Delete(now), cJSON_Delete(was);
        return la_fail(LA_ENOMEM, "--resume: out of memory");
    }
    settings_norm(was);
    la_status st = LA_OK;
    for (const cJSON *x = now->child; x && st == LA_OK; x = x->next) {
        const cJSON *y = cJSON_GetObjectItemCaseSensitive(was, x->string);
        if (y ? cJSON_Compare(x, y, 1) : !strcmp(x->string, "model_bytes")) continue;
        char *a = cJSON_PrintUnformatted(x), *b = y ? cJSON_PrintUnformatted(y) : NULL;
        st = la_fail(LA_EFORMAT, "--resume: %s was computed with %s = %s, this run has %s = %s; run with the same "
                     "options, or use another --out (or delete the cell)", path, x->string, b ? b : "(none)",
                     x->string, a ? a : "?");
        free(a);
        free(b);
    }
    cJSON_Delete(now);
    cJSON_Delete(was);
    return st;
}

static la_status cell_run(void *user, int i, const char *key) {
    le_grid *G = user;
    (void)key;
    la_longeval_cell *cell = &G->cells[i];
    G->cur = i;
    G->ts = la_now_s();
    G->c->tick = on_tick;
    G->c->tick_user = G;
    la_status st = le_cell_run(G->c, G->o, cell);
    G->c->tick = NULL;
    cell->seconds = la_now_s() - G->ts;
    G->run_s += cell->seconds;
    /* --seq-parallel: the ranks ran it together, and one that failed fails it on every rank */
    return G->g->collective ? la_dist_agree(st) : st;
}

static la_status cell_done(void *user, int i, const char *key, la_status st, int restored) {
    le_grid *G = user;
    (void)key, (void)restored;
    G->n_done++;
    if (st == LA_OK && G->fn) {
        const double done = G->g->done;
        double eta = done > 0 && G->run_s > 0 ? la_grid_eta(G->run_s, done, G->g->total) : 0;
        la_longeval_progress p = {G->n_mine, G->n_done, &G->cells[i], la_now_s() - G->t0, eta, NULL};
        G->fn(G->user, &p);
    }
    return st;
}

la_status la_longeval_run(const la_longeval_opts *oin, la_longeval_progress_fn fn, void *user,
                          la_longeval_cell *cells_out) {
    if (!oin || !oin->model) return la_fail(LA_EINVAL, "la_longeval_run: no model (--model FILE.gguf)");
    la_longeval_opts o = *oin;
    if (o.n_methods < 1 || o.n_lengths < 1 || o.n_methods > LA_LONGEVAL_MAX || o.n_lengths > LA_LONGEVAL_MAX || o.n_depths > LA_LONGEVAL_MAX ||
        o.n_depths < 1 || o.trials < 0 || o.buckets < 1 || o.buckets > LA_LONGEVAL_MAX || o.chunk < 1)
        return la_fail(LA_EINVAL, "longeval: bad options (methods/lengths/depths 1..%d, trials >= 0, buckets "
                       "1..%d, chunk >= 1)", LA_LONGEVAL_MAX, LA_LONGEVAL_MAX);
    if (o.n_docs < 0 || o.n_docs > LA_LONGEVAL_MAX_DOCS || (o.resamples != 0 && o.resamples < 1000))
        return la_fail(LA_EINVAL, "longeval: documents must be in [0, %d] (0: all) and resamples >= 1000 (SPEC 10)",
                       LA_LONGEVAL_MAX_DOCS);
    if ((int64_t)(o.n_docs ? o.n_docs : LA_LONGEVAL_MAX_DOCS) * o.n_depths * o.trials > LA_LONGEVAL_MAX_EX)
        return la_fail(LA_EINVAL, "longeval: documents x depths x trials = %d x %d x %d exceeds %d examples per cell; "
                       "use fewer trials or depths", o.n_docs ? o.n_docs : LA_LONGEVAL_MAX_DOCS, o.n_depths, o.trials,
                       LA_LONGEVAL_MAX_EX);
    for (int d = 0; d < o.n_depths; d++)
        if (!(o.depths[d] >= 0 && o.depths[d] <= 1))
            return la_fail(LA_EINVAL, "longeval: depth %g is outside [0, 1]", o.depths[d]);
    if (o.threads > 0) {
        omp_set_num_threads(o.threads);
        openblas_set_num_threads(o.threads);
    }
    le_ctx c;
    memset(&c, 0, sizeof c);
    la_llama_params lp = la_llama_params_default();
    /* no early return from here: under mpirun a rank that fails meets the others below */
    la_status st = la_llama_open(o.model, &lp, &c.m);
    if (st == LA_OK) st = la_llama_tokenizer(c.m, &c.tok);
    if (st == LA_OK) {
        const la_llama_config *cfg = la_llama_get_config(c.m);
        c.C = o.train_ctx > 0 ? o.train_ctx : cfg->n_ctx_train;
        c.V = cfg->n_vocab;
        /* every id the tokenizer can give must have a logit: the perplexity reads row[next id] */
        if (la_tokenizer_n_vocab(c.tok) > c.V)
            st = la_fail(LA_EFORMAT, "longeval: %s: the tokenizer has %d tokens but the model has %d logits, so a "
                         "token could not be scored; use a file whose tokenizer matches its model", o.model,
                         la_tokenizer_n_vocab(c.tok), c.V);
    }
    int nc = o.n_methods * o.n_lengths;
    la_longeval_cell *cells = la_calloc((size_t)nc, sizeof *cells);
    c.logits = la_malloc(sizeof(float) * (size_t)o.chunk * (size_t)c.V);
    if (st == LA_OK && (!cells || !c.logits)) st = la_fail(LA_ENOMEM, "longeval: out of memory");
    if (st == LA_OK && c.C < 2) st = la_fail(LA_EFORMAT, "longeval: %s gives no trained context length", o.model);
    /* every method must set up and run a token at every length, with its KV type, before
     * anything runs or is deleted (LA_ESPEC: a bad option, the CLI's exit 2) */
    int64_t maxL = 0;
    for (int l = 0; st == LA_OK && l < o.n_lengths; l++) {
        int64_t L = (int64_t)llround(o.lengths[l] * (double)c.C);
        if (L < 64) st = la_fail(LA_ESPEC, "--lengths: %g x C = %lld tokens (C = %lld) is too short; a length "
                                 "must give >= 64 tokens", o.lengths[l], (long long)L, (long long)c.C);
        if (L > maxL) maxL = L;
        for (int m = 0; st == LA_OK && m < o.n_methods; m++) {
            la_kv_params kv;
            int hk;
            char pr[96];
            st = le_cell_check(&c, &o, m, L, &kv, &hk, pr);
            if (st == LA_OK && o.seq_parallel && (*pr || (hk && kv.policy != LA_KV_FULL)))
                st = la_fail(LA_EUNSUPPORTED, "longeval --seq-parallel: method '%s' %s; the prefill over the ranks "
                             "keeps every token with the model's own attention: drop the method or --seq-parallel",
                             o.methods[m], *pr ? "has its own position regimes" : "evicts from its KV cache");
        }
    }
    /* the long documents (scripts/prepare_longdocs.sh) unless they were never prepared:
     * then the pydoc validation documents, said in the progress note and results.json */
    struct stat dsb;
    if (st == LA_OK && !strcmp(o.docs, LE_DOCS_DEFAULT) && stat(o.docs, &dsb) != 0) o.docs = LE_DOCS_FALLBACK;
    /* one stream per document (the first o.n_docs in name order; each from its start, long
     * enough for the longest cell and, with several trials, for seeded haystack offsets) */
    if (st == LA_OK) {
        la_docs dd = {0};
        st = la_docs_load(o.docs, &dd);
        c.n_folder_docs = dd.n_docs;
        int want = o.n_docs > 0 ? o.n_docs : c.n_folder_docs;
        if (want > LA_LONGEVAL_MAX_DOCS) want = LA_LONGEVAL_MAX_DOCS;
        if (st == LA_OK && want > c.n_folder_docs) want = c.n_folder_docs; /* fewer in the folder: all of them */
        if (st == LA_OK && want < 1) st = la_fail(LA_EINVAL, "longeval: no documents in '%s'", o.docs);
        int64_t need = (o.trials > 1 ? 2 * maxL : maxL) + 1;
        for (int k = 0; st == LA_OK && k < want; k++) {
            st = le_stream_build(c.tok, &dd, o.docs, need, k, &c.docs[k]);
            if (st == LA_OK) c.n_docs = k + 1;
        }
        la_docs_free(&dd);
    }
    if (st == LA_OK) {
        c.stream = c.docs[0];
        c.hay = c.stream.tokens;
        c.n_hay = c.stream.n;
    }
    if (st == LA_OK && o.filler) { /* Mohtashami & Jaggi 2023: the passkey's original haystack */
        static const char F[] = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
        la_token_buf fb = {0};
        while (st == LA_OK && fb.n < 2 * maxL + 1) st = la_tokenizer_encode(c.tok, F, strlen(F), 0, &fb);
        c.filler_ids = fb.ids;
        c.hay = fb.ids;
        c.n_hay = fb.n;
    }
    /* every length must hold the needles and the question: fail now, not after hours */
    for (int l = 0; st == LA_OK && o.trials > 0 && l < o.n_lengths; l++) {
        int64_t L = (int64_t)llround(o.lengths[l] * (double)c.C);
        int32_t *ex = la_malloc(sizeof(int32_t) * (size_t)L);
        char ans[16];
        int64_t at;
        if (!ex) st = la_fail(LA_ENOMEM, "longeval: out of memory");
        for (int kind = 0; st == LA_OK && kind < (o.distractors < 0 ? 1 : 2); kind++)
            st = la_longeval_example(c.tok, c.hay, c.n_hay, kind, L, 0.5, o.distractors, o.seed, ex, ans,
                                     &at);
        free(ex);
    }
    if (st == LA_OK && fn) {
        char note[256];
        snprintf(note, sizeof note, "C = %lld; %d cells; %d documents of %s (perplexity: each one's first L tokens; "
                 "retrieval: %d examples per cell, %s)", (long long)c.C, nc, c.n_docs, o.docs,
                 o.trials > 0 ? c.n_docs * o.n_depths * o.trials * (o.distractors < 0 ? 1 : 2) : 0,
                 o.seq_parallel ? "each prefilled from its start in one pass over the ranks"
                 : o.no_share   ? "each prefilled from its start"
                                : "continued from forks of a shared prefix");
        la_longeval_progress p = {nc, 0, NULL, 0, 0, note};
        fn(user, &p);
    }
    /* under mpirun every rank has done the above (each loads the model); one that could
     * not stops them all, named. The cells go to ranks by estimated cost (the ETA's L^2),
     * each rank runs and stores its own, rank 0 gathers them and writes the files. With
     * --seq-parallel the ranks are one unit that runs every cell together (one sequence
     * over the ranks): the grid agrees each load and store over them, rank 0 writes. */
    const int N = la_dist_size(), me = la_dist_rank(), sp = o.seq_parallel;
    st = la_dist_agree(st);
    double *cost = st == LA_OK ? la_calloc((size_t)nc, sizeof *cost) : NULL;
    if (st == LA_OK && !cost) st = la_fail(LA_ENOMEM, "longeval: out of memory");
    for (int i = 0; st == LA_OK && i < nc; i++) {
        int64_t L = (int64_t)llround(o.lengths[i % o.n_lengths] * (double)c.C);
        cost[i] = (double)L * L; /* attention dominates at long L: cost ~ L^2 per prefill */
    }
    la_grid g = {0};
    if (st == LA_OK) st = la_grid_init(&g, "longeval", cost, nc, sp ? 1 : N, sp ? 0 : me);
    free(cost);
    /* no fingerprint: each stored cell must name this run's method, L and --seq-parallel */
    la_cells store;
    if (st == LA_OK && o.out_dir) st = la_grid_open(&store, o.out_dir, "longeval", NULL, o.resume);
    le_grid G = {.c = &c, .o = &o, .cells = cells, .g = &g, .fn = fn, .user = user, .t0 = la_now_s()};
    for (int i = 0; st == LA_OK && i < nc; i++) G.n_mine += g.owner[i] == g.unit;
    for (int32_t v = 0; st == LA_OK && !G.keep_space && v < la_tokenizer_n_vocab(c.tok); v++) {
        size_t a = 0, b = 0;
        char *t0 = NULL, *t1 = NULL;
        if (la_tokenizer_decode(c.tok, &v, 1, 0, &t0, &a) == LA_OK &&
            la_tokenizer_decode(c.tok, &v, 1, LA_TOK_KEEP_SPACE, &t1, &b) == LA_OK)
            G.keep_space = a != b;
        free(t0);
        free(t1);
    }
    if (st == LA_OK) {
        g.store = o.out_dir ? &store : NULL;
        g.collective = sp;
        g.test_point = "longeval-cell";
        const la_grid_fns fns = {.begin = cell_begin, .restore = cell_restore, .run = cell_run,
                                 .to_json = cell_to_json, .done = cell_done};
        st = la_grid_run(&g, &fns, &G);
    }
    if (N > 1) { /* a rank that failed stops them all here, named; rank 0 collects */
        st = la_dist_agree(st);
        if (st == LA_OK) st = la_grid_gather(cells, sizeof *cells, g.owner, nc, 1, "longeval");
    }
    la_grid_free(&g);
    if (st == LA_OK && o.out_dir && me == 0) st = write_outputs(&o, cells, c.C, &c.stream);
    if (N > 1) st = la_dist_agree(st); /* rank 0's write status is every rank's */
    if (st == LA_OK && o.out_dir && me == 0) {
        /* gnuplot draws into *.png.tmp: each finished PNG is moved into place (atomic) */
        char names[LA_LONGEVAL_MAX + 2][32] = {"retrieval.png", "ppl_by_position.png"};
        const char *pngs[LA_LONGEVAL_MAX + 2] = {names[0], names[1]};
        for (int m = 0; m < o.n_methods; m++) {
            snprintf(names[m + 2], sizeof names[0], "passkey_%d.png", m + 1);
            pngs[m + 2] = names[m + 2];
        }
        int rc = la_report_plot(NULL, o.out_dir, "plots.gp", "gnuplot.log", pngs, o.n_methods + 2, NULL, NULL, 0);
        if (rc != 0 && fn) {
            char note[256];
            snprintf(note, sizeof note, "gnuplot exited %d: no PNGs (see %s/gnuplot.log; plots.gp redraws them)", rc,
                     o.out_dir);
            la_longeval_progress p = {nc, nc, NULL, la_now_s() - G.t0, 0, note};
            fn(user, &p);
        }
    }
    if (st == LA_OK && cells_out) memcpy(cells_out, cells, sizeof *cells * (size_t)nc);
    free(cells);
    free(c.logits);
    for (int k = 0; k < c.n_docs; k++) le_stream_free(&c.docs[k]);
    free(c.filler_ids);
    la_tokenizer_free(c.tok);
    la_llama_free(c.m);
    return st;
}
