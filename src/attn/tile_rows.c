/* tile_rows.c -- the row helpers of the attention kernels: transpose of a key/value tile,
 * row max / sum / dot products, the vectorised exp, the column lists of sparse rows.
 *
 * Three implementations, one result where it can be one:
 *   - AVX-512 where the build targets it (-march=native on such a CPU);
 *   - AVX2 + FMA chosen at run time (la_cpu(); LA_PORTABLE=1 turns it off). It computes
 *     exactly what the AVX-512 code computes: 16 lanes held as two 8-lane halves (lanes
 *     0-7 and 8-15), each element by the same operations (the exp polynomial with the same
 *     fused multiply-adds, 2^n by an exact scaling with one rounding, as scalef), tails by
 *     masks, and the 16 lanes reduced in the order of GCC's _mm512_reduce_{add,max}_ps
 *     (upper 256 op lower 256, upper 128 op lower 128, lanes {0,1} op {2,3}, lane 0 op lane
 *     1). So the kernels give the same bits on either ISA; tests/test_softmax_kernel.c
 *     checks the path this CPU takes against a scalar emulation of those steps;
 *   - the generic loops (la_*_generic): expf and sequential sums, a few ulp from the vector
 *     paths per element (the test states the bound). */
#include "attn/attn_internal.h"
#include "core/exp_avx2.h"
#include "core/half.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if (defined(__x86_64__) || defined(__i386__)) && !defined(__AVX512F__)
#define LA_ROWS_AVX2 1
static int use_avx2(void) {
    const la_cpu_caps *c = la_cpu();
    return c->avx2 && c->fma;
}
#endif

/* ---- generic loops -------------------------------------------------------------------- */

/* columns c0..n-1 of the transpose, and the zero fill of columns n..ldd-1 */
static void transpose_from(const float *src, int c0, int n, int D, int lds, float *dst, int ldd) {
    for (int d = 0; d < D; d++) {
        float *o = dst + (size_t)d * ldd;
        for (int c = c0; c < n; c++) o[c] = src[(size_t)c * lds + d];
        for (int c = n; c < ldd; c++) o[c] = 0.0f;
    }
}

void la_transpose_generic(const float *src, int n, int D, int lds, float *dst, int ldd) {
    transpose_from(src, 0, n, D, lds, dst, ldd);
}

float la_row_max_generic(const float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

float la_row_sum_generic(const float *x, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[i];
    return s;
}

float la_row_dot_live_generic(const float *a, const float *b, const float *L, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        if (L[i] != -INFINITY) s += a[i] * b[i];
    return s;
}

float la_row_plogit_generic(const float *P, const float *L, float mx, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        if (L[i] != -INFINITY) s += P[i] * (L[i] - mx);
    return s;
}

float la_exp_sub_generic(const float *x, float mx, float *y, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        y[i] = x[i] == -INFINITY ? 0.0f : expf(x[i] - mx);
        sum += y[i];
    }
    return sum;
}

void la_sigmoid_row_generic(const float *l, float b, float *p, int n) {
    /* e^ overflows to inf for l + b < -88, giving exactly 0 */
    for (int x = 0; x < n; x++) p[x] = l[x] == -INFINITY ? 0.0f : 1.0f / (1.0f + expf(-(l[x] + b)));
}

static int nz_cols_generic(const float *p, int x, int n, int32_t *idx, int k) {
    for (; x < n; x++)
        if (p[x] != 0.0f) idx[k++] = x;
    return k;
}

static int gt_cols_generic(const float *l, int x, int n, float thr, int32_t *idx, int k) {
    for (; x < n; x++)
        if (l[x] > thr) idx[k++] = x;
    return k;
}

/* ---- AVX-512 (compile time) ------------------------------------------------------------ */
#ifdef __AVX512F__
/* 16 x 16 block transpose in registers: dst[i][j] = src[j][i]. */
static inline void tr16x16(const float *src, size_t lds, float *dst, size_t ldd) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++) {
            t[8 * h + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0x88);
            t[8 * h + 4 + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0xDD);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + i * ldd, r[i]);
}

