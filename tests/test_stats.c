/* test_stats.c -- the evaluation tables' statistics (src/tasks/stats.c) against
 * independent references:
 *   Wilson: Newcombe (1998), "Two-sided confidence intervals for the single proportion:
 *     comparison of seven methods", Stat. Med. 17:857-872, Table I, method 3 (score interval
 *     without continuity correction), 4 decimals as printed: 81/263, 15/148, 0/20, 1/29;
 *     and more cases from the formula evaluated in Python (float64, z = 1.96).
 *   McNemar: exact two-sided p = min(1, 2 sum_{i<=min(b,c)} C(b+c, i) / 2^(b+c)), evaluated
 *     with exact rationals (Python fractions.Fraction + math.comb), e.g. b = 1, c = 8:
 *     2 (1 + 9) / 512 = 0.0390625 by hand.
 *   Bootstrap: properties that do not depend on the generator: a constant per-unit
 *     difference gives a zero-width interval at it; the interval holds the point estimate;
 *     the same seed gives the same interval; for i.i.d. normal differences the percentile
 *     interval's width approaches the normal theory's 2 * 1.96 sd / sqrt(n). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "longattn.h"

static void test_wilson_newcombe_table(void **state) {
    (void)state;
    /* x, n, lower, upper: Newcombe 1998 Table I (4 decimals) */
    static const double nc[][4] = {{81, 263, 0.2553, 0.3662}, {15, 148, 0.0624, 0.1605},
                                   {0, 20, 0.0000, 0.1611}, {1, 29, 0.0061, 0.1718}};
    for (int i = 0; i < 4; i++) {
        double lo, hi;
        assert_int_equal(la_stats_wilson((int)nc[i][0], (int)nc[i][1], 1.96, &lo, &hi), LA_OK);
        assert_true(fabs(lo - nc[i][2]) <= 0.5e-4 + 1e-12); /* printed to 4 decimals: half a unit */
        assert_true(fabs(hi - nc[i][3]) <= 0.5e-4 + 1e-12);
    }
    /* the formula in Python float64 (10 decimals printed): agreement to 1e-9 */
    static const double py[][4] = {{81, 263, 0.2552876131, 0.3662106841}, {12, 20, 0.3865779423, 0.7811960326},
                                   {29, 30, 0.8332924860, 0.9940915620}, {7, 10, 0.3967732200, 0.8922107125},
                                   {1, 29, 0.0061130566, 0.1717589106}};
    for (int i = 0; i < 5; i++) {
        double lo, hi;
        assert_int_equal(la_stats_wilson((int)py[i][0], (int)py[i][1], 1.96, &lo, &hi), LA_OK);
        assert_true(fabs(lo - py[i][2]) < 1e-9);
        assert_true(fabs(hi - py[i][3]) < 1e-9);
    }
    double lo, hi;
    assert_int_equal(la_stats_wilson(20, 20, 1.96, &lo, &hi), LA_OK);
    assert_true(hi == 1 && lo > 0.8 && lo < 0.9); /* 20/20: 0.8389 */
    assert_int_equal(la_stats_wilson(0, 0, 1.96, &lo, &hi), LA_OK);
    assert_true(lo == 0 && hi == 1);
    assert_int_equal(la_stats_wilson(3, 2, 1.96, &lo, &hi), LA_EINVAL);
    assert_int_equal(la_stats_wilson(-1, 2, 1.96, &lo, &hi), LA_EINVAL);
    assert_int_equal(la_stats_wilson(1, 2, 0, &lo, &hi), LA_EINVAL);
}

static void test_mcnemar_exact(void **state) {
    (void)state;
    /* b, c, p (exact rationals in Python, printed with repr) */
    static const double ref[][3] = {{1, 8, 0.0390625},          {0, 5, 0.0625},
                                    {3, 3, 1.0},                {10, 25, 0.01667384780012071},
                                    {0, 0, 1.0},                {40, 70, 0.005447429511444482},
                                    {2, 200, 6.379835262863242e-57}};
    for (int i = 0; i < 7; i++) {
        double p = la_stats_mcnemar_exact((int)ref[i][0], (int)ref[i][1]);
        /* lgamma-based sums: relative error ~1e-13 at these sizes; 1e-9 leaves room */
        assert_true(fabs(p - ref[i][2]) <= 1e-9 * ref[i][2]);
        assert_true(la_stats_mcnemar_exact((int)ref[i][1], (int)ref[i][0]) == p); /* symmetric */
    }
    assert_true(isnan(la_stats_mcnemar_exact(-1, 3)));
}

static void test_bootstrap_properties(void **state) {
    (void)state;
    enum { N = 400 };
    double a[N], b[N], w[N], est, lo, hi, lo2, hi2;
    for (int i = 0; i < N; i++) a[i] = 3.0 + 0.01 * (i % 7), b[i] = a[i] - 0.25, w[i] = 1;
    assert_int_equal(la_stats_bootstrap_diff(a, b, w, N, 1000, 7, &est, &lo, &hi), LA_OK);
    assert_true(fabs(est - 0.25) < 1e-12 && fabs(lo - 0.25) < 1e-12 && fabs(hi - 0.25) < 1e-12);
    /* i.i.d. N(0, 1) differences (Box-Muller from a fixed LCG, here) */
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        double u1, u2;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        u1 = ((s >> 11) + 0.5) / 9007199254740992.0;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        u2 = ((s >> 11) + 0.5) / 9007199254740992.0;
        a[i] = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
        b[i] = 0;
    }
    assert_int_equal(la_stats_bootstrap_diff(a, b, w, N, 4000, 99, &est, &lo, &hi), LA_OK);
    assert_true(lo < est && est < hi);
    double sd = 0, m = 0;
    for (int i = 0; i < N; i++) m += a[i] / N;
    for (int i = 0; i < N; i++) sd += (a[i] - m) * (a[i] - m) / (N - 1);
    sd = sqrt(sd);
    double width = hi - lo, theory = 2 * 1.96 * sd / sqrt((double)N);
    /* Monte-Carlo error of the percentiles with 4000 resamples: a few %; 15 % is loose
     * enough never to flake on a fixed seed yet fails a wrong (e.g. unpaired or n-times-
     * too-small) resampling, which changes the width by a factor sqrt(2) or more */
    assert_true(fabs(width / theory - 1) < 0.15);
    assert_int_equal(la_stats_bootstrap_diff(a, b, w, N, 4000, 99, &est, &lo2, &hi2), LA_OK);
    assert_true(lo2 == lo && hi2 == hi);
    w[0] = 0;
    for (int i = 0; i < N; i++) w[i] = 0;
    assert_int_equal(la_stats_bootstrap_diff(a, b, w, N, 10, 1, &est, &lo, &hi), LA_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wilson_newcombe_table),
        cmocka_unit_test(test_mcnemar_exact),
        cmocka_unit_test(test_bootstrap_properties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
