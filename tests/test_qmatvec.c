/* test_qmatvec.c -- quantized matrix x vector (src/model/qmatvec.c) against dequantize
 * (src/io/gguf_quant.c, itself checked bit for bit against gguf-py in
 * tests/python/test_gguf.py) + a double-precision dot product, for every supported type,
 * through both the vectorised kernels and the portable path (this file compiles
 * qmatvec.c a second time with LA_QMV_PORTABLE, under other names).
 *
 * Tolerance. The kernels compute sum_b [d_b * sum_{i in b} q_i x_i + m_b * sum_{i in b} x_i]
 * in float32. Every intermediate is a sum of terms |d q x| or |m x|, each at most
 * 3 * max|w| * |x_i| (with w = d q + m taking values m and d*qmax + m, |d q| <= 2 max|w|
 * when the block's quants span their range, which random blocks do). Float summation of
 * such terms at depth k errs by at most k * 2^-24 * sum|terms|, and the depth is at most
 * 32 (within a block or sub-block, incl. the scale multiply and the final 8-lane reduction)
 * plus the number of blocks or sub-blocks (cols / 16 at most). So
 *     |y - y_ref| <= (cols/16 + 32) * 2^-24 * 3 * max|w| * sum|x|.
 * A wrong nibble, bit or scale gives errors of order max|w| * |x| -- far above it. */
#define LA_QMV_PORTABLE
#define la_qmatvec la_qmatvec_portable
#define la_gguf_matvec la_gguf_matvec_portable
#define la_qmatvec_q8x la_qmatvec_q8x_portable
#include "model/qmatvec.c"
#include "longattn.h"
#undef la_qmatvec
#undef la_gguf_matvec
#undef la_qmatvec_q8x
la_status la_qmatvec(uint32_t type, const void *W, int64_t rows, int64_t cols, const float *x,
                     float *y);
la_status la_qmatvec_q8x(uint32_t type, const void *W, int64_t rows, int64_t cols, const float *x,
                         float *y);
la_status la_gguf_matvec(const la_gguf_tensor *t, const float *x, float *y);

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

static const uint32_t types[] = {LA_GGML_F32,  LA_GGML_F16,  LA_GGML_BF16, LA_GGML_Q8_0,
                                 LA_GGML_Q4_0, LA_GGML_Q4_1, LA_GGML_Q5_0, LA_GGML_Q5_1,
                                 LA_GGML_Q4_K, LA_GGML_Q5_K, LA_GGML_Q6_K};

/* moderate finite f16 (|v| in [2^-5, 4)) with random sign and mantissa */
static uint16_t rand_f16(la_rng *r) {
    return (uint16_t)((la_rng_below(r, 2) << 15) | (la_rng_below(r, 7) + 10) << 10 |
                      la_rng_below(r, 1024));
}

