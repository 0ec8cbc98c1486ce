/* kv_decode.c -- the decode attention kernel: one new query row per head over a layer's
 * cache, for any element type (f32, f16, bf16, int8).
 *
 * Decode is bound by memory traffic (every cached row is read once per generated token
 * and used for a handful of products), so the kernel is organised around reading the
 * cache once:
 *   - grouped-query attention: the G = H / Hkv query heads of a kv head are computed
 *     together, so each k and v row is read (and converted) once for all of them, never
 *     once per query head;
 *   - the context is split into chunks of LA_KV_DEC_CHUNK keys (a constant, independent
 *     of the thread count); a work item is one chunk of every kv head in turn (the chunk's
 *     RoPE table rows stay in the CPU caches across the kv heads); for each (kv head,
 *     chunk) the rows are converted to float (exact), rotated by their slot position (RoPE
 *     table shared with kv_stream.c), and the partial softmax (max m_c, sum
 *     l_c = sum exp(s - m_c), unnormalised output o_c = sum exp(s - m_c) v) is written to
 *     its own slot. Two implementations, chosen at run time: the AVX2 + FMA + F16C one
 *     (chunk_fast: conversion, rotation and products fused in registers, polynomial exp)
 *     and the portable loop (chunk_item's own body; LA_PORTABLE=1, other CPUs and shapes).
 *     They round differently (not bitwise equal; both within the float64-reference
 *     bound of tests/test_kv_decode.c);
 *   - the partials of each query head are merged in chunk order (flash-decoding's
 *     log-sum-exp merge: M = max m_c, Z = sum l_c e^(m_c - M), out = sum o_c e^(m_c - M) / Z),
 *     so the result is bitwise the same for any thread count and any schedule.
 * Positions and logit factors are those of la_kv_attend's kernel call (the query at slot
 * len - 1, key j at slot j; RoPE angles in double rounded to float, the rotation in float;
 * the factor of la_kv_row_factor times 1/sqrt(D) folded into the query). All arithmetic is
 * float32; the error against a float64 reference is that of float32 sums over len terms. */
#include <assert.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "infer/kv_internal.h"
#include "longattn/infer.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LA_KVD_X86 1
#endif

int la_kv_decode_ok(const la_kv_cache *c, const la_spec *spec, const la_attn_opts *opts) {
    if (!c || !spec) return 0;
    if (opts && (opts->doc_ids || opts->row_entropy || opts->row_support)) return 0;
    if (spec->norm != LA_NORM_SOFTMAX) return 0;
    if (spec->sink != LA_SINK_NONE) return 0; /* its merge has no sink term: the fused path has */
    if (spec->pattern != LA_PAT_CAUSAL && spec->pattern != LA_PAT_FULL) return 0;
    switch (spec->pos) {
    case LA_POS_NOPE: break;
    case LA_POS_ROPE: case LA_POS_PROPE: case LA_POS_NTK: case LA_POS_YARN: case LA_POS_PI:
        if (c->p.D % 2) return 0;
        break;
    default: return 0; /* dynamic-ntk: frequencies change with the length; ALiBi / NAPE: biases */
    }
    switch (spec->xform) {
    case LA_XF_NONE: case LA_XF_TEMP: case LA_XF_CRITICAL: case LA_XF_QWEN_LOGN: return 1;
    default: return 0; /* logn (learned per-head s), sinv (distance-dependent affine) */
    }
}

/* q . k over D, eight partial sums (vectorised by the compiler) added in a fixed order */
static inline float dot8(const float *restrict a, const float *restrict b, int D) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int d = 0;
    for (; d + 8 <= D; d += 8)
        for (int i = 0; i < 8; i++) acc[i] += a[d + i] * b[d + i];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; d < D; d++) s += a[d] * b[d];
    return s;
}

