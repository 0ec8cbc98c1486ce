/* tile.c -- the tile products and the vectorised exp used by the attention kernels.
 * One product shape covers the forward and backward passes:
 *     C[i][0:N] (+)= sum_k A(i, k) B[k][0:N]
 * S = Q K^T is taken with K transposed into (D, BK); P V, dS K, P^T dO and dS^T Q read
 * their A operand with strides. la_mm picks a register-blocked kernel at run time (6 x 64
 * on AVX-512, 6 x 16 on AVX2 + FMA), each bitwise equal to la_mm_generic; the other helpers
 * below use AVX-512 when the build targets it. */
#include "attn/attn_internal.h"
#include "core/half.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

void la_mm_generic(int M, int N, int K, const float *A, size_t sai, size_t sak,
                   const float *B, int ldb, float *C, int ldc, int acc) {
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        if (!acc) memset(c, 0, sizeof(float) * (size_t)N);
        for (int k = 0; k < K; k++) {
            float a = A[i * sai + k * sak];
            const float *b = B + (size_t)k * ldb;
            for (int n = 0; n < N; n++) c[n] = fmaf(a, b[n], c[n]); /* fused, as the AVX-512 kernel */
        }
    }
}

#if defined(__x86_64__) || defined(__i386__)
#define LA_TILE_X86 1
/* Register-blocked kernels, chosen at run time (la_cpu(); LA_PORTABLE=1 takes
 * la_mm_generic). Each keeps one accumulator per C element, starts it from C (acc) or +0
 * (as la_mm_generic's memset) and applies the fused multiply-adds over k in increasing order:
 * per element the same chain as la_mm_generic, so all three give bitwise the same C. */

/* AVX-512: MI rows x NV vectors of 16 columns; the last vector uses mask lm. */
static inline __attribute__((always_inline, target("avx512f"))) void
mm_block(const int MI, const int NV, int K, const float *A, size_t sai, size_t sak,
         const float *B, int ldb, float *C, int ldc, int acc, __mmask16 lm) {
    __m512 c[6][4];
    for (int i = 0; i < MI; i++)
        for (int v = 0; v < NV; v++) {
            __mmask16 m = v == NV - 1 ? lm : 0xFFFF;
            c[i][v] = acc ? _mm512_maskz_loadu_ps(m, C + (size_t)i * ldc + 16 * v) : _mm512_setzero_ps();
        }
    for (int k = 0; k < K; k++) {
        const float *b = B + (size_t)k * ldb;
        __m512 bv[4];
        for (int v = 0; v < NV; v++) {
            __mmask16 m = v == NV - 1 ? lm : 0xFFFF;
            bv[v] = _mm512_maskz_loadu_ps(m, b + 16 * v);
        }
        const float *a = A + k * sak;
        for (int i = 0; i < MI; i++) {
            __m512 av = _mm512_set1_ps(a[i * sai]);
            for (int v = 0; v < NV; v++) c[i][v] = _mm512_fmadd_ps(av, bv[v], c[i][v]);
        }
    }
    for (int i = 0; i < MI; i++)
        for (int v = 0; v < NV; v++) {
            __mmask16 m = v == NV - 1 ? lm : 0xFFFF;
            _mm512_mask_storeu_ps(C + (size_t)i * ldc + 16 * v, m, c[i][v]);
        }
}

