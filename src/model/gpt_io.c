/* gpt_io.c -- model weights in safetensors: config and attention spec in "__metadata__"
 * (strings, as the format requires), one F32 tensor per parameter tensor. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "model/model_io.h"

#define GPT_FORMAT "longattn-gpt-1"

int la_model_config_meta(const la_model *m, char vals[][LA_SPEC_TEXT_MAX], const char **kv) {
    const la_model_config *c = la_model_get_config(m);
    int n = 0;
#define PUT(key, fmt, val)                                          \
    do {                                                            \
        snprintf(vals[n], LA_SPEC_TEXT_MAX, fmt, val);              \
        kv[2 * n] = key;                                            \
        kv[2 * n + 1] = vals[n];                                    \
        n++;                                                        \
    } while (0)
    PUT("format", "%s", GPT_FORMAT);
    PUT("n_layer", "%d", c->n_layer);
    PUT("n_head", "%d", c->n_head);
    PUT("n_kv_head", "%d", c->n_kv_head);
    PUT("d_model", "%d", c->d_model);
    PUT("d_ff", "%d", c->d_ff);
    PUT("vocab", "%d", c->vocab);
    PUT("train_len", "%d", c->train_len);
    PUT("init_std", "%.9g", (double)c->init_std);
    PUT("qk_gain", "%.9g", (double)c->qk_gain);
    PUT("spec", "%s", c->spec);
#undef PUT
    return n;
}

static la_status meta_int(const la_st_file *f, const char *path, const char *key, int *out) {
    const char *v = la_st_meta(f, key);
    char *end;
    if (!v) return la_fail(LA_EFORMAT, "%s: metadata key '%s' is missing (not a longattn model checkpoint?)", path, key);
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*end || end == v || errno || x < 1 || x > INT_MAX)
        return la_fail(LA_EFORMAT, "%s: metadata '%s' = '%s' is not an integer in [1, %d]", path, key, v, INT_MAX);
    *out = (int)x;
    return LA_OK;
}

/* An optional positive float (absent: *out kept); anything else is a corrupt file. */
static la_status meta_float(const la_st_file *f, const char *path, const char *key, float *out) {
    const char *v = la_st_meta(f, key);
    char *end;
    if (!v) return LA_OK;
    float x = strtof(v, &end);
    if (*end || end == v || !(x > 0 && isfinite(x)))
        return la_fail(LA_EFORMAT, "%s: metadata '%s' = '%s' is not a positive number", path, key, v);
    *out = x;
    return LA_OK;
}

la_status la_model_config_from_meta(const la_st_file *f, const char *path, la_model_config *c) {
    const char *fmt = la_st_meta(f, "format");
    if (!fmt || strcmp(fmt, GPT_FORMAT))
        return la_fail(LA_EFORMAT, "%s: metadata format is '%s', expected '%s' (not a longattn "
                       "model checkpoint)", path, fmt ? fmt : "(missing)", GPT_FORMAT);
    *c = la_model_config_default();
    LA_TRY(meta_int(f, path, "n_layer", &c->n_layer));
    LA_TRY(meta_int(f, path, "n_head", &c->n_head));
    LA_TRY(meta_int(f, path, "n_kv_head", &c->n_kv_head));
    LA_TRY(meta_int(f, path, "d_model", &c->d_model));
    LA_TRY(meta_int(f, path, "d_ff", &c->d_ff));
    LA_TRY(meta_int(f, path, "vocab", &c->vocab));
    LA_TRY(meta_int(f, path, "train_len", &c->train_len));
    LA_TRY(meta_float(f, path, "init_std", &c->init_std));
    LA_TRY(meta_float(f, path, "qk_gain", &c->qk_gain)); /* absent in older checkpoints: default */
    const char *sp = la_st_meta(f, "spec");
    if (!sp) return la_fail(LA_EFORMAT, "%s: metadata key 'spec' is missing", path);
    if (strlen(sp) >= sizeof c->spec) return la_fail(LA_EFORMAT, "%s: spec text too long", path);
    snprintf(c->spec, sizeof c->spec, "%s", sp);
    return LA_OK;
}

