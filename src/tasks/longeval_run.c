/* longeval_run.c -- the long-context evaluation runner (issue #15): study file, cells in
 * order with progress and ETA, one atomically written file per finished cell (--resume
 * reads them back), results.json, longeval.csv, longeval.md and gnuplot PNGs. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/dist.h"
#include "core/internal.h"
#include "io/gnuplot.h"
#include "tasks/cells.h"
#include "tasks/longeval_internal.h"

void openblas_set_num_threads(int);

/* The default (also studies/longeval.json): the smallest table that shows the effects --
 * the model within C and at 2C, YaRN at 2C, StreamingLLM sinks -- at a cost of 9 prefills
 * of C/2 and 9 of 2C tokens, 3 of them streamed through the sinks cache (README
 * "Long-context evaluation", cost). The full
 * method set is studies/longeval-full.json. */
static const char *const DEFAULT_METHODS[] = {
    "as-trained",
    "yarn({s},{C})",
    "as-trained | sinks(4,2044)",
};
static const double DEFAULT_LENGTHS[] = {0.5, 2};

la_longeval_opts la_longeval_opts_default(void) {
    la_longeval_opts o;
    memset(&o, 0, sizeof o);
    o.docs = LE_DOCS_DEFAULT;
    o.n_depths = 2;
    o.depths[0] = 0.25, o.depths[1] = 0.75;
    o.trials = 1;
    o.distractors = -1;
    o.buckets = 8;
    o.chunk = 512;
    o.seed = 1;
    o.n_methods = (int)(sizeof DEFAULT_METHODS / sizeof DEFAULT_METHODS[0]);
    for (int i = 0; i < o.n_methods; i++) o.methods[i] = DEFAULT_METHODS[i];
    o.n_lengths = (int)(sizeof DEFAULT_LENGTHS / sizeof DEFAULT_LENGTHS[0]);
    memcpy(o.lengths, DEFAULT_LENGTHS, sizeof DEFAULT_LENGTHS);
    return o;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *slurp(const char *path, la_status *st) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        *st = la_fail(LA_EIO, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = la_malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        fclose(f);
        *st = la_fail(LA_EIO, "cannot read '%s'", path);
        return NULL;
    }
    b[n] = '\0';
    fclose(f);
    *st = LA_OK;
    return b;
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
    la_status st;
    char *text = slurp(path, &st);
    if (!text) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return la_fail(LA_EFORMAT, "%s: not a JSON object (bad JSON?)", path);
    }
    static const char *const known[] = {"methods", "lengths", "depths", "trials", "distractors", "buckets",
                                        "chunk", "seed", "docs", "comment", "haystack", "kv_type"};
    const cJSON *e;
    st = LA_OK;
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
    int seed = (int)o->seed;
    if (st == LA_OK) st = int_key(root, "seed", path, &seed, 0, 1 << 30);
    o->seed = (uint64_t)seed;
    if (st == LA_OK && (v = cJSON_GetObjectItemCaseSensitive(root, "docs"))) {
        if (!cJSON_IsString(v)) st = la_fail(LA_EFORMAT, "%s: \"docs\" must be a folder name", path);
        else o->docs = KEEP(v->valuestring);
    }
    if (st == LA_OK && (v = cJSON_GetObjectItemCaseSensitive(root, "kv_type"))) {
        la_kv_params kp = la_kv_params_default();
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
    cJSON *bt = cJSON_AddArrayToObject(j, "bucket_bits_per_token");
    cJSON *bb = cJSON_AddArrayToObject(j, "bucket_bits_per_byte");
    for (int b = 0; b < c->n_buckets; b++) {
        la_json_push(bt, cJSON_CreateNumber(c->bucket_bits_token[b]));
        la_json_push(bb, cJSON_CreateNumber(c->bucket_bits_byte[b]));
    }
    cJSON_AddNumberToObject(j, "passkey_hits", c->passkey_hits);
    cJSON_AddNumberToObject(j, "passkey_n", c->passkey_n);
    cJSON_AddNumberToObject(j, "multikey_hits", c->multikey_hits);
    cJSON_AddNumberToObject(j, "multikey_n", c->multikey_n);
    cJSON *dh = cJSON_AddArrayToObject(j, "passkey_hits_by_depth");
    cJSON *dm = cJSON_AddArrayToObject(j, "multikey_hits_by_depth");
    for (int d = 0; d < o->n_depths; d++) {
        la_json_push(dh, cJSON_CreateNumber(c->depth_hits[d]));
        la_json_push(dm, cJSON_CreateNumber(c->depth_mk_hits[d]));
    }
    cJSON_AddNumberToObject(j, "seconds", c->seconds);
    return la_json_end(saved_json, j);
}