#define MM_ROWS(NV)                                                                          \
    switch (mi) {                                                                            \
    case 6: mm_block(6, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                 \
    case 5: mm_block(5, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                 \
    case 4: mm_block(4, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                 \
    case 3: mm_block(3, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                 \
    case 2: mm_block(2, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                 \
    default: mm_block(1, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                \
    }

__attribute__((target("avx512f"))) static void mm_avx512(int M, int N, int K, const float *A, size_t sai,
                                                         size_t sak, const float *B, int ldb, float *C, int ldc,
                                                         int acc) {
    for (int n0 = 0; n0 < N; n0 += 64) {
        int nn = N - n0 < 64 ? N - n0 : 64;
        int nv = (nn + 15) / 16;
        int rem = nn - 16 * (nv - 1);
        __mmask16 lm = (__mmask16)(rem == 16 ? 0xFFFF : ((1u << rem) - 1));
        for (int i0 = 0; i0 < M; i0 += 6) {
            int mi = M - i0 < 6 ? M - i0 : 6;
            const float *a = A + i0 * sai;
            const float *b = B + n0;
            float *c = C + (size_t)i0 * ldc + n0;
            switch (nv) {
            case 4: MM_ROWS(4) break;
            case 3: MM_ROWS(3) break;
            case 2: MM_ROWS(2) break;
            default: MM_ROWS(1) break;
            }
        }
    }
}
#undef MM_ROWS

/* AVX2 + FMA: MI (<= 6) rows x NV (<= 2) vectors of 8 columns (12 accumulators, 2 B
 * vectors and the broadcast A value: 15 of the 16 ymm registers); the last vector loads
 * and stores through mask lm (lanes past N are neither read nor written). */
static inline __attribute__((always_inline, target("avx2,fma"))) void
mm_block8(const int MI, const int NV, int K, const float *A, size_t sai, size_t sak, const float *B, int ldb,
          float *C, int ldc, int acc, __m256i lm) {
    const __m256i all = _mm256_set1_epi32(-1);
    __m256 c[6][2];
    for (int i = 0; i < MI; i++)
        for (int v = 0; v < NV; v++)
            c[i][v] = acc ? _mm256_maskload_ps(C + (size_t)i * ldc + 8 * v, v == NV - 1 ? lm : all)
                          : _mm256_setzero_ps();
    for (int k = 0; k < K; k++) {
        const float *b = B + (size_t)k * ldb;
        __m256 bv[2];
        for (int v = 0; v < NV; v++) bv[v] = _mm256_maskload_ps(b + 8 * v, v == NV - 1 ? lm : all);
        const float *a = A + k * sak;
        for (int i = 0; i < MI; i++) {
            const __m256 av = _mm256_broadcast_ss(a + i * sai);
            for (int v = 0; v < NV; v++) c[i][v] = _mm256_fmadd_ps(av, bv[v], c[i][v]);
        }
    }
    for (int i = 0; i < MI; i++)
        for (int v = 0; v < NV; v++) _mm256_maskstore_ps(C + (size_t)i * ldc + 8 * v, v == NV - 1 ? lm : all, c[i][v]);
}

#define MM_ROWS8(NV)                                                                         \
    switch (mi) {                                                                            \
    case 6: mm_block8(6, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                \
    case 5: mm_block8(5, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                \
    case 4: mm_block8(4, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                \
    case 3: mm_block8(3, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                \
    case 2: mm_block8(2, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;                \
    default: mm_block8(1, NV, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;               \
    }

__attribute__((target("avx2,fma"))) static void mm_avx2(int M, int N, int K, const float *A, size_t sai,
                                                        size_t sak, const float *B, int ldb, float *C, int ldc,
                                                        int acc) {
    for (int n0 = 0; n0 < N; n0 += 16) {
        const int nn = N - n0 < 16 ? N - n0 : 16, nv = (nn + 7) / 8, rem = nn - 8 * (nv - 1);
        /* lane l of the last vector is live when l < rem */
        const __m256i lm = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int i0 = 0; i0 < M; i0 += 6) {
            const int mi = M - i0 < 6 ? M - i0 : 6;
            const float *a = A + i0 * sai;
            const float *b = B + n0;
            float *c = C + (size_t)i0 * ldc + n0;
            if (nv == 2) {
                MM_ROWS8(2)
            } else {
                MM_ROWS8(1)
            }
        }
    }
}
#undef MM_ROWS8
#endif

void la_mm(int M, int N, int K, const float *A, size_t sai, size_t sak, const float *B,
           int ldb, float *C, int ldc, int acc) {
#ifdef LA_TILE_X86
    const la_cpu_caps *cpu = la_cpu();
    if (cpu->avx512f) {
        mm_avx512(M, N, K, A, sai, sak, B, ldb, C, ldc, acc);
        return;
    }
    if (cpu->avx2 && cpu->fma) {
        mm_avx2(M, N, K, A, sai, sak, B, ldb, C, ldc, acc);
        return;
    }
#endif
    la_mm_generic(M, N, K, A, sai, sak, B, ldb, C, ldc, acc);
}

void la_mm_rows(const la_rowvis *rows, int M, int j0, int n, int D, const float *P, int ldp,
                const float *X, int ldx, float *C, int ldc) {
    for (int r = 0; r < M; r++) {
        int cr[4];
        int nr = la_row_cols(&rows[r], j0, n, cr);
        float *c = C + (size_t)r * ldc;
        const float *p = P + (size_t)r * ldp;
        for (int g = 0; g < nr; g++)
            for (int col = cr[2 * g]; col < cr[2 * g + 1]; col++) {
                float a = p[col];
                const float *x = X + (size_t)col * ldx;
                /* fused multiply-add written out: the sparse products (below) must form the
                 * same value whatever the optimiser would contract */
                for (int d = 0; d < D; d++) c[d] = fmaf(a, x[d], c[d]);
            }
    }
}

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
#endif

void la_transpose(const float *src, int n, int D, int lds, float *dst, int ldd) {
    for (int d = 0; d < D; d++) {
        float *o = dst + (size_t)d * ldd;
        for (int c = n; c < ldd; c++) o[c] = 0.0f;
    }
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
#endif
    for (; c0 < n; c0 += 16) {
        int c1 = c0 + 16 < n ? c0 + 16 : n;
        for (int d = 0; d < D; d++) {
            float *o = dst + (size_t)d * ldd;
            for (int c = c0; c < c1; c++) o[c] = src[(size_t)c * lds + d];
        }
    }
}

float la_row_max(const float *x, int n) {
    int i = 0;
    float m = -INFINITY;
#ifdef __AVX512F__
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (; i + 16 <= n; i += 16) vm = _mm512_max_ps(vm, _mm512_loadu_ps(x + i));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        vm = _mm512_max_ps(vm, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, x + i));
        i = n;
    }
    m = _mm512_reduce_max_ps(vm);
#endif
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

float la_row_sum(const float *x, int n) {
    int i = 0;
    float s = 0.0f;
#ifdef __AVX512F__
    __m512 vs = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) vs = _mm512_add_ps(vs, _mm512_loadu_ps(x + i));
    if (i < n) {
        vs = _mm512_add_ps(vs, _mm512_maskz_loadu_ps((__mmask16)((1u << (n - i)) - 1), x + i));
        i = n;
    }
    s = _mm512_reduce_add_ps(vs);
#endif
    for (; i < n; i++) s += x[i];
    return s;
}

float la_row_dot_live(const float *a, const float *b, const float *L, int n) {
    int i = 0;
    float s = 0.0f;
#ifdef __AVX512F__
    __m512 vs = _mm512_setzero_ps(), ninf = _mm512_set1_ps(-INFINITY);
    for (; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __mmask16 live = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, L + i), ninf, _CMP_NEQ_UQ);
        vs = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(live, a + i), _mm512_maskz_loadu_ps(live, b + i), vs, live);
    }
    return _mm512_reduce_add_ps(vs);
#endif
    for (; i < n; i++)
        if (L[i] != -INFINITY) s += a[i] * b[i];
    return s;
}

float la_row_plogit(const float *P, const float *L, float mx, int n) {
    int i = 0;
    float s = 0.0f;
#ifdef __AVX512F__
    __m512 vs = _mm512_setzero_ps(), vm = _mm512_set1_ps(mx), ninf = _mm512_set1_ps(-INFINITY);
    for (; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 l = _mm512_mask_loadu_ps(ninf, k, L + i);
        __mmask16 live = _mm512_cmp_ps_mask(l, ninf, _CMP_NEQ_UQ);
        __m512 p = _mm512_maskz_loadu_ps(live, P + i);
        vs = _mm512_mask3_fmadd_ps(p, _mm512_sub_ps(l, vm), vs, live);
    }
    return _mm512_reduce_add_ps(vs);
#endif
    for (; i < n; i++)
        if (L[i] != -INFINITY) s += P[i] * (L[i] - mx);
    return s;
}

/* y = exp(x - mx), exactly 0 where x = -inf (masked). exp by range reduction
 * x = n ln2 + r, |r| <= ln2/2, Taylor polynomial of degree 7 (relative error < 1e-8 before
 * rounding), scaled by 2^n with scalef (gradual underflow to 0); the constants are core/half.h's
 * LA_EXP_*, shared with the AVX2 la_exp_sub_f32. */
float la_exp_sub(const float *x, float mx, float *y, int n) {
    int i = 0;
#ifdef __AVX512F__
    const __m512 vm = _mm512_set1_ps(mx), lo = _mm512_set1_ps(-104.0f);
    const __m512 l2e = _mm512_set1_ps(LA_EXP_LOG2E);
    const __m512 ln2h = _mm512_set1_ps(LA_EXP_LN2_HI), ln2l = _mm512_set1_ps(LA_EXP_LN2_LO);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 acc = _mm512_setzero_ps();
    for (; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 xv = _mm512_mask_loadu_ps(ninf, k, x + i);
        __mmask16 live = _mm512_cmp_ps_mask(xv, ninf, _CMP_NEQ_UQ);
        __m512 t = _mm512_max_ps(_mm512_sub_ps(xv, vm), lo);
        __m512 nn = _mm512_roundscale_ps(_mm512_mul_ps(t, l2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 r = _mm512_fnmadd_ps(nn, ln2h, t);
        r = _mm512_fnmadd_ps(nn, ln2l, r);
        __m512 p = _mm512_set1_ps(LA_EXP_C7);
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LA_EXP_C6));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LA_EXP_C5));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LA_EXP_C4));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LA_EXP_C3));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(LA_EXP_C2));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
        p = _mm512_scalef_ps(p, nn);
        p = _mm512_maskz_mov_ps(live, p);
        acc = _mm512_add_ps(acc, p);
        _mm512_mask_storeu_ps(y + i, k, p);
    }
    return _mm512_reduce_add_ps(acc);
