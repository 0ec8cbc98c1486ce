/* test_critical.c -- the critical-scaling simulation (src/tasks/critical.c) against the
 * limits of Chen et al. 2025 Theorem 2.1, a naive double-precision reference, and the
 * Gaussian model's two phases. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>
#include <omp.h>

#include "longattn.h"

/* naive reference of one attention step: y_i = sum_j softmax_j(beta <x_i,x_j>) x_j, normalised */
static void ref_attend(const double *x, int n, int d, double beta, double *y) {
    double *s = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        double mx = -INFINITY, z = 0;
        for (int j = 0; j < n; j++) {
            double ip = 0;
            for (int c = 0; c < d; c++) ip += x[i * d + c] * x[j * d + c];
            s[j] = beta * ip;
            if (s[j] > mx) mx = s[j];
        }
        for (int j = 0; j < n; j++) z += (s[j] = exp(s[j] - mx));
        double nrm = 0;
        for (int c = 0; c < d; c++) {
            double acc = 0;
            for (int j = 0; j < n; j++) acc += s[j] / z * x[j * d + c];
            y[i * d + c] = acc;
            nrm += acc * acc;
        }
        for (int c = 0; c < d; c++) y[i * d + c] /= sqrt(nrm);
    }
    free(s);
}

static void test_simplex_tokens_exact(void **st) {
    (void)st;
    int n = 40, d = n + 1;
    double *x = malloc(sizeof(double) * n * d);
    assert_int_equal(la_critical_simplex_tokens(n, 0.3, x), LA_OK);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double ip = 0;
            for (int c = 0; c < d; c++) ip += x[i * d + c] * x[j * d + c];
            /* rho + (1 - rho) by construction: exact up to a couple of roundings */
            assert_true(fabs(ip - (i == j ? 1.0 : 0.3)) < 1e-15);
        }
    free(x);
}

/* the general O(n^2 d) step equals the naive reference on random unit tokens */
static void test_attend_matches_reference(void **st) {
    (void)st;
    int n = 37, d = 5;
    double *x = malloc(sizeof(double) * n * d), *y = malloc(sizeof(double) * n * d), *yr = malloc(sizeof(double) * n * d);
    assert_int_equal(la_critical_gaussian_tokens(n, d, 0.4, 3, x), LA_OK);
    for (int i = 0; i < n; i++) { /* rows are unit */
        double s = 0;
        for (int c = 0; c < d; c++) s += x[i * d + c] * x[i * d + c];
        assert_true(fabs(s - 1) < 1e-14);
    }
    for (double beta = 0; beta < 40; beta += 7.5) {
        assert_int_equal(la_critical_attend(x, n, d, beta, y), LA_OK);
        ref_attend(x, n, d, beta, yr);
        /* same sums in a different order (BLAS): agreement to ~1e-15, 1e-12 leaves room */
        for (int k = 0; k < n * d; k++) assert_true(fabs(y[k] - yr[k]) < 1e-12);
    }
    /* pair statistics against a direct double loop */
    double ma, mi, ra = 0, ri = 0;
    assert_int_equal(la_critical_pair_stats(x, n, d, &ma, &mi), LA_OK);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double ip = 0;
            for (int c = 0; c < d; c++) ip += x[i * d + c] * x[j * d + c];
            ri += ip, ra += acos(fmin(1, fmax(-1, ip)));
        }
    assert_true(fabs(ma - ra / (n * (n - 1) / 2.0)) < 1e-12);
    assert_true(fabs(mi - ri / (n * (n - 1) / 2.0)) < 1e-12);
    free(x), free(y), free(yr);
}

/* the O(1) closed form equals the explicit computation on exactly built simplex tokens:
 * this is what licenses using it at n = 1e12 */
