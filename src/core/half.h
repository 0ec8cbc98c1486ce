/*
 * half.h -- reduced-precision element types and the CPU features that convert them
 * (layer core).
 *
 * One place for f16 (IEEE binary16) and bf16 (bfloat16: the top half of an IEEE float)
 * conversions and for run-time CPU detection, shared by the KV cache, the decode kernel,
 * the reduced-precision attention tiles and the trainer.
 *
 * Every conversion rounds to nearest, ties to even (IEEE 754 roundTiesToEven), keeps
 * infinities, turns NaN into a quiet NaN of the same sign, and handles f16 subnormals
 * and overflow (values >= 65520 become infinity). The fast paths (F16C, AVX-512F,
 * AVX512-BF16) implement the same rounding, so their results are bitwise those of the
 * portable path (tests/test_half.c checks all 2^16 halves and 2^24 float patterns per
 * path). Setting LA_PORTABLE=1 in the environment forces the portable path everywhere
 * (CI runs the tests both ways); it is read once, at the first call of la_cpu().
 */
#ifndef LA_CORE_HALF_H
#define LA_CORE_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "longattn/core.h"

/* CPU features the reduced-precision paths can use; all zero when LA_PORTABLE=1. */
typedef struct {
    int avx2, fma, f16c;           /* AVX2 + FMA + F16C (x86-64-v3) */
    int avx512f, avx512bw, avx512vl;
    int avx512bf16;                /* vcvtne2ps2bf16, vdpbf16ps */
    int avx512fp16;                /* half-precision arithmetic */
    int portable_forced;           /* LA_PORTABLE=1 was set */
} la_cpu_caps;

/* The features of this CPU, detected once (thread-safe). Never NULL. */
const la_cpu_caps *la_cpu(void);

/* Scalar conversions (portable C, exactly the fast paths' results). */
static inline float la_bf16_to_f32_s(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
uint16_t la_f32_to_bf16_s(float f);
float la_f16_to_f32_s(uint16_t h);
uint16_t la_f32_to_f16_s(float f);

/* Bulk conversions of n elements, dispatched on la_cpu(); dst and src never overlap. */
void la_cvt_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void la_cvt_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void la_cvt_f32_to_f16(uint16_t *dst, const float *src, size_t n);
void la_cvt_f16_to_f32(float *dst, const uint16_t *src, size_t n);

/* Round each float to the nearest bf16 / f16 value in place (x = to_f32(to_half(x))):
 * what a float32 operand becomes when it is stored in that type. */
void la_round_bf16(float *x, size_t n);
void la_round_f16(float *x, size_t n);

/* exp for the kernels: x = n ln2 + r, |r| <= ln2/2 (ln2 split in two for an exact
 * reduction), a Taylor polynomial of degree 7 in r (relative error < 1e-8 before rounding),
 * scaled by 2^n. The constants are shared by every vector implementation (attn/tile_rows.c's
 * la_exp_sub, AVX-512 and AVX2, and la_exp_sub_f32's AVX2 path below) so the ISAs compute the
 * same formula. */
#define LA_EXP_LOG2E 1.44269504088896341f
#define LA_EXP_LN2_HI 0.693359375f
#define LA_EXP_LN2_LO (-2.12194440e-4f)
#define LA_EXP_C7 (1.0f / 5040.0f)
#define LA_EXP_C6 (1.0f / 720.0f)
#define LA_EXP_C5 (1.0f / 120.0f)
#define LA_EXP_C4 (1.0f / 24.0f)
#define LA_EXP_C3 (1.0f / 6.0f)
#define LA_EXP_C2 0.5f

/* y[i] = exp(x[i] - mx) for i < n (x[i] <= mx, no NaN), returns the float32 sum of the y.
 * AVX2 + FMA where the CPU has them (la_cpu()): the polynomial above, eight lanes summed
 * in a fixed order, results below 2^-126 (x - mx < -87.3) flushed to 0; otherwise
 * (LA_PORTABLE=1) expf and a sequential sum. The two paths differ by a few ulp per element
 * (measured in tests/test_half.c); each is deterministic. */
float la_exp_sub_f32(const float *x, float mx, float *y, size_t n);

/* Bytes of one element of t (la_dtype, public: include/longattn/core.h). */
size_t la_dtype_size(la_dtype t);

#endif /* LA_CORE_HALF_H */