static inline __mmask16 tail16(int m) { return m >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << m) - 1); }

/* exp(t) of 16 lanes: t = n ln2 + r (ln2 in two parts), the degree-7 polynomial in r
 * (core/half.h's LA_EXP_*, Horner by fused multiply-adds), then scalef by 2^n (one rounding:
 * gradual underflow, inf past 88.7) */
static inline __m512 exp16_t(__m512 t) {
    __m512 nn = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(LA_EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(nn, _mm512_set1_ps(LA_EXP_LN2_HI), t);
    r = _mm512_fnmadd_ps(nn, _mm512_set1_ps(LA_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(LA_EXP_C7);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LA_EXP_C6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LA_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LA_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LA_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LA_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, nn);
}
#endif

/* ---- AVX2 + FMA (run time): 16 lanes as two halves ------------------------------------- */
#ifdef LA_ROWS_AVX2
#define AVX2_FN __attribute__((target("avx2,fma")))

typedef struct {
    __m256 lo, hi; /* lanes 0-7, 8-15 */
} v16;
typedef struct {
    __m256i lo, hi; /* all-ones where the lane is below the count */
} m16;

static inline AVX2_FN m16 tail_mask(int m) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    m16 k = {_mm256_cmpgt_epi32(_mm256_set1_epi32(m), iota), _mm256_cmpgt_epi32(_mm256_set1_epi32(m - 8), iota)};
    return k;
}
/* load of 16 lanes, the lanes from m on `fill` (and never read); whole groups (m >= 16)
 * without masks (masked loads and stores are slow on some CPUs: AMD Zen) */
static inline AVX2_FN v16 load16(const float *x, int m, __m256 fill) {
    if (m >= 16) {
        v16 v = {_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)};
        return v;
    }
    m16 k = tail_mask(m);
    v16 v = {_mm256_blendv_ps(fill, _mm256_maskload_ps(x, k.lo), _mm256_castsi256_ps(k.lo)),
             _mm256_blendv_ps(fill, _mm256_maskload_ps(x + 8, k.hi), _mm256_castsi256_ps(k.hi))};
    return v;
}
/* GCC's _mm512_reduce_add_ps tree (avx512fintrin.h): T3 = hi256 + lo256, T6 = hi128 +
 * lo128 of T3, T8 = T6 + T6[2,3,0,1], result T8[0] + T8[1] */
static inline AVX2_FN float reduce_add16(v16 v) {
    __m256 t3 = _mm256_add_ps(v.hi, v.lo);
    __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(_mm_add_ss(t8, _mm_shuffle_ps(t8, t8, _MM_SHUFFLE(1, 1, 1, 1))));
}
/* _mm512_reduce_max_ps: the same tree with max, each max(first, second) in GCC's operand
 * order (max_ps returns its second operand on a tie of +-0 or a NaN) */
static inline AVX2_FN float reduce_max16(v16 v) {
    __m256 t3 = _mm256_max_ps(v.hi, v.lo);
    __m128 t6 = _mm_max_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    __m128 t8 = _mm_max_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
    __m128 t10 = _mm_max_ps(t8, _mm_shuffle_ps(t8, t8, _MM_SHUFFLE(0, 1, 0, 1)));
    return _mm_cvtss_f32(t10);
}

/* 8 x 8 block transpose in registers: dst[i][j] = src[j][i]. */
static inline AVX2_FN void tr8x8(const float *src, size_t lds, float *dst, size_t ldd) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * lds);
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[4 + i], 0x20));
        _mm256_storeu_ps(dst + (4 + i) * ldd, _mm256_permute2f128_ps(r[i], r[4 + i], 0x31));
    }
}

