/* kv_cache.c -- the KV cache's storage: allocation (once), append with eviction by
 * policy, compaction, read-out. Eviction rules: window (sliding window), sinks (StreamingLLM,
 * Xiao et al. 2024: keep the first n "attention sink" tokens and the last w), h2o (H2O,
 * Zhang et al. 2023: keep the `heavy` tokens with the largest cumulative attention mass
 * plus the `recent` newest; we also never evict `sinks` first tokens). */
#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "infer/kv_internal.h"
#include "longattn/infer.h"

size_t la_kv_elt_size(la_kv_storage s) {
    switch (s) {
    case LA_KV_INT8: return 1;
    case LA_KV_F16: case LA_KV_BF16: return 2;
    default: return sizeof(float);
    }
}

static size_t elt_size(const la_kv_cache *c) { return la_kv_elt_size(c->p.storage); }

void la_kv_free(la_kv_cache *c) {
    if (!c) return;
    if (c->layers) {
        for (int l = 0; l < c->p.n_layers; l++) {
            la_kv_layer *L = &c->layers[l];
            free(L->k);
            free(L->v);
            free(L->k_scale);
            free(L->v_scale);
            free(L->pos);
            free(L->score);
        }
        free(c->layers);
    }
    free(c->kbuf);
    free(c->vbuf);
    free(c->mass);
    free(c->stat);
    free(c->keep);
    free(c->s_k);
    free(c->s_v);
    free(c->s_q);
    free(c->s_out);
    free(c->s_lse);
    free(c->s_cs);
    free(c->s_omega);
    free(c->s_qrow);
    free(c->s_acc);
    free(c->d_q);
    free(c->d_kb);
    free(c->d_vb);
    free(c->d_p);
    free(c->d_m);
    free(c->d_l);
    free(c->d_o);
    la_workspace_free(c->ws);
    free(c);
}

la_status la_kv_new(const la_kv_params *p, la_kv_cache **out) { return la_kv_new_stream(p, 1, out); }

