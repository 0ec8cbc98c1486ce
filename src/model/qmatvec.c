/* qmatvec.c -- y = W x with W in a ggml block type (the memory-bound decode path).
 *
 * Each row is one dot product over its blocks; rows are split over OpenMP threads. The
 * weights are decoded in registers and never written out: per block the integer quants
 * are widened to float and multiplied with x, the block scale is applied once per block
 * (broadcast into a vector accumulator, so no horizontal sum per block), and the
 * "min" terms of the affine types (Q4_1, Q5_1, Q4_K, Q5_K: w = d*q + m) become
 * m * sum(x over the block), with those block sums of x computed once per call:
 *   sum_i w_i x_i = sum_b [ d_b * sum_{i in b} q_i x_i  +  m_b * sum_{i in b} x_i ].
 * x stays float32 (ggml instead quantizes x to 8 bits; longattn keeps the reference
 * accuracy; la_qmatvec_q8x, at the end of this file, is ggml's way as an option). The
 * AVX2+FMA+F16C kernels are used when the compiler targets them
 * (-march=native); otherwise each block is dequantized (src/io) and dotted in float with
 * eight partial sums, a loop the compiler vectorises. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "core/internal.h"
#include "longattn/gguf.h"
#include "longattn/model.h"
#include "io/ggml_types.h"

/* LA_QMV_PORTABLE forces the portable path (tests/test_qmatvec.c builds this file a second
 * time with it, so both paths are tested on an AVX2 machine) */
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(LA_QMV_PORTABLE)
#define QMV_AVX2 1
#include <immintrin.h>
#endif

/* affine types need per-32-value sums of x */
static int needs_xsum(uint32_t t) {
    return t == LA_GGML_Q4_1 || t == LA_GGML_Q5_1 || t == LA_GGML_Q4_K || t == LA_GGML_Q5_K;
}

/* ---- portable fallback: dequantize one block, dot with 8 partial sums ---- */
static float dot_generic(uint32_t type, const uint8_t *row, const float *x, int64_t cols) {
    const int64_t bs = la_ggml_block_size(type), nb = la_ggml_block_bytes(type);
    float w[LA_QK_K], part[8] = {0};
    double total = 0.0;
    if (bs == 1) { /* F32/F16/BF16: decode 256 at a time */
        for (int64_t c0 = 0; c0 < cols; c0 += LA_QK_K) {
            int64_t n = cols - c0 < LA_QK_K ? cols - c0 : LA_QK_K;
            la_ggml_dequant(type, row + c0 * nb, w, n);
            int64_t i = 0;
            for (; i + 8 <= n; i += 8)
                for (int k = 0; k < 8; k++) part[k] += w[i + k] * x[c0 + i + k];
            for (; i < n; i++) part[0] += w[i] * x[c0 + i];
        }
    } else {
        for (int64_t b = 0; b < cols / bs; b++) {
            la_ggml_dequant(type, row + b * nb, w, bs);
            for (int64_t i = 0; i < bs; i += 8)
                for (int k = 0; k < 8; k++) part[k] += w[i + k] * x[b * bs + i + k];
        }
    }
    for (int k = 0; k < 8; k++) total += part[k];
    return (float)total;
}

