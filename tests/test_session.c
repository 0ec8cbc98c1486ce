/* test_session.c -- the language-model interface (la_lm), the one decoding session
 * (src/infer/session.c) and the library's generation and perplexity loops
 * (src/infer/generate.c), on the GPT, against the cache-less forward:
 *  - la_generate at temperature 0 equals a greedy loop of full la_model_forward calls, stops
 *    at a stop token without emitting it, and returns on_token's error;
 *  - la_perplexity's NLL equals the per-token losses of la_model_eval on each window, per
 *    position bucket, with 1 byte per token when no byte table is given;
 *  - la_session_copy forks a stream that continues exactly as the original.
 * Tolerance on summed NLL: 1e-4 relative. Cached and cache-less logits differ by float
 * rounding only (measured 7e-6 absolute on logits of order 1-5, tests/test_decode.c); the
 * NLL of one token moves by at most twice that, over 45 tokens below 1e-3 absolute on a sum
 * of ~250 nats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "core/internal.h"
#include "longattn.h"

static la_model *tiny_model(uint64_t seed) {
    la_model_config cfg = la_model_config_default();
    cfg.n_layer = 2;
    cfg.n_head = 4;
    cfg.n_kv_head = 2;
    cfg.d_model = 32;
    cfg.vocab = 256;
    cfg.train_len = 16;
    cfg.init_std = 0.3f; /* logits of order 1: a wrong token or row shows */
    la_model *m = NULL;
    assert_int_equal(la_model_new(&cfg, seed, &m), LA_OK);
    return m;
}

static void test_lm_accessors(void **state) {
    (void)state;
    la_model *m = tiny_model(1);
    la_lm *lm = la_model_lm(m);
    assert_non_null(lm);
    assert_ptr_equal(la_model_lm(m), lm); /* embedded: the same handle every time */
    assert_int_equal(la_lm_vocab(lm), 256);
    assert_int_equal(la_lm_context(lm), 16);
    assert_string_equal(la_lm_family(lm), "gpt");
    assert_ptr_equal(la_lm_spec(lm), la_model_spec(m));
    la_kv_params p = la_kv_params_default();
    assert_int_equal(la_lm_kv_params(lm, &p), LA_OK);
    assert_int_equal(p.n_layers, 2);
    assert_int_equal(p.H, 4);
    assert_int_equal(p.Hkv, 2);
    assert_int_equal(p.D, 8);
    assert_null(la_model_lm(NULL));
    assert_int_equal(la_lm_vocab(NULL), 0);
    assert_int_equal(la_lm_kv_params(NULL, &p), LA_EINVAL);
    la_model_free(m);
}

typedef struct {
    int32_t got[64];
    int n, fail_at;
} sink_t;

static la_status collect(void *user, int32_t t) {
    sink_t *s = user;
    if (s->n == s->fail_at) return la_fail(LA_EIO, "collect: refused token %d", t);
    s->got[s->n++] = t;
    return LA_OK;
}

