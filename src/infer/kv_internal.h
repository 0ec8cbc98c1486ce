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
    int64_t C;            /* budget: tokens held between calls */
    int64_t cap;          /* slots allocated per kv head (the storage stride): C, plus stream_T - 1
                             for exact chunked streaming (window/sinks, kv_stream.c) */
    int stream_T;         /* largest chunk of la_kv_stream_attend; 1: no streaming scratch */
    int group;            /* effective int8 group (D when p.group == 0) */
    int n_groups;         /* D / group */
    la_kv_layer *layers;  /* (n_layers) */
    /* scratch, allocated once */
    float *kbuf, *vbuf;   /* (Hkv, C, D) dequantised / gathered rows for the kernel */
    float *mass;          /* (H, C) key_mass of one attend call */
    float *stat;          /* (H, C) row statistic when the caller passes none */
    unsigned char *keep;  /* (C) eviction marks */
    la_workspace *ws;     /* kernel scratch */
    /* la_kv_stream_attend scratch (stream_T > 1 only), allocated once */
    float *s_k, *s_v;     /* (cap, D) rotated keys / float values of one kv head */
    float *s_q, *s_out;   /* (G, stream_T, D) scaled rotated queries / window part of the output */
    float *s_lse;         /* (G, stream_T) log-sum-exp of the window part */
    float *s_cs;          /* (cap, D) cos | sin of positions 0..s_tab_n-1 under s_omega */
    double *s_omega;      /* (D) frequencies the table was built with | the new ones */
    int64_t s_tab_n;      /* rows of s_cs that are valid (0: none) */
    float *s_qrow;        /* (D) one query rotated for the sinks */
    double *s_acc;        /* (D) one output row being merged */
};

/* la_kv_new with room for exact chunked streaming (window/sinks only; stream_T <= the
 * policy's max chunk): cap = budget + stream_T - 1 and la_kv_stream_attend's scratch.
 * stream_T = 1 or another policy: exactly la_kv_new. */
la_status la_kv_new_stream(const la_kv_params *p, int stream_T, la_kv_cache **out);

/* Evict (oldest non-sinks first for window/sinks; lowest scores for h2o) until the layer
 * holds at most len_after tokens. */
void la_kv_evict_to(la_kv_cache *c, int layer, int64_t len_after);
/* Write T rows at the end of the layer without evicting (len + T <= cap). */
void la_kv_write(la_kv_cache *c, int layer, const float *k, const float *v, int T);
/* Append for exact streaming: evict to budget - 1 (sinks plus the newest w - 1, what the
 * token before the chunk left), then write all T rows (1 <= T <= stream_T), so the layer
 * briefly holds up to budget - 1 + T rows. Errors: LA_EINVAL (T), LA_ENUMERIC (int8). */
la_status la_kv_append_stream(la_kv_cache *c, int layer, const float *k, const float *v, int T);
/* Row j of kv head h of L (k, or v when which_v) as float into dst (D). */
void la_kv_row_f32(const la_kv_cache *c, const la_kv_layer *L, int which_v, size_t h, size_t j, float *dst);

/* Exact chunked streaming attention (kv_stream.c): append T new tokens' k, v (Hkv, T, D)
 * with la_kv_append_stream, attend the queries q (H, T, D) into out (H, T, D) so that
 * each row sees exactly the keys and the re-indexed positions it would see were the T
 * tokens appended and attended one at a time, then evict back to the budget. Requires
 * la_kv_stream_exact and a cache from la_kv_new_stream with stream_T >= T. n_threads from
 * opts. Errors: LA_EINVAL, LA_EUNSUPPORTED (spec), the kernel's. */
la_status la_kv_stream_attend(la_kv_cache *c, int layer, const la_spec *spec, const float *q, const float *k,
                              const float *v, int T, float *out, const la_attn_opts *opts);

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
