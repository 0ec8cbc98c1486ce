/* test_kv_stream.c -- exact chunked streaming (src/infer/kv_stream.c) for window(w) and
 * sinks(n, w) caches: a stream fed in chunks of varying size must give, row for row, the
 * attention output of the same stream appended and attended ONE token at a time
 * (la_kv_append + la_kv_attend with T = 1, the definition of StreamingLLM streaming), and
 * leave the same kept set (stream positions, keys, values) after every chunk.
 *
 * Tolerance 2e-5 absolute on outputs (|v| ~ 1): both paths are float32 softmax over the
 * same <= budget keys; they differ in summation order (tiles vs. one row), in where the
 * rotation is applied (the kernel's table vs. kv_stream's, same double angles rounded to
 * float) and in the sinks' log-sum-exp merge (double). Measured differences are ~1e-6;
 * a wrong key set or position costs > 1e-2 (checked: the approximate chunked path). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "core/internal.h"
#include "infer/kv_internal.h"
#include "longattn.h"

enum { NL = 1, H = 4, HKV = 2, D = 16, N = 150 };
static const double TOL = 2e-5;

static void fill_normal(la_rng *r, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = (float)la_rng_normal(r);
}

/* Rows [t0, t0+T) of the stream's (X, N, D) tensor x as (X, T, D) into dst. */
static void take(const float *x, int X, int t0, int T, float *dst) {
    for (int h = 0; h < X; h++)
        memcpy(dst + (size_t)h * T * D, x + ((size_t)h * N + t0) * D, sizeof(float) * (size_t)T * D);
}

/* Runs the stream both ways under (policy, spec); returns the largest output difference
 * of the chunked path from token-by-token streaming. exact = 1: la_kv_stream_attend;
 * 0: the approximate chunked path (la_kv_append of the chunk, then la_kv_attend). */