#ifdef QMV_AVX2
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 signed / unsigned bytes -> 8 floats */
static inline __m256 i8x8(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
static inline __m256 u8x8(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }

/* sum over 32 values of q * x, q given as 32 bytes in two 16-byte halves (lo = values
 * 0..15, hi = 16..31), signed or not */
static inline __m256 qx32_s(__m128i lo, __m128i hi, const float *x) {
    __m256 p = _mm256_mul_ps(i8x8(lo), _mm256_loadu_ps(x));
    p = _mm256_fmadd_ps(i8x8(_mm_srli_si128(lo, 8)), _mm256_loadu_ps(x + 8), p);
    p = _mm256_fmadd_ps(i8x8(hi), _mm256_loadu_ps(x + 16), p);
    return _mm256_fmadd_ps(i8x8(_mm_srli_si128(hi, 8)), _mm256_loadu_ps(x + 24), p);
}
static inline __m256 qx32_u(__m128i lo, __m128i hi, const float *x) {
    __m256 p = _mm256_mul_ps(u8x8(lo), _mm256_loadu_ps(x));
    p = _mm256_fmadd_ps(u8x8(_mm_srli_si128(lo, 8)), _mm256_loadu_ps(x + 8), p);
    p = _mm256_fmadd_ps(u8x8(hi), _mm256_loadu_ps(x + 16), p);
    return _mm256_fmadd_ps(u8x8(_mm_srli_si128(hi, 8)), _mm256_loadu_ps(x + 24), p);
}

/* 32 bits of qh -> bit j of the 32 values as 0x10 bytes: lo (values 0..15), hi (16..31) */
static inline void qh_bits(uint32_t qh, __m128i *lo, __m128i *hi) {
    /* byte j of the broadcast word holds bits 8*(j/8).. ; select bit j%8 of byte j/8 */
    const __m128i shuf_lo = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m128i shuf_hi = _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m128i bit = _mm_set1_epi64x((long long)0x8040201008040201ull);
    __m128i w = _mm_cvtsi32_si128((int)qh);
    __m128i l = _mm_and_si128(_mm_shuffle_epi8(w, shuf_lo), bit);
    __m128i h = _mm_and_si128(_mm_shuffle_epi8(w, shuf_hi), bit);
    *lo = _mm_and_si128(_mm_cmpeq_epi8(l, bit), _mm_set1_epi8(0x10));
    *hi = _mm_and_si128(_mm_cmpeq_epi8(h, bit), _mm_set1_epi8(0x10));
}

static inline void nibbles(const uint8_t *qs, __m128i *lo, __m128i *hi) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    *lo = _mm_and_si128(v, m4);
    *hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
}

static float dot_q8_0(const uint8_t *b, const float *x, const float *xs, int64_t nbk) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nbk; i++, b += 34, x += 32) {
        __m128i lo = _mm_loadu_si128((const __m128i *)(b + 2));
        __m128i hi = _mm_loadu_si128((const __m128i *)(b + 18));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(la_f16_to_f32(la_ld16(b))), qx32_s(lo, hi, x), acc);
    }
    return hsum8(acc);
}

static float dot_q4_0(const uint8_t *b, const float *x, const float *xs, int64_t nbk) {
    __m256 acc = _mm256_setzero_ps();
    const __m128i eight = _mm_set1_epi8(8);
    for (int64_t i = 0; i < nbk; i++, b += 18, x += 32) {
        __m128i lo, hi;
        nibbles(b + 2, &lo, &hi);
        __m256 p = qx32_s(_mm_sub_epi8(lo, eight), _mm_sub_epi8(hi, eight), x);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(la_f16_to_f32(la_ld16(b))), p, acc);
    }
    return hsum8(acc);
}

static float dot_q4_1(const uint8_t *b, const float *x, const float *xs, int64_t nbk) {
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t i = 0; i < nbk; i++, b += 20, x += 32) {
        __m128i lo, hi;
        nibbles(b + 4, &lo, &hi);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(la_f16_to_f32(la_ld16(b))), qx32_u(lo, hi, x), acc);
        accm += la_f16_to_f32(la_ld16(b + 2)) * xs[i];
    }
    return hsum8(acc) + accm;
}

static float dot_q5_0(const uint8_t *b, const float *x, const float *xs, int64_t nbk) {
    __m256 acc = _mm256_setzero_ps();
    const __m128i sixteen = _mm_set1_epi8(16);
    for (int64_t i = 0; i < nbk; i++, b += 22, x += 32) {
        __m128i lo, hi, hlo, hhi;
        nibbles(b + 6, &lo, &hi);
        qh_bits(la_ld32(b + 2), &hlo, &hhi);
        lo = _mm_sub_epi8(_mm_or_si128(lo, hlo), sixteen);
        hi = _mm_sub_epi8(_mm_or_si128(hi, hhi), sixteen);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(la_f16_to_f32(la_ld16(b))), qx32_s(lo, hi, x), acc);
    }
    return hsum8(acc);
}

