/* test_attn_hostile.c -- numerical hostility (issue 17): adversarial inputs for the fused
 * attention kernels against the float64 reference tests/support/ref_attn.c, NaN/Inf in
 * visible and invisible key/value rows, and logits that would overflow float32. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>

#include "core/internal.h" /* la_rng */
#include "longattn.h"
#include "support/ref_attn.h"

typedef struct {
    la_shape sh;
    float *q, *k, *v, *dout, *out, *stat, *dq, *dk, *dv;
    double *qd, *kd, *vd, *doutd, *outd, *statd, *dqd, *dkd, *dvd;
    size_t nq, nk, bht;
} prob;

static prob prob_new(int B, int H, int Hkv, int T, int S, int D, int64_t pos0) {
    prob p;
    memset(&p, 0, sizeof p);
    p.sh = (la_shape){B, H, Hkv, T, S, D, pos0};
    p.nq = (size_t)B * H * T * D, p.nk = (size_t)B * Hkv * S * D, p.bht = (size_t)B * H * T;
    p.q = calloc(p.nq, sizeof(float)), p.dout = calloc(p.nq, sizeof(float));
    p.out = calloc(p.nq, sizeof(float)), p.dq = calloc(p.nq, sizeof(float));
    p.k = calloc(p.nk, sizeof(float)), p.v = calloc(p.nk, sizeof(float));
    p.dk = calloc(p.nk, sizeof(float)), p.dv = calloc(p.nk, sizeof(float));
    p.stat = calloc(p.bht, sizeof(float));
    p.qd = calloc(p.nq, sizeof(double)), p.doutd = calloc(p.nq, sizeof(double));
    p.outd = calloc(p.nq, sizeof(double)), p.dqd = calloc(p.nq, sizeof(double));
    p.kd = calloc(p.nk, sizeof(double)), p.vd = calloc(p.nk, sizeof(double));
    p.dkd = calloc(p.nk, sizeof(double)), p.dvd = calloc(p.nk, sizeof(double));
    p.statd = calloc(p.bht, sizeof(double));
    la_rng r;
    la_rng_seed(&r, 1700 + (uint64_t)T * 31 + (uint64_t)S * 7 + (uint64_t)D);
    for (size_t i = 0; i < p.nq; i++) p.q[i] = (float)la_rng_normal(&r), p.dout[i] = (float)la_rng_normal(&r);
    for (size_t i = 0; i < p.nk; i++) p.k[i] = (float)la_rng_normal(&r), p.v[i] = (float)la_rng_normal(&r);
    return p;
}

static void prob_free(prob *p) {
    free(p->q); free(p->k); free(p->v); free(p->dout); free(p->out); free(p->stat);
    free(p->dq); free(p->dk); free(p->dv);
    free(p->qd); free(p->kd); free(p->vd); free(p->doutd); free(p->outd); free(p->statd);
    free(p->dqd); free(p->dkd); free(p->dvd);
}

static la_status run(const la_spec *sp, prob *p, const int32_t *docs, int bwd) {
    la_attn_opts o = la_attn_opts_default();
    o.doc_ids = docs;
    o.n_threads = 2;
    la_status st = la_attn_forward(sp, &p->sh, p->q, p->k, p->v, p->out, p->stat, &o);
    if (st != LA_OK || !bwd) return st;
    return la_attn_backward(sp, &p->sh, p->q, p->k, p->v, p->out, p->stat, p->dout, p->dq, p->dk, p->dv, &o);
}

/* max |a - b| (equal infinities count as 0, NaN as infinite) and max |b| over finite b */
static double maxerr(const float *a, const double *b, size_t n, double *scale) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(b[i]) && (double)a[i] == b[i]) continue;
        double d = fabs((double)a[i] - b[i]);
        if (isnan(d)) d = INFINITY;
        if (d > e) e = d;
        if (isfinite(b[i]) && fabs(b[i]) > s) s = fabs(b[i]);
    }
    *scale = s;
    return e;
}

