/* test_eval_loss.c -- evaluation windows and validation loss per position bucket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "core/internal.h"
#include "longattn.h"
#include "support/test_corpus.h"

static char dir[256];
static la_docs val;
static const int SIZES[] = {700, 90, 2600, 40, 1300, 5000, 129};

static int setup(void **state) {
    (void)state;
    if (la_test_mkdtemp("la_eval_", dir, sizeof dir)) return -1;
    if (la_test_write_corpus(dir, 7, SIZES, 21)) return -1;
    return la_docs_load(dir, &val) == LA_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    la_docs_free(&val);
    la_test_rmtree(dir);
    return 0;
}

static int doc_of(int64_t pos) {
    for (int d = 0; d < val.n_docs; d++)
        if (pos >= val.offset[d] && pos < val.offset[d + 1]) return d;
    return -1;
}

static void test_windows_inside_long_documents(void **state) {
    (void)state;
    const int lens[] = {1, 64, 128, 1000, 2599, 4999};
    for (int li = 0; li < 6; li++) {
        int T = lens[li];
        int64_t a[40], b[40];
        assert_int_equal(la_eval_windows(&val, T, 40, 9, a), LA_OK);
        assert_int_equal(la_eval_windows(&val, T, 40, 9, b), LA_OK);
        assert_memory_equal(a, b, sizeof a); /* deterministic */
        int used[7] = {0};
        for (int w = 0; w < 40; w++) {
            int d = doc_of(a[w]);
            assert_true(d >= 0);
            /* all T+1 tokens (inputs and the last target) inside one document */
            assert_true(a[w] + T + 1 <= val.offset[d + 1]);
            assert_true(SIZES[d] >= T + 1);
            used[d]++;
        }
        /* every eligible document is used (round robin over a shuffled list) */
        for (int d = 0; d < 7; d++)
            if (SIZES[d] >= T + 1) assert_true(used[d] > 0);
    }
    int64_t s[1];
    assert_int_equal(la_eval_windows(&val, 5000, 1, 9, s), LA_ESHAPE); /* longest is 5000 < 5001 */
    assert_non_null(strstr(la_errmsg(), "longest has 5000"));
    assert_int_equal(la_eval_windows(&val, 0, 1, 9, s), LA_EINVAL);
    assert_int_equal(la_eval_windows(&val, 10, 0, 9, s), LA_EINVAL);
}

/* Reference "models": a unigram byte model (loss depends on the target) and a model whose
 * loss depends only on the position (to pin the bucket assignment). */
typedef struct { double logp[256]; int calls; } unigram;

static la_status unigram_loss(void *ctx, const int32_t *in, const int32_t *tgt, int T, float *loss) {
    unigram *u = ctx;
    u->calls++;
    for (int t = 0; t < T; t++) {
        assert_int_equal(in[t + 1 < T ? t + 1 : t], t + 1 < T ? tgt[t] : in[t]); /* shifted by one */
        loss[t] = (float)-u->logp[tgt[t]];
    }
    return LA_OK;
}

static la_status position_loss(void *ctx, const int32_t *in, const int32_t *tgt, int T, float *loss) {
    (void)ctx; (void)in; (void)tgt;
    for (int t = 0; t < T; t++) loss[t] = (float)(0.01 * t);
    return LA_OK;
}

static la_status nan_loss(void *ctx, const int32_t *in, const int32_t *tgt, int T, float *loss) {
    (void)ctx; (void)in; (void)tgt;
    for (int t = 0; t < T; t++) loss[t] = t == T / 2 ? NAN : 1.0f;
    return LA_OK;
}