static AVX2_FN int transpose_avx2(const float *src, int n, int D, int lds, float *dst, int ldd) {
    int c0 = 0, D8 = D & ~7;
    for (; c0 + 8 <= n; c0 += 8) {
        for (int d0 = 0; d0 < D8; d0 += 8)
            tr8x8(src + (size_t)c0 * lds + d0, (size_t)lds, dst + (size_t)d0 * ldd + c0, (size_t)ldd);
        for (int d = D8; d < D; d++)
            for (int c = c0; c < c0 + 8; c++) dst[(size_t)d * ldd + c] = src[(size_t)c * lds + d];
    }
    return c0;
}

static AVX2_FN float row_max_avx2(const float *x, int n) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    v16 m = {ninf, ninf};
    for (int i = 0; i < n; i += 16) {
        v16 v = load16(x + i, n - i, ninf);
        m.lo = _mm256_max_ps(m.lo, v.lo), m.hi = _mm256_max_ps(m.hi, v.hi);
    }
    return reduce_max16(m);
}

static AVX2_FN float row_sum_avx2(const float *x, int n) {
    const __m256 z = _mm256_setzero_ps();
    v16 s = {z, z};
    for (int i = 0; i < n; i += 16) {
        v16 v = load16(x + i, n - i, z);
        s.lo = _mm256_add_ps(s.lo, v.lo), s.hi = _mm256_add_ps(s.hi, v.hi);
    }
    return reduce_add16(s);
}

/* one half of la_row_dot_live: s += a b where live (k and L != -inf), else s unchanged */
static inline AVX2_FN __m256 dot_live8(__m256 s, const float *a, const float *b, const float *L, __m256i k) {
    const __m256 live = _mm256_and_ps(_mm256_castsi256_ps(k),
                                      _mm256_cmp_ps(_mm256_maskload_ps(L, k), _mm256_set1_ps(-INFINITY), _CMP_NEQ_UQ));
    const __m256i lk = _mm256_castps_si256(live);
    return _mm256_blendv_ps(s, _mm256_fmadd_ps(_mm256_maskload_ps(a, lk), _mm256_maskload_ps(b, lk), s), live);
}

static AVX2_FN float row_dot_live_avx2(const float *a, const float *b, const float *L, int n) {
    v16 s = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < n; i += 16) {
        m16 k = tail_mask(n - i);
        s.lo = dot_live8(s.lo, a + i, b + i, L + i, k.lo);
        s.hi = dot_live8(s.hi, a + i + 8, b + i + 8, L + i + 8, k.hi);
    }
    return reduce_add16(s);
}

/* one half of la_row_plogit: s += P (L - mx) where L (read through k, -inf outside) is live */
static inline AVX2_FN __m256 plogit8(__m256 s, const float *P, const float *L, __m256 vm, __m256i k) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256 l = _mm256_blendv_ps(ninf, _mm256_maskload_ps(L, k), _mm256_castsi256_ps(k));
    const __m256 live = _mm256_cmp_ps(l, ninf, _CMP_NEQ_UQ);
    const __m256 p = _mm256_maskload_ps(P, _mm256_castps_si256(live));
    return _mm256_blendv_ps(s, _mm256_fmadd_ps(p, _mm256_sub_ps(l, vm), s), live);
}

static AVX2_FN float row_plogit_avx2(const float *P, const float *L, float mx, int n) {
    const __m256 vm = _mm256_set1_ps(mx);
    v16 s = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < n; i += 16) {
        m16 k = tail_mask(n - i);
        s.lo = plogit8(s.lo, P + i, L + i, vm, k.lo);
        s.hi = plogit8(s.hi, P + i + 8, L + i + 8, vm, k.hi);
    }
    return reduce_add16(s);
}

/* exp(t) of one half, as exp16_t (the AVX-512 path) computes it per lane; 2^n (scalef)
 * as p 2^n1 2^n2 with n1 = clamp(n, -64, 64): the first product is exact (p in [0.7, 1.5),
 * a normal result), the second rounds once, as scalef does, also to a subnormal or to inf */