static void test_simplex_closed_form_matches_explicit(void **st) {
    (void)st;
    static const int ns[] = {2, 3, 50, 300};
    static const double rhos[] = {0.0, 0.3, 0.8};
    static const double kappas[] = {0.2, 0.9, 1.0, 1.3, 3.0}; /* gamma (1 - rho) */
    for (int a = 0; a < 4; a++) {
        int n = ns[a], d = n + 1;
        double *x = malloc(sizeof(double) * n * d), *y = malloc(sizeof(double) * n * d);
        for (int r = 0; r < 3; r++) {
            assert_int_equal(la_critical_simplex_tokens(n, rhos[r], x), LA_OK);
            for (int k = 0; k < 5; k++) {
                double gamma = kappas[k] / (1 - rhos[r]), ip_cf, mi;
                assert_int_equal(la_critical_attend(x, n, d, gamma * log((double)n), y), LA_OK);
                assert_int_equal(la_critical_pair_stats(y, n, d, NULL, &mi), LA_OK);
                assert_int_equal(la_critical_simplex_ip(n, rhos[r], gamma, &ip_cf), LA_OK);
                /* every pair has the same inner product: the mean is it; rounding ~1e-15 */
                assert_true(fabs(mi - ip_cf) < 1e-12);
            }
        }
        free(x), free(y);
    }
}

/* Theorem 2.1 limits at n = 1e12, with the limits written out independently here:
 * below gamma = 1/(1-rho): 1; at it: 4 rho / (1 + 3 rho); above: rho.
 * Tolerances from the closed form's convergence: off the critical line the self weight is
 * 1/(1+u) with u ~ n^{1 - gamma(1-rho)}, i.e. n^{-1/2} = 1e-6 for gamma(1-rho) = 0.5 or 1.5,
 * so |error| <= 1e-5; on the line the error is O(1/n) = 1e-12, so 1e-9. */
static void test_simplex_limits_large_n(void **st) {
    (void)st;
    static const double rhos[] = {0.1, 0.25, 0.5, 0.75, 0.9};
    for (int r = 0; r < 5; r++) {
        double rho = rhos[r], gc = 1 / (1 - rho), ip;
        assert_int_equal(la_critical_simplex_ip(1e12, rho, 0.5 * gc, &ip), LA_OK);
        assert_true(fabs(ip - 1.0) < 1e-5);
        assert_int_equal(la_critical_simplex_ip(1e12, rho, gc, &ip), LA_OK);
        assert_true(fabs(ip - 4 * rho / (1 + 3 * rho)) < 1e-9);
        assert_int_equal(la_critical_simplex_ip(1e12, rho, 1.5 * gc, &ip), LA_OK);
        assert_true(fabs(ip - rho) < 1e-5);
        /* far from the line even n = 1e6 is close */
        assert_int_equal(la_critical_simplex_ip(1e6, rho, 0.2 * gc, &ip), LA_OK);
        assert_true(fabs(ip - 1.0) < 1e-4);
        assert_int_equal(la_critical_simplex_ip(1e6, rho, 3 * gc, &ip), LA_OK);
        assert_true(fabs(ip - rho) < 1e-4);
        /* the library's limit function agrees */
        assert_true(la_critical_simplex_limit(rho, 0.5 * gc) == 1.0);
        assert_true(fabs(la_critical_simplex_limit(rho, gc) - 4 * rho / (1 + 3 * rho)) < 1e-15);
        assert_true(la_critical_simplex_limit(rho, 1.5 * gc) == rho);
    }
    /* a hand value: rho = 0.5 at the critical gamma 2 tends to 4*0.5/2.5 = 0.8 */
    double ip;
    assert_int_equal(la_critical_simplex_ip(1e12, 0.5, 2.0, &ip), LA_OK);
    assert_true(fabs(ip - 0.8) < 1e-9);
}

/* near the line convergence is slow (n^{-|1-kappa|}) but monotone in n */
static void test_simplex_convergence_monotone(void **st) {
    (void)st;
    static const double kappas[] = {0.8, 0.9, 1.1, 1.2};
    for (int k = 0; k < 4; k++) {
        double rho = 0.4, g = kappas[k] / (1 - rho), lim = kappas[k] < 1 ? 1.0 : rho, prev = INFINITY;
        for (double n = 1e3; n <= 1e12; n *= 1e3) {
            double ip;
            assert_int_equal(la_critical_simplex_ip(n, rho, g, &ip), LA_OK);
            double err = fabs(ip - lim);
            assert_true(err < prev);
            prev = err;
        }
    }
}

