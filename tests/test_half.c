/* test_half.c -- f16 / bf16 conversions (src/core/half.c) against an independent
 * reference: the nearest representable value found by exhaustive comparison in double
 * precision (ties to the even significand), and the dispatched fast paths against the
 * portable scalar code, bitwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "core/half.h"
#include "core/internal.h"

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* reference: the half (or bf16) nearest to x among the two neighbours that bracket it,
 * found by decoding every candidate in a sorted list of the finite positive values */
static uint16_t ref_round(double x, int bf16) {
    /* positive finite values of the type in increasing order are codes 0 .. maxcode */
    const int maxcode = bf16 ? 0x7f7f : 0x7bff;
    const double maxv = bf16 ? (double)la_bf16_to_f32_s(0x7f7f) : 65504.0;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    /* overflow: values at or past max + half an ulp of max round to infinity */
    double ulp_max = bf16 ? ldexp(1.0, 127 - 7) : ldexp(1.0, 15 - 10);
    if (a >= maxv + ulp_max / 2) return (uint16_t)(sign | (bf16 ? 0x7f80 : 0x7c00));
    int lo = 0, hi = maxcode; /* largest code with value <= a */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        double v = bf16 ? (double)la_bf16_to_f32_s((uint16_t)mid) : (double)la_f16_to_f32_s((uint16_t)mid);
        if (v <= a) lo = mid; else hi = mid - 1;
    }
    double vlo = bf16 ? (double)la_bf16_to_f32_s((uint16_t)lo) : (double)la_f16_to_f32_s((uint16_t)lo);
    if (vlo == a || lo == maxcode) return (uint16_t)(sign | lo);
    double vhi = bf16 ? (double)la_bf16_to_f32_s((uint16_t)(lo + 1)) : (double)la_f16_to_f32_s((uint16_t)(lo + 1));
    int pick = (a - vlo < vhi - a) ? lo : (a - vlo > vhi - a) ? lo + 1 : ((lo & 1) ? lo + 1 : lo);
    return (uint16_t)(sign | pick);
}

/* decoding f16: every finite half against ldexp arithmetic */
static void test_f16_decode_all(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        int e = (h >> 10) & 31, m = h & 0x3ff;
        float got = la_f16_to_f32_s((uint16_t)h);
        if (e == 31) {
            assert_true(m ? isnan(got) : isinf(got));
            continue;
        }
        double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
        if (h & 0x8000) v = -v;
        assert_true((double)got == v);
        assert_int_equal(signbit(got) != 0, (h & 0x8000) != 0);
    }
}

/* encoding: a spread of float bit patterns (every 97th pattern + the boundaries) against
 * the reference, for both types */
static void test_encode_against_reference(void **state) {
    (void)state;
    uint32_t special[] = {0x00000000u, 0x80000000u, 0x33000000u, 0x33000001u, 0x337fffffu,
                          0x38800000u, 0x387fffffu, 0x477fe000u, 0x477fefffu, 0x477ff000u,
                          0x7f7fffffu, 0x7f800000u, 0x00000001u, 0x3f800000u, 0x3f808000u,
                          0x3f818000u, 0x3f7fffffu};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        float f = bits_f(special[i]);
        assert_int_equal(la_f32_to_f16_s(f), ref_round(f, 0));
        assert_int_equal(la_f32_to_bf16_s(f), ref_round(f, 1));
    }
    for (uint64_t u = 0; u < 0x7f800000u; u += 9973) {
        float f = bits_f((uint32_t)u), g = -f;
        assert_int_equal(la_f32_to_f16_s(f), ref_round(f, 0));
        assert_int_equal(la_f32_to_f16_s(g), ref_round(g, 0));
        assert_int_equal(la_f32_to_bf16_s(f), ref_round(f, 1));
    }
    /* infinities and NaN */
    assert_int_equal(la_f32_to_f16_s(INFINITY), 0x7c00);
    assert_int_equal(la_f32_to_f16_s(-INFINITY), 0xfc00);
    assert_int_equal(la_f32_to_bf16_s(INFINITY), 0x7f80);
    assert_true(isnan(la_f16_to_f32_s(la_f32_to_f16_s(NAN))));
    assert_true(isnan(la_bf16_to_f32_s(la_f32_to_bf16_s(NAN))));
    /* a NaN whose payload sits only in the low bits stays a NaN in bf16 */
    assert_true(isnan(la_bf16_to_f32_s(la_f32_to_bf16_s(bits_f(0x7f800001u)))));
}

/* the dispatched bulk paths equal the scalar code bitwise (on a CPU without the feature
 * this compares the portable loop with itself, and says so) */