static float dot_q5_1(const uint8_t *b, const float *x, const float *xs, int64_t nbk) {
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t i = 0; i < nbk; i++, b += 24, x += 32) {
        __m128i lo, hi, hlo, hhi;
        nibbles(b + 8, &lo, &hi);
        qh_bits(la_ld32(b + 4), &hlo, &hhi);
        __m256 p = qx32_u(_mm_or_si128(lo, hlo), _mm_or_si128(hi, hhi), x);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(la_f16_to_f32(la_ld16(b))), p, acc);
        accm += la_f16_to_f32(la_ld16(b + 2)) * xs[i];
    }
    return hsum8(acc) + accm;
}

/* Q4_K / Q5_K (qh = NULL for Q4_K): 8 sub-blocks of 32, x advanced by the caller */
static float dot_k4(const uint8_t *b, const float *x, const float *xs, int64_t nbk, int q5) {
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    const int64_t stride = q5 ? 176 : 144;
    const __m128i m4 = _mm_set1_epi8(0x0F), one = _mm_set1_epi8(1);
    for (int64_t i = 0; i < nbk; i++, b += stride, x += 256, xs += 8) {
        const float d = la_f16_to_f32(la_ld16(b)), dmin = la_f16_to_f32(la_ld16(b + 2));
        const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + (q5 ? 48 : 16);
        __m128i qh_lo = _mm_setzero_si128(), qh_hi = _mm_setzero_si128();
        if (q5) {
            qh_lo = _mm_loadu_si128((const __m128i *)qh);
            qh_hi = _mm_loadu_si128((const __m128i *)(qh + 16));
        }
        for (int c = 0; c < 4; c++) {
            uint8_t sc[2], m[2];
            la_scale_min_k4(2 * c, scales, &sc[0], &m[0]);
            la_scale_min_k4(2 * c + 1, scales, &sc[1], &m[1]);
            __m128i v0 = _mm_loadu_si128((const __m128i *)(qs + 32 * c));
            __m128i v1 = _mm_loadu_si128((const __m128i *)(qs + 32 * c + 16));
            for (int s = 0; s < 2; s++) { /* s = 0: low nibbles, sub-block 2c; 1: high, 2c+1 */
                __m128i a = s ? _mm_and_si128(_mm_srli_epi16(v0, 4), m4) : _mm_and_si128(v0, m4);
                __m128i e = s ? _mm_and_si128(_mm_srli_epi16(v1, 4), m4) : _mm_and_si128(v1, m4);
                if (q5) {
                    const int sb = 2 * c + s;
                    __m128i sh = _mm_cvtsi32_si128(sb);
                    a = _mm_or_si128(a, _mm_slli_epi16(_mm_and_si128(_mm_srl_epi16(qh_lo, sh), one), 4));
                    e = _mm_or_si128(e, _mm_slli_epi16(_mm_and_si128(_mm_srl_epi16(qh_hi, sh), one), 4));
                }
                __m256 p = qx32_u(a, e, x + 64 * c + 32 * s);
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc[s]), p, acc);
                accm += dmin * (float)m[s] * xs[2 * c + s];
            }
        }
    }
    return hsum8(acc) - accm;
}

static float dot_q4_k(const uint8_t *b, const float *x, const float *xs, int64_t nbk) {
    return dot_k4(b, x, xs, nbk, 0);
}
static float dot_q5_k(const uint8_t *b, const float *x, const float *xs, int64_t nbk) {
    return dot_k4(b, x, xs, nbk, 1);
}