la_status la_kv_new_stream(const la_kv_params *p, int stream_T, la_kv_cache **out) {
    if (!out) return la_fail(LA_EINVAL, "la_kv_new: out is NULL");
    *out = NULL;
    LA_TRY(la_kv_params_validate(p));
    const int streams = (p->policy == LA_KV_WINDOW || p->policy == LA_KV_SINKS) && stream_T > 1;
    if (streams && stream_T > la_kv_max_chunk(p))
        return la_fail(LA_EINVAL, "la_kv_new_stream: chunk %d exceeds the policy's largest append %lld", stream_T,
                       (long long)la_kv_max_chunk(p));
    la_kv_cache *c = la_calloc(1, sizeof *c);
    if (!c) return la_fail(LA_ENOMEM, "la_kv_new: out of memory");
    c->p = *p;
    c->C = la_kv_budget(p);
    c->stream_T = streams ? stream_T : 1;
    c->cap = c->C + c->stream_T - 1;
    c->group = (p->storage == LA_KV_INT8 && p->group > 0) ? p->group : p->D;
    c->n_groups = p->D / c->group;
    const size_t C = (size_t)c->cap, D = (size_t)p->D, Hkv = (size_t)p->Hkv, H = (size_t)p->H;
    c->layers = la_calloc((size_t)p->n_layers, sizeof *c->layers);
    int ok = c->layers != NULL;
    for (int l = 0; ok && l < p->n_layers; l++) {
        la_kv_layer *L = &c->layers[l];
        L->k = la_malloc(Hkv * C * D * elt_size(c));
        L->v = la_malloc(Hkv * C * D * elt_size(c));
        L->pos = la_malloc(Hkv * C * sizeof *L->pos);
        L->score = la_malloc(Hkv * C * sizeof *L->score);
        ok = L->k && L->v && L->pos && L->score;
        if (ok && p->storage == LA_KV_INT8) {
            L->k_scale = la_malloc(Hkv * C * (size_t)c->n_groups * sizeof(float));
            L->v_scale = la_malloc(Hkv * C * (size_t)c->n_groups * sizeof(float));
            ok = L->k_scale && L->v_scale;
        }
    }
    if (ok) {
        /* rows go to the kernel straight from storage only for f32 with one kv head; else
         * they are dequantised / gathered into (Hkv, len, D) here */
        c->kbuf = la_malloc(Hkv * C * D * sizeof(float));
        c->vbuf = la_malloc(Hkv * C * D * sizeof(float));
        c->mass = la_malloc(H * C * sizeof(float));
        c->stat = la_malloc(H * C * sizeof(float));
        c->keep = la_malloc(C);
        (void)la_workspace_create(&c->ws); /* NULL when it failed: checked below */
        c->s_cs = la_malloc(C * D * sizeof(float));
        c->s_omega = la_malloc(D * sizeof(double));
        ok = c->kbuf && c->vbuf && c->mass && c->stat && c->keep && c->ws && c->s_cs && c->s_omega;
    }
    if (ok) { /* la_kv_decode_attend's scratch (kv_decode.c) */
        const size_t G = H / Hkv, CH = LA_KV_DEC_CHUNK;
        c->d_nthr = omp_get_max_threads();
        if (c->d_nthr < 1) c->d_nthr = 1;
        c->d_nch = (c->cap + LA_KV_DEC_CHUNK - 1) / LA_KV_DEC_CHUNK;
        const size_t nt = (size_t)c->d_nthr, nch = (size_t)c->d_nch;
        c->d_q = la_malloc(H * D * sizeof(float));
        c->d_kb = la_malloc(nt * CH * D * sizeof(float));
        c->d_vb = la_malloc(nt * CH * D * sizeof(float));
        c->d_p = la_malloc(nt * G * CH * sizeof(float));
        c->d_m = la_malloc(Hkv * nch * G * sizeof(float));
        c->d_l = la_malloc(Hkv * nch * G * sizeof(float));
        c->d_o = la_malloc(Hkv * nch * G * D * sizeof(float));
        ok = c->d_q && c->d_kb && c->d_vb && c->d_p && c->d_m && c->d_l && c->d_o;
    }
    if (ok && streams) { /* la_kv_stream_attend's scratch (kv_stream.c) */
        const size_t G = H / Hkv, T = (size_t)c->stream_T;
        c->s_k = la_malloc(C * D * sizeof(float));
        c->s_v = la_malloc(C * D * sizeof(float));
        c->s_q = la_malloc(G * T * D * sizeof(float));
        c->s_out = la_malloc(G * T * D * sizeof(float));
        c->s_lse = la_malloc(G * T * sizeof(float));
        c->s_qrow = la_malloc(D * sizeof(float));
        c->s_acc = la_malloc(D * sizeof(double));
        ok = c->s_k && c->s_v && c->s_q && c->s_out && c->s_lse && c->s_qrow && c->s_acc;
    }
    if (!ok) {
        la_kv_free(c);
        return la_fail(LA_ENOMEM, "la_kv_new: out of memory for a cache of %lld tokens x %d layers x %d kv heads x D=%d",
                       (long long)C, p->n_layers, p->Hkv, p->D);
    }
    la_kv_reset(c);
    *out = c;
    return LA_OK;
}

void la_kv_reset(la_kv_cache *c) {
    if (!c) return;
    for (int l = 0; l < c->p.n_layers; l++) {
        c->layers[l].len = 0;
        c->layers[l].seen = 0;
    }
    c->s_tab_n = 0;
}

const la_kv_params *la_kv_get_params(const la_kv_cache *c) { return c ? &c->p : NULL; }

int64_t la_kv_len(const la_kv_cache *c, int layer) {
    if (!c || layer < 0 || layer >= c->p.n_layers) return -1;
    return c->layers[layer].len;
}

int64_t la_kv_seen(const la_kv_cache *c, int layer) {
    if (!c || layer < 0 || layer >= c->p.n_layers) return -1;
    return c->layers[layer].seen;
}

