/* kv_internal.h -- the KV cache's private layout, shared by the files of src/infer/. */
#ifndef LA_KV_INTERNAL_H
#define LA_KV_INTERNAL_H

#include "core/internal.h"

/* One layer's storage. C = budget slots per kv head, all allocated at la_kv_new.
 * Slot j of head h holds the token at stream position pos[h*C + j]; slots 0..len-1 are in
 * stream order (compacted after every eviction). */
typedef struct {
    void *k, *v;          /* (Hkv, C, D) float or int8 */
    float *k_scale;       /* (Hkv, C, D/g) int8 only */
    float *v_scale;       /* (Hkv, C, D/g) int8 only */
    int64_t *pos;         /* (Hkv, C) original stream positions */
    float *score;         /* (Hkv, C) H2O cumulative attention mass */
    int64_t len;          /* tokens held (same for every kv head) */
    int64_t seen;         /* tokens ever appended */
} la_kv_layer;

struct la_kv_cache {
    la_kv_params p;
    int64_t C;            /* capacity = budget */
    int group;            /* effective int8 group (D when p.group == 0) */
    int n_groups;         /* D / group */
    la_kv_layer *layers;  /* (n_layers) */
    /* scratch, allocated once */
    float *kbuf, *vbuf;   /* (Hkv, C, D) dequantised / gathered rows for the kernel */
    float *mass;          /* (H, C) key_mass of one attend call */
    float *stat;          /* (H, C) row statistic when the caller passes none */
    unsigned char *keep;  /* (C) eviction marks */
    la_workspace *ws;     /* kernel scratch */
};

/* int8 quantisation of one row x (D) in groups of g channels (kv_quant.c). */
void la_kv_quant_row(const float *x, int D, int g, int8_t *q, float *scale);
void la_kv_dequant_row(const int8_t *q, const float *scale, int D, int g, float *x);

/* Policy protection counts (kv_params.c): sinks that are never evicted and the recent
 * window that the newest tokens occupy. */
void la_kv_policy_counts(const la_kv_params *p, int64_t *sinks, int64_t *heavy, int64_t *recent);

/* (Hkv, len, D) float k and v of a layer for the kernel (kv_cache.c): pointers into the
 * storage when it is already laid out so (f32 with one kv head or a full layer), else the
 * rows dequantised / gathered into kbuf, vbuf. */
void la_kv_gather(la_kv_cache *c, int layer, const float **k, const float **v);

#endif