#endif
    float sum = 0.0f;
    for (; i < n; i++) {
        y[i] = x[i] == -INFINITY ? 0.0f : expf(x[i] - mx);
        sum += y[i];
    }
    return sum;
}

/* ---- sparse tile products (entmax rows: a few nonzero p per row) ---------------------
 * Each computes, for the entries it touches, exactly the fused multiply-add chain (fmaf,
 * never a separate multiply and add, at any optimisation level) that la_mm / la_mm_rows
 * compute (same operands, same order, starting from the same value), and only
 * leaves out terms whose A factor is zero (which add +-0 to a sum that is never -0, so
 * change nothing): results are bitwise those of the dense products. */

int la_nz_cols(const float *p, int n, int32_t *idx) {
    int k = 0;
    int x = 0;
#ifdef __AVX512F__
    for (; x < n; x += 16) {
        __mmask16 lm = n - x >= 16 ? 0xFFFF : (__mmask16)((1u << (n - x)) - 1);
        __mmask16 nz = _mm512_mask_cmp_ps_mask(lm, _mm512_maskz_loadu_ps(lm, p + x), _mm512_setzero_ps(), _CMP_NEQ_UQ);
        while (nz) {
            idx[k++] = x + __builtin_ctz(nz);
            nz &= (__mmask16)(nz - 1);
        }
    }
#endif
    for (; x < n; x++)
        if (p[x] != 0.0f) idx[k++] = x;
    return k;
}

