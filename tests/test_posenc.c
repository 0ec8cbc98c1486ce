/* test_posenc.c -- RoPE family frequencies and rotations, ALiBi slopes, sinv coefficients
 * and YaRN's logit factor (src/attn/posenc.c), against closed forms and hand values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "attn_testutil.h"
#include "attn/attn_internal.h"

/* RoPE at large positions vs a double rotation with omega_k = theta^(-2k/D) computed here.
 * Tolerance 1e-6 (SPEC 3): cos/sin rounded to float contribute ~6e-8 each. */
static void test_rope_large_positions(void **state) {
    (void)state;
    const int D = 64;
    la_spec s = tu_spec();
    s.pos = LA_POS_ROPE;
    int64_t pos[3] = {1857, 65537, (int64_t)1 << 20};
    float x[3 * 64];
    double xd[3 * 64];
    la_rng r;
    la_rng_seed(&r, 1);
    for (int i = 0; i < 3 * D; i++) { xd[i] = la_rng_uniform(&r) * 2 - 1; x[i] = (float)xd[i]; xd[i] = x[i]; }
    assert_int_equal(la_rope_apply(&s, x, 3, D, pos, 4096, 0), LA_OK);
    for (int n = 0; n < 3; n++)
        for (int k = 0; k < D / 2; k++) {
            double om = pow(10000.0, -2.0 * k / D), a = (double)pos[n] * om;
            double u = xd[n * D + k], v = xd[n * D + k + D / 2];
            assert_true(fabs(x[n * D + k] - (u * cos(a) - v * sin(a))) < 1e-6);
            assert_true(fabs(x[n * D + k + D / 2] - (u * sin(a) + v * cos(a))) < 1e-6);
        }
    /* inverse undoes the rotation */
    assert_int_equal(la_rope_apply(&s, x, 3, D, pos, 4096, 1), LA_OK);
    for (int i = 0; i < 3 * D; i++) assert_true(fabs(x[i] - xd[i]) < 1e-6);
}

static double dotf(const float *a, const float *b, int D) {
    double s = 0;
    for (int d = 0; d < D; d++) s += (double)a[d] * b[d];
    return s;
}

/* Scores depend on p_q - p_k only: shifting both by 100000 changes nothing (to float
 * rounding of cos/sin: |err| <= 1e-5 |q||k|). Also for p-RoPE, YaRN and NTK. */
static void test_rope_shift_invariance(void **state) {
    (void)state;
    const int D = 64;
    la_pos kinds[5] = {LA_POS_ROPE, LA_POS_PROPE, LA_POS_YARN, LA_POS_NTK, LA_POS_PI};
    la_rng r;
    la_rng_seed(&r, 2);
    for (int kd = 0; kd < 5; kd++) {
        la_spec s = tu_spec();
        s.pos = kinds[kd];
        s.pos_scale = 4;
        s.train_len = 512;
        for (int trial = 0; trial < 5; trial++) {
            float q[64], k[64], q2[64], k2[64];
            for (int d = 0; d < D; d++) { q[d] = (float)la_rng_normal(&r); k[d] = (float)la_rng_normal(&r); }
            memcpy(q2, q, sizeof q); memcpy(k2, k, sizeof k);
            int64_t pq = 1000 + 37 * trial, pk = 13 * trial, pq2 = pq + 100000, pk2 = pk + 100000;
            la_rope_apply(&s, q, 1, D, &pq, 4096, 0);
            la_rope_apply(&s, k, 1, D, &pk, 4096, 0);
            la_rope_apply(&s, q2, 1, D, &pq2, 4096, 0);
            la_rope_apply(&s, k2, 1, D, &pk2, 4096, 0);
            double nq = sqrt(dotf(q, q, D)), nk = sqrt(dotf(k, k, D));
            assert_true(fabs(dotf(q, k, D) - dotf(q2, k2, D)) <= 1e-5 * nq * nk);
        }
    }
}