#ifdef LA_KVD_X86
/* ---- AVX2 + FMA + F16C path (chosen at run time, la_cpu()) ----------------------------
 * The same work item fused: each key row is loaded once, converted (exact: F16C for f16, a
 * 16-bit shift for bf16), rotated in registers and multiplied with the G queries of its
 * group; exp is la_exp_sub_f32's polynomial; values are loaded once per 16 columns for the
 * G heads. Compared with the portable loop it rounds differently (fused multiply-adds,
 * another summation order, the polynomial exp): within the tests' float32 bounds, not
 * bitwise. Each item is still computed by one thread in a fixed order, so the result does not
 * depend on the thread count. */
#define KVD_T __attribute__((target("avx2,fma,f16c")))
#define KVD_IN static inline __attribute__((always_inline)) KVD_T

/* 8 elements of a row of storage type ty (f32, f16, bf16) at element offset i, as float */
KVD_IN __m256 kvd_load(const void *base, size_t i, la_kv_storage ty) {
    if (ty == LA_KV_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
    if (ty == LA_KV_BF16) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    return _mm256_loadu_ps((const float *)base + i);
}

/* lanes summed in a fixed order: (0+4, 1+5, 2+6, 3+7), then pairs */
KVD_IN float kvd_hsum(__m256 a) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

#define KVD_AHEAD 8 /* rows (8, 16, 32 and 64 measured the same: the kernel is bound by its arithmetic) */

/* the sum of q_g . (key row r, rotated by table row c when c) over one 8-wide block b of
 * each RoPE half (or of the row, unrotated), added to acc[g] for the G queries qg (G, D) */
KVD_IN void kvd_row_block(const int G, const void *k, size_t r, const float *c, la_kv_storage ty, int b, int half,
                          const float *qg, int D, __m256 *acc) {
    /* the blocks b and b + D/2 of the row: the pair la_kv_rotate rotates together, or (no
     * table) the two halves unrotated, so that both cases cover the row per b */
    __m256 ra = kvd_load(k, r + (size_t)b, ty), rb = kvd_load(k, r + (size_t)(b + half), ty);
    if (c) { /* la_kv_rotate: (a, b) -> (a cos - b sin, a sin + b cos) */
        const __m256 co = _mm256_loadu_ps(c + b), si = _mm256_loadu_ps(c + half + b);
        const __m256 ka = ra, kb = rb;
        ra = _mm256_fmsub_ps(ka, co, _mm256_mul_ps(kb, si));
        rb = _mm256_fmadd_ps(ka, si, _mm256_mul_ps(kb, co));
    }
#pragma GCC unroll 6
    for (int g = 0; g < G; g++) {
        acc[g] = _mm256_fmadd_ps(_mm256_loadu_ps(qg + (size_t)g * D + b), ra, acc[g]);
        acc[g] = _mm256_fmadd_ps(_mm256_loadu_ps(qg + (size_t)g * D + half + b), rb, acc[g]);
    }
}

/* logits of the G queries qg (G, D) against rows [0, m) of k (row stride D elements), key j
 * rotated by table row cs + j * D when cs, into lg[g * ldl + j].
 * R = 4 rows (G <= 2) or 2 rows (G = 3..6) at a time: R x G independent accumulators (the
 * chains of fused multiply-adds overlap), reduced together by horizontal adds that sum four
 * accumulators in one pass (lanes (0+1)+(2+3) of each half, then the halves), instead of one
 * horizontal sum per logit. Rows left over (m not a multiple of R) take R = 1. (R = 4 at
 * G = 3 needs more than the 16 vector registers, and spilling made it 10 % slower.) */
KVD_IN void kvd_logits(const int G, const void *k, const void *v, la_kv_storage ty, int64_t m, const float *cs,
                       const float *qg, int D, float *lg, int64_t ldl) {
    const int half = D / 2, R = G <= 2 ? 4 : 2;
    const size_t rowb = (size_t)D * la_kv_elt_size(ty);
    int64_t j = 0;
    for (; j + R <= m; j += R) {
        /* software prefetch: the key rows KVD_AHEAD rows on and these rows' value rows (read
         * by kvd_pv after the exp), so that the loads of the cache overlap the arithmetic */
        for (size_t b = 0; b < (size_t)R * rowb; b += 64) {
            _mm_prefetch((const char *)k + (size_t)(j + KVD_AHEAD) * rowb + b, _MM_HINT_T0);
            _mm_prefetch((const char *)v + (size_t)j * rowb + b, _MM_HINT_T0);
        }
        __m256 acc[12]; /* acc[r * G + g] */
#pragma GCC unroll 12
        for (int i = 0; i < R * G; i++) acc[i] = _mm256_setzero_ps();
        for (int b = 0; b < half; b += 8)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const size_t row = (size_t)(j + r) * (size_t)D;
                kvd_row_block(G, k, row, cs ? cs + row : NULL, ty, b, half, qg, D, acc + r * G);
            }
        if (R == 4) {
#pragma GCC unroll 3
            for (int g = 0; g < G; g++) { /* [row 0 .. row 3] of query g */
                const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[g], acc[G + g]),
                                                _mm256_hadd_ps(acc[2 * G + g], acc[3 * G + g]));
                _mm_storeu_ps(lg + (size_t)g * ldl + j,
                              _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
            }
        } else {
#pragma GCC unroll 3
            for (int g = 0; g < G; g += 2) { /* [rows 0, 1 of query g, rows 0, 1 of query g + 1] */
                const __m256 z = _mm256_setzero_ps();
                const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[g], acc[G + g]),
                                                g + 1 < G ? _mm256_hadd_ps(acc[g + 1], acc[G + g + 1]) : z);
                float s[4];
                _mm_storeu_ps(s, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
                lg[(size_t)g * ldl + j] = s[0], lg[(size_t)g * ldl + j + 1] = s[1];
                if (g + 1 < G) lg[(size_t)(g + 1) * ldl + j] = s[2], lg[(size_t)(g + 1) * ldl + j + 1] = s[3];
            }
        }
    }
    for (; j < m; j++) {
        __m256 acc[6];
        for (int g = 0; g < G; g++) acc[g] = _mm256_setzero_ps();
        const size_t row = (size_t)j * (size_t)D;
        for (int b = 0; b < half; b += 8) kvd_row_block(G, k, row, cs ? cs + row : NULL, ty, b, half, qg, D, acc);
        for (int g = 0; g < G; g++) lg[(size_t)g * ldl + j] = kvd_hsum(acc[g]);
    }
}