static inline AVX2_FN __m256 exp8_t(__m256 t) {
    __m256 nn, p = la_exp_poly8(t, &nn);
    const __m256 n1 = _mm256_min_ps(_mm256_max_ps(nn, _mm256_set1_ps(-64.0f)), _mm256_set1_ps(64.0f));
    const __m256 n2 = _mm256_min_ps(_mm256_max_ps(_mm256_sub_ps(nn, n1), _mm256_set1_ps(-126.0f)),
                                    _mm256_set1_ps(127.0f));
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n1), bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n2), bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
/* exp(x - mx), exactly 0 where x = -inf, as la_exp_sub's AVX-512 loop per lane */
static inline AVX2_FN __m256 exp8(__m256 xv, __m256 vm) {
    const __m256 live = _mm256_cmp_ps(xv, _mm256_set1_ps(-INFINITY), _CMP_NEQ_UQ);
    const __m256 t = _mm256_max_ps(_mm256_sub_ps(xv, vm), _mm256_set1_ps(-104.0f));
    return _mm256_and_ps(exp8_t(t), live);
}
/* sigmoid(l + b) = 1 / (1 + exp(t)), t = -(l + b) clamped to [-104, 104] (exp(104) is inf in
 * float: p = 0; exp(-104) is 0: p = 1), as la_sigmoid_row's AVX-512 loop per lane */
static inline AVX2_FN __m256 sigmoid8(__m256 lv, __m256 vb) {
    const __m256 live = _mm256_cmp_ps(lv, _mm256_set1_ps(-INFINITY), _CMP_NEQ_UQ);
    __m256 t = _mm256_xor_ps(_mm256_add_ps(lv, vb), _mm256_set1_ps(-0.0f));
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(104.0f));
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_and_ps(_mm256_div_ps(one, _mm256_add_ps(one, exp8_t(t))), live);
}

static AVX2_FN float exp_sub_avx2(const float *x, float mx, float *y, int n) {
    const __m256 vm = _mm256_set1_ps(mx), ninf = _mm256_set1_ps(-INFINITY);
    v16 acc = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < n; i += 16) {
        v16 xv = load16(x + i, n - i, ninf);
        __m256 plo = exp8(xv.lo, vm), phi = exp8(xv.hi, vm);
        acc.lo = _mm256_add_ps(acc.lo, plo), acc.hi = _mm256_add_ps(acc.hi, phi);
        if (n - i >= 16) {
            _mm256_storeu_ps(y + i, plo), _mm256_storeu_ps(y + i + 8, phi);
        } else {
            m16 k = tail_mask(n - i);
            _mm256_maskstore_ps(y + i, k.lo, plo), _mm256_maskstore_ps(y + i + 8, k.hi, phi);
        }
    }
    return reduce_add16(acc);
}

static AVX2_FN void sigmoid_row_avx2(const float *l, float b, float *p, int n) {
    const __m256 vb = _mm256_set1_ps(b), ninf = _mm256_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16) {
        v16 lv = load16(l + i, n - i, ninf);
        __m256 plo = sigmoid8(lv.lo, vb), phi = sigmoid8(lv.hi, vb);
        if (n - i >= 16) {
            _mm256_storeu_ps(p + i, plo), _mm256_storeu_ps(p + i + 8, phi);
        } else {
            m16 k = tail_mask(n - i);
            _mm256_maskstore_ps(p + i, k.lo, plo), _mm256_maskstore_ps(p + i + 8, k.hi, phi);
        }
    }
}

static AVX2_FN int nz_cols_avx2(const float *p, int n, int32_t *idx, int *k) {
    int x = 0;
    for (; x + 8 <= n; x += 8) {
        unsigned nz = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + x), _mm256_setzero_ps(), _CMP_NEQ_UQ));
        while (nz) {
            idx[(*k)++] = x + __builtin_ctz(nz);
            nz &= nz - 1;
        }
    }
    return x;
}

