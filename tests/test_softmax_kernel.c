/* test_softmax_kernel.c -- the fused softmax attention kernel (src/attn/softmax.c,
 * attn.c, mask.c, tile.c) against a naive double reference (tests/attn_testutil.h),
 * finite differences, and fault cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "attn_testutil.h"
#include "attn/attn_internal.h"
#include "core/half.h"
#include "core/half.h"

typedef struct {
    la_shape sh;
    float *q, *k, *v, *dout, *out, *lse, *ent, *km, *sup, *dq, *dk, *dv;
    float dlogn[64];
} prob;

static void fill(float *x, size_t n, la_rng *r, double sc) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(sc * la_rng_normal(r));
}

static prob prob_new(int B, int H, int Hkv, int T, int S, int D, int64_t pos0, uint64_t seed) {
    prob p;
    memset(&p, 0, sizeof p);
    p.sh = (la_shape){B, H, Hkv, T, S, D, pos0};
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * Hkv * S * D, bht = (size_t)B * H * T;
    p.q = malloc(sizeof(float) * nq); p.k = malloc(sizeof(float) * nk); p.v = malloc(sizeof(float) * nk);
    p.dout = malloc(sizeof(float) * nq); p.out = malloc(sizeof(float) * nq);
    p.lse = malloc(sizeof(float) * bht); p.ent = malloc(sizeof(float) * bht); p.sup = malloc(sizeof(float) * bht);
    p.km = malloc(sizeof(float) * (size_t)B * H * S);
    p.dq = malloc(sizeof(float) * nq); p.dk = malloc(sizeof(float) * nk); p.dv = malloc(sizeof(float) * nk);
    la_rng r;
    la_rng_seed(&r, seed);
    fill(p.q, nq, &r, 1.0); fill(p.k, nk, &r, 1.0); fill(p.v, nk, &r, 1.0); fill(p.dout, nq, &r, 1.0);
    return p;
}

static void prob_free(prob *p) {
    free(p->q); free(p->k); free(p->v); free(p->dout); free(p->out); free(p->lse); free(p->ent);
    free(p->sup); free(p->km); free(p->dq); free(p->dk); free(p->dv);
}

static double maxerr(const float *a, const double *b, size_t n, double *scale) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(b[i]) && a[i] == b[i]) continue;
        double d = fabs(a[i] - b[i]);
        if (!(d <= e)) e = d; /* NaN counts as huge */
        if (isnan(d)) e = INFINITY;
        if (fabs(b[i]) > s && isfinite(b[i])) s = fabs(b[i]);
    }
    if (scale) *scale = s;
    return e;
}

static la_status run(const la_spec *sp, prob *p, const int32_t *docs, const float *logn_s, int threads, int bwd) {
    la_attn_opts o = la_attn_opts_default();
    o.doc_ids = docs;
    o.logn_s = logn_s;
    o.row_entropy = p->ent;
    o.key_mass = p->km;
    o.row_support = p->sup;
    o.n_threads = threads;
    o.dlogn_s = p->dlogn;
    la_status st = la_attn_forward(sp, &p->sh, p->q, p->k, p->v, p->out, p->lse, &o);
    if (st != LA_OK || !bwd) return st;
    return la_attn_backward(sp, &p->sh, p->q, p->k, p->v, p->out, p->lse, p->dout, p->dq, p->dk, p->dv, &o);
}

/* Compare forward, statistics and backward with the double reference. Tolerances: float32
 * accumulation over <= 1025 keys of O(1) terms gives ~1e-6 relative per op; 2e-4 absolute
 * on O(1) outputs and 2e-3 relative to the largest gradient leave a wide margin while any
 * wrong mask, position or factor changes results by >= 1e-2. */
static void check_case(const char *name, const la_spec *sp, int B, int H, int Hkv, int T, int S,
                       int D, int64_t pos0, const int32_t *docs, const float *logn_s) {
    prob p = prob_new(B, H, Hkv, T, S, D, pos0, 1234 + T * 7 + S);
    la_status st = run(sp, &p, docs, logn_s, 2, 1);
    if (st != LA_OK) fail_msg("%s: status %s: %s", name, la_status_name(st), la_errmsg());
    tu_ref R = tu_ref_alloc(&p.sh);
    tu_reference(sp, &p.sh, p.q, p.k, p.v, docs, logn_s, p.dout, &R);
    size_t bht = (size_t)B * H * T, nk = (size_t)B * Hkv * S * D;
    double sc, e;
    e = maxerr(p.out, R.out, bht * D, &sc);
    if (e > 2e-4) fail_msg("%s: out max err %g", name, e);
    e = maxerr(p.lse, R.lse, bht, &sc);
    if (e > 2e-4 * (1 + sc)) fail_msg("%s: lse max err %g (scale %g)", name, e, sc);
    e = maxerr(p.ent, R.ent, bht, &sc);
    if (e > 5e-4 * (1 + sc)) fail_msg("%s: entropy max err %g", name, e);
    e = maxerr(p.km, R.kmass, (size_t)B * H * S, &sc);
    if (e > 2e-4 * (1 + sc)) fail_msg("%s: key mass max err %g", name, e);
    e = maxerr(p.dq, R.dq, bht * D, &sc);
    if (e > 2e-3 * (1 + sc)) fail_msg("%s: dq max err %g (scale %g)", name, e, sc);
    e = maxerr(p.dk, R.dk, nk, &sc);
    if (e > 2e-3 * (1 + sc)) fail_msg("%s: dk max err %g (scale %g)", name, e, sc);
    e = maxerr(p.dv, R.dv, nk, &sc);
    if (e > 2e-3 * (1 + sc)) fail_msg("%s: dv max err %g (scale %g)", name, e, sc);
    if (sp->xform == LA_XF_LOGN) {
        e = maxerr(p.dlogn, R.dlogn, (size_t)H, &sc);
        if (e > 2e-3 * (1 + sc)) fail_msg("%s: dlogn_s max err %g (scale %g)", name, e, sc);
    }
    tu_ref_free(&R);
    prob_free(&p);
}