/* f16 scale fields of one block (ggml-common.h) */
static int scale_fields(uint32_t t, int off[2]) {
    switch (t) {
    case LA_GGML_Q8_0: case LA_GGML_Q4_0: case LA_GGML_Q5_0: off[0] = 0; return 1;
    case LA_GGML_Q4_1: case LA_GGML_Q5_1: case LA_GGML_Q4_K: case LA_GGML_Q5_K:
        off[0] = 0; off[1] = 2; return 2;
    case LA_GGML_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

/* rows x cols random weights of type t (random quants, moderate finite scales) */
static uint8_t *random_matrix(la_rng *r, uint32_t t, int64_t rows, int64_t cols) {
    const int64_t rb = la_ggml_row_bytes(t, cols), bs = la_ggml_block_size(t),
                  nb = la_ggml_block_bytes(t);
    uint8_t *w = malloc((size_t)(rows * rb));
    assert_non_null(w);
    for (int64_t i = 0; i < rows * rb; i++) w[i] = (uint8_t)la_rng_below(r, 256);
    for (int64_t v = 0; v < rows * cols / bs; v++) {
        uint8_t *b = w + v * nb;
        if (t == LA_GGML_F32) {
            float f = (float)la_rng_normal(r);
            memcpy(b, &f, 4);
        } else if (t == LA_GGML_F16) {
            uint16_t h = rand_f16(r);
            memcpy(b, &h, 2);
        } else if (t == LA_GGML_BF16) {
            uint16_t h = (uint16_t)((la_rng_below(r, 2) << 15) | (la_rng_below(r, 8) + 122) << 7 |
                                    la_rng_below(r, 128));
            memcpy(b, &h, 2);
        } else {
            int off[2], n = scale_fields(t, off);
            for (int k = 0; k < n; k++) {
                uint16_t h = rand_f16(r);
                memcpy(b + off[k], &h, 2);
            }
        }
    }
    return w;
}

typedef la_status (*qmv_fn)(uint32_t, const void *, int64_t, int64_t, const float *, float *);

/* y = W x through fn against dequantize + double dot, row by row (bound above) */
static void check_matrix(qmv_fn fn, uint32_t t, const uint8_t *w, int64_t rows, int64_t cols,
                         const float *x) {
    float *y = malloc((size_t)rows * sizeof *y), *wr = malloc((size_t)cols * sizeof *wr), y1;
    assert_true(y && wr);
    double sumx = 0;
    for (int64_t c = 0; c < cols; c++) sumx += fabs(x[c]);
    assert_int_equal(fn(t, w, rows, cols, x, y), LA_OK);
    const int64_t rb = la_ggml_row_bytes(t, cols);
    for (int64_t i = 0; i < rows; i++) {
        assert_int_equal(la_ggml_dequant(t, w + i * rb, wr, cols), LA_OK);
        double ref = 0, wmax = 0;
        for (int64_t c = 0; c < cols; c++) {
            ref += (double)wr[c] * (double)x[c];
            wmax = fmax(wmax, fabs(wr[c]));
        }
        const double tol = (double)(cols / 16 + 32) * 0x1p-24 * 3.0 * wmax * sumx;
        if (!(fabs(y[i] - ref) <= tol))
            print_error("%s %lldx%lld row %lld: %.9g vs %.9g (tol %.3g)\n", la_ggml_type_name(t),
                        (long long)rows, (long long)cols, (long long)i, y[i], ref, tol);
        assert_true(fabs(y[i] - ref) <= tol);
        /* one row alone (no threads) gives the same bits as inside the full product */
        assert_int_equal(fn(t, w + i * rb, 1, cols, x, &y1), LA_OK);
        assert_memory_equal(&y1, &y[i], sizeof y1);
    }
    free(y);
    free(wr);
}

static void check_type(qmv_fn fn, uint32_t t, int64_t rows, int64_t cols, uint64_t seed) {
    la_rng r;
    la_rng_seed(&r, seed);
    uint8_t *w = random_matrix(&r, t, rows, cols);
    float *x = malloc((size_t)cols * sizeof *x);
    assert_non_null(x);
    for (int64_t c = 0; c < cols; c++) x[c] = (float)la_rng_normal(&r);
    check_matrix(fn, t, w, rows, cols, x);
    free(w);
    free(x);
}

static void run_all(qmv_fn fn) {
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        const uint32_t t = types[k];
        const int64_t bs = la_ggml_block_size(t);
        /* small, odd row counts; a large one (threads); for F32/F16/BF16 a ragged length */
        check_type(fn, t, 3, bs == 1 ? 37 : bs, 1 + k);
        check_type(fn, t, 7, bs == 256 ? 512 : 576, 100 + k);
        check_type(fn, t, 301, bs == 256 ? 1536 : 1536, 200 + k);
    }
}

static void test_vectorised_matches_reference(void **state) {
    (void)state;
    run_all(la_qmatvec);
}

static void test_portable_matches_reference(void **state) {
    (void)state;
    run_all(la_qmatvec_portable);
}

/* The default model's weights (scripts/fetch_model.sh): the Q8_0 embedding as an output
 * layer (49152 x 576), a Q4_1 attention and feed-forward weight and an F32 norm vector
 * (as a 1 x 576 matrix), through la_gguf_matvec and the portable path. */
static void test_default_model_weights(void **state) {
    (void)state;
    const char *path = "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    la_gguf *g;
    la_status s = la_gguf_open(path, &g);
    if (s != LA_OK) print_error("%s (run scripts/fetch_model.sh)\n", la_errmsg());
    assert_int_equal(s, LA_OK);
    const char *names[] = {"token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight",
                           "output_norm.weight"};
    for (int k = 0; k < 4; k++) {
        const la_gguf_tensor *t;
        assert_int_equal(la_gguf_get_tensor(g, names[k], &t), LA_OK);
        const int64_t cols = t->ne[0], rows = la_gguf_tensor_nrows(t);
        float *x = malloc((size_t)cols * sizeof *x), *y = malloc((size_t)rows * sizeof *y);
        assert_true(x && y);
        la_rng r;
        la_rng_seed(&r, (uint64_t)k);
        for (int64_t c = 0; c < cols; c++) x[c] = (float)la_rng_normal(&r);
        assert_int_equal(la_gguf_matvec(t, x, y), LA_OK);
        check_matrix(la_qmatvec, t->type, t->data, rows, cols, x);
        check_matrix(la_qmatvec_portable, t->type, t->data, rows, cols, x);
        free(x);
        free(y);
    }
    const la_gguf_tensor *t = la_gguf_find_tensor(g, "blk.0.attn_k.weight");
    assert_non_null(t);
    assert_int_equal(t->type, LA_GGML_Q4_1);
    la_gguf_close(g);
}

static void test_errors(void **state) {
    (void)state;
    uint8_t w[256] = {0};
    float x[256] = {0}, y[4];
    assert_int_equal(la_qmatvec(10, w, 1, 256, x, y), LA_EUNSUPPORTED);
    assert_non_null(strstr(la_errmsg(), "Q2_K"));
    assert_int_equal(la_qmatvec(LA_GGML_Q4_0, w, 1, 33, x, y), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "block size 32"));
    assert_int_equal(la_qmatvec(LA_GGML_Q4_0, NULL, 1, 32, x, y), LA_EINVAL);
    assert_int_equal(la_qmatvec(LA_GGML_Q4_0, w, 0, 32, x, y), LA_OK); /* empty is fine */
}