static float dot_q6_k(const uint8_t *b, const float *x, const float *xs, int64_t nbk) {
    __m256 acc = _mm256_setzero_ps();
    const __m128i m4 = _mm_set1_epi8(0x0F), m3 = _mm_set1_epi8(3), k32 = _mm_set1_epi8(32);
    for (int64_t i = 0; i < nbk; i++, b += 210, x += 256) {
        const float d = la_f16_to_f32(la_ld16(b + 208));
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
            const float *xh = x + 128 * h;
            for (int half16 = 0; half16 < 2; half16++) { /* l in [16*half16, 16*half16 + 16) */
                const int l = 16 * half16;
                __m128i a = _mm_loadu_si128((const __m128i *)(ql + l));
                __m128i e = _mm_loadu_si128((const __m128i *)(ql + l + 32));
                __m128i hb = _mm_loadu_si128((const __m128i *)(qh + l));
                __m128i q[4];
                q[0] = _mm_or_si128(_mm_and_si128(a, m4), _mm_slli_epi16(_mm_and_si128(hb, m3), 4));
                q[1] = _mm_or_si128(_mm_and_si128(e, m4),
                                    _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hb, 2), m3), 4));
                q[2] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), m4),
                                    _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hb, 4), m3), 4));
                q[3] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(e, 4), m4),
                                    _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hb, 6), m3), 4));
                for (int k = 0; k < 4; k++) { /* values 32k + l .. +16 of the half */
                    __m128i qk = _mm_sub_epi8(q[k], k32);
                    const float *xk = xh + 32 * k + l;
                    __m256 p = _mm256_mul_ps(i8x8(qk), _mm256_loadu_ps(xk));
                    p = _mm256_fmadd_ps(i8x8(_mm_srli_si128(qk, 8)), _mm256_loadu_ps(xk + 8), p);
                    const float s = d * (float)sc[8 * h + 2 * k + half16];
                    acc = _mm256_fmadd_ps(_mm256_set1_ps(s), p, acc);
                }
            }
        }
    }
    return hsum8(acc);
}

static float dot_f16(const uint8_t *b, const float *x, int64_t cols) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= cols; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 2 * i))),
                               _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 2 * i + 16))),
                               _mm256_loadu_ps(x + i + 8), acc1);
    }
    float s = hsum8(_mm256_add_ps(acc0, acc1));
    for (; i < cols; i++) s += la_f16_to_f32(la_ld16(b + 2 * i)) * x[i];
    return s;
}

static float dot_bf16(const uint8_t *b, const float *x, int64_t cols) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= cols; i += 16) {
        __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(b + 2 * i)));
        __m256i g = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(b + 2 * i + 16)));
        acc0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(h, 16)),
                               _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(g, 16)),
                               _mm256_loadu_ps(x + i + 8), acc1);
    }
    float s = hsum8(_mm256_add_ps(acc0, acc1));
    for (; i < cols; i++) s += la_bf16_to_f32(la_ld16(b + 2 * i)) * x[i];
    return s;
}

static float dot_f32(const uint8_t *b, const float *x, int64_t cols) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= cols; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps((const float *)(const void *)(b + 4 * i)),
                               _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps((const float *)(const void *)(b + 4 * i + 32)),
                               _mm256_loadu_ps(x + i + 8), acc1);
    }
    float s = hsum8(_mm256_add_ps(acc0, acc1));
    for (; i < cols; i++) {
        float w;
        memcpy(&w, b + 4 * i, 4);
        s += w * x[i];
    }
    return s;
}
#endif /* QMV_AVX2 */

typedef float (*block_dot_fn)(const uint8_t *, const float *, const float *, int64_t);

static block_dot_fn block_kernel(uint32_t type) {
#ifdef QMV_AVX2
    switch (type) {
    case LA_GGML_Q8_0: return dot_q8_0;
    case LA_GGML_Q4_0: return dot_q4_0;
    case LA_GGML_Q4_1: return dot_q4_1;
    case LA_GGML_Q5_0: return dot_q5_0;
    case LA_GGML_Q5_1: return dot_q5_1;
    case LA_GGML_Q4_K: return dot_q4_k;
    case LA_GGML_Q5_K: return dot_q5_k;
    case LA_GGML_Q6_K: return dot_q6_k;
    default: return NULL;
    }
#else
    (void)type;
    return NULL;
#endif
}

static float row_dot(uint32_t type, block_dot_fn f, const uint8_t *row, const float *x,
                     const float *xs, int64_t cols) {
    if (f) return f(row, x, xs, cols / la_ggml_block_size(type));
#ifdef QMV_AVX2
    if (type == LA_GGML_F32) return dot_f32(row, x, cols);
    if (type == LA_GGML_F16) return dot_f16(row, x, cols);
    if (type == LA_GGML_BF16) return dot_bf16(row, x, cols);
#endif
    (void)xs;
    return dot_generic(type, row, x, cols);
}