/* Kernel forward + backward vs the reference on the same (float) inputs. Tolerances as in
 * test_softmax_kernel.c / test_entmax_attn.c: float32 accumulation over <= 256 keys of
 * O(1) terms, ~1e-6 relative per operation; outputs 2e-4 absolute on O(1) values (scaled by
 * the largest reference value when that is larger, for the huge-logit cases), row
 * statistics 2e-4 (1 + |stat|), gradients 2e-3 (1 + largest gradient). A wrong mask, a
 * dropped row or a NaN is off by >= 1e-2 or infinite. */
static void check(const char *name, const la_spec *sp, prob *p, const int32_t *docs) {
    la_status st = run(sp, p, docs, 1);
    if (st != LA_OK) fail_msg("%s: %s: %s", name, la_status_name(st), la_errmsg());
    for (size_t i = 0; i < p->nq; i++) p->qd[i] = p->q[i], p->doutd[i] = p->dout[i];
    for (size_t i = 0; i < p->nk; i++) p->kd[i] = p->k[i], p->vd[i] = p->v[i];
    ref_attn_opts o;
    memset(&o, 0, sizeof o);
    o.doc_ids = docs;
    if (ref_attn_forward(sp, &p->sh, p->qd, p->kd, p->vd, &o, p->outd, p->statd, NULL, NULL) ||
        ref_attn_backward(sp, &p->sh, p->qd, p->kd, p->vd, &o, p->doutd, p->dqd, p->dkd, p->dvd, NULL))
        fail_msg("%s: reference: %s", name, ref_attn_error());
    double sc, e;
    e = maxerr(p->out, p->outd, p->nq, &sc);
    if (!(e <= 2e-4 * (sc > 1 ? sc : 1))) fail_msg("%s: out max err %g (scale %g)", name, e, sc);
    e = maxerr(p->stat, p->statd, p->bht, &sc);
    if (!(e <= 2e-4 * (1 + sc))) fail_msg("%s: row statistic max err %g (scale %g)", name, e, sc);
    e = maxerr(p->dq, p->dqd, p->nq, &sc);
    if (!(e <= 2e-3 * (1 + sc))) fail_msg("%s: dq max err %g (scale %g)", name, e, sc);
    e = maxerr(p->dk, p->dkd, p->nk, &sc);
    if (!(e <= 2e-3 * (1 + sc))) fail_msg("%s: dk max err %g (scale %g)", name, e, sc);
    e = maxerr(p->dv, p->dvd, p->nk, &sc);
    if (!(e <= 2e-3 * (1 + sc))) fail_msg("%s: dv max err %g (scale %g)", name, e, sc);
}

static la_spec spec_of(const char *text) {
    la_spec s;
    if (la_spec_parse(text, &s) != LA_OK) fail_msg("spec %s: %s", text, la_errmsg());
    return s;
}

static const char *g_specs[] = {"softmax+nope+causal", "softmax+rope+window(5)", "softmax+alibi+sinks(n=2,w=3)",
                                "entmax(alpha=1.5)+nope+causal", "sparsemax+nope+full",
                                "entmax(alpha=1.25)+rope+causal"};
#define N_SPECS (int)(sizeof g_specs / sizeof g_specs[0])

