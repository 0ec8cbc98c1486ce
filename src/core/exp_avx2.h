/* exp_avx2.h -- the kernels' exp on 8 lanes (AVX2 + FMA), shared by core/half.c's
 * la_exp_sub_f32 (decode) and attn/tile_rows.c's la_exp_sub (the fused kernels):
 * t = n ln2 + r with n = round(t log2 e) and ln2 split in two (an exact reduction), then the
 * degree-7 Taylor polynomial in r with the constants of core/half.h (LA_EXP_*), evaluated by
 * fused multiply-adds in Horner order. Returns the polynomial (in [0.7, 1.5)) and n; the
 * caller scales by 2^n its own way (flush to zero or gradual underflow). */
#ifndef LA_CORE_EXP_AVX2_H
#define LA_CORE_EXP_AVX2_H
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "core/half.h"

static inline __attribute__((always_inline, target("avx2,fma"))) __m256 la_exp_poly8(__m256 t, __m256 *nn) {
    *nn = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(LA_EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(*nn, _mm256_set1_ps(LA_EXP_LN2_HI), t);
    r = _mm256_fnmadd_ps(*nn, _mm256_set1_ps(LA_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(LA_EXP_C7);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LA_EXP_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LA_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LA_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LA_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(LA_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}
#endif
#endif /* LA_CORE_EXP_AVX2_H */