/* xs[b] = sum of x over values 32b..32b+31, in order, for b < n32 */
static void block_sums(const float *x, int64_t n32, float *xs) {
    for (int64_t b = 0; b < n32; b++) {
        float s = 0.0f;
        for (int k = 0; k < 32; k++) s += x[32 * b + k];
        xs[b] = s;
    }
}

/* below this many weights one thread does the whole product */
#define QMV_PARALLEL_MIN (1 << 16)

/* the arguments of la_qmatvec / la_qmatvec_q8x (who: the caller's name for the message) */
static la_status check_args(const char *who, uint32_t type, const void *W, int64_t rows, int64_t cols,
                            const float *x, const float *y) {
    if (!W || !x || !y) return la_fail(LA_EINVAL, "%s: NULL W, x or y", who);
    if (!la_ggml_type_supported(type)) {
        const char *name = la_ggml_type_name(type);
        if (name) return la_fail(LA_EUNSUPPORTED, "%s: type %s is not supported; "
                                 "supported types: " LA_GGML_SUPPORTED, who, name);
        return la_fail(LA_EUNSUPPORTED, "%s: unknown type id %u", who, type);
    }
    const int64_t bs = la_ggml_block_size(type);
    if (rows < 0 || cols < 0 || cols % bs)
        return la_fail(LA_EINVAL, "%s: %lld x %lld %s matrix: rows and cols must be >= 0 "
                       "and cols a multiple of the block size %lld", who, (long long)rows,
                       (long long)cols, la_ggml_type_name(type), (long long)bs);
    return LA_OK;
}

la_status la_qmatvec(uint32_t type, const void *W, int64_t rows, int64_t cols, const float *x,
                     float *y) {
    LA_TRY(check_args("la_qmatvec", type, W, rows, cols, x, y));
    const int64_t rb = la_ggml_row_bytes(type, cols);
    block_dot_fn f = block_kernel(type);
    /* per-32 sums of x for the affine types (stack for rows up to 64K values) */
    float xs_stack[2048], *xs = NULL;
    if (f && needs_xsum(type)) {
        const int64_t n32 = cols / 32;
        xs = n32 <= 2048 ? xs_stack : la_malloc((size_t)n32 * sizeof *xs);
        if (!xs) return la_fail(LA_ENOMEM, "la_qmatvec: out of memory for %lld block sums",
                                (long long)n32);
        block_sums(x, n32, xs);
    }
    const uint8_t *w = W;
    const int par = rows * cols >= QMV_PARALLEL_MIN && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (par)
    for (int64_t r = 0; r < rows; r++) y[r] = row_dot(type, f, w + r * rb, x, xs, cols);
    if (xs && xs != xs_stack) free(xs);
    return LA_OK;
}

/* ---- x quantized to 8 bits: la_qmatvec_q8x (issue 27) --------------------------------
 * What llama.cpp does on its decode path (ggml's vec_dot of Q4_0 / Q4_1 / Q8_0 with Q8_0 /
 * Q8_1 activations): x is cut into blocks of 32, each stored as 32 signed bytes and one
 * float scale, and the weight blocks are dotted with it in integers. Per block b:
 *     dx_b = max_i |x_i| / 127,  qx_i = round-half-even(x_i / dx_b) in [-127, 127],
 *     sum_{i in b} w_i x_i ~= d_b dx_b sum_i q_i qx_i  (+ m_b sum_i x_i for Q4_1, with the
 *     float sum of x as in la_qmatvec: the min term keeps full precision).
 * The integer sum is exact. It is taken in 8 lanes of 4 consecutive values (lane l holds
 * values 4l..4l+3: _mm256_maddubs_epi16 then _mm256_madd_epi16 by ones), each lane
 * accumulated as acc_l = fma(float(lane_l), d_b dx_b, acc_l) over the blocks, and the lanes
 * reduced as hsum8 does. The portable path takes the same steps in scalar code, so both
 * give the same bits. */
#define Q8X_STACK_COLS 16384

static int has_q8x(uint32_t t) { return t == LA_GGML_Q4_0 || t == LA_GGML_Q4_1 || t == LA_GGML_Q8_0; }