static void test_vs_reference(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pos = LA_POS_ROPE;
    check_case("causal+rope GQA", &s, 2, 4, 2, 137, 137, 16, LA_POS0_AUTO, NULL, NULL);
    s = tu_spec();
    s.pos = LA_POS_ALIBI; s.pattern = LA_PAT_WINDOW; s.window = 7;
    check_case("window(7)+alibi T!=S", &s, 1, 3, 1, 65, 130, 8, LA_POS0_AUTO, NULL, NULL);
    s = tu_spec();
    s.pos = LA_POS_PROPE; s.xform = LA_XF_SINV; s.pattern = LA_PAT_SINKS; s.sinks = 3; s.window = 5;
    check_case("sinks(3,5)+sinv+prope", &s, 1, 2, 2, 70, 70, 16, LA_POS0_AUTO, NULL, NULL);
    s = tu_spec();
    s.pos = LA_POS_NAPE; s.xform = LA_XF_LOGN; s.pattern = LA_PAT_GLOBAL; s.global = 4; s.window = 8;
    float ls[4] = {0.3f, 0.5f, 0.7f, 1.1f};
    check_case("global(4)+window(8)+logn+nape", &s, 1, 4, 2, 67, 67, 8, LA_POS0_AUTO, NULL, ls);
    s = tu_spec();
    s.pos = LA_POS_YARN; s.pos_scale = 4; s.train_len = 32; s.xform = LA_XF_CRITICAL; s.gamma = 0.7;
    s.pattern = LA_PAT_FULL;
    check_case("full+yarn+critical", &s, 1, 2, 1, 33, 71, 16, LA_POS0_AUTO, NULL, NULL);
    s = tu_spec();
    s.pos = LA_POS_DYNAMIC_NTK; s.pos_scale = 2; s.train_len = 40; s.xform = LA_XF_TEMP; s.temp = 1.7;
    check_case("dynamic-ntk (S>L)+temp, pos0<0 empty rows", &s, 1, 2, 1, 64, 100, 16, -5, NULL, NULL);
    s = tu_spec();
    s.pos = LA_POS_NTK; s.pos_scale = 3; s.xform = LA_XF_LOGN; s.train_len = 64;
    s = tu_spec();
    s.pos = LA_POS_DYNAMIC_NTK; s.pos_scale = 2; s.train_len = 25;
    check_case("dynamic-ntk S > L, explicit pos0", &s, 1, 2, 1, 20, 30, 16, 50, NULL, NULL);
    s = tu_spec();
    s.pos = LA_POS_PROPE; s.xform = LA_XF_LOGN; s.train_len = 32; s.pattern = LA_PAT_GLOBAL; s.global = 2; s.window = 8;
    check_case("global(2)+window(8)+prope+logn, T > S, pos0 < 0", &s, 1, 4, 2, 137, 64, 16, -13, NULL, NULL);
    s = tu_spec();
    s.pos = LA_POS_NTK; s.pos_scale = 3; s.xform = LA_XF_LOGN; s.train_len = 64;
    check_case("ntk+logn default s, pos0 > S-T", &s, 1, 2, 1, 20, 40, 8, 60, NULL, NULL);
}

static void test_docs_vs_reference(void **state) {
    (void)state;
    int S = 100;
    int32_t docs[200];
    for (int j = 0; j < S; j++) docs[j] = j < 13 ? 5 : j < 64 ? 9 : j < 66 ? 2 : 7;
    for (int j = 0; j < S; j++) docs[S + j] = j < 50 ? 1 : 3;
    la_spec s = tu_spec();
    s.pos = LA_POS_ROPE; s.xform = LA_XF_QWEN_LOGN; s.train_len = 8;
    check_case("docs+causal+rope+qwen pos0=30", &s, 2, 2, 1, 50, S, 16, 30, docs, NULL);
    s = tu_spec();
    s.pos = LA_POS_ALIBI; s.xform = LA_XF_SINV; s.pattern = LA_PAT_WINDOW; s.window = 9;
    check_case("docs+window+sinv+alibi", &s, 2, 2, 2, 100, S, 8, LA_POS0_AUTO, docs, NULL);
    s = tu_spec();
    s.pattern = LA_PAT_GLOBAL; s.global = 3; s.window = 4; s.xform = LA_XF_LOGN; s.logn_s = 0.8;
    check_case("docs+global+logn", &s, 2, 2, 1, 70, S, 8, 10, docs, NULL);
}