static void test_generate_greedy_and_stop(void **state) {
    (void)state;
    la_model *m = tiny_model(5);
    const int P = 7, n_new = 10;
    int32_t seq[32] = {100, 101, 102, 58, 32, 120, 10};
    for (int n = 0; n < n_new; n++) { /* reference: greedy over full forwards, no cache */
        assert_int_equal(la_model_forward(m, seq, NULL, 1, P + n, NULL, NULL), LA_OK);
        const float *z = la_model_logits(m) + (size_t)(P + n - 1) * 256;
        int best = 0;
        for (int i = 1; i < 256; i++)
            if (z[i] > z[best]) best = i;
        seq[P + n] = best;
    }
    la_kv_params kp = la_kv_params_default();
    kp.max_tokens = 64;
    la_session *s = NULL;
    assert_int_equal(la_session_new(la_model_lm(m), &kp, 4, &s), LA_OK);
    la_generate_params gp = la_generate_params_default();
    gp.sample.temperature = 0;
    gp.max_new = n_new;
    gp.prefill_chunk = 3; /* 3 + 3 + 1 prompt tokens */
    gp.on_token = collect;
    sink_t got = {.fail_at = -1};
    gp.user = &got;
    la_generate_result r;
    assert_int_equal(la_generate(s, seq, P, &gp, &r), LA_OK);
    assert_int_equal(r.n_new, n_new);
    assert_int_equal(r.stopped, 0);
    assert_int_equal(got.n, n_new);
    assert_memory_equal(got.got, seq + P, sizeof(int32_t) * n_new);
    /* the last token is not stepped: the stream holds the prompt and n_new - 1 tokens */
    assert_int_equal(la_session_pos(s), P + n_new - 1);

    /* a stop token ends generation before it is emitted */
    la_session_reset(s);
    assert_int_equal(la_session_pos(s), 0);
    int32_t stop = seq[P + 4];
    int first = 4; /* the first generated position holding the stop token */
    for (int i = 0; i < 4; i++)
        if (seq[P + i] == stop) first = i, i = 4;
    gp.stop = &stop;
    gp.n_stop = 1;
    got.n = 0;
    assert_int_equal(la_generate(s, seq, P, &gp, &r), LA_OK);
    assert_int_equal(r.stopped, 1);
    assert_int_equal(r.n_new, first);
    assert_int_equal(got.n, first);

    /* on_token's error ends generation and is returned */
    la_session_reset(s);
    gp.n_stop = 0;
    got.n = 0;
    got.fail_at = 2;
    assert_int_equal(la_generate(s, seq, P, &gp, &r), LA_EIO);
    assert_int_equal(got.n, 2);

    /* bad input, refused before the session moves (before 2026-12-05 bad sampling params
     * and a bad id in a later chunk failed after the prompt's steps) */
    la_session_reset(s);
    assert_int_equal(la_generate(s, seq, 0, &gp, &r), LA_EINVAL);
    gp.prefill_chunk = 5; /* > max_step */
    assert_int_equal(la_generate(s, seq, P, &gp, &r), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "max_step"));
    gp.prefill_chunk = 3;
    gp.n_stop = 1;
    gp.stop = NULL;
    assert_int_equal(la_generate(s, seq, P, &gp, &r), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "stop is NULL"));
    gp.n_stop = 0;
    const double bad_t[2] = {-1, NAN};
    for (int i = 0; i < 3; i++) {
        la_generate_params g = gp;
        if (i < 2) g.sample.temperature = bad_t[i];
        else g.sample.top_p = NAN;
        assert_int_equal(la_generate(s, seq, P, &g, &r), LA_EINVAL);
        assert_non_null(strstr(la_errmsg(), i < 2 ? "temperature" : "top_p"));
    }
    int32_t bad_prompt[7];
    memcpy(bad_prompt, seq, sizeof bad_prompt);
    bad_prompt[5] = 256; /* in the second chunk of 3 */
    assert_int_equal(la_generate(s, bad_prompt, P, &gp, &r), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "token 256 at index 5"));
    assert_int_equal(la_session_pos(s), 0);
    /* a prompt longer than the full cache: refused before its first chunks are appended */
    int32_t *longp = calloc(65, sizeof *longp);
    assert_non_null(longp);
    assert_int_equal(la_generate(s, longp, 65, &gp, &r), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "do not fit"));
    assert_int_equal(la_session_pos(s), 0);
    free(longp);
    la_session_free(s);
    la_model_free(m);
}