int la_gt_cols(const float *l, int n, float thr, int32_t *idx) {
    int k = 0;
    int x = 0;
#ifdef __AVX512F__
    const __m512 vt = _mm512_set1_ps(thr);
    for (; x < n; x += 16) {
        __mmask16 lm = n - x >= 16 ? 0xFFFF : (__mmask16)((1u << (n - x)) - 1);
        __mmask16 gt = _mm512_mask_cmp_ps_mask(lm, _mm512_maskz_loadu_ps(lm, l + x), vt, _CMP_GT_OQ);
        while (gt) {
            idx[k++] = x + __builtin_ctz(gt);
            gt &= (__mmask16)(gt - 1);
        }
    }
#endif
    for (; x < n; x++)
        if (l[x] > thr) idx[k++] = x;
    return k;
}

void la_spmm_row(const float *p, const int32_t *idx, int nnz, const float *X, int ldx, float *c, int D) {
    for (int t = 0; t < nnz; t++) {
        float a = p[idx[t]];
        const float *x = X + (size_t)idx[t] * ldx;
        for (int d = 0; d < D; d++) c[d] = fmaf(a, x[d], c[d]);
    }
}

void la_spscatter_row(const float *p, const int32_t *idx, int nnz, const float *x, float *C, int ldc, int D) {
    for (int t = 0; t < nnz; t++) {
        float a = p[idx[t]];
        float *c = C + (size_t)idx[t] * ldc;
        for (int d = 0; d < D; d++) c[d] = fmaf(a, x[d], c[d]);
    }
}

void la_dot_entries(int n, const int32_t *ri, const int32_t *xi, const float *A, int lda,
                    const float *B, int ldb, int K, float *C, int ldc) {
    for (int t0 = 0; t0 < n; t0 += 8) {
        /* 8 independent chains at a time (short groups repeat their last entry) */
        const float *a[8], *b[8];
        float acc[8];
        for (int i = 0; i < 8; i++) {
            int t = t0 + i < n ? t0 + i : n - 1;
            a[i] = A + (size_t)ri[t] * lda;
            b[i] = B + (size_t)xi[t] * ldb;
            acc[i] = 0.0f;
        }
        for (int k = 0; k < K; k++)
            for (int i = 0; i < 8; i++) acc[i] = fmaf(a[i][k], b[i][k], acc[i]);
        for (int i = 0; i < 8 && t0 + i < n; i++) C[(size_t)ri[t0 + i] * ldc + xi[t0 + i]] = acc[i];
    }
}