static double run(const char *policy, const char *spec_text, int int8, int exact, int check_kept) {
    la_kv_params p = la_kv_params_default();
    p.n_layers = NL, p.H = H, p.Hkv = HKV, p.D = D;
    assert_int_equal(la_kv_policy_parse(policy, &p), LA_OK);
    if (int8) p.storage = LA_KV_INT8;
    la_spec spec;
    assert_int_equal(la_spec_parse(spec_text, &spec), LA_OK);
    const int Tmax = (int)la_kv_max_chunk(&p) < 13 ? (int)la_kv_max_chunk(&p) : 13;
    if (exact) assert_true(la_kv_stream_exact(&spec, &p));

    la_rng r;
    la_rng_seed(&r, 42);
    float *q = malloc(sizeof(float) * H * N * D), *k = malloc(sizeof(float) * HKV * N * D),
          *v = malloc(sizeof(float) * HKV * N * D);
    fill_normal(&r, q, (size_t)H * N * D);
    fill_normal(&r, k, (size_t)HKV * N * D);
    fill_normal(&r, v, (size_t)HKV * N * D);

    /* reference: one token at a time */
    float *ref = malloc(sizeof(float) * H * N * D);
    int64_t *ref_pos = malloc(sizeof(int64_t) * HKV * N);
    int64_t *ref_len = malloc(sizeof(int64_t) * N);
    float *ref_k = malloc(sizeof(float) * (size_t)N * HKV * N * D); /* kept k after each token */
    la_kv_cache *a;
    assert_int_equal(la_kv_new(&p, &a), LA_OK);
    float qb[H * D], kb[HKV * D], vb[HKV * D], ob[H * D];
    for (int t = 0; t < N; t++) {
        take(q, H, t, 1, qb);
        take(k, HKV, t, 1, kb);
        take(v, HKV, t, 1, vb);
        assert_int_equal(la_kv_append(a, 0, kb, vb, 1), LA_OK);
        assert_int_equal(la_kv_attend(a, 0, &spec, qb, 1, ob, NULL, NULL), LA_OK);
        for (int h = 0; h < H; h++) memcpy(ref + ((size_t)h * N + t) * D, ob + (size_t)h * D, sizeof(float) * D);
        ref_len[t] = la_kv_len(a, 0);
        assert_int_equal(la_kv_read(a, 0, ref_k + (size_t)t * HKV * N * D, NULL, ref_pos + 0), LA_OK);
        /* keep the positions of the last token only in ref_pos; per-token positions are
         * compared through ref_k (rows are distinct random vectors) */
    }

    /* chunked: sizes 1, 2, ..., Tmax, 1, 2, ... (every phase: filling, partly, full) */
    la_kv_cache *b;
    assert_int_equal(la_kv_new_stream(&p, Tmax, &b), LA_OK);
    float *qc = malloc(sizeof(float) * H * Tmax * D), *kc = malloc(sizeof(float) * HKV * Tmax * D),
          *vc = malloc(sizeof(float) * HKV * Tmax * D), *oc = malloc(sizeof(float) * H * Tmax * D);
    float *kk = malloc(sizeof(float) * HKV * N * D);
    int64_t *pos = malloc(sizeof(int64_t) * HKV * N);
    double worst = 0.0;
    int T = 1;
    for (int t0 = 0; t0 < N; t0 += T, T = T % Tmax + 1) {
        if (t0 + T > N) T = N - t0;
        take(q, H, t0, T, qc);
        take(k, HKV, t0, T, kc);
        take(v, HKV, t0, T, vc);
        if (exact) {
            la_attn_opts o = la_attn_opts_default();
            o.n_threads = 1;
            assert_int_equal(la_kv_stream_attend(b, 0, &spec, qc, kc, vc, T, oc, &o), LA_OK);
        } else {
            assert_int_equal(la_kv_append(b, 0, kc, vc, T), LA_OK);
            assert_int_equal(la_kv_attend(b, 0, &spec, qc, T, oc, NULL, NULL), LA_OK);
        }
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++)
                for (int d = 0; d < D; d++) {
                    double e = fabs((double)oc[((size_t)h * T + i) * D + d] - ref[((size_t)h * N + t0 + i) * D + d]);
                    if (e > worst) worst = e;
                }
        if (check_kept) {
            const int t = t0 + T - 1;
            assert_int_equal(la_kv_len(b, 0), ref_len[t]);
            assert_int_equal(la_kv_seen(b, 0), t + 1);
            assert_int_equal(la_kv_read(b, 0, kk, NULL, pos), LA_OK);
            const size_t n = (size_t)ref_len[t];
            /* same kept keys in the same order: the same stream positions */
            assert_memory_equal(kk, ref_k + (size_t)t * HKV * N * D, sizeof(float) * HKV * n * D);
            for (size_t j = 0; j < n; j++) { /* sinks, then the newest tokens, consecutive */
                int64_t sinks = (int64_t)(p.policy == LA_KV_SINKS ? p.sinks : 0);
                int64_t want = (int64_t)j < sinks ? (int64_t)j : (int64_t)(t + 1 - (int64_t)n + (int64_t)j);
                if ((int64_t)(t + 1) <= la_kv_budget(&p)) want = (int64_t)j;
                assert_int_equal(pos[j], want);
            }
        }
    }
    la_kv_free(a);
    la_kv_free(b);
    free(q), free(k), free(v), free(ref), free(ref_pos), free(ref_len), free(ref_k);
    free(qc), free(kc), free(vc), free(oc), free(kk), free(pos);
    return worst;
}

static const char *SPECS[] = {
    "softmax+rope(theta=10000)+causal",
    "softmax+nope+causal",
    "softmax+yarn(2,16)+causal",          /* mscale^2 logit factor, interpolated frequencies */
    "softmax+pi(3)+causal",
    "softmax+ntk(2)+causal",
    "softmax+critical(0.7)+rope+causal",  /* gamma log(n_q): n_q = min(t+1, budget) */
    "softmax+qwen-logn(8)+rope+causal",   /* log(p+1)/log(8) past p = 7: slot positions */
    "softmax+temp(1.3)+prope(0.5)+causal",
    "softmax+dynamic-ntk(2,64)+causal",   /* budget <= L_train: exact */
};