/* ---- la_qmatvec_q8x: x quantized to 8 bits per 32 values ----
 * Reference: x rounded as documented (dx = max|x| / 127 per block, q = nearest-even of
 * x * 127 / max|x|), xhat = dx q, then in double sum_i w_i xhat_i with w from the
 * dequantizer; for Q4_1 the min term uses the exact x: + m_b sum_i (x_i - xhat_i), m_b
 * read from the block. The kernel's float32 error has la_qmatvec's bound with xhat for x
 * (|xhat_i| <= |x_i| (1 + 1/254)); the 8-bit rounding itself must stay within half a step
 * per value, |y - W x| <= sum_b (dx_b / 2) sum_{i in b} |w_i| (+ that float error): a wrong
 * scale or a swapped nibble breaks both bounds by orders of magnitude. */
static void check_q8x(qmv_fn fn, uint32_t t, int64_t rows, int64_t cols, uint64_t seed) {
    la_rng r;
    la_rng_seed(&r, seed);
    uint8_t *w = random_matrix(&r, t, rows, cols);
    float *x = malloc((size_t)cols * sizeof *x), *y = malloc((size_t)rows * sizeof *y),
          *wr = malloc((size_t)cols * sizeof *wr);
    double *xh = malloc((size_t)cols * sizeof *xh), *dx = malloc((size_t)cols / 32 * sizeof *dx);
    assert_true(x && y && wr && xh && dx);
    for (int64_t c = 0; c < cols; c++) x[c] = (float)la_rng_normal(&r) * (c % 7 == 0 ? 4.0f : 1.0f);
    double sumx = 0;
    for (int64_t b = 0; b < cols / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
        const float d = amax / 127.0f, id = 127.0f / amax;
        dx[b] = d;
        for (int i = 0; i < 32; i++) xh[32 * b + i] = (double)d * (double)nearbyintf(x[32 * b + i] * id);
    }
    for (int64_t c = 0; c < cols; c++) sumx += fabs(x[c]);
    assert_int_equal(fn(t, w, rows, cols, x, y), LA_OK);
    const int64_t rb = la_ggml_row_bytes(t, cols), nb = la_ggml_block_bytes(t);
    for (int64_t i = 0; i < rows; i++) {
        assert_int_equal(la_ggml_dequant(t, w + i * rb, wr, cols), LA_OK);
        double ref = 0, exact = 0, wmax = 0, step = 0;
        for (int64_t c = 0; c < cols; c++) {
            ref += (double)wr[c] * xh[c];
            exact += (double)wr[c] * x[c];
            wmax = fmax(wmax, fabs(wr[c]));
            step += dx[c / 32] / 2 * fabs(wr[c]);
        }
        if (t == LA_GGML_Q4_1)
            for (int64_t b = 0; b < cols / 32; b++) {
                const double m = la_f16_to_f32(la_ld16(w + i * rb + b * nb + 2));
                for (int k = 0; k < 32; k++) ref += m * ((double)x[32 * b + k] - xh[32 * b + k]);
            }
        const double tol = (double)(cols / 16 + 32) * 0x1p-24 * 3.0 * wmax * sumx * (1 + 1.0 / 254);
        if (!(fabs(y[i] - ref) <= tol) || !(fabs(y[i] - exact) <= step + tol))
            print_error("%s q8x %lldx%lld row %lld: %.9g vs %.9g (tol %.3g), exact %.9g (step %.3g)\n",
                        la_ggml_type_name(t), (long long)rows, (long long)cols, (long long)i, y[i], ref, tol,
                        exact, step);
        assert_true(fabs(y[i] - ref) <= tol);
        assert_true(fabs(y[i] - exact) <= step + tol);
    }
    free(w), free(x), free(y), free(wr), free(xh), free(dx);
}