/* Tile edges: T, S around the tile size 64 and 1. */
static void test_tile_edges(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pos = LA_POS_ROPE;
    int sizes[][2] = {{1, 1}, {2, 2}, {63, 63}, {64, 64}, {65, 65}, {1, 65}, {65, 129}, {129, 64}};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        char name[64];
        snprintf(name, sizeof name, "rope causal T=%d S=%d", sizes[c][0], sizes[c][1]);
        check_case(name, &s, 1, 2, 1, sizes[c][0], sizes[c][1], 8, LA_POS0_AUTO, NULL, NULL);
    }
    s.pattern = LA_PAT_FULL;
    check_case("full D=20", &s, 1, 1, 1, 70, 90, 20, LA_POS0_AUTO, NULL, NULL);
}

/* Bitwise equality for 1 and 2 threads, forward, statistics and backward. */
static void test_threads_bitwise(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pos = LA_POS_ROPE; s.xform = LA_XF_LOGN; s.logn_s = 0.4;
    prob a = prob_new(2, 4, 2, 200, 230, 32, LA_POS0_AUTO, 7), b = prob_new(2, 4, 2, 200, 230, 32, LA_POS0_AUTO, 7);
    assert_int_equal(run(&s, &a, NULL, NULL, 1, 1), LA_OK);
    assert_int_equal(run(&s, &b, NULL, NULL, 2, 1), LA_OK);
    size_t nq = (size_t)2 * 4 * 200 * 32, nk = (size_t)2 * 2 * 230 * 32;
    assert_memory_equal(a.out, b.out, nq * sizeof(float));
    assert_memory_equal(a.lse, b.lse, 1600 * sizeof(float));
    assert_memory_equal(a.ent, b.ent, 1600 * sizeof(float));
    assert_memory_equal(a.km, b.km, (size_t)2 * 4 * 230 * sizeof(float));
    assert_memory_equal(a.dq, b.dq, nq * sizeof(float));
    assert_memory_equal(a.dk, b.dk, nk * sizeof(float));
    assert_memory_equal(a.dv, b.dv, nk * sizeof(float));
    assert_memory_equal(a.dlogn, b.dlogn, 4 * sizeof(float));
    prob_free(&a);
    prob_free(&b);
}

/* Central finite differences of loss = sum(out * G) against the kernel's own backward.
 * eps = 1e-2 on O(1) inputs in float: truncation O(eps^2) ~ 1e-4, rounding ~ 1e-6/eps;
 * tolerance 2e-2 relative + 2e-3 absolute. */
static double loss_of(const la_spec *sp, prob *p, const float *ls) {
    la_attn_opts o = la_attn_opts_default();
    o.logn_s = ls;
    assert_int_equal(la_attn_forward(sp, &p->sh, p->q, p->k, p->v, p->out, p->lse, &o), LA_OK);
    double L = 0;
    size_t n = (size_t)p->sh.B * p->sh.H * p->sh.T * p->sh.D;
    for (size_t i = 0; i < n; i++) L += (double)p->out[i] * p->dout[i];
    return L;
}

static void fd_check(const char *name, const la_spec *sp, float *x, const float *g, size_t n, prob *p, float *ls) {
    for (size_t i = 0; i < n; i += (n > 40 ? n / 40 : 1)) {
        float keep = x[i];
        double eps = 1e-2;
        x[i] = keep + (float)eps;
        double lp = loss_of(sp, p, ls);
        x[i] = keep - (float)eps;
        double lm = loss_of(sp, p, ls);
        x[i] = keep;
        double fd = (lp - lm) / (2 * eps);
        if (fabs(fd - g[i]) > 2e-3 + 2e-2 * fabs(fd))
            fail_msg("%s[%zu]: finite difference %g, backward %g", name, i, fd, (double)g[i]);
    }
}

static void test_finite_differences(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pos = LA_POS_ROPE; s.xform = LA_XF_LOGN; s.pattern = LA_PAT_SINKS; s.sinks = 2; s.window = 6;
    float ls[2] = {0.6f, 0.9f};
    prob p = prob_new(1, 2, 1, 20, 24, 8, LA_POS0_AUTO, 99);
    la_attn_opts o = la_attn_opts_default();
    o.logn_s = ls;
    o.dlogn_s = p.dlogn;
    assert_int_equal(la_attn_forward(&s, &p.sh, p.q, p.k, p.v, p.out, p.lse, &o), LA_OK);
    assert_int_equal(la_attn_backward(&s, &p.sh, p.q, p.k, p.v, p.out, p.lse, p.dout, p.dq, p.dk, p.dv, &o), LA_OK);
    fd_check("dq", &s, p.q, p.dq, 2 * 20 * 8, &p, ls);
    fd_check("dk", &s, p.k, p.dk, 24 * 8, &p, ls);
    fd_check("dv", &s, p.v, p.dv, 24 * 8, &p, ls);
    fd_check("dlogn_s", &s, ls, p.dlogn, 2, &p, ls);
    prob_free(&p);
}

/* pos0 = -10 and window: rows with no visible key -> out 0, lse -inf, zero gradients. */
static void test_empty_rows(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pos = LA_POS_ROPE; s.xform = LA_XF_LOGN; s.logn_s = 1.0;
    prob p = prob_new(1, 1, 1, 30, 30, 8, -10, 5);
    assert_int_equal(run(&s, &p, NULL, NULL, 2, 1), LA_OK);
    for (int i = 0; i < 30; i++) {
        int empty = i < 10; /* query at position i-10 < 0 sees nothing under causal */
        for (int d = 0; d < 8; d++) {
            assert_false(isnan(p.out[i * 8 + d]) || isnan(p.dq[i * 8 + d]));
            if (empty) {
                assert_true(p.out[i * 8 + d] == 0.0f);
                assert_true(p.dq[i * 8 + d] == 0.0f);
            }
        }
        if (empty) assert_true(isinf(p.lse[i]) && p.lse[i] < 0);
        else assert_true(isfinite(p.lse[i]));
        assert_true(p.sup[i] == (float)(empty ? 0 : i - 9));
    }
    for (int j = 0; j < 30 * 8; j++) assert_false(isnan(p.dk[j]) || isnan(p.dv[j]));
    /* the last 10 keys are seen by nobody: exactly zero gradient */
    for (int j = 20 * 8; j < 30 * 8; j++) assert_true(p.dk[j] == 0.0f && p.dv[j] == 0.0f);
    prob_free(&p);
}