size_t la_kv_bytes(const la_kv_cache *c) {
    if (!c) return 0;
    return (size_t)c->C * (size_t)la_kv_bytes_per_token(&c->p);
}

void la_kv_copy_slots(const la_kv_cache *c, la_kv_layer *T, size_t to, const la_kv_layer *S, size_t from, size_t n) {
    const size_t D = (size_t)c->p.D, es = elt_size(c), G = (size_t)c->n_groups;
    memcpy((char *)T->k + to * D * es, (const char *)S->k + from * D * es, n * D * es);
    memcpy((char *)T->v + to * D * es, (const char *)S->v + from * D * es, n * D * es);
    if (S->k_scale) {
        memcpy(T->k_scale + to * G, S->k_scale + from * G, n * G * sizeof(float));
        memcpy(T->v_scale + to * G, S->v_scale + from * G, n * G * sizeof(float));
    }
    memcpy(T->pos + to, S->pos + from, n * sizeof *S->pos);
    memcpy(T->score + to, S->score + from, n * sizeof *S->score);
}

/* Evict from every kv head of L so that len + T <= budget. Protected: the first `sinks`
 * slots and the newest (recent - T) slots (they stay within the recent window once the T
 * new tokens arrive). Among the rest, H2O keeps the `heavy` largest scores (evicting the
 * smallest first, the older of equal scores first); window/sinks have heavy = 0. */
static void evict_for(la_kv_cache *c, la_kv_layer *L, int64_t T) {
    const int64_t n = L->len, C = c->C, cap = c->cap;
    if (n + T <= C) return;
    int64_t sinks, heavy, recent;
    la_kv_policy_counts(&c->p, &sinks, &heavy, &recent);
    const int64_t n_evict = n + T - C;          /* >= 1 */
    const int64_t lo = sinks < n ? sinks : n;   /* candidates are slots [lo, hi) */
    const int64_t hi = n - (recent - T);        /* recent >= T is checked by the caller */
    for (int64_t h = 0; h < c->p.Hkv; h++) {
        unsigned char *keep = c->keep;
        memset(keep, 1, (size_t)n);
        const float *sc = L->score + h * cap;
        if (heavy == 0) {
            /* window / sinks: the oldest candidates go */
            for (int64_t j = lo; j < lo + n_evict; j++) keep[j] = 0;
        } else {
            for (int64_t e = 0; e < n_evict; e++) {
                int64_t arg = -1;
                for (int64_t j = lo; j < hi; j++) {
                    if (!keep[j]) continue;
                    if (arg < 0 || sc[j] < sc[arg]) arg = j; /* strict: the oldest of ties */
                }
                keep[arg] = 0;
            }
        }
        int64_t w = 0;
        for (int64_t j = 0; j < n; j++) {
            if (!keep[j]) continue;
            if (w != j) la_kv_copy_slots(c, L, (size_t)(h * cap + w), L, (size_t)(h * cap + j), 1);
            w++;
        }
    }
    L->len = n - n_evict;
}

void la_kv_evict_to(la_kv_cache *c, int layer, int64_t len_after) {
    la_kv_layer *L = &c->layers[layer];
    /* evict_for(T) leaves len <= C - T, protecting the newest recent - T slots */
    if (L->len > len_after) evict_for(c, L, c->C - len_after);
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* 1 if every |x| rounds to a finite f16 (< 65520, the midpoint above 65504) */
static int fits_f16(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(x[i]) < 65520.0f)) return 0;
    return 1;
}

/* The new rows fit the element type: int8 needs finite values (absmax scales), f16 values
 * below its largest finite magnitude (no silent infinity). f32 / bf16 store anything. */