static void test_rope_family_freqs(void **state) {
    (void)state;
    const int D = 16;
    double om[8], ref[8];
    la_spec s = tu_spec();
    s.pos = LA_POS_PROPE;
    s.rope_p = 0.5; /* m = floor(0.5 * 8) = 4 highest frequencies (k < 4) rotate */
    assert_int_equal(la_rope_freqs(&s, D, 100, om), LA_OK);
    for (int k = 0; k < 8; k++) assert_true(om[k] == (k < 4 ? pow(10000.0, -2.0 * k / D) : 0.0));
    s.pos = LA_POS_NTK;
    s.pos_scale = 8; /* theta' = theta s^(D/(D-2)) */
    assert_int_equal(la_rope_freqs(&s, D, 100, om), LA_OK);
    double th = 10000.0 * pow(8.0, 16.0 / 14.0);
    for (int k = 0; k < 8; k++) assert_true(fabs(om[k] - pow(th, -2.0 * k / D)) <= 1e-12 * pow(th, -2.0 * k / D) + 1e-300);
    /* dynamic-ntk: s' = s n / L - (s - 1) past the training length */
    s.pos = LA_POS_DYNAMIC_NTK;
    s.pos_scale = 2;
    s.train_len = 100;
    assert_int_equal(la_rope_freqs(&s, D, 400, om), LA_OK);
    double sp = 2.0 * 400 / 100 - 1; /* 7 */
    th = 10000.0 * pow(sp, 16.0 / 14.0);
    for (int k = 1; k < 8; k++) assert_true(fabs(om[k] / pow(th, -2.0 * k / D) - 1) < 1e-12);
    /* pi: every frequency divided by s, so position p rotates like p / s under plain RoPE */
    s.pos = LA_POS_PI;
    s.pos_scale = 4;
    assert_int_equal(la_rope_freqs(&s, D, 100, om), LA_OK);
    for (int k = 0; k < 8; k++) assert_true(fabs(om[k] - pow(10000.0, -2.0 * k / D) / 4) <= 1e-15 * om[0]);
    /* nope / alibi / nape: nothing rotates */
    s.pos = LA_POS_ALIBI;
    assert_int_equal(la_rope_freqs(&s, D, 100, om), LA_OK);
    for (int k = 0; k < 8; k++) assert_true(om[k] == 0.0);
    /* YaRN: D=64, theta=10000, L=2048, s=8: c(32) = 64 ln(2048/(2 pi 32)) / (2 ln 1e4) = 8.06 ->
     * low = 8; c(1) = 64 ln(2048/(2 pi)) / (2 ln 1e4) = 20.1 -> high = 21. Pairs below low
     * keep omega, above high use omega/s, in between a linear blend. */
    s = tu_spec();
    s.pos = LA_POS_YARN;
    s.pos_scale = 8;
    s.train_len = 2048;
    double oy[32];
    assert_int_equal(la_rope_freqs(&s, 64, 4096, oy), LA_OK);
    for (int k = 0; k < 32; k++) {
        double o = pow(10000.0, -2.0 * k / 64), ramp = (k - 8.0) / (21.0 - 8.0);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        ref[k % 8] = o * (1 - ramp) + o / 8 * ramp;
        assert_true(fabs(oy[k] / ref[k % 8] - 1) < 1e-12);
    }
    assert_true(oy[3] == pow(10000.0, -6.0 / 64));
    assert_true(fabs(oy[30] - pow(10000.0, -60.0 / 64) / 8) < 1e-15);
    /* errors */
    assert_int_equal(la_rope_freqs(&s, 7, 10, oy), LA_ESHAPE);
    s.train_len = 0;
    assert_int_equal(la_rope_freqs(&s, 64, 10, oy), LA_EINVAL);
}

/* dynamic-ntk at or below the training length equals plain RoPE bit for bit. */
static void test_dynamic_ntk_equals_rope(void **state) {
    (void)state;
    la_spec a = tu_spec(), b = tu_spec();
    a.pos = LA_POS_ROPE;
    b.pos = LA_POS_DYNAMIC_NTK;
    b.pos_scale = 4;
    b.train_len = 1024;
    float x[4 * 32], y[4 * 32];
    for (int i = 0; i < 4 * 32; i++) x[i] = y[i] = sinf(0.37f * i);
    int64_t pos[4] = {0, 5, 1000, 1023};
    for (int64_t ctx = 1; ctx <= 1024; ctx *= 4) {
        assert_int_equal(la_rope_apply(&a, x, 4, 32, pos, ctx, 0), LA_OK);
        assert_int_equal(la_rope_apply(&b, y, 4, 32, pos, ctx, 0), LA_OK);
        assert_memory_equal(x, y, sizeof x);
    }
    assert_int_equal(la_rope_apply(&a, x, 4, 32, pos, 1024, 0), LA_OK);
    assert_int_equal(la_rope_apply(&b, y, 4, 32, pos, 1024, 0), LA_OK);
    assert_memory_equal(x, y, sizeof x);
    /* past the training length it differs */
    assert_int_equal(la_rope_apply(&a, x, 4, 32, pos, 4096, 0), LA_OK);
    assert_int_equal(la_rope_apply(&b, y, 4, 32, pos, 4096, 0), LA_OK);
    assert_true(memcmp(x, y, sizeof x) != 0);
    /* and in the kernel: same outputs for S <= train_len */
    la_shape sh = {1, 1, 1, 16, 16, 8, LA_POS0_AUTO};
    float q[128], k[128], v[128], o1[128], o2[128], l1[16], l2[16];
    for (int i = 0; i < 128; i++) { q[i] = sinf(i * 0.3f); k[i] = cosf(i * 0.7f); v[i] = sinf(i * 1.1f); }
    assert_int_equal(la_attn_forward(&a, &sh, q, k, v, o1, l1, NULL), LA_OK);
    assert_int_equal(la_attn_forward(&b, &sh, q, k, v, o2, l2, NULL), LA_OK);
    assert_memory_equal(o1, o2, sizeof o1);
}