/* NaN/Inf in masked K/V rows change nothing (bitwise), in full and partial tiles. */
static void test_masked_nan_inf(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pos = LA_POS_ROPE; s.pattern = LA_PAT_WINDOW; s.window = 4;
    prob a = prob_new(1, 1, 1, 100, 100, 8, LA_POS0_AUTO, 11);
    assert_int_equal(run(&s, &a, NULL, NULL, 2, 1), LA_OK);
    prob b = prob_new(1, 1, 1, 100, 100, 8, LA_POS0_AUTO, 11);
    /* key 0 is visible to queries 0..3: a NaN there is an error naming tensor, head, row
     * and a query that sees it (issue 17; it used to be dropped silently from rows 0..3) */
    for (int d = 0; d < 8; d++) { b.k[d] = NAN; b.v[d] = INFINITY; }
    assert_int_equal(run(&s, &b, NULL, NULL, 2, 1), LA_ENUMERIC);
    assert_non_null(strstr(la_errmsg(), "k[0, 0, 0, 0] is nan"));
    assert_non_null(strstr(la_errmsg(), "query 0 sees it"));
    prob_free(&b);
    /* with T < S the first S - T - w + 1 keys are seen by no query (pos0 = S - T): poison
     * them (k and v) and every row is unchanged */
    prob_free(&a);
    a = prob_new(1, 1, 1, 50, 100, 8, LA_POS0_AUTO, 11);
    b = prob_new(1, 1, 1, 50, 100, 8, LA_POS0_AUTO, 11);
    for (int j = 0; j < 47 * 8; j++) { b.k[j] = (j & 1) ? NAN : INFINITY; b.v[j] = (j & 2) ? -INFINITY : NAN; }
    assert_int_equal(run(&s, &a, NULL, NULL, 2, 1), LA_OK);
    assert_int_equal(run(&s, &b, NULL, NULL, 2, 1), LA_OK);
    assert_memory_equal(a.out, b.out, 50 * 8 * sizeof(float));
    assert_memory_equal(a.lse, b.lse, 50 * sizeof(float));
    assert_memory_equal(a.dq, b.dq, 50 * 8 * sizeof(float));
    /* key 47 is the first visible one (query 0 at position 50 sees 47..50) */
    b.v[47 * 8 + 3] = NAN;
    assert_int_equal(run(&s, &b, NULL, NULL, 2, 1), LA_ENUMERIC);
    assert_non_null(strstr(la_errmsg(), "v[0, 0, 47, 3] is nan"));
    prob_free(&a);
    prob_free(&b);
    /* keys beyond the last query (pos0 = 0, T < S) are masked for every row */
    s.pattern = LA_PAT_CAUSAL;
    a = prob_new(1, 2, 1, 40, 200, 8, 0, 12);
    b = prob_new(1, 2, 1, 40, 200, 8, 0, 12);
    for (int j = 40 * 8; j < 200 * 8; j++) { b.k[j] = (j & 1) ? NAN : -INFINITY; b.v[j] = (j & 1) ? INFINITY : NAN; }
    assert_int_equal(run(&s, &a, NULL, NULL, 2, 1), LA_OK);
    assert_int_equal(run(&s, &b, NULL, NULL, 2, 1), LA_OK);
    assert_memory_equal(a.out, b.out, 2 * 40 * 8 * sizeof(float));
    assert_memory_equal(a.dq, b.dq, 2 * 40 * 8 * sizeof(float));
    assert_memory_equal(a.dk, b.dk, 40 * 8 * sizeof(float));
    assert_memory_equal(a.km, b.km, 2 * 200 * sizeof(float));
    prob_free(&a);
    prob_free(&b);
}

/* A NaN or Inf in q is an error naming the element (softmax and entmax paths), never a row
 * silently treated as empty. */
static void test_nonfinite_q_is_an_error(void **state) {
    (void)state;
    la_spec s = tu_spec();
    for (int norm = 0; norm < 2; norm++) {
        if (norm) { s.norm = LA_NORM_ENTMAX; s.alpha = 1.5; }
        prob a = prob_new(1, 2, 1, 30, 30, 8, LA_POS0_AUTO, 13);
        a.q[1 * 30 * 8 + 7 * 8 + 5] = norm ? INFINITY : NAN; /* b 0, h 1, t 7, d 5 */
        assert_int_equal(run(&s, &a, NULL, NULL, 1, 0), LA_ENUMERIC);
        assert_non_null(strstr(la_errmsg(), "q[0, 1, 7, 5]"));
        prob_free(&a);
    }
}