/* o[g] (D) = sum_j p[g * CH + j] v_j over rows [0, m) of v, NV * 8 columns at a time: NV = 8
 * (G = 1), 4 (G <= 3) or 2 vectors, so that G x NV independent accumulators keep the
 * multiply-add units busy (each accumulator's chain adds one row per step) and each value
 * row is read D / (8 NV) times from the L1/L2 cache */
KVD_IN void kvd_pv_nv(const int G, const int NV, const void *v, la_kv_storage ty, int64_t m, const float *p,
                      int D, float *o) {
    for (int d0 = 0; d0 < D; d0 += 8 * NV) {
        __m256 a[12]; /* a[g * NV + i] */
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_setzero_ps();
        for (int64_t j = 0; j < m; j++) {
            const size_t r = (size_t)j * (size_t)D + (size_t)d0;
            /* G broadcasts, then one value vector at a time: G x NV + G + 1 registers */
            __m256 pj[6];
#pragma GCC unroll 6
            for (int g = 0; g < G; g++) pj[g] = _mm256_broadcast_ss(p + (size_t)g * LA_KV_DEC_CHUNK + j);
#pragma GCC unroll 8
            for (int i = 0; i < NV; i++) {
                const __m256 vi = kvd_load(v, r + (size_t)(8 * i), ty);
#pragma GCC unroll 6
                for (int g = 0; g < G; g++) a[g * NV + i] = _mm256_fmadd_ps(pj[g], vi, a[g * NV + i]);
            }
        }
#pragma GCC unroll 6
        for (int g = 0; g < G; g++)
#pragma GCC unroll 8
            for (int i = 0; i < NV; i++) _mm256_storeu_ps(o + (size_t)g * D + d0 + 8 * i, a[g * NV + i]);
    }
}