static void test_q8x_matches_reference(void **state) {
    (void)state;
    const uint32_t q8t[] = {LA_GGML_Q4_0, LA_GGML_Q4_1, LA_GGML_Q8_0};
    for (int k = 0; k < 3; k++)
        for (int p = 0; p < 2; p++) {
            qmv_fn fn = p ? la_qmatvec_q8x_portable : la_qmatvec_q8x;
            check_q8x(fn, q8t[k], 3, 32, 300 + k);
            check_q8x(fn, q8t[k], 301, 1536, 400 + k);
            check_q8x(fn, q8t[k], 2, 16416, 500 + k); /* past the stack buffer: allocated */
        }
}

/* for Q4_0, Q4_1 and Q8_0 the vectorised and the portable path give the same bits (the same
 * integer lanes, the same fused multiply-adds, the same reduction); the other types give
 * la_qmatvec's result */
static void test_q8x_paths_bitwise(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        const uint32_t t = types[k];
        const int64_t rows = 97, cols = la_ggml_block_size(t) == 256 ? 1536 : 576;
        la_rng r;
        la_rng_seed(&r, 600 + k);
        uint8_t *w = random_matrix(&r, t, rows, cols);
        float *x = malloc((size_t)cols * sizeof *x), *a = malloc(rows * sizeof *a), *b = malloc(rows * sizeof *b);
        assert_true(x && a && b);
        for (int64_t c = 0; c < cols; c++) x[c] = (float)la_rng_normal(&r);
        assert_int_equal(la_qmatvec_q8x(t, w, rows, cols, x, a), LA_OK);
        if (t == LA_GGML_Q4_0 || t == LA_GGML_Q4_1 || t == LA_GGML_Q8_0)
            assert_int_equal(la_qmatvec_q8x_portable(t, w, rows, cols, x, b), LA_OK);
        else /* la_qmatvec's own paths differ in summation order (its tolerance, above) */
            assert_int_equal(la_qmatvec(t, w, rows, cols, x, b), LA_OK);
        assert_memory_equal(a, b, rows * sizeof *a);
        free(w), free(x), free(a), free(b);
    }
}

/* a NaN in x reaches every row of y (its block's scale is NaN); bad shapes are refused */
static void test_q8x_nan_and_errors(void **state) {
    (void)state;
    la_rng r;
    la_rng_seed(&r, 7);
    uint8_t *w = random_matrix(&r, LA_GGML_Q4_1, 4, 64);
    float x[64], y[4];
    for (int c = 0; c < 64; c++) x[c] = (float)la_rng_normal(&r);
    x[40] = NAN;
    assert_int_equal(la_qmatvec_q8x(LA_GGML_Q4_1, w, 4, 64, x, y), LA_OK);
    for (int i = 0; i < 4; i++) assert_true(isnan(y[i]));
    assert_int_equal(la_qmatvec_q8x(LA_GGML_Q4_1, w, 1, 48, x, y), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "block size 32"));
    assert_int_equal(la_qmatvec_q8x(LA_GGML_Q8_0, NULL, 1, 32, x, y), LA_EINVAL);
    assert_int_equal(la_qmatvec_q8x(10, w, 1, 256, x, y), LA_EUNSUPPORTED);
    assert_int_equal(la_qmatvec_q8x(LA_GGML_Q4_0, w, 0, 32, x, y), LA_OK);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectorised_matches_reference),
        cmocka_unit_test(test_portable_matches_reference),
        cmocka_unit_test(test_default_model_weights),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_q8x_matches_reference),
        cmocka_unit_test(test_q8x_paths_bitwise),
        cmocka_unit_test(test_q8x_nan_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
