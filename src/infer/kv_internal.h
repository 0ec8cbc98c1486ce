/* kv_internal.h -- the KV cache's private layout, shared by the files of src/infer/. */
#ifndef LA_KV_INTERNAL_H
#define LA_KV_INTERNAL_H

#include "core/half.h"
#include "core/internal.h"
#include "longattn/infer.h"

/* One layer's storage. cap slots per kv head (the storage stride), all allocated at
 * la_kv_new. Slot j of head h holds the token at stream position pos[h*cap + j]; slots
 * 0..len-1 are in stream order (compacted after every eviction), so the len rows of one
 * head are contiguous: element d of row j of head h is at k[(h*cap + j)*D + d].
 * Element type p.storage (la_kv_elt_size bytes): f32 float; f16 / bf16 uint16_t bit
 * patterns (core/half.h, rounded to nearest even when written, read back exactly with
 * la_cvt_*_to_f32); int8 int8_t with one float scale per group of `group` channels at
 * k_scale[(h*cap + j)*n_groups + gi]. A snapshot of a layer is therefore: k, v (and the
 * scales) for slots [0, len) of each head, pos, score, len and seen. */
typedef struct {
    void *k, *v;          /* (Hkv, cap, D) of p.storage's element type */
    float *k_scale;       /* (Hkv, cap, D/g) int8 only */
    float *v_scale;       /* (Hkv, cap, D/g) int8 only */
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
    /* s_cs / s_omega (the RoPE table) are allocated for every cache: the decode kernel uses
     * them too. la_kv_decode_attend scratch (kv_decode.c), allocated once: */
    int d_nthr;           /* per-thread buffers allocated (threads beyond it are not used) */
    int64_t d_nch;        /* chunks of LA_KV_DEC_CHUNK keys the partials have room for */
    float *d_q;           /* (H, D) rotated, scaled queries */
    float *d_kb, *d_vb;   /* (d_nthr, LA_KV_DEC_CHUNK, D) one chunk's rows as float */
    float *d_p;           /* (d_nthr, G, LA_KV_DEC_CHUNK) one chunk's probabilities */
    float *d_m, *d_l;     /* (Hkv, d_nch, G) partial max and sum of each chunk */
    float *d_o;           /* (Hkv, d_nch, G, D) partial (unnormalised) outputs */
};

/* Keys per chunk of the decode kernel: fixed, independent of the thread count, so that the
 * chunk partials and their merge (in chunk order) are the same for any thread count. */
#define LA_KV_DEC_CHUNK 128

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
/* Rows j0 .. j0+n-1 of kv head h of L (k, or v when which_v) as float into dst (n, D) (bulk
 * conversion, exact). */
void la_kv_rows_f32(const la_kv_cache *c, const la_kv_layer *L, int which_v, size_t h, size_t j0, size_t n,
                    float *dst);
/* Copy n slots (k, v, scales, pos, score) from absolute slot `from` (h*cap + j) of S to slot
 * `to` of T; S and T are layers of c or of a cache of its shape; the ranges do not overlap. */
void la_kv_copy_slots(const la_kv_cache *c, la_kv_layer *T, size_t to, const la_kv_layer *S, size_t from, size_t n);
/* Bytes of one stored element: 4 (f32), 2 (f16, bf16), 1 (int8; scales apart). */
size_t la_kv_elt_size(la_kv_storage s);

/* Exact chunked streaming attention (kv_stream.c): append T new tokens' k, v (Hkv, T, D)
 * with la_kv_append_stream, attend the queries q (H, T, D) into out (H, T, D) so that
 * each row sees exactly the keys and the re-indexed positions it would see were the T
 * tokens appended and attended one at a time, then evict back to the budget. Requires
 * la_kv_stream_exact and a cache from la_kv_new_stream with stream_T >= T. n_threads from
 * opts. Errors: LA_EINVAL, LA_EUNSUPPORTED (spec), the kernel's. */
la_status la_kv_stream_attend(la_kv_cache *c, int layer, const la_spec *spec, const float *q, const float *k,
                              const float *v, int T, float *out, const la_attn_opts *opts);

/* RoPE helpers shared by kv_stream.c and kv_decode.c (defined in kv_stream.c): the cos|sin
 * table of positions 0..cap-1 in c->s_cs (rebuilt only when the frequencies change),
 * rotation of one row by a table row (the kernel's convention: pairs (k, k + D/2)), and the
 * logit factor the kernel applies to stream token t of a cache of budget tokens. */
la_status la_kv_rope_table(la_kv_cache *c, const la_spec *spec, int64_t ctx, int *rotates);
void la_kv_rotate(float *x, const float *cs, int D);
double la_kv_row_factor(const la_spec *spec, int64_t t, int64_t budget);

/* Decode kernel (kv_decode.c): 1 if la_kv_decode_attend computes spec over this cache for
 * one query row (softmax; causal or full pattern; NoPE or a RoPE-family encoding except
 * dynamic-ntk; transform none, temp, critical or qwen-logn; no doc_ids, row_entropy or
 * row_support requested). */
int la_kv_decode_ok(const la_kv_cache *c, const la_spec *spec, const la_attn_opts *opts);
/* Attention of one new query row per head, q (H, D) un-rotated, over the layer's len kept
 * rows, into out (H, D) and row_stat (H) (log-sum-exp; may be NULL). Each kv head's rows are
 * read once for the G query heads of its group, in chunks of LA_KV_DEC_CHUNK keys spread
 * over n_threads (0: the OpenMP default) and merged in chunk order: bitwise the same for
 * any thread count. mass (H, len) or NULL: each key's probability. Requires
 * la_kv_decode_ok. */
la_status la_kv_decode_attend(la_kv_cache *c, int layer, const la_spec *spec, const float *q, float *out,
                              float *row_stat, float *mass, int n_threads);

/* la_sample_token's checks of sp (sample.c), for callers that check before they start:
 * LA_EINVAL naming the bad field, prefixed with who. */
la_status la_sample_check(const la_sample_params *sp, const char *who);

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