/* x (cols, a multiple of 32) -> qx (cols) and dx (cols / 32). The vectorised loop takes
 * the same steps (an exact max, one division, one product, rounding half to even as
 * lrintf in the default rounding mode), so both give the same bytes. */
static void quantize_x(const float *x, int64_t cols, int8_t *qx, float *dx) {
    int64_t b = 0;
#ifdef QMV_AVX2
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (; b < cols / 32; b++) {
        const float *xb = x + 32 * b;
        __m256 v[4], m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            const __m256 a = _mm256_andnot_ps(sign, v[k]);
            m = _mm256_max_ps(m, a);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
        }
        if (!_mm256_testz_ps(nan, nan)) break; /* a NaN: the scalar loop below from here */
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        if (!(amax > 0.0f && amax <= FLT_MAX)) break;
        const __m256 id = _mm256_set1_ps(127.0f / amax);
        const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v[0], id)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v[1], id)),
                      i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v[2], id)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v[3], id));
        /* packs interleave 128-bit lanes: the permute puts the 32 bytes back in order */
        const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        _mm256_storeu_si256((__m256i *)(qx + 32 * b),
                            _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        dx[b] = amax / 127.0f;
    }
#endif
    for (; b < cols / 32; b++) {
        const float *xb = x + 32 * b;
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) { /* a NaN sticks, so that it reaches y as la_qmatvec's would */
            const float v = fabsf(xb[i]);
            amax = v > amax || v != v ? v : amax;
        }
        /* an all-zero block, or one with a NaN / inf (then d is NaN / inf): quants 0 */
        const int finite = amax > 0.0f && amax <= FLT_MAX;
        const float id = finite ? 127.0f / amax : 0.0f;
        for (int i = 0; i < 32; i++) qx[32 * b + i] = finite ? (int8_t)lrintf(xb[i] * id) : 0;
        dx[b] = amax / 127.0f;
    }
}

#ifndef QMV_AVX2
/* 8 lanes of 4 -> one float, in hsum8's order ((0+4)+(2+6)) + ((1+5)+(3+7)) */
static float lanes_sum(const float a[8]) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* one weight block's 32 quants as integers in value order (Q4_1: 0..15, Q4_0: -8..7,
 * Q8_0: -128..127), its scale d and (Q4_1) min m */
static void block_ints(uint32_t t, const uint8_t *b, int w[32], float *d, float *m) {
    *d = la_f16_to_f32(la_ld16(b));
    *m = 0.0f;
    if (t == LA_GGML_Q8_0) {
        for (int i = 0; i < 32; i++) w[i] = (int8_t)b[2 + i];
        return;
    }
    const uint8_t *qs = b + (t == LA_GGML_Q4_1 ? 4 : 2);
    const int off = t == LA_GGML_Q4_1 ? 0 : 8;
    if (t == LA_GGML_Q4_1) *m = la_f16_to_f32(la_ld16(b + 2));
    for (int i = 0; i < 16; i++) {
        w[i] = (qs[i] & 0x0F) - off;
        w[i + 16] = (qs[i] >> 4) - off;
    }
}

static float dot_q8x_generic(uint32_t t, const uint8_t *row, const int8_t *qx, const float *dx,
                             const float *xs, int64_t nbk) {
    const int64_t nb = la_ggml_block_bytes(t);
    float acc[8] = {0}, accm = 0.0f;
    for (int64_t i = 0; i < nbk; i++) {
        int w[32];
        float d, m;
        block_ints(t, row + i * nb, w, &d, &m);
        const float s = d * dx[i];
        for (int l = 0; l < 8; l++) {
            int32_t lane = 0;
            for (int k = 4 * l; k < 4 * l + 4; k++) lane += w[k] * qx[32 * i + k];
            acc[l] = fmaf((float)lane, s, acc[l]);
        }
        if (t == LA_GGML_Q4_1) accm = fmaf(m, xs[i], accm);
    }
    return lanes_sum(acc) + accm;
}
#endif

