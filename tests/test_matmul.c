/* test_matmul.c -- the model's products split over the ranks of sequence parallelism
 * (issue 30, src/model/matmul.c): la_sp_wide_range's ranges cover each rank's rows with
 * calls that start at multiples of 24 rows, and the products over each rank's rows put
 * together are bitwise one call over all B*T rows (forward and dx), for any B, T, P. One
 * process, no MPI: the rank is passed in la_sp_part. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cblas.h>
#include <omp.h>

#include "attn/ring.h"
#include "core/internal.h"
#include "model/layers.h"

static la_sp_part part(int B, int T, int P, int r) {
    la_sp_part p = {.P = P, .r = r, .B = B, .T = T};
    la_attn_sp_rows(T, P, r, p.rows);
    return p;
}

/* Every rank's own rows lie in its widened ranges; the ranges are increasing, disjoint,
 * start at multiples of 24 and end at one or at B*T. */
static void test_wide_ranges(void **state) {
    (void)state;
    for (int P = 1; P <= 5; P++)
        for (int B = 1; B <= 3; B++)
            for (int T = 64 * (2 * P - 1) + 1; T <= 1100; T += 37) {
                const int N = B * T;
                unsigned char *own = calloc((size_t)N, 1), *cov = calloc((size_t)N, 1);
                assert_non_null(own);
                assert_non_null(cov);
                for (int r = 0; r < P; r++) {
                    la_sp_part p = part(B, T, P, r);
                    memset(own, 0, (size_t)N);
                    memset(cov, 0, (size_t)N);
                    for (int i = 0, n0; i < 2 * B; i++) {
                        int n = la_sp_range(&p, i, &n0);
                        for (int k = 0; k < n; k++) own[n0 + k] = 1;
                    }
                    int last = -1;
                    for (int i = 0, n0, n; (n = la_sp_wide_range(&p, &i, &n0)) > 0;) {
                        assert_true(n0 > last);
                        assert_int_equal(n0 % 24, 0);
                        assert_true(n0 + n == N || (n0 + n) % 24 == 0);
                        for (int k = 0; k < n; k++) cov[n0 + k]++;
                        last = n0 + n - 1;
                    }
                    for (int k = 0; k < N; k++) {
                        assert_true(cov[k] <= 1);
                        if (own[k]) assert_int_equal(cov[k], 1);
                    }
                }
                free(own);
                free(cov);
            }
}

/* The product over every rank's rows, each rank's rows taken from its own call, equals one
 * call over all rows, bit for bit (OpenBLAS computes the rows past a call's last multiple
 * of 24 by another code path: without the widening, ranges that do not end there change
 * bits). Sizes with a partial last group (T = 1000, 700) and several threads included. */
static void test_rows_bitwise(void **state) {
    (void)state;
    const int in = 96, out = 80;
    const int shapes[][3] = {{1, 700, 2}, {2, 1000, 2}, {2, 1000, 3}, {3, 513, 4}, {1, 4096, 2}};
    double timer = 0;
    la_mm_ctx mm = {&timer, NULL, 0};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int B = shapes[s][0], T = shapes[s][1], P = shapes[s][2], N = B * T;
        float *x = malloc(sizeof(float) * (size_t)N * in), *W = malloc(sizeof(float) * (size_t)out * in);
        float *dy = malloc(sizeof(float) * (size_t)N * out);
        float *y1 = malloc(sizeof(float) * (size_t)N * out), *yr = malloc(sizeof(float) * (size_t)N * out);
        float *dx1 = malloc(sizeof(float) * (size_t)N * in), *dxr = malloc(sizeof(float) * (size_t)N * in);
        float *dW = calloc((size_t)out * in, sizeof(float));
        assert_true(x && W && dy && y1 && yr && dx1 && dxr && dW);
        la_rng g;
        la_rng_seed(&g, 30 + s);
        for (size_t i = 0; i < (size_t)N * in; i++) x[i] = (float)la_rng_normal(&g);
        for (size_t i = 0; i < (size_t)out * in; i++) W[i] = 0.1f * (float)la_rng_normal(&g);
        for (size_t i = 0; i < (size_t)N * out; i++) dy[i] = (float)la_rng_normal(&g);
        for (int nt = 1; nt <= 2; nt++) {
            omp_set_num_threads(nt);
            la_mm_forward(&mm, y1, x, W, N, in, out, 0);
            la_mm_backward(&mm, dx1, dW, dy, x, W, N, in, out, 0);
            for (int r = 0; r < P; r++) {
                la_sp_part p = part(B, T, P, r);
                la_mm_forward_rows(&p, &mm, yr, x, W, in, out, 0);
                la_mm_dx_rows(&p, &mm, dxr, dy, W, in, out, 0);
                for (int i = 0, n0, n; i < 2 * B; i++)
                    if ((n = la_sp_range(&p, i, &n0)) > 0) {
                        assert_memory_equal(yr + (size_t)n0 * out, y1 + (size_t)n0 * out, sizeof(float) * n * out);
                        assert_memory_equal(dxr + (size_t)n0 * in, dx1 + (size_t)n0 * in, sizeof(float) * n * in);
                    }
            }
        }
        free(x), free(W), free(dy), free(y1), free(yr), free(dx1), free(dxr), free(dW);
    }
}

int main(void) {
    /* as the CLI runs it (and the model's thread-count independence needs): OpenBLAS on one
     * thread, the products split over OpenMP threads at la_mm_row_block's bounds */
    openblas_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wide_ranges),
        cmocka_unit_test(test_rows_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