/* YaRN's magnitude factor mscale^2 is applied exactly once: with one query and one key at
 * position 0 (no rotation), lse = logit = mscale^2 q.k / sqrt(D). */
static void test_yarn_factor_once(void **state) {
    (void)state;
    la_spec y = tu_spec(), n = tu_spec();
    y.pos = LA_POS_YARN;
    y.pos_scale = 4;
    y.train_len = 256;
    la_shape sh = {1, 1, 1, 1, 1, 8, LA_POS0_AUTO};
    float q[8] = {1, 2, 3, 4, -1, 0.5f, 2, 1}, k[8] = {0.5f, 1, -1, 2, 1, 1, 0.25f, -2}, v[8] = {0};
    float o[8], ly, ln;
    assert_int_equal(la_attn_forward(&y, &sh, q, k, v, o, &ly, NULL), LA_OK);
    assert_int_equal(la_attn_forward(&n, &sh, q, k, v, o, &ln, NULL), LA_OK);
    double ms = 0.1 * log(4.0) + 1;
    assert_true(fabs(ln - dotf(q, k, 8) / sqrt(8.0)) < 1e-5);
    assert_true(fabs(ly / ln - ms * ms) < 1e-5); /* 1.28525..., not 1 and not mscale^4 */
    assert_true(fabs(la_yarn_logit_factor(&y) - ms * ms) < 1e-15);
}

/* ALiBi slopes (Press et al. 2022): 6 heads = the 4-head set 2^-2, 2^-4, 2^-6, 2^-8 then
 * every other slope of the 8-head set: 2^-1, 2^-3. 12 heads = 2^-1..2^-8 then
 * 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5. */
static void test_alibi_slopes(void **state) {
    (void)state;
    float s6[6], s12[12], s8[8];
    const double r6[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    const double r12[12] = {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
                            0.7071067811865476, 0.3535533905932738, 0.1767766952966369, 0.08838834764831845};
    la_alibi_slopes(6, s6);
    la_alibi_slopes(12, s12);
    la_alibi_slopes(8, s8);
    for (int h = 0; h < 6; h++) assert_true(fabs(s6[h] - r6[h]) < 1e-7);
    for (int h = 0; h < 12; h++) assert_true(fabs(s12[h] - r12[h]) < 1e-7);
    for (int h = 0; h < 8; h++) assert_true(s8[h] == (float)r12[h]);
}

/* sinv (SPEC 4): t=10, tau=10 -> a = 1.54476, m = -1.3863; t=0 -> 1, 0; t<0 clamps. */
static void test_sinv_coeffs(void **state) {
    (void)state;
    double a, m;
    la_sinv_coeffs(10, 10, &a, &m);
    assert_true(fabs(a - 1.54476) < 1e-5);
    assert_true(fabs(m - (-1.3863)) < 1e-4);
    /* closed form with alpha = beta = e^0.5: a^2 = 2[log(t/tau+1) - log alpha + beta/alpha] */
    double al = exp(0.5);
    assert_true(fabs(a * a - 2 * (log(2.0) - log(al) + 1)) < 1e-12);
    assert_true(fabs(m - (-a * a + 1)) < 1e-12);
    la_sinv_coeffs(0, 10, &a, &m);
    assert_true(a == 1.0 && m == 0.0);
    la_sinv_coeffs(-5, 10, &a, &m);
    assert_true(a == 1.0 && m == 0.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_large_positions),
        cmocka_unit_test(test_rope_shift_invariance),
        cmocka_unit_test(test_rope_family_freqs),
        cmocka_unit_test(test_dynamic_ntk_equals_rope),
        cmocka_unit_test(test_yarn_factor_once),
        cmocka_unit_test(test_alibi_slopes),
        cmocka_unit_test(test_sinv_coeffs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