/* Gaussian model: collapse well below the critical gamma, near identity well above */
static void test_gaussian_phases(void **st) {
    (void)st;
    int n = 256, d = 512;
    double rho = 0.5;
    double *x = malloc(sizeof(double) * n * d), *y = malloc(sizeof(double) * n * d);
    assert_int_equal(la_critical_gaussian_tokens(n, d, rho, 11, x), LA_OK);
    double a0, i0;
    assert_int_equal(la_critical_pair_stats(x, n, d, &a0, &i0), LA_OK);
    /* mean inner product ~ rho: the shared z_0 has |z_0|^2/d = 1 +- sqrt(2/d) ~ 0.06 */
    assert_true(fabs(i0 - rho) < 0.1);
    double prev = -1;
    static const double gammas[] = {0.25, 1, 2, 3, 8};
    double ratio[5];
    for (int g = 0; g < 5; g++) {
        double a1;
        assert_int_equal(la_critical_attend(x, n, d, gammas[g] * log((double)n), y), LA_OK);
        assert_int_equal(la_critical_pair_stats(y, n, d, &a1, NULL), LA_OK);
        ratio[g] = a1 / a0;
        assert_true(ratio[g] > prev); /* more scaling, less collapse */
        prev = ratio[g];
    }
    assert_true(ratio[0] < 0.1);  /* gamma = 1/8 of critical: measured ~0.01 */
    assert_true(ratio[4] > 0.99); /* gamma = 4x critical: self weight dominates */
    free(x), free(y);
}

static void test_grid(void **st) {
    (void)st;
    la_critical_params p = la_critical_params_default();
    p.n = 128, p.d = 64, p.draws = 2;
    double rhos[2] = {0.2, 0.6}, gammas[3] = {0.2, 2.5, 12};
    la_critical_cell cells[6];
    assert_int_equal(la_critical_grid(&p, rhos, 2, gammas, 3, cells), LA_OK);
    for (int a = 0; a < 2; a++)
        for (int g = 0; g < 3; g++) {
            const la_critical_cell *c = &cells[a * 3 + g];
            assert_true(c->rho == rhos[a] && c->gamma == gammas[g]);
            assert_true(fabs(c->gamma_crit - 1 / (1 - rhos[a])) < 1e-15);
            assert_true(fabs(c->beta - gammas[g] * log(128.0)) < 1e-12);
            assert_true(fabs(c->angle_ratio - c->angle_after / c->angle_before) < 1e-15);
            double ip;
            la_critical_simplex_ip(128, rhos[a], gammas[g], &ip);
            assert_true(c->simplex_ip == ip);
        }
    assert_true(cells[0].angle_ratio < 0.2 && cells[2].angle_ratio > 0.95);
    /* the same tokens for every gamma of a rho: the before statistics agree */
    assert_true(cells[3].angle_before == cells[5].angle_before);
}

static void test_bad_arguments(void **st) {
    (void)st;
    double x[12] = {1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0}, y[12], ip;
    assert_int_equal(la_critical_attend(NULL, 4, 3, 1, y), LA_EINVAL);
    assert_int_equal(la_critical_attend(x, 4, 3, 1, x), LA_EINVAL);
    assert_int_equal(la_critical_attend(x, 0, 3, 1, y), LA_EINVAL);
    assert_int_equal(la_critical_attend(x, 4, 3, NAN, y), LA_EINVAL);
    assert_int_equal(la_critical_pair_stats(x, 1, 3, NULL, NULL), LA_EINVAL);
    assert_int_equal(la_critical_gaussian_tokens(4, 3, 1.5, 1, x), LA_EINVAL);
    assert_int_equal(la_critical_simplex_tokens(3, 1.0, x), LA_EINVAL);
    assert_int_equal(la_critical_simplex_ip(1, 0.5, 1, &ip), LA_EINVAL);
    assert_int_equal(la_critical_simplex_ip(10, -0.1, 1, &ip), LA_EINVAL);
    assert_int_equal(la_critical_simplex_ip(10, 0.5, -1, &ip), LA_EINVAL);
    assert_int_equal(la_critical_simplex_ip(INFINITY, 0.5, 1, &ip), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "n must be"));
    la_critical_params p = la_critical_params_default();
    double r = 0.5, g = 1;
    la_critical_cell c;
    p.draws = 0;
    assert_int_equal(la_critical_grid(&p, &r, 1, &g, 1, &c), LA_EINVAL);
    p = la_critical_params_default();
    r = 1.0;
    assert_int_equal(la_critical_grid(&p, &r, 1, &g, 1, &c), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "rho"));
}