la_status la_model_weights_from_file(la_model *m, const la_st_file *f, const char *path, int copy) {
    int nt = la_model_num_tensors(m);
    if (f->n != nt)
        return la_fail(LA_EFORMAT, "%s: holds %d tensors, the model has %d", path, f->n, nt);
    for (int pass = 0; pass < (copy ? 2 : 1); pass++)
        for (int i = 0; i < nt; i++) {
            la_tensor_info t;
            la_model_get_tensor(m, i, &t);
            const la_st_entry *e = la_st_find(f, t.name);
            if (!e) return la_fail(LA_EFORMAT, "%s: tensor %s is missing", path, t.name);
            int same = e->ndim == t.ndim;
            for (int d = 0; same && d < t.ndim; d++) same = e->shape[d] == t.shape[d];
            if (!same)
                return la_fail(LA_EFORMAT, "%s: tensor %s has a different shape than the model's",
                               path, t.name);
            if (pass == 0) { /* a corrupt file must not load as a model that computes garbage */
                const uint8_t *src = f->data + e->begin;
                for (size_t j = 0; j < t.numel; j++) {
                    float x;
                    memcpy(&x, src + j * sizeof x, sizeof x);
                    if (!isfinite(x))
                        return la_fail(LA_EFORMAT, "%s: tensor %s holds a non-finite value (%g at element %zu): "
                                       "the checkpoint is corrupt or came from a diverged run",
                                       path, t.name, (double)x, j);
                }
            }
            if (pass == 1)
                memcpy(la_model_params(m) + t.offset, f->data + e->begin, t.numel * sizeof(float));
        }
    return LA_OK;
}

uint64_t la_model_weights_hash(const la_model *m) {
    return la_fnv1a(LA_FNV0, la_model_params((la_model *)m), la_model_num_params(m) * sizeof(float));
}

la_status la_model_save(const la_model *m, const char *path) {
    if (!m || !path) return la_fail(LA_EINVAL, "la_model_save: NULL argument");
    la_afile af;
    LA_TRY(la_model_save_af(m, path, &af));
    return la_afile_commit(&af);
}

la_status la_model_save_af(const la_model *m, const char *path, la_afile *af) {
    int nt = la_model_num_tensors(m);
    la_st_tensor *ts = la_calloc(nt, sizeof *ts);
    if (!ts) return la_fail(LA_ENOMEM, "la_model_save: out of memory");
    const float *P = la_model_params((la_model *)m);
    for (int i = 0; i < nt; i++) {
        la_tensor_info t;
        la_model_get_tensor(m, i, &t);
        ts[i].name = t.name;
        ts[i].data = P + t.offset;
        ts[i].ndim = t.ndim;
        ts[i].shape[0] = t.shape[0];
        ts[i].shape[1] = t.shape[1];
    }
    char vals[16][LA_SPEC_TEXT_MAX];
    const char *kv[32];
    int n = la_model_config_meta(m, vals, kv);
    la_status s = la_st_write_af(af, path, ts, nt, kv, n);
    free(ts);
    return s;
}

la_status la_model_load(const char *path, la_model **out) {
    if (out) *out = NULL; /* as every constructor: NULL on any failure */
    if (!path || !out) return la_fail(LA_EINVAL, "la_model_load: NULL argument");
    la_st_file f;
    LA_TRY(la_st_read(path, &f));
    la_model_config c;
    la_model *m = NULL;
    la_status s = la_model_config_from_meta(&f, path, &c);
    if (s == LA_OK) s = la_model_new(&c, 0, &m);
    if (s == LA_OK) s = la_model_weights_from_file(m, &f, path, 1);
    la_st_free(&f);
    if (s == LA_OK) *out = m;
    else la_model_free(m);
    return s;
}