static la_status check_rows(const la_kv_cache *c, int layer, const float *k, const float *v, int T) {
    const size_t n = (size_t)c->p.Hkv * (size_t)T * (size_t)c->p.D;
    if (c->p.storage == LA_KV_INT8 && (!all_finite(k, n) || !all_finite(v, n)))
        return la_fail(LA_ENUMERIC, "la_kv_append: non-finite value in k or v of layer %d; int8 storage cannot hold it",
                       layer);
    if (c->p.storage == LA_KV_F16 && (!fits_f16(k, n) || !fits_f16(v, n)))
        return la_fail(LA_ENUMERIC,
                       "la_kv_append: a k or v value of layer %d is beyond f16's range (|x| > 65504) or not finite; "
                       "use the bf16 or f32 KV type",
                       layer);
    return LA_OK;
}

la_status la_kv_append(la_kv_cache *c, int layer, const float *k, const float *v, int T) {
    if (!c || !k || !v) return la_fail(LA_EINVAL, "la_kv_append: NULL cache, k or v");
    if (layer < 0 || layer >= c->p.n_layers)
        return la_fail(LA_EINVAL, "la_kv_append: layer %d out of range [0, %d)", layer, c->p.n_layers);
    const int64_t max_chunk = la_kv_max_chunk(&c->p);
    if (T < 1 || T > max_chunk)
        return la_fail(LA_EINVAL,
                       "la_kv_append: T = %d new tokens, must be in [1, %lld] for this policy (its recent window); "
                       "append a long prompt in chunks",
                       T, (long long)max_chunk);
    la_kv_layer *L = &c->layers[layer];
    if (c->p.policy == LA_KV_FULL && L->len + T > c->C)
        return la_fail(LA_EINVAL,
                       "la_kv_append: full cache holds %lld of max_tokens = %lld, cannot add %d more; "
                       "create it with a larger max_tokens or use an evicting policy (window, sinks, h2o)",
                       (long long)L->len, (long long)c->C, T);
    LA_TRY(check_rows(c, layer, k, v, T));
    evict_for(c, L, T);
    la_kv_write(c, layer, k, v, T);
    return LA_OK;
}

la_status la_kv_append_stream(la_kv_cache *c, int layer, const float *k, const float *v, int T) {
    assert(c && k && v && layer >= 0 && layer < c->p.n_layers);
    if (T < 1 || T > c->stream_T)
        return la_fail(LA_EINVAL, "la_kv_append_stream: T = %d new tokens, must be in [1, %d] (the cache's chunk)", T,
                       c->stream_T);
    LA_TRY(check_rows(c, layer, k, v, T));
    la_kv_evict_to(c, layer, c->C - 1); /* the sinks and the newest w - 1: what token t0 - 1 left behind */
    la_kv_write(c, layer, k, v, T);
    return LA_OK;
}

void la_kv_write(la_kv_cache *c, int layer, const float *k, const float *v, int T) {
    la_kv_layer *L = &c->layers[layer];
    const size_t D = (size_t)c->p.D, C = (size_t)c->cap, Hkv = (size_t)c->p.Hkv, G = (size_t)c->n_groups;
    assert(L->len + T <= c->cap);
    for (size_t h = 0; h < Hkv; h++) {
        for (size_t t = 0; t < (size_t)T; t++) {
            const size_t slot = h * C + (size_t)L->len + t;
            const float *ks = k + (h * (size_t)T + t) * D, *vs = v + (h * (size_t)T + t) * D;
            if (c->p.storage == LA_KV_INT8) {
                la_kv_quant_row(ks, (int)D, c->group, (int8_t *)L->k + slot * D, L->k_scale + slot * G);
                la_kv_quant_row(vs, (int)D, c->group, (int8_t *)L->v + slot * D, L->v_scale + slot * G);
            } else if (c->p.storage == LA_KV_F16) {
                la_cvt_f32_to_f16((uint16_t *)L->k + slot * D, ks, D);
                la_cvt_f32_to_f16((uint16_t *)L->v + slot * D, vs, D);
            } else if (c->p.storage == LA_KV_BF16) {
                la_cvt_f32_to_bf16((uint16_t *)L->k + slot * D, ks, D);
                la_cvt_f32_to_bf16((uint16_t *)L->v + slot * D, vs, D);
            } else {
                memcpy((float *)L->k + slot * D, ks, D * sizeof(float));
                memcpy((float *)L->v + slot * D, vs, D * sizeof(float));
            }
            L->pos[slot] = L->seen + (int64_t)t;
            L->score[slot] = 0.0f;
        }
    }
    L->len += T;
    L->seen += T;
}