KVD_IN void kvd_pv(const int G, const void *v, la_kv_storage ty, int64_t m, const float *p, int D, float *o) {
    const int NV = G == 1 ? 8 : G <= 3 ? 4 : 2;
    if (D % (8 * NV) == 0) kvd_pv_nv(G, NV, v, ty, m, p, D, o);
    else kvd_pv_nv(G, 2, v, ty, m, p, D, o); /* D % 16 == 0 (fast_ok) */
}

/* the whole item on rows k, v (contiguous, m rows) of type TY for G query heads per kv head;
 * instantiated below once per (G, TY), so that the loops over rows, heads and vectors have
 * constant trip counts and unroll into registers */
KVD_IN void chunk_fast_body(const int G, const la_kv_storage TY, int D, const void *k, const void *v, int64_t m,
                            const float *cs, const float *qg, float *restrict lg, int64_t ldl, float *pb, float *o,
                            float *pm, float *pl) {
    kvd_logits(G, k, v, TY, m, cs, qg, D, lg, ldl);
    for (int g = 0; g < G; g++) {
        const float *s = lg + (size_t)g * ldl;
        float mx = s[0];
        for (int64_t j = 1; j < m; j++) mx = s[j] > mx ? s[j] : mx;
        pm[g] = mx;
        pl[g] = la_exp_sub_f32(s, mx, pb + (size_t)g * LA_KV_DEC_CHUNK, (size_t)m);
    }
    kvd_pv(G, v, TY, m, pb, D, o);
}

typedef void (*kvd_chunk_fn)(int D, const void *k, const void *v, int64_t m, const float *cs, const float *qg,
                             float *restrict lg, int64_t ldl, float *pb, float *o, float *pm, float *pl);
#define KVD_INST(g_, tn_, ty_)                                                                                 \
    KVD_T static void kvd_chunk_##g_##tn_(int D, const void *k, const void *v, int64_t m, const float *cs,        \
                                          const float *qg, float *restrict lg, int64_t ldl, float *pb, float *o, \
                                          float *pm, float *pl) {                                              \
        chunk_fast_body(g_, ty_, D, k, v, m, cs, qg, lg, ldl, pb, o, pm, pl);                                  \
    }
#define KVD_INST_G(g_) KVD_INST(g_, f32, LA_KV_F32) KVD_INST(g_, f16, LA_KV_F16) KVD_INST(g_, bf16, LA_KV_BF16)
KVD_INST_G(1) KVD_INST_G(2) KVD_INST_G(3) KVD_INST_G(4) KVD_INST_G(5) KVD_INST_G(6)
#undef KVD_INST_G
#undef KVD_INST
#define KVD_ROW(g_) {kvd_chunk_##g_##f32, kvd_chunk_##g_##f16, kvd_chunk_##g_##bf16}
static const kvd_chunk_fn kvd_chunk_fns[6][3] = {KVD_ROW(1), KVD_ROW(2), KVD_ROW(3),
                                                 KVD_ROW(4), KVD_ROW(5), KVD_ROW(6)};
#undef KVD_ROW

static void chunk_fast(la_kv_cache *c, const void *k, const void *v, la_kv_storage ty, int64_t m,
                       const float *cs, const float *qg, float *restrict lg, int64_t ldl, float *pb,
                       float *o, float *pm, float *pl) {
    const int G = c->p.H / c->p.Hkv;
    const int ti = ty == LA_KV_F16 ? 1 : ty == LA_KV_BF16 ? 2 : 0;
    assert(G >= 1 && G <= 6 && (ty == LA_KV_F32 || ti > 0));
    kvd_chunk_fns[G - 1][ti](c->p.D, k, v, m, cs, qg, lg, ldl, pb, o, pm, pl);
}

/* 1 if this cache's items take the AVX2 path: the CPU has AVX2, FMA and F16C (and
 * LA_PORTABLE is unset), D a multiple of 16 (whole vectors in each RoPE half), G <= 6
 * (the accumulators fit in registers) */