/* Logits of +-1e4: everything finite, out is the arg-max value row. */
static void test_huge_logits_finite(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pattern = LA_PAT_FULL; s.xform = LA_XF_TEMP; s.temp = 1e4;
    prob p = prob_new(1, 1, 1, 8, 8, 4, LA_POS0_AUTO, 3);
    for (int i = 0; i < 8 * 4; i++) { p.q[i] = (i % 4 == 0) ? ((i / 4) % 2 ? 2.0f : -2.0f) : 0.0f; }
    for (int j = 0; j < 8; j++) { p.k[j * 4] = (float)(j - 4) * 0.25f; p.k[j * 4 + 1] = p.k[j * 4 + 2] = p.k[j * 4 + 3] = 0; }
    assert_int_equal(run(&s, &p, NULL, NULL, 2, 1), LA_OK);
    for (int i = 0; i < 8 * 4; i++) {
        assert_true(isfinite(p.out[i]) && isfinite(p.dq[i]) && isfinite(p.dk[i]) && isfinite(p.dv[i]));
    }
    for (int i = 0; i < 8; i++) {
        assert_true(isfinite(p.lse[i]) && fabsf(p.lse[i]) > 1000.0f && isfinite(p.ent[i]));
        int best = (i % 2) ? 7 : 0; /* q = +-2: largest logit at the largest / smallest k */
        for (int d = 0; d < 4; d++) assert_float_equal(p.out[i * 4 + d], p.v[best * 4 + d], 1e-5);
    }
    prob_free(&p);
}

/* window(w): the row at position p sees exactly min(p+1, w) keys (row_support). */
static void test_window_counts(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pattern = LA_PAT_WINDOW; s.window = 37;
    prob p = prob_new(1, 1, 1, 300, 300, 4, LA_POS0_AUTO, 4);
    assert_int_equal(run(&s, &p, NULL, NULL, 2, 0), LA_OK);
    for (int i = 0; i < 300; i++) assert_true(p.sup[i] == (float)(i + 1 < 37 ? i + 1 : 37));
    /* and the key mass of the window pattern sums to the number of rows */
    double tot = 0;
    for (int j = 0; j < 300; j++) tot += p.km[j];
    assert_float_equal(tot, 300.0, 1e-3);
    prob_free(&p);
}

/* Workspace reuse gives identical results and does not shrink. */
static void test_workspace_reuse(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pos = LA_POS_ROPE;
    prob p = prob_new(1, 2, 1, 90, 90, 16, LA_POS0_AUTO, 8);
    la_workspace *ws = la_workspace_new();
    la_attn_opts o = la_attn_opts_default();
    o.ws = ws;
    float *out2 = malloc(sizeof(float) * 2 * 90 * 16);
    assert_int_equal(la_attn_forward(&s, &p.sh, p.q, p.k, p.v, p.out, p.lse, &o), LA_OK);
    assert_int_equal(la_attn_forward(&s, &p.sh, p.q, p.k, p.v, out2, p.lse, &o), LA_OK);
    assert_memory_equal(p.out, out2, sizeof(float) * 2 * 90 * 16);
    /* the cached RoPE table must follow a change of frequencies and of S: compare each
     * call on the shared workspace with a call on a fresh one */
    la_spec specs[3] = {tu_spec(), tu_spec(), tu_spec()};
    specs[0].pos = LA_POS_YARN; specs[0].pos_scale = 4; specs[0].train_len = 16;
    specs[1].pos = LA_POS_ROPE; specs[1].theta = 500;
    specs[2].pos = LA_POS_ROPE;
    for (int c = 0; c < 3; c++) {
        la_shape sh = p.sh;
        if (c == 2) sh.S = 60, sh.T = 60; /* fewer keys than the cached table */
        la_attn_opts fresh = la_attn_opts_default();
        assert_int_equal(la_attn_forward(&specs[c], &sh, p.q, p.k, p.v, out2, p.lse, &o), LA_OK);
        assert_int_equal(la_attn_forward(&specs[c], &sh, p.q, p.k, p.v, p.out, p.lse, &fresh), LA_OK);
        assert_memory_equal(p.out, out2, sizeof(float) * 2 * (size_t)sh.T * 16);
    }
    free(out2);
    la_workspace_free(ws);
    prob_free(&p);
}

static void test_bad_arguments(void **state) {
    (void)state;
    la_spec s = tu_spec();
    prob p = prob_new(1, 4, 2, 8, 8, 6, LA_POS0_AUTO, 1);
    la_shape bad = p.sh;
    bad.Hkv = 3;
    assert_int_equal(la_attn_forward(&s, &bad, p.q, p.k, p.v, p.out, p.lse, NULL), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "Hkv"));
    bad = p.sh;
    bad.T = 0;
    assert_int_equal(la_attn_forward(&s, &bad, p.q, p.k, p.v, p.out, p.lse, NULL), LA_ESHAPE);
    assert_int_equal(la_attn_forward(&s, &p.sh, NULL, p.k, p.v, p.out, p.lse, NULL), LA_EINVAL);
    assert_int_equal(la_attn_forward(NULL, &p.sh, p.q, p.k, p.v, p.out, p.lse, NULL), LA_EINVAL);
    s.pos = LA_POS_ROPE;
    bad = p.sh;
    bad.D = 5;
    assert_int_equal(la_attn_forward(&s, &bad, p.q, p.k, p.v, p.out, p.lse, NULL), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "odd"));
    s = tu_spec();
    s.pattern = LA_PAT_WINDOW; s.window = 0;
    assert_int_equal(la_attn_forward(&s, &p.sh, p.q, p.k, p.v, p.out, p.lse, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "window"));
    s = tu_spec();
    s.xform = LA_XF_LOGN; /* no s, no train_len */
    assert_int_equal(la_attn_forward(&s, &p.sh, p.q, p.k, p.v, p.out, p.lse, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "logn"));
    s = tu_spec();
    int32_t docs[8] = {0};
    la_attn_opts o = la_attn_opts_default();
    o.doc_ids = docs;
    bad = p.sh;
    bad.pos0 = 3; /* queries 3..10 overrun S = 8 */
    assert_int_equal(la_attn_forward(&s, &bad, p.q, p.k, p.v, p.out, p.lse, &o), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "doc_ids"));
    /* the entmax family is dispatched to entmax_attn.c (tested in test_entmax_attn.c); a
     * normaliser outside the enum is rejected */
    s.norm = (la_norm)17;
    assert_int_equal(la_attn_forward(&s, &p.sh, p.q, p.k, p.v, p.out, p.lse, NULL), LA_EINVAL);
    prob_free(&p);
}