/* The grid: every spec above x every adversarial input. */
static void test_adversarial_grid(void **state) {
    (void)state;
    for (int si = 0; si < N_SPECS; si++) {
        la_spec sp = spec_of(g_specs[si]);
        int even = la_spec_format(&sp, NULL, 0) > 0 && sp.pos != LA_POS_ROPE; /* D = 1 needs no rotation */
        char name[160];
#define NAME(what) (snprintf(name, sizeof name, "%s: %s", g_specs[si], what), name)
        /* all-equal logits: q = 0, so every visible key gets the same logit */
        prob p = prob_new(1, 2, 1, 24, 24, 8, LA_POS0_AUTO);
        memset(p.q, 0, sizeof(float) * p.nq);
        check(NAME("all-equal logits"), &sp, &p, NULL);
        prob_free(&p);
        /* one huge logit: key 3 aligned with every query, 1e3 times longer than the rest */
        p = prob_new(1, 1, 1, 16, 16, 8, LA_POS0_AUTO);
        for (int d = 0; d < 8; d++) p.k[3 * 8 + d] = 300.0f * (d == 0 ? 1.0f : 0.0f);
        for (int i = 0; i < 16; i++) p.q[i * 8] = 10.0f;
        check(NAME("one huge logit"), &sp, &p, NULL);
        prob_free(&p);
        /* denormals: q, k, v, dout of magnitude ~1e-39 (below FLT_MIN = 1.2e-38) */
        p = prob_new(1, 1, 1, 12, 12, 4, LA_POS0_AUTO);
        for (size_t i = 0; i < p.nq; i++) p.q[i] *= 1e-39f, p.dout[i] *= 1e-39f;
        for (size_t i = 0; i < p.nk; i++) p.k[i] *= 1e-39f, p.v[i] *= 1e-39f;
        assert_true(fpclassify(p.k[0]) == FP_SUBNORMAL || p.k[0] == 0.0f);
        check(NAME("denormals"), &sp, &p, NULL);
        prob_free(&p);
        /* fully masked rows: queries at negative positions (pos0 = -3) see no key (causal
         * patterns): out 0, statistic LA_ROW_EMPTY, zero gradients */
        p = prob_new(1, 1, 1, 8, 8, 4, -3);
        check(NAME("fully masked rows"), &sp, &p, NULL);
        if (sp.pattern != LA_PAT_FULL) {
            assert_true(p.stat[0] == LA_ROW_EMPTY);
            for (int d = 0; d < 4; d++) assert_true(p.out[d] == 0.0f && p.dq[d] == 0.0f);
        }
        prob_free(&p);
        /* T = 1, S = 1, and both */
        p = prob_new(2, 2, 2, 1, 9, 8, LA_POS0_AUTO);
        check(NAME("T = 1"), &sp, &p, NULL);
        prob_free(&p);
        p = prob_new(1, 2, 1, 6, 1, 8, 0);
        check(NAME("S = 1"), &sp, &p, NULL);
        prob_free(&p);
        p = prob_new(1, 1, 1, 1, 1, 8, LA_POS0_AUTO);
        check(NAME("T = S = 1"), &sp, &p, NULL);
        prob_free(&p);
        /* D = 1 (no RoPE: it rotates pairs) and D = 256 */
        if (even) {
            p = prob_new(1, 2, 2, 10, 10, 1, LA_POS0_AUTO);
            check(NAME("D = 1"), &sp, &p, NULL);
            prob_free(&p);
        }
        p = prob_new(1, 2, 1, 9, 9, 256, LA_POS0_AUTO);
        for (size_t i = 0; i < p.nq; i++) p.q[i] *= 0.25f; /* logits O(1) at D = 256 too */
        check(NAME("D = 256"), &sp, &p, NULL);
        prob_free(&p);
#undef NAME
    }
}

/* A NaN or Inf in a key or value row that some query sees is LA_ENUMERIC naming the tensor,
 * [b, kv head, row, element] and a query that sees it -- for causal, window, sinks and
 * document masks, softmax and entmax. Rows no query sees may hold anything (SPEC 1). */