static int fast_ok(const la_kv_cache *c) {
    const la_cpu_caps *cpu = la_cpu();
    const int G = c->p.H / c->p.Hkv;
    return cpu->avx2 && cpu->fma && cpu->f16c && c->p.D % 16 == 0 && G >= 1 && G <= 6;
}
#endif

/* One work item: kv head hk, keys [j0, j0 + m). Logits of query head g into lg + g * n
 * (the (G, n) block of this kv head), partials into slot (hk, ci). */
static void chunk_item(la_kv_cache *c, const la_kv_layer *L, int hk, int64_t ci, int64_t nch, int64_t n, int rotates,
                       float *restrict lg, int tid) {
    const int D = c->p.D, G = c->p.H / c->p.Hkv, CH = LA_KV_DEC_CHUNK;
    const size_t Dz = (size_t)D;
    const int64_t j0 = ci * CH, m = n - j0 < CH ? n - j0 : CH;
    float *kb = c->d_kb + (size_t)tid * CH * Dz, *vb = c->d_vb + (size_t)tid * CH * Dz;
    float *pb = c->d_p + (size_t)tid * G * CH;
#ifdef LA_KVD_X86
    if (fast_ok(c)) {
        const size_t slot = ((size_t)hk * nch + ci) * G;
        const float *cs = rotates ? c->s_cs + (size_t)j0 * Dz : NULL;
        const void *k = kb, *v = vb;
        la_kv_storage ty = c->p.storage;
        if (ty == LA_KV_INT8) { /* dequantised into the buffers first, then read as float */
            la_kv_rows_f32(c, L, 0, (size_t)hk, (size_t)j0, (size_t)m, kb);
            la_kv_rows_f32(c, L, 1, (size_t)hk, (size_t)j0, (size_t)m, vb);
            ty = LA_KV_F32;
        } else {
            const size_t off = ((size_t)hk * (size_t)c->cap + (size_t)j0) * Dz * la_kv_elt_size(ty);
            k = (const char *)L->k + off, v = (const char *)L->v + off;
        }
        chunk_fast(c, k, v, ty, m, cs, c->d_q + (size_t)hk * G * Dz, lg + j0, n, pb, c->d_o + slot * Dz,
                   c->d_m + slot, c->d_l + slot);
        return;
    }
#endif
    /* keys: converted (exact) and rotated by their slot */
    la_kv_rows_f32(c, L, 0, (size_t)hk, (size_t)j0, (size_t)m, kb);
    if (rotates)
        for (int64_t j = 0; j < m; j++) la_kv_rotate(kb + (size_t)j * Dz, c->s_cs + (size_t)(j0 + j) * Dz, D);
    const float *qg = c->d_q + (size_t)hk * G * Dz;
    for (int64_t j = 0; j < m; j++) {
        const float *kr = kb + (size_t)j * Dz;
        for (int g = 0; g < G; g++) lg[(size_t)g * n + j0 + j] = dot8(qg + (size_t)g * Dz, kr, D);
    }
    /* per query head: chunk max, probabilities relative to it, their sum */
    const size_t slot = ((size_t)hk * nch + ci) * G;
    for (int g = 0; g < G; g++) {
        const float *s = lg + (size_t)g * n + j0;
        float mx = s[0];
        for (int64_t j = 1; j < m; j++) mx = s[j] > mx ? s[j] : mx;
        float *p = pb + (size_t)g * CH, l = 0.0f;
        for (int64_t j = 0; j < m; j++) {
            p[j] = expf(s[j] - mx);
            l += p[j];
        }
        c->d_m[slot + g] = mx;
        c->d_l[slot + g] = l;
    }
    /* values: each row read once for the G heads */
    la_kv_rows_f32(c, L, 1, (size_t)hk, (size_t)j0, (size_t)m, vb);
    float *o = c->d_o + slot * Dz;
    memset(o, 0, (size_t)G * Dz * sizeof(float));
    for (int64_t j = 0; j < m; j++) {
        const float *vr = vb + (size_t)j * Dz;
        for (int g = 0; g < G; g++) {
            const float pj = pb[(size_t)g * CH + j];
            float *og = o + (size_t)g * Dz;
            for (int d = 0; d < D; d++) og[d] += pj * vr[d];
        }
    }
}