static AVX2_FN int gt_cols_avx2(const float *l, int n, float thr, int32_t *idx, int *k) {
    int x = 0;
    const __m256 vt = _mm256_set1_ps(thr);
    for (; x + 8 <= n; x += 8) {
        unsigned gt = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(l + x), vt, _CMP_GT_OQ));
        while (gt) {
            idx[(*k)++] = x + __builtin_ctz(gt);
            gt &= gt - 1;
        }
    }
    return x;
}
#undef AVX2_FN
#endif

/* ---- the entry points ------------------------------------------------------------------ */

void la_transpose(const float *src, int n, int D, int lds, float *dst, int ldd) {
    int c0 = 0;
#ifdef __AVX512F__
    int D16 = D & ~15;
    for (; c0 + 16 <= n; c0 += 16) {
        for (int d0 = 0; d0 < D16; d0 += 16)
            tr16x16(src + (size_t)c0 * lds + d0, (size_t)lds, dst + (size_t)d0 * ldd + c0, (size_t)ldd);
        for (int d = D16; d < D; d++) {
            float *o = dst + (size_t)d * ldd;
            for (int c = c0; c < c0 + 16; c++) o[c] = src[(size_t)c * lds + d];
        }
    }
#elif defined(LA_ROWS_AVX2)
    if (use_avx2()) c0 = transpose_avx2(src, n, D, lds, dst, ldd);
#endif
    transpose_from(src, c0, n, D, lds, dst, ldd);
}

float la_row_max(const float *x, int n) {
#ifdef __AVX512F__
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16) vm = _mm512_max_ps(vm, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail16(n - i), x + i));
    return _mm512_reduce_max_ps(vm);
#else
#ifdef LA_ROWS_AVX2
    if (use_avx2()) return row_max_avx2(x, n);
#endif
    return la_row_max_generic(x, n);
#endif
}

float la_row_sum(const float *x, int n) {
#ifdef __AVX512F__
    __m512 vs = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) vs = _mm512_add_ps(vs, _mm512_maskz_loadu_ps(tail16(n - i), x + i));
    return _mm512_reduce_add_ps(vs);
#else
#ifdef LA_ROWS_AVX2
    if (use_avx2()) return row_sum_avx2(x, n);
#endif
    return la_row_sum_generic(x, n);
#endif
}

float la_row_dot_live(const float *a, const float *b, const float *L, int n) {
#ifdef __AVX512F__
    __m512 vs = _mm512_setzero_ps(), ninf = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = tail16(n - i);
        __mmask16 live = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, L + i), ninf, _CMP_NEQ_UQ);
        vs = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(live, a + i), _mm512_maskz_loadu_ps(live, b + i), vs, live);
    }
    return _mm512_reduce_add_ps(vs);
#else
#ifdef LA_ROWS_AVX2
    if (use_avx2()) return row_dot_live_avx2(a, b, L, n);
#endif
    return la_row_dot_live_generic(a, b, L, n);
#endif
}

float la_row_plogit(const float *P, const float *L, float mx, int n) {
#ifdef __AVX512F__
    __m512 vs = _mm512_setzero_ps(), vm = _mm512_set1_ps(mx), ninf = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16) {
        __m512 l = _mm512_mask_loadu_ps(ninf, tail16(n - i), L + i);
        __mmask16 live = _mm512_cmp_ps_mask(l, ninf, _CMP_NEQ_UQ);
        __m512 p = _mm512_maskz_loadu_ps(live, P + i);
        vs = _mm512_mask3_fmadd_ps(p, _mm512_sub_ps(l, vm), vs, live);
    }
    return _mm512_reduce_add_ps(vs);
#else
#ifdef LA_ROWS_AVX2
    if (use_avx2()) return row_plogit_avx2(P, L, mx, n);
#endif
    return la_row_plogit_generic(P, L, mx, n);
#endif
}

/* y = exp(x - mx), exactly 0 where x = -inf (masked). exp by range reduction
 * x = n ln2 + r, |r| <= ln2/2, Taylor polynomial of degree 7 (relative error < 1e-8 before
 * rounding), scaled by 2^n with scalef (gradual underflow to 0); the constants are core/half.h's
 * LA_EXP_*, shared with the AVX2 la_exp_sub_f32. */