static void test_perplexity_matches_eval(void **state) {
    (void)state;
    la_model *m = tiny_model(9);
    enum { N = 50, CTX = 16 };
    int32_t ids[N];
    la_rng r;
    la_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) ids[i] = (int32_t)la_rng_below(&r, 256);
    la_kv_params kp = la_kv_params_default();
    kp.max_tokens = CTX;
    la_session *s = NULL;
    assert_int_equal(la_session_new(la_model_lm(m), &kp, 5, &s), LA_OK);
    la_perplexity_params pp = la_perplexity_params_default();
    pp.ctx = CTX;
    la_perplexity_result res;
    assert_int_equal(la_perplexity(s, ids, N, &pp, &res), LA_OK);
    assert_int_equal(res.windows, N / CTX);
    assert_int_equal(res.tokens, (N / CTX) * (CTX - 1));
    assert_true(res.bytes == (double)res.tokens); /* 1 byte per token without a table */
    /* buckets [1,2) [2,4) [4,8) [8,16): 1, 2, 4, 8 targets per window */
    for (int b = 0; b < 4; b++) assert_int_equal(res.bucket_n[b], (int64_t)(N / CTX) << b);
    /* reference: la_model_eval's per-token loss on each window (no cache) */
    double ref[4] = {0}, tot = 0;
    for (int w = 0; w < N / CTX; w++) {
        float loss[CTX];
        int32_t tgt[CTX];
        for (int i = 0; i < CTX; i++) tgt[i] = i + 1 < CTX ? ids[w * CTX + i + 1] : -1;
        assert_int_equal(la_model_eval(m, ids + w * CTX, tgt, 1, CTX, NULL, loss, NULL, NULL), LA_OK);
        for (int i = 0; i + 1 < CTX; i++) {
            int p = i + 1, b = 0;
            while ((2 << b) <= p) b++;
            ref[b] += loss[i];
            tot += loss[i];
        }
    }
    assert_true(fabs(res.nll - tot) <= 1e-4 * tot);
    for (int b = 0; b < 4; b++) assert_true(fabs(res.bucket_nll[b] - ref[b]) <= 1e-4 * ref[b] + 1e-6);
    /* max_windows and a byte table */
    int tb[256];
    for (int v = 0; v < 256; v++) tb[v] = 2;
    pp.max_windows = 1;
    pp.token_bytes = tb;
    pp.chunk = 4;
    assert_int_equal(la_perplexity(s, ids, N, &pp, &res), LA_OK);
    assert_int_equal(res.windows, 1);
    assert_true(res.bytes == 2.0 * (CTX - 1));
    /* bad input */
    pp.ctx = N + 1;
    assert_int_equal(la_perplexity(s, ids, N, &pp, &res), LA_EINVAL);
    pp.ctx = CTX;
    pp.chunk = 6;
    assert_int_equal(la_perplexity(s, ids, N, &pp, &res), LA_EINVAL);
    pp.chunk = 4;
    pp.max_windows = -1; /* scored nothing and returned LA_OK before 2026-12-05 */
    assert_int_equal(la_perplexity(s, ids, N, &pp, &res), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "max_windows"));
    pp.max_windows = 0;
    tb[7] = -1;
    assert_int_equal(la_perplexity(s, ids, N, &pp, &res), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "token_bytes[7] = -1"));
    tb[7] = 2;
    /* ids outside the vocabulary: the first token of a chunk was scored (read out of
     * bounds) before la_session_step saw it, before 2026-12-05 */
    const int32_t bad[3] = {256, -1, 100000};
    for (int i = 0; i < 3; i++) {
        const int32_t keep = ids[CTX + 4];
        ids[CTX + 4] = bad[i]; /* the first token of the second chunk of window 1 */
        assert_int_equal(la_perplexity(s, ids, N, &pp, &res), LA_EINVAL);
        assert_non_null(strstr(la_errmsg(), "at index 20"));
        assert_int_equal(res.windows, 0);
        ids[CTX + 4] = keep;
    }
    la_session_free(s);
    /* a run that fails in its first window reports the windows it scored: none (it said
     * n / ctx before 2026-12-05) */
    kp.max_tokens = CTX - 2; /* a full cache too small for the window */
    assert_int_equal(la_session_new(la_model_lm(m), &kp, 5, &s), LA_OK);
    assert_int_equal(la_perplexity(s, ids, N, &pp, &res), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "full"));
    assert_int_equal(res.windows, 0);
    la_session_free(s);
    la_model_free(m);
}

/* a fork (la_session_copy) continues exactly as the stream it was copied from */
static void test_session_copy(void **state) {
    (void)state;
    la_model *m = tiny_model(2);
    const int V = 256;
    int32_t tok[24];
    for (int i = 0; i < 24; i++) tok[i] = (i * 31 + 7) % V;
    const char *pols[3] = {"window(8)", "sinks(2,6)+int8", "h2o(4,4)+f16"};
    for (int pi = 0; pi < 3; pi++) {
        la_kv_params kp = la_kv_params_default();
        assert_int_equal(la_kv_policy_parse(pols[pi], &kp), LA_OK);
        la_session *a = NULL, *b = NULL, *other = NULL;
        assert_int_equal(la_session_new(la_model_lm(m), &kp, 4, &a), LA_OK);
        assert_int_equal(la_session_new(la_model_lm(m), &kp, 4, &b), LA_OK);
        assert_int_equal(la_session_new(la_model_lm(m), &kp, 2, &other), LA_OK);
        float la[4 * 256], lb[4 * 256];
        for (int i = 0; i < 16; i += 4) assert_int_equal(la_session_step(a, tok + i, 4, la, 1), LA_OK);
        assert_int_equal(la_session_copy(b, a), LA_OK);
        assert_int_equal(la_session_pos(b), 16);
        assert_int_equal(la_session_copy(other, a), LA_EINVAL); /* max_step differs */
        for (int i = 16; i < 24; i += 4) {
            assert_int_equal(la_session_step(a, tok + i, 4, la, 1), LA_OK);
            assert_int_equal(la_session_step(b, tok + i, 4, lb, 1), LA_OK);
            assert_memory_equal(la, lb, sizeof la);
        }
        /* tokens outside the vocabulary, steps longer than max_step */
        int32_t bad = 256;
        assert_int_equal(la_session_step(a, &bad, 1, la, 0), LA_EINVAL);
        assert_non_null(strstr(la_errmsg(), "vocabulary"));
        assert_int_equal(la_session_step(a, tok, 5, la, 0), LA_EINVAL);
        la_session_free(a);
        la_session_free(b);
        la_session_free(other);
    }
    /* a full cache out of room names its size */
    la_kv_params kp = la_kv_params_default();
    kp.max_tokens = 6;
    la_session *s = NULL;
    assert_int_equal(la_session_new(la_model_lm(m), &kp, 4, &s), LA_OK);
    float lg[4 * 256];
    assert_int_equal(la_session_step(s, tok, 4, lg, 0), LA_OK);
    assert_int_equal(la_session_step(s, tok, 4, lg, 0), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "holds 4 tokens"));
    la_session_free(s);
    assert_int_equal(la_session_new(NULL, &kp, 1, &s), LA_EINVAL);
    la_model_free(m);
}