/* The tile product la_mm (the register-blocked kernel this CPU gets: AVX-512, AVX2 + FMA,
 * or the generic loop under LA_PORTABLE=1) is bitwise la_mm_generic: on 400 random shapes
 * with M, N, K not multiples of the blocks (M 1..20 across the 6-row blocks, N 1..80 across
 * the 8 / 16 / 64-column vectors and their masked tails, K 0..40), A read row-major,
 * transposed or with both strides > 1, overwrite and accumulate, C with a leading dimension
 * past N whose extra columns must stay untouched. Any other order or an unfused
 * multiply-add changes the last bits of most of the 10^5 elements compared. */
static void test_tile_products(void **state) {
    (void)state;
    la_rng r;
    la_rng_seed(&r, 77);
    enum { AN = 64 * 64 * 4, CN = 20 * 96 };
    float *A = malloc(sizeof(float) * AN), *B = malloc(sizeof(float) * 41 * 96);
    float *C1 = malloc(sizeof(float) * CN), *C2 = malloc(sizeof(float) * CN);
    fill(A, AN, &r, 1), fill(B, 41 * 96, &r, 1);
    size_t compared = 0;
    for (int t = 0; t < 400; t++) {
        const int M = 1 + (int)(la_rng_u64(&r) % 20), N = 1 + (int)(la_rng_u64(&r) % 80),
                  K = (int)(la_rng_u64(&r) % 41), acc = t % 2, mode = (t / 2) % 3;
        const int ldb = N + (int)(la_rng_u64(&r) % 16), ldc = N + (int)(la_rng_u64(&r) % 16);
        /* A(i, k) = A[i * sai + k * sak]: row-major (ld >= K), transposed (ld >= M), both strided */
        size_t sai = (size_t)K + 3, sak = 1;
        if (mode == 1) sai = 1, sak = (size_t)M + 2;
        if (mode == 2) sai = 2 * (size_t)K + 1, sak = 2;
        fill(C1, CN, &r, 1);
        memcpy(C2, C1, sizeof(float) * CN);
        la_mm(M, N, K, A, sai, sak, B, ldb, C1, ldc, acc);
        la_mm_generic(M, N, K, A, sai, sak, B, ldb, C2, ldc, acc);
        assert_memory_equal(C1, C2, sizeof(float) * CN); /* every element, also past N */
        compared += (size_t)M * N;
    }
    printf("  la_mm (%s) bitwise la_mm_generic on 400 shapes, %zu elements\n",
           la_cpu()->avx512f ? "AVX-512" : la_cpu()->avx2 && la_cpu()->fma ? "AVX2+FMA" : "generic", compared);
    free(B), free(C1), free(C2);
    float *Tt = malloc(sizeof(float) * 80 * 64);
    /* transpose (16x16 register blocks plus scalar edges) */
    int shapes[3][2] = {{64, 64}, {37, 48}, {50, 20}};
    for (int c = 0; c < 3; c++) {
        int n = shapes[c][0], Dd = shapes[c][1];
        la_transpose(A, n, Dd, 64, Tt, 64);
        for (int d = 0; d < Dd; d++)
            for (int j = 0; j < 64; j++) assert_true(Tt[d * 64 + j] == (j < n ? A[j * 64 + d] : 0.0f));
    }
    /* row reductions */
    float rr[37];
    for (int i = 0; i < 37; i++) rr[i] = (float)((i * 7) % 11) - 3.0f;
    assert_true(la_row_max(rr, 37) == 7.0f && la_row_max(rr, 3) == 4.0f);
    double sref = 0;
    for (int i = 0; i < 37; i++) sref += rr[i];
    assert_float_equal(la_row_sum(rr, 37), sref, 1e-4);
    /* vectorised exp: relative error and exact zeros for -inf */
    float x[40], y[40];
    for (int i = 0; i < 40; i++) x[i] = -90.0f + 2.3f * i;
    x[5] = -INFINITY;
    la_exp_sub(x, 1.0f, y, 40);
    for (int i = 0; i < 40; i++) {
        double ref = i == 5 ? 0.0 : exp((double)x[i] - 1.0);
        assert_true(fabs(y[i] - ref) <= 2e-7 * ref + 1e-37);
    }
    assert_true(y[5] == 0.0f);
    free(A), free(Tt);
}