static void test_nonfinite_kv(void **state) {
    (void)state;
    for (int norm = 0; norm < 2; norm++) {
        la_spec sp = spec_of(norm ? "entmax(alpha=1.5)+nope+window(4)" : "softmax+rope+window(4)");
        /* T = 8 queries at positions 12..19 see keys 9..19: keys 0..8 are invisible */
        prob a = prob_new(2, 2, 2, 8, 20, 4, LA_POS0_AUTO), b = prob_new(2, 2, 2, 8, 20, 4, LA_POS0_AUTO);
        for (int r = 0; r < 9; r++)
            for (int d = 0; d < 4; d++) {
                size_t o = ((size_t)(1 * 2 + 1) * 20 + r) * 4 + d; /* b 1, kv head 1 */
                b.k[o] = r % 2 ? NAN : -INFINITY;
                b.v[o] = r % 3 ? INFINITY : NAN;
            }
        assert_int_equal(run(&sp, &a, NULL, 1), LA_OK);
        assert_int_equal(run(&sp, &b, NULL, 1), LA_OK);
        assert_memory_equal(a.out, b.out, sizeof(float) * a.nq);
        assert_memory_equal(a.dq, b.dq, sizeof(float) * a.nq);
        /* key 9 is seen by query 0 (position 12, window 9..12) */
        b.k[((size_t)(1 * 2 + 1) * 20 + 9) * 4 + 2] = INFINITY;
        assert_int_equal(run(&sp, &b, NULL, 0), LA_ENUMERIC);
        if (!strstr(la_errmsg(), "k[1, 1, 9, 2] is inf") || !strstr(la_errmsg(), "query 0 sees it"))
            fail_msg("message: %s", la_errmsg());
        b.k[((size_t)(1 * 2 + 1) * 20 + 9) * 4 + 2] = 0.5f;
        b.v[((size_t)(0 * 2 + 0) * 20 + 19) * 4 + 0] = NAN; /* b 0, kv head 0, row 19: query 7 */
        assert_int_equal(run(&sp, &b, NULL, 0), LA_ENUMERIC);
        if (!strstr(la_errmsg(), "v[0, 0, 19, 0] is nan") || !strstr(la_errmsg(), "query 7 sees it"))
            fail_msg("message: %s", la_errmsg());
        prob_free(&a);
        prob_free(&b);
    }
    /* sinks(n=1, w=2) over T = S = 10: key 0 (the sink) is visible to all, keys 1..9 to
     * their own and next query: every key is visible */
    la_spec sp = spec_of("softmax+nope+sinks(n=1,w=2)");
    prob p = prob_new(1, 1, 1, 10, 10, 4, LA_POS0_AUTO);
    p.v[0] = NAN;
    assert_int_equal(run(&sp, &p, NULL, 0), LA_ENUMERIC);
    assert_non_null(strstr(la_errmsg(), "v[0, 0, 0, 0] is nan"));
    prob_free(&p);
    /* documents: two docs [0,6) and [6,12), causal; T = 4 queries at positions 8..11 (pos0
     * = 8) only see the second document, so the first may hold NaN; key 6 is seen by query 0 */
    sp = spec_of("softmax+nope+causal");
    int32_t docs[12] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
    p = prob_new(1, 1, 1, 4, 12, 4, 8);
    for (int j = 0; j < 6 * 4; j++) p.k[j] = NAN, p.v[j] = INFINITY;
    assert_int_equal(run(&sp, &p, docs, 1), LA_OK);
    for (size_t i = 0; i < p.nq; i++) assert_true(isfinite(p.out[i]) && isfinite(p.dq[i]));
    p.k[6 * 4 + 1] = -INFINITY;
    assert_int_equal(run(&sp, &p, docs, 0), LA_ENUMERIC);
    assert_non_null(strstr(la_errmsg(), "k[0, 0, 6, 1] is -inf"));
    prob_free(&p);
}

/* q and k scaled by 1e20: q.k is ~1e40 > FLT_MAX. Refused with LA_ENUMERIC naming the
 * bound and the fix, never an empty row or a NaN reported as success; 1e15 (logits 1e30 /
 * sqrt(D) ~ bound) is refused too, 1e10 (logits ~1e20) computes, matching the reference
 * (a one-hot row per query: the largest logit wins). */