/* Rows j0 .. j0+n-1 of head h as float into dst (n, D): one bulk conversion for f16 /
 * bf16 (the rows of a head are contiguous), row by row for int8. Exact: every stored value
 * is a float. */
void la_kv_rows_f32(const la_kv_cache *c, const la_kv_layer *L, int which_v, size_t h, size_t j0, size_t n,
                    float *dst) {
    const size_t D = (size_t)c->p.D, C = (size_t)c->cap, G = (size_t)c->n_groups;
    const size_t slot = h * C + j0;
    const void *src = which_v ? L->v : L->k;
    switch (c->p.storage) {
    case LA_KV_INT8: {
        const int8_t *q = (const int8_t *)src + slot * D;
        const float *s = (which_v ? L->v_scale : L->k_scale) + slot * G;
        for (size_t j = 0; j < n; j++) la_kv_dequant_row(q + j * D, s + j * G, (int)D, c->group, dst + j * D);
        break;
    }
    case LA_KV_F16: la_cvt_f16_to_f32(dst, (const uint16_t *)src + slot * D, n * D); break;
    case LA_KV_BF16: la_cvt_bf16_to_f32(dst, (const uint16_t *)src + slot * D, n * D); break;
    default: memcpy(dst, (const float *)src + slot * D, n * D * sizeof(float)); break;
    }
}

la_status la_kv_read(const la_kv_cache *c, int layer, float *k, float *v, int64_t *orig_pos) {
    if (!c) return la_fail(LA_EINVAL, "la_kv_read: NULL cache");
    if (layer < 0 || layer >= c->p.n_layers)
        return la_fail(LA_EINVAL, "la_kv_read: layer %d out of range [0, %d)", layer, c->p.n_layers);
    const la_kv_layer *L = &c->layers[layer];
    const size_t D = (size_t)c->p.D, n = (size_t)L->len;
    for (size_t h = 0; h < (size_t)c->p.Hkv; h++) {
        if (k) la_kv_rows_f32(c, L, 0, h, 0, n, k + h * n * D);
        if (v) la_kv_rows_f32(c, L, 1, h, 0, n, v + h * n * D);
        if (orig_pos) memcpy(orig_pos + h * n, L->pos + h * (size_t)c->cap, n * sizeof *orig_pos);
    }
    return LA_OK;
}

la_status la_kv_scores(const la_kv_cache *c, int layer, float *scores) {
    if (!c || !scores) return la_fail(LA_EINVAL, "la_kv_scores: NULL argument");
    if (layer < 0 || layer >= c->p.n_layers)
        return la_fail(LA_EINVAL, "la_kv_scores: layer %d out of range [0, %d)", layer, c->p.n_layers);
    const la_kv_layer *L = &c->layers[layer];
    for (size_t h = 0; h < (size_t)c->p.Hkv; h++)
        memcpy(scores + h * (size_t)L->len, L->score + h * (size_t)c->cap, (size_t)L->len * sizeof(float));
    return LA_OK;
}

void la_kv_gather(la_kv_cache *c, int layer, const float **k, const float **v) {
    la_kv_layer *L = &c->layers[layer];
    const size_t D = (size_t)c->p.D, n = (size_t)L->len;
    if (c->p.storage == LA_KV_F32 && (c->p.Hkv == 1 || L->len == c->cap)) {
        *k = L->k;
        *v = L->v;
        return;
    }
    for (size_t h = 0; h < (size_t)c->p.Hkv; h++) {
        la_kv_rows_f32(c, L, 0, h, 0, n, c->kbuf + h * n * D);
        la_kv_rows_f32(c, L, 1, h, 0, n, c->vbuf + h * n * D);
    }
    *k = c->kbuf;
    *v = c->vbuf;
}