/* The row helpers (tile_rows.c) take the same steps on AVX-512 and on AVX2 + FMA: per lane
 * the same exp polynomial (fused multiply-adds), 2^n with one rounding (scalef), 16 lane
 * accumulators, GCC's _mm512_reduce_{add,max}_ps tree. Written out here in scalar C, the
 * path this CPU takes must equal it bit for bit (whichever ISA it is: the AVX-512 path is
 * checked by the same emulation on such a CPU); the generic loops (LA_PORTABLE=1) are held
 * to the float64 reference instead. */
static float emu_max(float a, float b) { return a > b ? a : b; } /* maxps(a, b) */
static float emu_red_add(const float *a) {
    float t3[8], t6[4];
    for (int j = 0; j < 8; j++) t3[j] = a[8 + j] + a[j];
    for (int j = 0; j < 4; j++) t6[j] = t3[4 + j] + t3[j];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}
static float emu_red_max(const float *a) {
    float t3[8], t6[4];
    for (int j = 0; j < 8; j++) t3[j] = emu_max(a[8 + j], a[j]);
    for (int j = 0; j < 4; j++) t6[j] = emu_max(t3[4 + j], t3[j]);
    return emu_max(emu_max(t6[0], t6[2]), emu_max(t6[1], t6[3]));
}
static float emu_exp_lane(float x, float mx) {
    if (x == -INFINITY) return 0.0f;
    float t = emu_max(x - mx, -104.0f);
    float nn = rintf(t * LA_EXP_LOG2E);
    float r = fmaf(-nn, LA_EXP_LN2_HI, t);
    r = fmaf(-nn, LA_EXP_LN2_LO, r);
    float q = LA_EXP_C7;
    q = fmaf(q, r, LA_EXP_C6), q = fmaf(q, r, LA_EXP_C5), q = fmaf(q, r, LA_EXP_C4);
    q = fmaf(q, r, LA_EXP_C3), q = fmaf(q, r, LA_EXP_C2), q = fmaf(q, r, 1.0f), q = fmaf(q, r, 1.0f);
    return ldexpf(q, (int)nn); /* one rounding, also to a subnormal */
}
/* sigmoid(l + b) lane: t = -(l + b) clamped to [-104, 104] (maxps, then minps), exp(t) as
 * above, 1 / (1 + e) */