float la_exp_sub(const float *x, float mx, float *y, int n) {
#ifdef __AVX512F__
    const __m512 vm = _mm512_set1_ps(mx), lo = _mm512_set1_ps(-104.0f);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = tail16(n - i);
        __m512 xv = _mm512_mask_loadu_ps(ninf, k, x + i);
        __mmask16 live = _mm512_cmp_ps_mask(xv, ninf, _CMP_NEQ_UQ);
        __m512 p = _mm512_maskz_mov_ps(live, exp16_t(_mm512_max_ps(_mm512_sub_ps(xv, vm), lo)));
        acc = _mm512_add_ps(acc, p);
        _mm512_mask_storeu_ps(y + i, k, p);
    }
    return _mm512_reduce_add_ps(acc);
#else
#ifdef LA_ROWS_AVX2
    if (use_avx2()) return exp_sub_avx2(x, mx, y, n);
#endif
    return la_exp_sub_generic(x, mx, y, n);
#endif
}

/* p = sigmoid(l + b) = 1 / (1 + exp(t)), t = -(l + b) clamped to [-104, 104], exp as in
 * la_exp_sub (polynomial, scalef: exp(104) = inf gives p = 0 exactly); 0 where l = -inf. */
void la_sigmoid_row(const float *l, float b, float *p, int n) {
#ifdef __AVX512F__
    const __m512 vb = _mm512_set1_ps(b), ninf = _mm512_set1_ps(-INFINITY), one = _mm512_set1_ps(1.0f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = tail16(n - i);
        __m512 lv = _mm512_mask_loadu_ps(ninf, k, l + i);
        __mmask16 live = _mm512_cmp_ps_mask(lv, ninf, _CMP_NEQ_UQ);
        __m512 t = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_add_ps(lv, vb)), sign));
        t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(104.0f));
        __m512 q = exp16_t(t);
        _mm512_mask_storeu_ps(p + i, k, _mm512_maskz_mov_ps(live, _mm512_div_ps(one, _mm512_add_ps(one, q))));
    }
#else
#ifdef LA_ROWS_AVX2
    if (use_avx2()) {
        sigmoid_row_avx2(l, b, p, n);
        return;
    }
#endif
    la_sigmoid_row_generic(l, b, p, n);
#endif
}

int la_nz_cols(const float *p, int n, int32_t *idx) {
    int k = 0, x = 0;
#ifdef __AVX512F__
    for (; x < n; x += 16) {
        __mmask16 lm = tail16(n - x);
        __mmask16 nz = _mm512_mask_cmp_ps_mask(lm, _mm512_maskz_loadu_ps(lm, p + x), _mm512_setzero_ps(), _CMP_NEQ_UQ);
        while (nz) {
            idx[k++] = x + __builtin_ctz(nz);
            nz &= (__mmask16)(nz - 1);
        }
    }
    return k;
#elif defined(LA_ROWS_AVX2)
    if (use_avx2()) x = nz_cols_avx2(p, n, idx, &k);
#endif
    return nz_cols_generic(p, x, n, idx, k);
}

int la_gt_cols(const float *l, int n, float thr, int32_t *idx) {
    int k = 0, x = 0;
#ifdef __AVX512F__
    const __m512 vt = _mm512_set1_ps(thr);
    for (; x < n; x += 16) {
        __mmask16 lm = tail16(n - x);
        __mmask16 gt = _mm512_mask_cmp_ps_mask(lm, _mm512_maskz_loadu_ps(lm, l + x), vt, _CMP_GT_OQ);
        while (gt) {
            idx[k++] = x + __builtin_ctz(gt);
            gt &= (__mmask16)(gt - 1);
        }
    }
    return k;
#elif defined(LA_ROWS_AVX2)
    if (use_avx2()) x = gt_cols_avx2(l, n, thr, idx, &k);
#endif
    return gt_cols_generic(l, x, n, thr, idx, k);
}