static double jnum(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* 1 if the file exists and describes the same cell (read into *c), 0 if absent. */
static la_status cell_read(const char *path, const la_longeval_opts *o, la_longeval_cell *c, int *found) {
    *found = 0;
    struct stat sb;
    if (stat(path, &sb) != 0) return LA_OK;
    la_status st;
    char *text = slurp(path, &st);
    if (!text) return st;
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "method");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(j, "spec");
    if (!cJSON_IsString(m) || !cJSON_IsString(sp) || strcmp(m->valuestring, c->method_text) ||
        jnum(j, "L") != (double)c->L) {
        cJSON_Delete(j);
        return la_fail(LA_EFORMAT, "--resume: %s is not this run's cell (method '%s', L = %lld); use another --out "
                       "or delete it", path, c->method_text, (long long)c->L);
    }
    snprintf(c->spec, sizeof c->spec, "%s", sp->valuestring);
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(j, "kv");
    if (cJSON_IsString(kv)) snprintf(c->kv, sizeof c->kv, "%s", kv->valuestring);
    c->ppl_bits_token = jnum(j, "bits_per_token");
    c->ppl_bits_byte = jnum(j, "bits_per_byte");
    const cJSON *bt = cJSON_GetObjectItemCaseSensitive(j, "bucket_bits_per_token");
    const cJSON *bb = cJSON_GetObjectItemCaseSensitive(j, "bucket_bits_per_byte");
    c->n_buckets = cJSON_GetArraySize(bt) < LA_LONGEVAL_MAX ? cJSON_GetArraySize(bt) : LA_LONGEVAL_MAX;
    for (int b = 0; b < c->n_buckets; b++) {
        const cJSON *x = cJSON_GetArrayItem(bt, b), *y = cJSON_GetArrayItem(bb, b);
        c->bucket_bits_token[b] = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        c->bucket_bits_byte[b] = cJSON_IsNumber(y) ? y->valuedouble : NAN;
    }
    c->passkey_hits = (int)jnum(j, "passkey_hits");
    c->passkey_n = (int)jnum(j, "passkey_n");
    c->multikey_hits = (int)jnum(j, "multikey_hits");
    c->multikey_n = (int)jnum(j, "multikey_n");
    const cJSON *dh = cJSON_GetObjectItemCaseSensitive(j, "passkey_hits_by_depth");
    const cJSON *dm = cJSON_GetObjectItemCaseSensitive(j, "multikey_hits_by_depth");
    for (int d = 0; d < o->n_depths; d++) {
        const cJSON *x = cJSON_GetArrayItem(dh, d), *y = cJSON_GetArrayItem(dm, d);
        c->depth_hits[d] = cJSON_IsNumber(x) ? (int)x->valuedouble : 0;
        c->depth_mk_hits[d] = cJSON_IsNumber(y) ? (int)y->valuedouble : 0;
    }
    c->seconds = jnum(j, "seconds");
    c->resumed = 1;
    cJSON_Delete(j);
    *found = 1;
    return LA_OK;
}

/* ---- report ---- */