static void test_loss_matches_reference_and_buckets_average(void **state) {
    (void)state;
    unigram u = {{0}, 0};
    double cnt[256] = {0};
    for (int64_t i = 0; i < val.n_tokens; i++) cnt[val.tokens[i]] += 1;
    for (int c = 0; c < 256; c++) u.logp[c] = log((cnt[c] + 1) / ((double)val.n_tokens + 256));
    const int T = 1000, n = 6, bucket = 128; /* 8 buckets, the last one 104 positions */
    double loss, bl[8];
    int64_t bt[8];
    assert_int_equal(la_eval_loss(unigram_loss, &u, &val, T, 0, n, 4, bucket, &loss, bl, bt), LA_OK);
    assert_int_equal(u.calls, n); /* one window per call: B = 1 */
    /* independent reference in double over the same windows */
    int64_t start[6];
    assert_int_equal(la_eval_windows(&val, T, n, 4, start), LA_OK);
    double ref = 0, refb[8] = {0};
    for (int w = 0; w < n; w++)
        for (int t = 0; t < T; t++) {
            double l = -(double)(float)u.logp[val.tokens[start[w] + t + 1]];
            ref += l;
            refb[t / bucket] += l;
        }
    ref /= n * T * log(2.0);
    /* float per-token losses summed in double: agreement to 1e-6 relative */
    assert_true(fabs(loss - ref) < 1e-6 * ref);
    double wsum = 0;
    int64_t tok = 0;
    for (int b = 0; b < 8; b++) {
        int per = b < 7 ? bucket : T - 7 * bucket;
        assert_int_equal(bt[b], (int64_t)per * n);
        assert_true(fabs(bl[b] - refb[b] / (bt[b] * log(2.0))) < 1e-6 * bl[b]);
        wsum += bl[b] * (double)bt[b];
        tok += bt[b];
    }
    /* token-weighted bucket average is the total */
    assert_int_equal(tok, (int64_t)n * T);
    assert_true(fabs(wsum / (double)tok - loss) < 1e-9 * loss);
}

static void test_bucket_assignment(void **state) {
    (void)state;
    const int T = 300, bucket = 100;
    double loss, bl[3];
    assert_int_equal(la_eval_loss(position_loss, NULL, &val, T, 0, 3, 1, bucket, &loss, bl, NULL), LA_OK);
    /* bucket b holds positions 100b .. 100b+99: mean 0.01*(100b + 49.5) nats */
    for (int b = 0; b < 3; b++) assert_true(fabs(bl[b] - 0.01 * (100 * b + 49.5) / log(2.0)) < 1e-5);
    assert_true(fabs(loss - 0.01 * 149.5 / log(2.0)) < 1e-5);
}

/* Cutting spans of 600 tokens into windows of T scores the same 600 targets per span at
 * every T: a position-independent model gives the same loss at every length. */
static void test_spans_score_the_same_tokens_at_every_length(void **state) {
    (void)state;
    unigram u = {{0}, 0};
    for (int c = 0; c < 256; c++) u.logp[c] = -1.0 - (c % 7) * 0.5;
    const int Ts[] = {100, 200, 300, 600};
    double ref = 0;
    for (int i = 0; i < 4; i++) {
        double loss;
        int nb = (Ts[i] + 99) / 100;
        int64_t bt[6];
        u.calls = 0;
        assert_int_equal(la_eval_loss(unigram_loss, &u, &val, Ts[i], 600, 5, 3, 100, &loss, NULL, bt), LA_OK);
        assert_int_equal(u.calls, 5 * (600 / Ts[i]));
        int64_t tok = 0;
        for (int b = 0; b < nb; b++) tok += bt[b];
        assert_int_equal(tok, 5 * 600);
        if (i == 0) ref = loss;
        /* float losses summed in double in a different grouping: 1e-9 relative */
        assert_true(fabs(loss - ref) < 1e-9 * ref);
    }
    double loss;
    assert_int_equal(la_eval_loss(unigram_loss, &u, &val, 700, 600, 5, 3, 100, &loss, NULL, NULL), LA_EINVAL);
}

/* The evaluation path (la_model_eval, one window at a time) against the training path
 * (la_model_forward on a batch of the same windows): the validation loss at the training
 * length must be the same number, position by position. The model is trained a little
 * first so that its predictions depend on the context. */
static la_status model_loss(void *ctx, const int32_t *in, const int32_t *tgt, int T, float *loss) {
    return la_model_eval(ctx, in, tgt, 1, T, NULL, loss, NULL, NULL);
}

