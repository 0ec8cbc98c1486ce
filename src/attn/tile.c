/* tile.c -- the tile products of the attention kernels (the row helpers: tile_rows.c).
 * One product shape covers the forward and backward passes:
 *     C[i][0:N] (+)= sum_k A(i, k) B[k][0:N]
 * S = Q K^T is taken with K transposed into (D, BK); P V, dS K, P^T dO and dS^T Q read
 * their A operand with strides. la_mm picks a register-blocked kernel at run time (6 x 64
 * on AVX-512, 6 x 16 on AVX2 + FMA), each bitwise equal to la_mm_generic. */
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
 * vectors and the broadcast A value: 15 of the 16 ymm registers). Unless FULL, the last
 * vector loads and stores through mask lm (lanes past N are neither read nor written);
 * whole vectors use plain loads and stores (masked stores are slow on some CPUs: AMD Zen). */
static inline __attribute__((always_inline, target("avx2,fma"))) __m256 ld8(const float *p, int masked, __m256i lm) {
    return masked ? _mm256_maskload_ps(p, lm) : _mm256_loadu_ps(p);
}
static inline __attribute__((always_inline, target("avx2,fma"))) void
mm_block8(const int MI, const int NV, const int FULL, int K, const float *A, size_t sai, size_t sak, const float *B,
          int ldb, float *C, int ldc, int acc, __m256i lm) {
    __m256 c[6][2];
    for (int i = 0; i < MI; i++)
        for (int v = 0; v < NV; v++)
            c[i][v] = acc ? ld8(C + (size_t)i * ldc + 8 * v, !FULL && v == NV - 1, lm) : _mm256_setzero_ps();
    for (int k = 0; k < K; k++) {
        const float *b = B + (size_t)k * ldb;
        __m256 bv[2];
        for (int v = 0; v < NV; v++) bv[v] = ld8(b + 8 * v, !FULL && v == NV - 1, lm);
        const float *a = A + k * sak;
        for (int i = 0; i < MI; i++) {
            const __m256 av = _mm256_broadcast_ss(a + i * sai);
            for (int v = 0; v < NV; v++) c[i][v] = _mm256_fmadd_ps(av, bv[v], c[i][v]);
        }
    }
    for (int i = 0; i < MI; i++)
        for (int v = 0; v < NV; v++) {
            float *cp = C + (size_t)i * ldc + 8 * v;
            if (!FULL && v == NV - 1)
                _mm256_maskstore_ps(cp, lm, c[i][v]);
            else
                _mm256_storeu_ps(cp, c[i][v]);
        }
}

#define MM_ROWS8(NV, FULL)                                                                   \
    switch (mi) {                                                                            \
    case 6: mm_block8(6, NV, FULL, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;          \
    case 5: mm_block8(5, NV, FULL, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;          \
    case 4: mm_block8(4, NV, FULL, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;          \
    case 3: mm_block8(3, NV, FULL, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;          \
    case 2: mm_block8(2, NV, FULL, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;          \
    default: mm_block8(1, NV, FULL, K, a, sai, sak, b, ldb, c, ldc, acc, lm); break;         \
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
            if (nn == 16) {
                MM_ROWS8(2, 1)
            } else if (nv == 2) {
                MM_ROWS8(2, 0)
            } else {
                MM_ROWS8(1, 0)
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

/* ---- sparse tile products (entmax rows: a few nonzero p per row) ---------------------
 * Each computes, for the entries it touches, exactly the fused multiply-add chain (fmaf,
 * never a separate multiply and add, at any optimisation level) that la_mm / la_mm_rows
 * compute (same operands, same order, starting from the same value), and only
 * leaves out terms whose A factor is zero (which add +-0 to a sum that is never -0, so
 * change nothing): results are bitwise those of the dense products. */

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