static float emu_sigmoid_lane(float l, float b) {
    if (l == -INFINITY) return 0.0f;
    float t = emu_max(-(l + b), -104.0f);
    t = t < 104.0f ? t : 104.0f;
    return 1.0f / (1.0f + emu_exp_lane(t, 0.0f));
}
static float emu_exp_sub(const float *x, float mx, float *y, int n) {
    float acc[16] = {0};
    for (int i = 0; i < n; i++) y[i] = emu_exp_lane(x[i], mx), acc[i % 16] = acc[i % 16] + y[i];
    return emu_red_add(acc);
}
static void test_row_helpers_isa(void **state) {
    (void)state;
#ifdef __AVX512F__
    const int vec = 1;
#else
    const int vec = la_cpu()->avx2 && la_cpu()->fma;
#endif
    la_rng r;
    la_rng_seed(&r, 4242);
    enum { NMAX = 150 };
    float x[NMAX], a[NMAX], L[NMAX], y1[NMAX], y2[NMAX];
    double worst_exp = 0, worst_sum = 0, worst_sig = 0;
    long compared = 0;
    for (int t = 0; t < 3000; t++) {
        const int n = 1 + (int)(la_rng_u64(&r) % NMAX);
        const int kind = t % 3; /* 0: logits to -120 below the max, 1: ties of +-0, 2: small range */
        for (int i = 0; i < n; i++) {
            float u = (float)(la_rng_u64(&r) >> 40) / (float)(1 << 24);
            x[i] = kind == 0 ? -120.0f * u : kind == 1 ? ((la_rng_u64(&r) & 1) ? 0.0f : -0.0f) : 4.0f * u - 2.0f;
            a[i] = 2.0f * (float)(la_rng_u64(&r) >> 40) / (float)(1 << 24) - 1.0f;
            L[i] = la_rng_u64(&r) % 5 == 0 ? -INFINITY : x[i];
            if (la_rng_u64(&r) % 7 == 0) x[i] = -INFINITY;
        }
        const float mx = kind == 2 ? 2.5f : 0.0f;
        const float s1 = la_exp_sub(x, mx, y1, n), sg = la_exp_sub_generic(x, mx, y2, n);
        for (int i = 0; i < n; i++) { /* the generic path against float64: expf's error plus the rounding */
            /* both paths first form x - mx in float, then exp: the reference starts there */
            double ref = x[i] == -INFINITY ? 0.0 : exp((double)(x[i] - mx));
            assert_true(fabs(y2[i] - ref) <= 1.2e-7 * ref + 1e-45);
            if (ref > 1e-37) worst_exp = fmax(worst_exp, fabs(y1[i] - ref) / ref);
            assert_true(fabs(y1[i] - ref) <= 2e-7 * ref + 1.5e-45); /* either path: 2 ulp, 1 subnormal ulp */
        }
        /* sigmoid rows (sigmoid attention): logits from -140 to +140 around the bias, so that
         * both saturations (p = 0 exactly past the overflow of exp, p = 1) are crossed; both
         * paths within 3 ulp of float64 (exp's 2 ulp, then the sum and the quotient round), and
         * below the smallest normal float (1.2e-38, l + b < -87.3) 0 or subnormal: e^-(l + b)
         * overflows there in both */
        const float sb = kind == 2 ? -8.0f : 0.5f;
        float sl[NMAX], q1[NMAX], q2[NMAX];
        for (int i = 0; i < n; i++) sl[i] = x[i] == -INFINITY ? x[i] : kind == 0 ? 140.0f + 2.3f * x[i] : 3.0f * x[i];
        la_sigmoid_row(sl, sb, q1, n), la_sigmoid_row_generic(sl, sb, q2, n);
        for (int i = 0; i < n; i++) {
            double ref = sl[i] == -INFINITY ? 0.0 : 1.0 / (1.0 + exp(-(double)(sl[i] + sb)));
            if (ref > 1e-37) worst_sig = fmax(worst_sig, fabs(q1[i] - ref) / ref);
            assert_true(fabs(q1[i] - ref) <= 3.6e-7 * ref + 1.2e-38);
            assert_true(fabs(q2[i] - ref) <= 3.6e-7 * ref + 1.2e-38);
            if (vec) {
                const float e = emu_sigmoid_lane(sl[i], sb);
                assert_memory_equal(&q1[i], &e, sizeof e);
            }
        }
        compared += n;
        if (sg > 0) worst_sum = fmax(worst_sum, fabs(s1 - sg) / sg);
        assert_true(fabs(s1 - sg) <= 1e-5 * sg + 1e-44);
        if (vec) {
            float s2 = emu_exp_sub(x, mx, y2, n);
            assert_memory_equal(y1, y2, sizeof(float) * (size_t)n);
            assert_memory_equal(&s1, &s2, sizeof s1);
            float m16[16], s16[16], d16[16], p16[16];
            for (int j = 0; j < 16; j++) m16[j] = -INFINITY, s16[j] = d16[j] = p16[j] = 0.0f;
            for (int i = 0; i < n; i++) {
                m16[i % 16] = emu_max(m16[i % 16], x[i]);
                s16[i % 16] = s16[i % 16] + a[i];
                if (L[i] != -INFINITY) {
                    d16[i % 16] = fmaf(a[i], y1[i], d16[i % 16]);
                    p16[i % 16] = fmaf(y1[i], L[i] - mx, p16[i % 16]);
                }
            }
            float e[4] = {emu_red_max(m16), emu_red_add(s16), emu_red_add(d16), emu_red_add(p16)};
            float g[4] = {la_row_max(x, n), la_row_sum(a, n), la_row_dot_live(a, y1, L, n), la_row_plogit(y1, L, mx, n)};
            assert_memory_equal(e, g, sizeof e);
            compared += 4 * n;
        }
        /* the generic reductions: max exact, sums to float rounding of n terms (n u sum |terms|,
         * u = 2^-24 < 1e-6 with room for the product roundings) */
        assert_true(la_row_max_generic(x, n) == la_row_max(x, n));
        double sd = 0, dd = 0, pd = 0, sa = 0, da = 0, pa = 0;
        for (int i = 0; i < n; i++) {
            sd += a[i], sa += fabs(a[i]);
            if (L[i] != -INFINITY) {
                double d = (double)a[i] * y1[i], q = (double)y1[i] * (L[i] - mx);
                dd += d, da += fabs(d), pd += q, pa += fabs(q);
            }
        }
        const double tol = 1e-6 * n;
        assert_true(fabs(la_row_sum(a, n) - sd) <= tol * sa + 1e-30 && fabs(la_row_sum_generic(a, n) - sd) <= tol * sa + 1e-30);
        assert_true(fabs(la_row_dot_live(a, y1, L, n) - dd) <= tol * da + 1e-30);
        assert_true(fabs(la_row_dot_live_generic(a, y1, L, n) - dd) <= tol * da + 1e-30);
        assert_true(fabs(la_row_plogit(y1, L, mx, n) - pd) <= tol * pa + 1e-30);
        assert_true(fabs(la_row_plogit_generic(y1, L, mx, n) - pd) <= tol * pa + 1e-30);
        compared += n;
    }
    /* transpose: every path moves the same values (no arithmetic) */
    float *src = malloc(sizeof(float) * 80 * 72), *t1 = malloc(sizeof(float) * 72 * 64), *t2 = malloc(sizeof(float) * 72 * 64);
    fill(src, 80 * 72, &r, 1);
    for (int n = 1; n <= 64; n += 7)
        for (int D = 1; D <= 72; D += 13) {
            la_transpose(src, n, D, 72, t1, 64);
            la_transpose_generic(src, n, D, 72, t2, 64);
            assert_memory_equal(t1, t2, sizeof(float) * (size_t)D * 64);
        }
    free(src), free(t1), free(t2);
    printf("  row helpers (%s): %ld values; exp max relative error %.2e, sigmoid %.2e, sum vs generic %.2e\n",
           vec ? "vector path bitwise its scalar emulation" : "generic", compared, worst_exp, worst_sig, worst_sum);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vs_reference),
        cmocka_unit_test(test_docs_vs_reference),
        cmocka_unit_test(test_tile_edges),
        cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_empty_rows),
        cmocka_unit_test(test_masked_nan_inf),
        cmocka_unit_test(test_nonfinite_q_is_an_error),
        cmocka_unit_test(test_huge_logits_finite),
        cmocka_unit_test(test_window_counts),
        cmocka_unit_test(test_workspace_reuse),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_tile_products),
        cmocka_unit_test(test_row_helpers_isa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