static void test_eval_at_L_equals_training_forward(void **state) {
    (void)state;
    enum { T = 64, N = 4, B = 8 };
    la_model_config mc = la_model_config_default();
    mc.n_layer = 1;
    mc.d_model = 32;
    mc.n_head = 2;
    mc.train_len = T;
    snprintf(mc.spec, sizeof mc.spec, "softmax+rope");
    la_model *m;
    assert_int_equal(la_model_new(&mc, 5, &m), LA_OK);
    la_train_config tc = la_train_config_default();
    tc.steps = 25;
    tc.B = B;
    tc.T = T;
    tc.lr = 1e-2;
    tc.warmup = 2;
    tc.n_threads = 1;
    la_trainer *tr;
    assert_int_equal(la_trainer_new(m, NULL, &tc, &tr), LA_OK);
    int32_t in[B * T], tg[B * T];
    la_rng r;
    la_rng_seed(&r, 8);
    float first = 0, last = 0;
    for (int step = 0; step < tc.steps; step++) {
        for (int b = 0; b < B; b++) {
            int64_t s0 = (int64_t)la_rng_below(&r, (uint64_t)(val.n_tokens - T - 1));
            for (int t = 0; t < T; t++) {
                in[b * T + t] = val.tokens[s0 + t];
                tg[b * T + t] = val.tokens[s0 + t + 1];
            }
        }
        la_step_info info;
        assert_int_equal(la_trainer_step_batch(tr, in, tg, B, T, &info), LA_OK);
        if (step == 0) first = info.loss;
        last = info.loss;
    }
    la_trainer_free(tr);
    assert_true(last < first - 0.5f); /* it learned something: predictions are not uniform */

    double loss, pos[T];
    int64_t cnt[T];
    assert_int_equal(la_eval_loss(model_loss, m, &val, T, 0, N, 77, 1, &loss, pos, cnt), LA_OK);
    int64_t start[N];
    assert_int_equal(la_eval_windows(&val, T, N, 77, start), LA_OK);
    for (int w = 0; w < N; w++)
        for (int t = 0; t < T; t++) {
            in[w * T + t] = val.tokens[start[w] + t];
            tg[w * T + t] = val.tokens[start[w] + t + 1];
        }
    float mean, per[N * T];
    assert_int_equal(la_model_forward(m, in, tg, N, T, &mean, per), LA_OK);
    /* float32 forward passes that group their sums differently: 1e-4 relative */
    assert_true(fabs(loss - mean / log(2.0)) < 1e-4 * loss);
    for (int t = 0; t < T; t++) {
        double ref = 0;
        for (int w = 0; w < N; w++) ref += per[w * T + t];
        ref /= N * log(2.0);
        assert_int_equal(cnt[t], N);
        assert_true(fabs(pos[t] - ref) < 1e-4 * (ref + 1));
    }
    la_model_free(m);
}

static void test_errors(void **state) {
    (void)state;
    double loss;
    assert_int_equal(la_eval_loss(nan_loss, NULL, &val, 64, 0, 2, 1, 64, &loss, NULL, NULL), LA_ENUMERIC);
    assert_non_null(strstr(la_errmsg(), "position 32"));
    assert_int_equal(la_eval_loss(position_loss, NULL, &val, 64, 0, 2, 1, 0, &loss, NULL, NULL), LA_EINVAL);
    assert_int_equal(la_eval_loss(position_loss, NULL, &val, 6000, 0, 2, 1, 64, &loss, NULL, NULL), LA_ESHAPE);
    assert_int_equal(la_eval_loss(NULL, NULL, &val, 64, 0, 2, 1, 64, &loss, NULL, NULL), LA_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows_inside_long_documents),
        cmocka_unit_test(test_loss_matches_reference_and_buckets_average),
        cmocka_unit_test(test_bucket_assignment),
        cmocka_unit_test(test_spans_score_the_same_tokens_at_every_length),
        cmocka_unit_test(test_eval_at_L_equals_training_forward),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
