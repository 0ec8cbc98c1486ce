/* test_sample.c -- next-token sampling (src/infer/sample.c): greedy, temperature, top-k,
 * top-p against an independent double-precision distribution, and bad parameters.
 * Distribution checks use a deterministic quadrature u_i = (i + 0.5) / N over [0, 1): the
 * inverse-CDF sampler then picks each token for a fraction of the u_i equal to its
 * probability up to 1/N per boundary, so with N = 100000 the tolerance is 3e-5. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "longattn.h"

#define V 8
static const float logits[V] = {1.0f, 2.5f, -0.5f, 2.5f, 0.3f, -INFINITY, 1.7f, -3.0f};

/* reference: softmax(logits / temp) over the kept set, in double */
static void ref_probs(double temp, const int *keep, double *p) {
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < V; i++)
        if (keep[i] && logits[i] > mx) mx = logits[i];
    for (int i = 0; i < V; i++) {
        p[i] = keep[i] && isfinite(logits[i]) ? exp((logits[i] - mx) / temp) : 0;
        z += p[i];
    }
    for (int i = 0; i < V; i++) p[i] /= z;
}

static void empirical(const la_sample_params *sp, double *freq) {
    const int N = 100000;
    char scratch[V * 8];
    assert_true(la_sample_scratch_bytes(V) <= sizeof scratch);
    for (int i = 0; i < V; i++) freq[i] = 0;
    for (int i = 0; i < N; i++) {
        int32_t t = -1;
        assert_int_equal(la_sample_token(logits, V, sp, (i + 0.5) / N, scratch, &t), LA_OK);
        assert_true(t >= 0 && t < V);
        freq[t] += 1.0 / N;
    }
}

static void test_greedy_is_argmax(void **state) {
    (void)state;
    la_sample_params sp = la_sample_params_default();
    sp.temperature = 0;
    int32_t t = -1;
    /* logits 1 and 3 tie at the maximum: the lower id wins */
    assert_int_equal(la_sample_token(logits, V, &sp, 0.99, NULL, &t), LA_OK);
    assert_int_equal(t, 1);
    char scratch[V * 8];
    sp = la_sample_params_default();
    sp.top_k = 1;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(la_sample_token(logits, V, &sp, i / 10.0, scratch, &t), LA_OK);
        assert_int_equal(t, 1);
    }
}

static void test_temperature_matches_softmax(void **state) {
    (void)state;
    const double temps[3] = {1.0, 0.7, 2.0};
    int keep[V];
    for (int i = 0; i < V; i++) keep[i] = 1;
    for (int k = 0; k < 3; k++) {
        la_sample_params sp = la_sample_params_default();
        sp.temperature = temps[k];
        double p[V], f[V];
        ref_probs(temps[k], keep, p);
        empirical(&sp, f);
        for (int i = 0; i < V; i++) assert_true(fabs(p[i] - f[i]) <= 3e-5);
        assert_true(f[5] == 0); /* -inf is never drawn */
    }
}

static void test_top_k_and_top_p(void **state) {
    (void)state;
    /* top-k = 3: tokens 1, 3 (2.5) and 6 (1.7) */
    la_sample_params sp = la_sample_params_default();
    sp.top_k = 3;
    sp.temperature = 0.8;
    int keep[V] = {0, 1, 0, 1, 0, 0, 1, 0};
    double p[V], f[V];
    ref_probs(0.8, keep, p);
    empirical(&sp, f);
    for (int i = 0; i < V; i++) assert_true(fabs(p[i] - f[i]) <= 3e-5);
    /* top-p: the smallest set of most likely tokens reaching p, from the full softmax */
    const double tps[3] = {0.3, 0.6, 0.95};
    for (int k = 0; k < 3; k++) {
        int all[V], order[V] = {1, 3, 6, 0, 4, 2, 7, 5}; /* decreasing logit, ties by id */
        for (int i = 0; i < V; i++) all[i] = 1;
        double full[V];
        ref_probs(1.0, all, full);
        int kp[V] = {0};
        double cum = 0;
        for (int r = 0; r < V; r++) {
            kp[order[r]] = 1;
            cum += full[order[r]];
            if (cum >= tps[k]) break;
        }
        sp = la_sample_params_default();
        sp.top_p = tps[k];
        ref_probs(1.0, kp, p);
        empirical(&sp, f);
        for (int i = 0; i < V; i++) assert_true(fabs(p[i] - f[i]) <= 3e-5);
    }
}

static void test_bad_params(void **state) {
    (void)state;
    char scratch[V * 8];
    int32_t t;
    la_sample_params sp = la_sample_params_default();
    assert_int_equal(la_sample_token(logits, V, &sp, 1.0, scratch, &t), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "u = 1"));
    assert_int_equal(la_sample_token(logits, 0, &sp, 0.5, scratch, &t), LA_ESHAPE);
    assert_int_equal(la_sample_token(NULL, V, &sp, 0.5, scratch, &t), LA_EINVAL);
    assert_int_equal(la_sample_token(logits, V, &sp, 0.5, NULL, &t), LA_EINVAL);
    sp.temperature = -1;
    assert_int_equal(la_sample_token(logits, V, &sp, 0.5, scratch, &t), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "temperature"));
    sp.temperature = INFINITY; /* said "must be >= 0" before 2026-12-05 */
    assert_int_equal(la_sample_token(logits, V, &sp, 0.5, scratch, &t), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "must be finite and >= 0"));
    sp = la_sample_params_default();
    sp.top_p = 0;
    assert_int_equal(la_sample_token(logits, V, &sp, 0.5, scratch, &t), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "top_p"));
    sp = la_sample_params_default();
    sp.top_k = -2;
    assert_int_equal(la_sample_token(logits, V, &sp, 0.5, scratch, &t), LA_EINVAL);
    sp = la_sample_params_default();
    float bad[3] = {0, NAN, 1};
    assert_int_equal(la_sample_token(bad, 3, &sp, 0.5, scratch, &t), LA_ENUMERIC);
    float ninf[2] = {-INFINITY, -INFINITY};
    assert_int_equal(la_sample_token(ninf, 2, &sp, 0.5, scratch, &t), LA_ENUMERIC);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_is_argmax),
        cmocka_unit_test(test_temperature_matches_softmax),
        cmocka_unit_test(test_top_k_and_top_p),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