static void test_sinks_chunked_equals_streaming(void **state) {
    (void)state;
    for (size_t s = 0; s < sizeof SPECS / sizeof SPECS[0]; s++) {
        double e = run("sinks(4,20)", SPECS[s], 0, 1, 1);
        if (s == 0) fprintf(stderr, "sinks(4,20) %s: max |diff| %g\n", SPECS[s], e);
        if (e > TOL) fprintf(stderr, "sinks(4,20) %s: max |diff| %g\n", SPECS[s], e);
        assert_true(e <= TOL);
    }
    assert_true(run("sinks(1,9)", SPECS[0], 0, 1, 1) <= TOL);
    assert_true(run("sinks(4,20)+int8", SPECS[0], 0, 1, 1) <= TOL); /* identical quantised rows */
}

static void test_window_chunked_equals_streaming(void **state) {
    (void)state;
    for (size_t s = 0; s < sizeof SPECS / sizeof SPECS[0]; s++) {
        double e = run("window(24)", SPECS[s], 0, 1, 1);
        if (e > TOL) fprintf(stderr, "window(24) %s: max |diff| %g\n", SPECS[s], e);
        assert_true(e <= TOL);
    }
    assert_true(run("window(13)+int8", SPECS[2], 0, 1, 1) <= TOL);
}

/* The test can fail: the approximate chunked path (a chunk sees the cache as evicted
 * before it; the sinks at the chunk's positions) is far outside the tolerance. */
static void test_approximation_is_detected(void **state) {
    (void)state;
    double e1 = run("sinks(4,20)", SPECS[0], 0, 0, 0), e2 = run("window(24)", SPECS[0], 0, 0, 0);
    fprintf(stderr, "approximate chunked path: max |diff| sinks %g, window %g\n", e1, e2);
    assert_true(e1 > 100 * TOL && e2 > 100 * TOL);
}

static void test_unsupported(void **state) {
    (void)state;
    la_kv_params p = la_kv_params_default();
    p.H = H, p.Hkv = HKV, p.D = D;
    la_spec sp;
    assert_int_equal(la_spec_parse("softmax+rope+causal", &sp), LA_OK);
    assert_int_equal(la_kv_policy_parse("h2o(8,8,4)", &p), LA_OK);
    assert_false(la_kv_stream_exact(&sp, &p)); /* eviction depends on each step's attention */
    assert_int_equal(la_kv_policy_parse("full", &p), LA_OK);
    assert_false(la_kv_stream_exact(&sp, &p));
    assert_int_equal(la_kv_policy_parse("sinks(4,20)", &p), LA_OK);
    assert_true(la_kv_stream_exact(&sp, &p));
    const char *bad[] = {"entmax+rope+causal", "softmax+alibi+causal", "softmax+sinv+rope+causal",
                         "softmax+rope+window(8)", "softmax+sink+rope+causal", "sigmoid(b=-2)+rope+causal"};
    la_kv_cache *c;
    assert_int_equal(la_kv_new_stream(&p, 4, &c), LA_OK);
    float x[H * 4 * D] = {0}, o[H * 4 * D];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(la_spec_parse(bad[i], &sp), LA_OK);
        assert_false(la_kv_stream_exact(&sp, &p));
        assert_int_equal(la_kv_stream_attend(c, 0, &sp, x, x, x, 4, o, NULL), LA_EUNSUPPORTED);
        assert_non_null(strstr(la_errmsg(), "one token at a time"));
    }
    assert_int_equal(la_spec_parse("softmax+rope+causal", &sp), LA_OK);
    assert_int_equal(la_kv_stream_attend(c, 0, &sp, x, x, x, 5, o, NULL), LA_EINVAL); /* > stream_T */
    la_kv_free(c);
    assert_int_equal(la_kv_new(&p, &c), LA_OK); /* no streaming scratch */
    assert_int_equal(la_kv_stream_attend(c, 0, &sp, x, x, x, 1, o, NULL), LA_EINVAL);
    la_kv_free(c);
    assert_int_equal(la_kv_new_stream(&p, 21, &c), LA_EINVAL); /* > the window */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sinks_chunked_equals_streaming),
        cmocka_unit_test(test_window_chunked_equals_streaming),
        cmocka_unit_test(test_approximation_is_detected),
        cmocka_unit_test(test_unsupported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