static void test_logit_overflow(void **state) {
    (void)state;
    const char *specs[] = {"softmax+nope+causal", "softmax+rope+full", "entmax(alpha=1.5)+nope+causal",
                           "sparsemax+alibi+causal"};
    for (int si = 0; si < 4; si++) {
        la_spec sp = spec_of(specs[si]);
        for (int sc = 0; sc < 3; sc++) {
            float f = sc == 0 ? 1e20f : sc == 1 ? 1e15f : 1e10f;
            prob p = prob_new(1, 2, 1, 6, 6, 4, LA_POS0_AUTO);
            for (size_t i = 0; i < p.nq; i++) p.q[i] *= f;
            for (size_t i = 0; i < p.nk; i++) p.k[i] *= f;
            if (sc < 2) {
                for (size_t i = 0; i < p.bht; i++) p.stat[i] = 7.0f;
                assert_int_equal(run(&sp, &p, NULL, 0), LA_ENUMERIC);
                if (!strstr(la_errmsg(), "overflow float32") || !strstr(la_errmsg(), "scale q and k down"))
                    fail_msg("%s x%g: message: %s", specs[si], (double)f, la_errmsg());
            } else {
                char name[128];
                snprintf(name, sizeof name, "%s, q and k x 1e10", specs[si]);
                la_status st = run(&sp, &p, NULL, 0);
                if (st != LA_OK) fail_msg("%s: %s", name, la_errmsg());
                for (size_t i = 0; i < p.bht; i++) assert_true(isfinite(p.stat[i]));
                for (size_t i = 0; i < p.nq; i++) assert_true(isfinite(p.out[i]));
                if (sp.norm == LA_NORM_SOFTMAX) { /* the reference handles 1e20 logits */
                    for (size_t i = 0; i < p.nq; i++) p.qd[i] = p.q[i];
                    for (size_t i = 0; i < p.nk; i++) p.kd[i] = p.k[i], p.vd[i] = p.v[i];
                    ref_attn_opts o;
                    memset(&o, 0, sizeof o);
                    assert_int_equal(ref_attn_forward(&sp, &p.sh, p.qd, p.kd, p.vd, &o, p.outd, p.statd, NULL, NULL), 0);
                } else {
                    /* the reference's bisection (200 halvings of a bracket ~1e20 wide) does not
                     * resolve these rows; the exact answer is one-hot: logit gaps of ~1e19 are far
                     * above 1/(alpha-1), so the largest causal logit q.k (ALiBi's -m|t| <= 6 does
                     * not matter) takes p = 1 */
                    for (int h = 0; h < 2; h++)
                        for (int i = 0; i < 6; i++) {
                            const float *qi = p.q + ((size_t)h * 6 + i) * 4;
                            int best = 0;
                            double bl = -INFINITY;
                            for (int j = 0; j <= i; j++) {
                                double l = 0;
                                for (int d = 0; d < 4; d++) l += (double)qi[d] * p.k[j * 4 + d];
                                if (l > bl) bl = l, best = j;
                            }
                            for (int d = 0; d < 4; d++) p.outd[((size_t)h * 6 + i) * 4 + d] = p.v[best * 4 + d];
                        }
                }
                double s, e = maxerr(p.out, p.outd, p.nq, &s);
                if (!(e <= 2e-4 * (s > 1 ? s : 1))) fail_msg("%s: out max err %g", name, e);
            }
            prob_free(&p);
        }
    }
}

/* alpha so close to 1 that the entmax threshold is not representable: refused at parse
 * time and by the row normaliser (|sum p - 1| ~ 5.5e-17 / (alpha - 1)). */
static void test_alpha_near_one(void **state) {
    (void)state;
    la_spec s;
    assert_int_equal(la_spec_parse("entmax(alpha=1.0000001)", &s), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "alpha must be a number in [1.000001, 4]"));
    assert_int_equal(la_spec_parse("entmax(alpha=1.000001)", &s), LA_OK);
    double z[3] = {0.1, 0.2, 0.3}, pr[3];
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, 1.0 + 1e-9, pr, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "not representable"));
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, LA_ENTMAX_ALPHA_MIN, pr, NULL), LA_OK);
    assert_true(fabs(pr[0] + pr[1] + pr[2] - 1.0) < 1e-9);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adversarial_grid),
        cmocka_unit_test(test_nonfinite_kv),
        cmocka_unit_test(test_logit_overflow),
        cmocka_unit_test(test_alpha_near_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
