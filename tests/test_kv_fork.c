/* test_kv_fork.c -- la_kv_copy (src/infer/kv_fork.c): a cache forked after a prefix
 * continues bitwise as the original would (the same outputs, kept rows, positions and H2O
 * scores after further appends and attends), for full, window, sinks and h2o policies, f32
 * and int8 storage; a copy into a differently shaped cache is refused. The continuation
 * of the original is the reference: no tolerance, since the fork must be exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "longattn.h"

static uint64_t st_ = 88172645463325252ULL;
static float rnd(void) { /* xorshift64, uniform in [-1, 1) */
    st_ ^= st_ << 13, st_ ^= st_ >> 7, st_ ^= st_ << 17;
    return (float)((double)(st_ >> 11) / 4503599627370496.0 - 1.0);
}

static void check(const char *policy, int int8) {
    const int H = 4, Hkv = 2, D = 16, L = 2, N = 40, T = 3;
    la_kv_params p = la_kv_params_default();
    p.H = H, p.Hkv = Hkv, p.D = D, p.n_layers = L, p.max_tokens = 256;
    assert_int_equal(la_kv_policy_parse(policy, &p), LA_OK);
    if (int8) p.storage = LA_KV_INT8;
    la_kv_cache *a = NULL, *b = NULL;
    assert_int_equal(la_kv_new(&p, &a), LA_OK);
    assert_int_equal(la_kv_new(&p, &b), LA_OK);
    la_spec spec;
    assert_int_equal(la_spec_parse("softmax+rope(theta=1000)+causal", &spec), LA_OK);
    float k[2 * 3 * 16], v[2 * 3 * 16], q[4 * 3 * 16], oa[4 * 3 * 16], ob[4 * 3 * 16];
    float ra[4096], rb[4096];
    int64_t pa[512], pb[512];
    for (int step = 0; step < N / T; step++) {
        for (size_t i = 0; i < sizeof k / sizeof *k; i++) k[i] = rnd(), v[i] = rnd();
        for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = rnd();
        for (int l = 0; l < L; l++) {
            assert_int_equal(la_kv_append(a, l, k, v, T), LA_OK);
            assert_int_equal(la_kv_attend(a, l, &spec, q, T, oa, NULL, NULL), LA_OK);
            if (step >= 6) { /* the fork continues with the same inputs */
                assert_int_equal(la_kv_append(b, l, k, v, T), LA_OK);
                assert_int_equal(la_kv_attend(b, l, &spec, q, T, ob, NULL, NULL), LA_OK);
                assert_memory_equal(oa, ob, sizeof oa);
                assert_int_equal(la_kv_len(a, l), la_kv_len(b, l));
                assert_int_equal(la_kv_seen(a, l), la_kv_seen(b, l));
                assert_int_equal(la_kv_read(a, l, ra, NULL, pa), LA_OK);
                assert_int_equal(la_kv_read(b, l, rb, NULL, pb), LA_OK);
                assert_memory_equal(ra, rb, sizeof(float) * (size_t)Hkv * la_kv_len(a, l) * D);
                assert_memory_equal(pa, pb, sizeof(int64_t) * (size_t)Hkv * la_kv_len(a, l));
                if (p.policy == LA_KV_H2O) {
                    assert_int_equal(la_kv_scores(a, l, ra), LA_OK);
                    assert_int_equal(la_kv_scores(b, l, rb), LA_OK);
                    assert_memory_equal(ra, rb, sizeof(float) * (size_t)Hkv * la_kv_len(a, l));
                }
            }
        }
        if (step == 5) { /* fork after 18 tokens: past every budget below, so evictions happened */
            for (int l = 0; l < L; l++) { /* make b's own state different first */
                float z[2 * 3 * 16] = {0};
                la_kv_reset(b);
                assert_int_equal(la_kv_append(b, l, z, z, T), LA_OK);
            }
            assert_int_equal(la_kv_copy(b, a), LA_OK);
        }
    }
    la_kv_free(a);
    la_kv_free(b);
}

static void test_fork_continues_bitwise(void **state) {
    (void)state;
    const char *pol[] = {"full", "window(8)", "sinks(2,7)", "h2o(4,5,2)"};
    for (int i = 0; i < 4; i++)
        for (int int8 = 0; int8 < 2; int8++) check(pol[i], int8);
}

static void test_fork_refuses_other_shapes(void **state) {
    (void)state;
    la_kv_params p = la_kv_params_default(), q = la_kv_params_default();
    q.max_tokens = 128;
    la_kv_cache *a = NULL, *b = NULL;
    assert_int_equal(la_kv_new(&p, &a), LA_OK);
    assert_int_equal(la_kv_new(&q, &b), LA_OK);
    assert_int_equal(la_kv_copy(b, a), LA_EINVAL);
    assert_int_equal(la_kv_copy(NULL, a), LA_EINVAL);
    assert_int_equal(la_kv_copy(a, a), LA_OK);
    la_kv_free(a);
    la_kv_free(b);
    /* the same policy and budget with other parameters: accepted before 2026-12-05, and
     * sinks(4,4) then evicted rows that sinks(2,6) keeps */
    const char *pairs[][2] = {{"sinks(2,6)", "sinks(4,4)"}, {"h2o(4,4,2)", "h2o(2,4,4)"}, {"h2o(4,4)", "h2o(2,6)"}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(la_kv_policy_parse(pairs[i][0], &p), LA_OK);
        assert_int_equal(la_kv_policy_parse(pairs[i][1], &q), LA_OK);
        assert_int_equal(la_kv_budget(&p), la_kv_budget(&q));
        assert_int_equal(la_kv_new(&p, &a), LA_OK);
        assert_int_equal(la_kv_new(&q, &b), LA_OK);
        assert_int_equal(la_kv_copy(b, a), LA_EINVAL);
        assert_non_null(strstr(la_errmsg(), "its parameters"));
        la_kv_free(a);
        la_kv_free(b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_continues_bitwise),
        cmocka_unit_test(test_fork_refuses_other_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