static void acc_text(int hits, int n, char *buf, size_t sz) {
    if (n == 0) snprintf(buf, sz, "-");
    else snprintf(buf, sz, "%.2f", (double)hits / n);
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
        for (const char *q = o->methods[m]; *q; q++) { /* a '|' inside a cell must be escaped in markdown */
            if (*q == '|') PUT("\\|");
            else PUT("%c", *q);
        }
        PUT("` |");
        for (int l = 0; l < o->n_lengths; l++) {
            const la_longeval_cell *c = &cells[m * o->n_lengths + l];
            if (c->L == 0) {
                PUT(" (not run) |");
                continue;
            }
            char a[16], b[16];
            acc_text(c->passkey_hits, c->passkey_n, a, sizeof a);
            acc_text(c->multikey_hits, c->multikey_n, b, sizeof b);
            PUT(" %.3f / %s / %s |", c->ppl_bits_byte, a, b);
        }
        PUT("\n");
    }
#undef PUT
    return (int)len;
}

static la_status write_outputs(const la_longeval_opts *o, const la_longeval_cell *cells, int64_t C,
                               const le_stream *s, double wall) {
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
    cJSON *dp = cJSON_AddArrayToObject(root, "depths");
    for (int d = 0; d < o->n_depths; d++) la_json_push(dp, cJSON_CreateNumber(o->depths[d]));
    cJSON *arr = cJSON_AddArrayToObject(root, "cells");
    for (int i = 0; i < nc; i++) la_json_push(arr, cell_json(o, &cells[i]));
    root = la_json_end(saved_json, root);
    snprintf(path, sizeof path, "%s/results.json", o->out_dir);
    la_status st = root ? la_json_write_atomic(path, root) : la_fail(LA_ENOMEM, "longeval: out of memory building %s", path);
    cJSON_Delete(root);
    LA_TRY(st);
    (void)wall;

    la_afile af;
    snprintf(path, sizeof path, "%s/longeval.csv", o->out_dir);
    LA_TRY(la_afile_open(&af, path));
    fprintf(af.f, "method,spec,kv,length_x_C,L,bits_per_token,bits_per_byte,passkey_hits,passkey_n,multikey_hits,"
                  "multikey_n,seconds\n");
    for (int i = 0; i < nc; i++) {
        const la_longeval_cell *c = &cells[i];
        fprintf(af.f, "\"%s\",\"%s\",\"%s\",%g,%lld,%.6f,%.6f,%d,%d,%d,%d,%.1f\n", c->method_text, c->spec, c->kv,
                o->lengths[c->length], (long long)c->L, c->ppl_bits_token, c->ppl_bits_byte, c->passkey_hits,
                c->passkey_n, c->multikey_hits, c->multikey_n, c->seconds);
    }
    LA_TRY(la_afile_commit(&af));

    size_t tn = 256 + (size_t)nc * 96 + (size_t)o->n_methods * 300;
    char *tab = la_malloc(tn);
    if (!tab) return la_fail(LA_ENOMEM, "longeval: out of memory");
    la_longeval_table(o, cells, C, tab, tn);
    snprintf(path, sizeof path, "%s/longeval.md", o->out_dir);
    st = la_afile_open(&af, path);
    if (st == LA_OK) {
        fprintf(af.f, "Cells: bits per byte (whole context) / passkey accuracy / multi-key accuracy. C = %lld.\n\n%s",
                (long long)C, tab);
        st = la_afile_commit(&af);
    }
    free(tab);
    LA_TRY(st);

    /* plots: data files, then one gnuplot script */
    snprintf(path, sizeof path, "%s/ppl_by_position.dat", o->out_dir);
    LA_TRY(la_afile_open(&af, path));
    int ll = o->n_lengths - 1;
    for (int m = 0; m < o->n_methods; m++) {
        const la_longeval_cell *c = &cells[m * o->n_lengths + ll];
        fprintf(af.f, "# %s at L = %lld: bucket centre, bits per token\n", o->methods[m], (long long)c->L);
        for (int b = 0; b < c->n_buckets; b++)
            fprintf(af.f, "%.1f %.5f\n", (b + 0.5) * (double)c->L / c->n_buckets, c->bucket_bits_token[b]);
        fprintf(af.f, "\n\n");
    }
    LA_TRY(la_afile_commit(&af));
    for (int m = 0; m < o->n_methods; m++) {
        snprintf(path, sizeof path, "%s/passkey_%d.dat", o->out_dir, m + 1);
        LA_TRY(la_afile_open(&af, path));
        for (int l = 0; l < o->n_lengths; l++)
            for (int d = 0; d < o->n_depths; d++)
                fprintf(af.f, "%d %d %.4f\n", l, d,
                        o->trials ? (double)cells[m * o->n_lengths + l].depth_hits[d] / o->trials : 0.0);
        LA_TRY(la_afile_commit(&af));
    }
    snprintf(path, sizeof path, "%s/plots.gp", o->out_dir);
    LA_TRY(la_afile_open(&af, path));
    FILE *f = af.f;
    fprintf(f, "set terminal pngcairo size 960,640\nset termoption noenhanced\nset key below\nset grid\n");
    fprintf(f, "set output 'ppl_by_position.png.tmp'\nset xlabel 'position (tokens)'\nset ylabel 'bits per token'\n"
               "set title 'perplexity by position at %gC (C = %lld)'\n", o->lengths[ll], (long long)C);
    fprintf(f, "set arrow 1 from %lld, graph 0 to %lld, graph 1 nohead dt 2\nplot ", (long long)C, (long long)C);
    for (int m = 0; m < o->n_methods; m++)
        fprintf(f, "%s'ppl_by_position.dat' index %d using 1:2 with linespoints lw 2 title '%s'", m ? ", " : "", m,
                o->methods[m]);
    fprintf(f, "\nunset arrow 1\nunset key\nunset grid\nset palette defined (0 '#b2182b', 0.5 '#f7f7f7', 1 '#2166ac')\n"
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

/* ---- the run ---- */

/* Collective: the cells each rank ran (owner) to rank 0, then the whole table to every
 * rank (cells are plain data). */
static la_status share_cells(la_longeval_cell *cells, const int *owner, int nc) {
    int N = la_dist_size(), me = la_dist_rank(), mine = 0;
    for (int i = 0; i < nc; i++) mine += owner[i] == me;
    size_t *counts = la_calloc((size_t)N, sizeof *counts);
    la_longeval_cell *send = la_malloc((size_t)(mine ? mine : 1) * sizeof *send);
    la_longeval_cell *recv = me == 0 ? la_malloc((size_t)nc * sizeof *recv) : NULL;
    la_status st = counts && send && (me != 0 || recv) ? LA_OK : la_fail(LA_ENOMEM, "longeval: out of memory (gather)");
    st = la_dist_agree(st);
    if (st == LA_OK) {
        for (int i = 0, k = 0; i < nc; i++) {
            counts[owner[i]] += sizeof *send;
            if (owner[i] == me) send[k++] = cells[i];
        }
        st = la_dist_agree(la_dist_gatherv_bytes(send, recv, counts, 0));
    }
    if (st == LA_OK && me == 0) { /* rank r's cells arrive in cell order, ranks in order */
        size_t k = 0;
        for (int r = 0; r < N; r++)
            for (int i = 0; i < nc; i++)
                if (owner[i] == r) cells[i] = recv[k++];
    }
    if (st == LA_OK) st = la_dist_agree(la_dist_bcast(cells, (size_t)nc * sizeof *cells, 0));
    free(counts);
    free(send);
    free(recv);
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
    }
    int nc = o.n_methods * o.n_lengths;
    la_longeval_cell *cells = la_calloc((size_t)nc, sizeof *cells);
    c.logits = la_malloc(sizeof(float) * (size_t)o.chunk * (size_t)c.V);
    if (st == LA_OK && (!cells || !c.logits)) st = la_fail(LA_ENOMEM, "longeval: out of memory");
    if (st == LA_OK && c.C < 2) st = la_fail(LA_EFORMAT, "longeval: %s gives no trained context length", o.model);
    /* every method must parse at every length before anything runs */
    int64_t maxL = 0;
    for (int l = 0; st == LA_OK && l < o.n_lengths; l++) {
        int64_t L = (int64_t)llround(o.lengths[l] * (double)c.C);
        if (L < 64) st = la_fail(LA_EINVAL, "longeval: length %gC = %lld tokens is too short (>= 64)", o.lengths[l],
                                 (long long)L);
        if (L > maxL) maxL = L;
        for (int m = 0; st == LA_OK && m < o.n_methods; m++) {
            la_spec sp;
            la_kv_params kv;
            int hk;
            st = le_method_parse(c.m, o.methods[m], c.C, L, &sp, &kv, &hk);
        }
    }
    /* the long documents (scripts/prepare_longdocs.sh) unless they were never prepared:
     * then the pydoc validation documents, said in the progress note and results.json */
    struct stat dsb;
    if (st == LA_OK && !strcmp(o.docs, LE_DOCS_DEFAULT) && stat(o.docs, &dsb) != 0) o.docs = LE_DOCS_FALLBACK;
    if (st == LA_OK) st = le_stream_build(c.tok, o.docs, maxL + 1, o.seed, &c.stream);
    if (st == LA_OK) {
        c.hay = c.stream.tokens;
        c.n_hay = c.stream.n;
    }
    if (st == LA_OK && o.filler) { /* Mohtashami & Jaggi 2023: the passkey's original haystack */
        static const char F[] = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
        la_token_buf fb = {0};
        while (st == LA_OK && fb.n < maxL + 1) st = la_tokenizer_encode(c.tok, F, strlen(F), 0, &fb);
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
    char cdir[4096];
    if (st == LA_OK && o.out_dir) {
        mkdir(o.out_dir, 0777);
        snprintf(cdir, sizeof cdir, "%s/cells", o.out_dir);
        mkdir(cdir, 0777);
        struct stat sb;
        if (stat(cdir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            st = la_fail(LA_EIO, "longeval: cannot create the folder '%s'", cdir);
    }
    if (st == LA_OK && fn) {
        char note[256];
        snprintf(note, sizeof note, "C = %lld; %d cells; text stream %lld tokens (%lld bytes, %d documents from %s)",
                 (long long)c.C, nc, (long long)c.stream.n, (long long)c.stream.text_bytes, c.stream.n_docs_used,
                 o.docs);
        la_longeval_progress p = {nc, 0, NULL, 0, 0, note};
        fn(user, &p);
    }
    /* under mpirun every rank has done the above (each loads the model); one that could
     * not stops them all, named. Cells go to ranks by estimated cost (la_dist_assign, the
     * ETA's L^2), each rank runs and saves its own, rank 0 gathers and writes the files */
    const int N = la_dist_size(), me = la_dist_rank();
    st = la_dist_agree(st);
    int *owner = st == LA_OK ? la_calloc((size_t)nc, sizeof *owner) : NULL;
    double *cost = st == LA_OK ? la_calloc((size_t)nc, sizeof *cost) : NULL;
    if (st == LA_OK && (!owner || !cost)) st = la_fail(LA_ENOMEM, "longeval: out of memory");
    double t0 = now_s(), work_tokens_done = 0, work_tokens_all = 0, run_s = 0;
    for (int i = 0; st == LA_OK && i < nc; i++) {
        int64_t L = (int64_t)llround(o.lengths[i % o.n_lengths] * (double)c.C);
        cost[i] = (double)L * L; /* attention dominates at long L: cost ~ L^2 per prefill */
    }
    if (st == LA_OK) la_dist_assign(cost, nc, N, owner);
    for (int i = 0; st == LA_OK && i < nc; i++)
        if (owner[i] == me) work_tokens_all += cost[i];
    int n_mine = 0, n_done = 0;
    for (int i = 0; st == LA_OK && i < nc; i++) n_mine += owner[i] == me;
    for (int i = 0; st == LA_OK && i < nc; i++) {
        if (owner[i] != me) continue;
        int mi = i / o.n_lengths, li = i % o.n_lengths;
        la_longeval_cell *cell = &cells[i];
        char path[4200];
        int found = 0;
        if (o.out_dir) snprintf(path, sizeof path, "%s/m%d_l%d.json", cdir, mi, li);
        if (o.resume && o.out_dir) {
            memset(cell, 0, sizeof *cell);
            cell->method = mi;
            cell->length = li;
            snprintf(cell->method_text, sizeof cell->method_text, "%s", o.methods[mi]);
            cell->L = (int64_t)llround(o.lengths[li] * (double)c.C);
            st = cell_read(path, &o, cell, &found);
        }
        if (st == LA_OK && !found) {
            double ts = now_s();
            st = le_cell_run(&c, &o, mi, li, cell);
            cell->seconds = now_s() - ts;
            run_s += cell->seconds;
            if (st == LA_OK && o.out_dir) {
                cJSON *j = cell_json(&o, cell);
                st = la_json_write_atomic(path, j);
                cJSON_Delete(j);
            }
        }
        double Lc = (double)cell->L;
        work_tokens_done += Lc * Lc;
        n_done++;
        if (st == LA_OK && fn) {
            double el = now_s() - t0;
            double eta = work_tokens_done > 0 && run_s > 0 ? run_s / work_tokens_done * (work_tokens_all - work_tokens_done)
                                                           : 0;
            la_longeval_progress p = {n_mine, n_done, cell, el, eta, NULL};
            fn(user, &p);
        }
    }
    free(cost);
    if (N > 1) { /* a rank that failed stops them all here, named; rank 0 collects */
        st = la_dist_agree(st);
        if (st == LA_OK) st = share_cells(cells, owner, nc);
    }
    free(owner);
    if (st == LA_OK && o.out_dir && me == 0) st = write_outputs(&o, cells, c.C, &c.stream, now_s() - t0);
    if (N > 1) st = la_dist_agree(st); /* rank 0's write status is every rank's */
    if (st == LA_OK && o.out_dir && me == 0) {
        char dir_abs[4096];
        snprintf(dir_abs, sizeof dir_abs, "%s", o.out_dir);
        int rc = la_gnuplot_run(NULL, dir_abs, "plots.gp", "gnuplot.log");
        /* gnuplot drew into *.png.tmp: move each finished PNG into place (atomic) */
        for (int i = 0; i <= o.n_methods; i++) {
            char tmp[4300], fin[4200];
            if (i == 0) snprintf(fin, sizeof fin, "%s/ppl_by_position.png", o.out_dir);
            else snprintf(fin, sizeof fin, "%s/passkey_%d.png", o.out_dir, i);
            snprintf(tmp, sizeof tmp, "%s.tmp", fin);
            if (rc == 0) rename(tmp, fin);
            else unlink(tmp);
        }
        if (rc != 0 && fn) {
            char note[256];
            snprintf(note, sizeof note, "gnuplot exited %d: no PNGs (see %s/gnuplot.log; plots.gp redraws them)", rc,
                     o.out_dir);
            la_longeval_progress p = {nc, nc, NULL, now_s() - t0, 0, note};
            fn(user, &p);
        }
    }
    if (st == LA_OK && cells_out) memcpy(cells_out, cells, sizeof *cells * (size_t)nc);
    free(cells);
    free(c.logits);
    le_stream_free(&c.stream);
    free(c.filler_ids);
    la_tokenizer_free(c.tok);
    la_llama_free(c.m);
    return st;
}