/* k, v of layer 1 beyond f16's range: a step fails in layer 1 after layer 0 appended */
static float *blow_up_wv(la_model *m, float **save, size_t *n) {
    la_tensor_info ti;
    for (int i = 0; i < la_model_num_tensors(m); i++) {
        assert_int_equal(la_model_get_tensor(m, i, &ti), LA_OK);
        if (strcmp(ti.name, "h.1.attn.wv")) continue;
        float *w = la_model_params(m) + ti.offset;
        *n = ti.numel;
        *save = malloc(ti.numel * sizeof(float));
        memcpy(*save, w, ti.numel * sizeof(float));
        for (size_t j = 0; j < ti.numel; j++) w[j] = 1e7f;
        return w;
    }
    fail_msg("no h.1.attn.wv");
    return NULL;
}

/* a failed step loses nothing: without eviction the cache is cut back exactly (before
 * 2026-12-05 layer 0 kept the failed step's tokens and the stream went on wrong); after
 * an eviction the session refuses steps until it is reset */
static void test_failed_step_restores(void **state) {
    (void)state;
    la_model *m = tiny_model(4);
    int32_t tok[12];
    for (int i = 0; i < 12; i++) tok[i] = (i * 37 + 3) % 256;
    const char *pols[3] = {"full+f16", "window(12)+f16", "sinks(2,6)+f16"};
    for (int pi = 0; pi < 3; pi++) {
        la_kv_params kp = la_kv_params_default();
        kp.max_tokens = 16;
        assert_int_equal(la_kv_policy_parse(pols[pi], &kp), LA_OK);
        la_session *a = NULL, *b = NULL;
        assert_int_equal(la_session_new(la_model_lm(m), &kp, 4, &a), LA_OK);
        assert_int_equal(la_session_new(la_model_lm(m), &kp, 4, &b), LA_OK);
        for (int i = 0; i < 8; i += 4) {
            assert_int_equal(la_session_step(a, tok + i, 4, NULL, 0), LA_OK);
            assert_int_equal(la_session_step(b, tok + i, 4, NULL, 0), LA_OK);
        }
        float *save = NULL, la[256], lb[256];
        size_t n = 0;
        float *w = blow_up_wv(m, &save, &n);
        assert_int_equal(la_session_step(a, tok + 8, 4, NULL, 0), LA_ENUMERIC);
        memcpy(w, save, n * sizeof(float));
        free(save);
        assert_int_equal(la_session_pos(a), 8);
        if (pi < 2) { /* 8 + 4 <= 12 or 16 slots: nothing was evicted */
            for (int l = 0; l < 2; l++) {
                assert_int_equal(la_kv_len(la_session_cache(a), l), 8);
                assert_int_equal(la_kv_seen(la_session_cache(a), l), 8);
            }
            assert_int_equal(la_session_step(a, tok + 8, 4, la, 0), LA_OK);
            assert_int_equal(la_session_step(b, tok + 8, 4, lb, 0), LA_OK);
            assert_memory_equal(la, lb, sizeof la);
        } else { /* layer 0 evicted its oldest rows: refused until reset */
            assert_int_equal(la_session_step(a, tok + 8, 4, la, 0), LA_EINVAL);
            assert_non_null(strstr(la_errmsg(), "la_session_reset"));
            assert_int_equal(la_session_copy(b, a), LA_EINVAL);
            assert_int_equal(la_session_copy(a, b), LA_OK); /* a fork of a good stream repairs it */
            assert_int_equal(la_session_step(a, tok + 8, 4, la, 0), LA_OK);
            la_session_reset(a);
            assert_int_equal(la_session_step(a, tok, 4, la, 0), LA_OK);
        }
        la_session_free(a);
        la_session_free(b);
    }
    la_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lm_accessors),
        cmocka_unit_test(test_generate_greedy_and_stop),
        cmocka_unit_test(test_perplexity_matches_eval),
        cmocka_unit_test(test_session_copy),
        cmocka_unit_test(test_failed_step_restores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