la_status la_kv_decode_attend(la_kv_cache *c, int layer, const la_spec *spec, const float *q, float *out,
                              float *row_stat, float *mass, int n_threads) {
    if (!c || !spec || !q || !out) return la_fail(LA_EINVAL, "la_kv_decode_attend: NULL cache, spec, q or out");
    if (!la_kv_decode_ok(c, spec, NULL))
        return la_fail(LA_EUNSUPPORTED, "la_kv_decode_attend: spec not supported by the decode kernel");
    const la_kv_layer *L = &c->layers[layer];
    const int64_t n = L->len;
    if (n < 1) return la_fail(LA_EINVAL, "la_kv_decode_attend: layer %d holds no token; append first", layer);
    const int D = c->p.D, H = c->p.H, Hkv = c->p.Hkv, G = H / Hkv;
    const size_t Dz = (size_t)D;
    int rotates;
    LA_TRY(la_kv_rope_table(c, spec, n, &rotates));
    /* queries at slot n - 1, the logit factor of that row and 1/sqrt(D) folded in */
    const float f = (float)(la_kv_row_factor(spec, n - 1, c->C) / sqrt((double)D));
    for (int h = 0; h < H; h++) {
        float *qr = c->d_q + (size_t)h * Dz;
        memcpy(qr, q + (size_t)h * Dz, Dz * sizeof(float));
        if (rotates) la_kv_rotate(qr, c->s_cs + (size_t)(n - 1) * Dz, D);
        for (int d = 0; d < D; d++) qr[d] *= f;
    }
    /* a work item is one chunk of every kv head in turn: the chunk's RoPE table rows (as many
     * bytes as an f16 key row) are then read from memory once per layer and from the L1/L2
     * cache for the other kv heads, not once per kv head */
    const int64_t nch = (n + LA_KV_DEC_CHUNK - 1) / LA_KV_DEC_CHUNK, items = nch;
    float *lg = c->mass; /* (H, n) logits, then probabilities when asked */
    int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
    if (nt > c->d_nthr) nt = c->d_nthr; /* per-thread buffers were sized at la_kv_new */
    if (nt > items) nt = (int)items;
    if (nt < 1) nt = 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int64_t it = 0; it < items; it++) {
        for (int hk = 0; hk < Hkv; hk++)
            chunk_item(c, L, hk, it, nch, n, rotates, lg + (size_t)hk * G * (size_t)n, omp_get_thread_num());
    }
    /* merge each head's chunks in chunk order */
    for (int h = 0; h < H; h++) {
        const int hk = h / G, g = h % G;
        const float *pm = c->d_m + (size_t)hk * nch * G + g, *pl = c->d_l + (size_t)hk * nch * G + g;
        float M = pm[0];
        for (int64_t ci = 1; ci < nch; ci++) M = pm[ci * G] > M ? pm[ci * G] : M;
        float Z = 0.0f, *dst = out + (size_t)h * Dz;
        memset(dst, 0, Dz * sizeof(float));
        for (int64_t ci = 0; ci < nch; ci++) {
            const float w = expf(pm[ci * G] - M);
            const float *oc = c->d_o + (((size_t)hk * nch + ci) * G + g) * Dz;
            Z += w * pl[ci * G];
            for (int d = 0; d < D; d++) dst[d] += w * oc[d];
        }
        const float iz = 1.0f / Z;
        for (int d = 0; d < D; d++) dst[d] *= iz;
        if (row_stat) row_stat[h] = M + logf(Z);
        if (mass) {
            const float *s = lg + (size_t)h * n;
            float *mh = mass + (size_t)h * n;
            for (int64_t j = 0; j < n; j++) mh[j] = expf(s[j] - M) * iz;
        }
    }
    return LA_OK;
}