#ifdef QMV_AVX2
/* 8 lanes of 4 products w * qx, w unsigned (0..15) */
static inline __m256 lanes_u(__m256i w, __m256i qx) {
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(w, qx), _mm256_set1_epi16(1)));
}
/* the same with w signed: |w| times qx with w's sign (|-128| read as unsigned 128) */
static inline __m256 lanes_s(__m256i w, __m256i qx) {
    return lanes_u(_mm256_abs_epi8(w), _mm256_sign_epi8(qx, w));
}
/* the 32 nibbles of a Q4 block in value order: low nibbles (0..15), then high (16..31) */
static inline __m256i nibbles32(const uint8_t *qs) {
    __m128i lo, hi;
    nibbles(qs, &lo, &hi);
    return _mm256_set_m128i(hi, lo);
}

static float dot_q8x_avx2(uint32_t t, const uint8_t *b, const int8_t *qx, const float *dx,
                          const float *xs, int64_t nbk) {
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t i = 0; i < nbk; i++, qx += 32) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)qx);
        const __m256 s = _mm256_set1_ps(la_f16_to_f32(la_ld16(b)) * dx[i]);
        __m256 p;
        if (t == LA_GGML_Q4_1) {
            p = lanes_u(nibbles32(b + 4), q);
            accm = fmaf(la_f16_to_f32(la_ld16(b + 2)), xs[i], accm);
            b += 20;
        } else if (t == LA_GGML_Q4_0) {
            p = lanes_s(_mm256_sub_epi8(nibbles32(b + 2), _mm256_set1_epi8(8)), q);
            b += 18;
        } else {
            p = lanes_s(_mm256_loadu_si256((const __m256i *)(b + 2)), q);
            b += 34;
        }
        acc = _mm256_fmadd_ps(p, s, acc);
    }
    return hsum8(acc) + accm;
}
#endif

la_status la_qmatvec_q8x(uint32_t type, const void *W, int64_t rows, int64_t cols, const float *x,
                         float *y) {
    if (!has_q8x(type)) return la_qmatvec(type, W, rows, cols, x, y);
    LA_TRY(check_args("la_qmatvec_q8x", type, W, rows, cols, x, y));
    const int64_t nbk = cols / 32, rb = la_ggml_row_bytes(type, cols);
    /* dx and the float block sums xs (nbk each), then qx (cols bytes): on the stack up to
     * 16384 columns (20 KB), one allocation above */
    float stack[Q8X_STACK_COLS / 32 * 2 + Q8X_STACK_COLS / 4];
    const size_t need = 2 * sizeof(float) * (size_t)nbk + (size_t)cols;
    char *buf = cols <= Q8X_STACK_COLS ? (char *)stack : la_malloc(need);
    if (!buf) return la_fail(LA_ENOMEM, "la_qmatvec_q8x: out of memory for %lld quantized values",
                             (long long)cols);
    float *dx = (float *)(void *)buf, *xs = dx + nbk;
    int8_t *qx = (int8_t *)(xs + nbk);
    quantize_x(x, cols, qx, dx);
    if (needs_xsum(type)) block_sums(x, nbk, xs); /* Q4_1's min term */
    const uint8_t *w = W;
    const int par = rows * cols >= QMV_PARALLEL_MIN && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (par)
    for (int64_t r = 0; r < rows; r++) {
#ifdef QMV_AVX2
        y[r] = dot_q8x_avx2(type, w + r * rb, qx, dx, xs, nbk);
#else
        y[r] = dot_q8x_generic(type, w + r * rb, qx, dx, xs, nbk);
#endif
    }
    if (buf != (char *)stack) free(buf);
    return LA_OK;
}

la_status la_gguf_matvec(const la_gguf_tensor *t, const float *x, float *y) {
    if (!t) return la_fail(LA_EINVAL, "la_gguf_matvec: NULL tensor");
    if (!la_ggml_type_supported(t->type))
        return la_fail(LA_EUNSUPPORTED, "tensor '%s' has type %s, which longattn cannot multiply; "
                       "supported types: " LA_GGML_SUPPORTED, t->name,
                       la_ggml_type_name(t->type) ? la_ggml_type_name(t->type) : "(unknown)");
    return la_qmatvec(t->type, t->data, la_gguf_tensor_nrows(t), t->ne[0], x, y);
}