static void test_bulk_equals_scalar(void **state) {
    (void)state;
    const size_t n = 1u << 20;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint16_t *h = malloc(n * sizeof *h);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(h);
    uint32_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = bits_f(s & 0xbfffffffu); /* |exponent| spread, no NaN/inf patterns */
        if (i % 7 == 0) x[i] = (float)((int)(s >> 8) % 2000 - 1000) * 0.37f;
    }
    fprintf(stderr, "cpu features: %s\n", la_cpu_features());
    la_cvt_f32_to_f16(h, x, n - 3); /* odd length: the scalar tail too */
    for (size_t i = 0; i < n - 3; i++) assert_int_equal(h[i], la_f32_to_f16_s(x[i]));
    la_cvt_f16_to_f32(y, h, n - 3);
    for (size_t i = 0; i < n - 3; i++) assert_int_equal(f_bits(y[i]), f_bits(la_f16_to_f32_s(h[i])));
    la_cvt_f32_to_bf16(h, x, n - 3);
    for (size_t i = 0; i < n - 3; i++) assert_int_equal(h[i], la_f32_to_bf16_s(x[i]));
    la_cvt_bf16_to_f32(y, h, n - 3);
    for (size_t i = 0; i < n - 3; i++) assert_int_equal(f_bits(y[i]), f_bits(la_bf16_to_f32_s(h[i])));
    /* rounding in place is to_f32(to_half(x)) */
    memcpy(y, x, 1000 * sizeof *x);
    la_round_bf16(y, 1000);
    for (size_t i = 0; i < 1000; i++) assert_int_equal(f_bits(y[i]), f_bits(la_bf16_to_f32_s(la_f32_to_bf16_s(x[i]))));
    free(x);
    free(y);
    free(h);
}

/* la_round_bf16 (branch-free, vectorised loop) against the scalar conversions on 2^24 bit
 * patterns spread over every exponent (stride 257, odd: every low-16-bit tie and carry
 * pattern occurs) plus +-0, +-inf, signalling and quiet NaNs, the largest finite float. */
static void test_round_bf16_patterns(void **state) {
    (void)state;
    const size_t n = (size_t)1 << 24;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    uint32_t special[] = {0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f800001u, 0xffc00000u, 0x7fbfffffu,
                          0x7f7fffffu, 0x7f7f8000u, 0x3f808000u, 0x3f818000u};
    for (size_t i = 0; i < n; i++) {
        uint32_t u = i < sizeof special / 4 ? special[i] : (uint32_t)(i * 257u + (i >> 13));
        memcpy(&x[i], &u, 4);
    }
    memcpy(y, x, n * sizeof *x);
    la_round_bf16(y, n);
    for (size_t i = 0; i < n; i++)
        if (f_bits(y[i]) != f_bits(la_bf16_to_f32_s(la_f32_to_bf16_s(x[i]))))
            fail_msg("la_round_bf16(0x%08x) = 0x%08x, scalar 0x%08x", f_bits(x[i]), f_bits(y[i]),
                     f_bits(la_bf16_to_f32_s(la_f32_to_bf16_s(x[i]))));
    free(x);
    free(y);
}

static void test_dtype_names(void **state) {
    (void)state;
    la_dtype t;
    assert_int_equal(la_dtype_parse("bf16", &t), LA_OK);
    assert_int_equal(t, LA_DTYPE_BF16);
    assert_int_equal(la_dtype_parse("float16", &t), LA_OK);
    assert_int_equal(t, LA_DTYPE_F16);
    assert_int_equal(la_dtype_parse("f64", &t), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "f32, f16, bf16 or int8"));
    assert_string_equal(la_dtype_name(LA_DTYPE_I8), "int8");
    assert_int_equal(la_dtype_size(LA_DTYPE_BF16), 2);
    assert_non_null(la_cpu_features());
}

/* la_exp_sub_f32 (the decode kernel's exp; AVX2 polynomial or expf under LA_PORTABLE=1,
 * whichever this run has) against exp in double over x - mx in [-90, 0] (every length 0..40
 * for the vector tails): relative error <= 4 float ulps (2^-21; expf is within 1 ulp, the
 * degree-7 polynomial within 1e-8 before the few roundings of its evaluation: measured
 * 4.7e-8 AVX2, 4.5e-8 expf), values under 2^-126 relative to the max may be flushed to 0, the returned sum is
 * the sum of the y within float32 rounding. */
static void test_exp_sub(void **state) {
    (void)state;
    float x[64] = {0}, y[64] = {0};
    double worst = 0;
    for (int n = 0; n <= 40; n++) {
        for (int i = 0; i < n; i++) x[i] = 2.0f - 92.0f * (float)((i * 37 + n * 11) % 64) / 63.0f;
        const float mx = 2.0f; /* x - mx in [-92, 0], 0 included (i = 0) */
        const float s = la_exp_sub_f32(x, mx, y, (size_t)n);
        double sd = 0;
        for (int i = 0; i < n; i++) {
            const double t = (double)x[i] - mx, e = exp(t);
            sd += y[i];
            if (t < -87.3) {
                assert_true(y[i] >= 0 && y[i] <= 2 * e + 1e-45);
                continue;
            }
            const double rel = fabs(y[i] - e) / e;
            if (rel > worst) worst = rel;
            assert_true(rel <= 0x1p-21);
        }
        assert_true(fabs(s - sd) <= 1e-6 * (sd + 1e-30));
    }
    printf("  la_exp_sub_f32 (%s): max relative error %.2e\n", la_cpu()->avx2 && la_cpu()->fma ? "AVX2" : "portable",
           worst);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_decode_all),
        cmocka_unit_test(test_encode_against_reference),
        cmocka_unit_test(test_bulk_equals_scalar),
        cmocka_unit_test(test_round_bf16_patterns),
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_exp_sub),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