/* la_critical_run (src/runner/critical_run.c): the grid it returns equals la_critical_grid's,
 * its CSV has one row per cell, no plot without the flag; bad arguments are LA_EINVAL. */
static void test_run_writes_files(void **state) {
    (void)state;
    char dir[] = "/tmp/la_critical_run_XXXXXX";
    assert_non_null(mkdtemp(dir));
    la_critical_params p = la_critical_params_default();
    p.n = 32, p.d = 8;
    const double rhos[2] = {0.2, 0.6}, gammas[3] = {0.5, 1.5, 3};
    la_critical_cell cells[6], ref[6];
    int gp = 7;
    assert_int_equal(la_critical_run(&p, rhos, 2, gammas, 3, dir, 0, cells, &gp), LA_OK);
    assert_int_equal(gp, -1); /* not run */
    assert_int_equal(la_critical_grid(&p, rhos, 2, gammas, 3, ref), LA_OK);
    /* same draws, same arithmetic up to OpenBLAS's threaded summation order (double,
     * n = 32 terms per dot: differences of order 1e-15; 1e-9 leaves a wide margin) */
    for (int k = 0; k < 6; k++) {
        assert_true(fabs(cells[k].angle_ratio - ref[k].angle_ratio) <= 1e-9);
        assert_true(cells[k].rho == ref[k].rho && cells[k].gamma == ref[k].gamma);
    }
    char path[128], line[512];
    snprintf(path, sizeof path, "%s/critical.csv", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int rows = 0;
    while (fgets(line, sizeof line, f)) rows++;
    fclose(f);
    assert_int_equal(rows, 1 + 6);
    const char *names[] = {"simplex.csv", "critical.gp"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        assert_int_equal(access(path, F_OK), 0);
    }
    snprintf(path, sizeof path, "%s/critical.png", dir);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(la_critical_run(&p, rhos, 2, gammas, 3, NULL, 0, cells, NULL), LA_EINVAL);
    const double bad_rho[1] = {1.5};
    assert_int_equal(la_critical_run(&p, bad_rho, 1, gammas, 3, dir, 0, cells, NULL), LA_EINVAL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* la_critical_pair_stats sums its pairs in row order: the same bits at 1, 2 and 3 threads
 * (the grid, its CSV and la_critical_run's comparison with la_critical_grid rely on it; a
 * dynamic-schedule OpenMP reduction used to make them differ from run to run). */
static void test_pair_stats_thread_invariant(void **state) {
    (void)state;
    enum { N = 300, D = 16 };
    double *x = malloc(sizeof(double) * N * D);
    assert_non_null(x);
    assert_int_equal(la_critical_gaussian_tokens(N, D, 0.3, 7, x), LA_OK);
    double a[3], ip[3];
    int saved = omp_get_max_threads();
    for (int t = 0; t < 3; t++) {
        omp_set_num_threads(t + 1);
        assert_int_equal(la_critical_pair_stats(x, N, D, &a[t], &ip[t]), LA_OK);
    }
    omp_set_num_threads(saved);
    for (int t = 1; t < 3; t++) {
        assert_memory_equal(&a[t], &a[0], sizeof(double));
        assert_memory_equal(&ip[t], &ip[0], sizeof(double));
    }
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simplex_tokens_exact),
        cmocka_unit_test(test_pair_stats_thread_invariant),
        cmocka_unit_test(test_attend_matches_reference),
        cmocka_unit_test(test_simplex_closed_form_matches_explicit),
        cmocka_unit_test(test_simplex_limits_large_n),
        cmocka_unit_test(test_simplex_convergence_monotone),
        cmocka_unit_test(test_gaussian_phases),
        cmocka_unit_test(test_grid),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_run_writes_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
