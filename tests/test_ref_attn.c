/* test_ref_attn.c -- the double-precision reference itself (tests/support/ref_attn.c),
 * before anything is compared against it:
 *   - its analytic backward against central finite differences of its own forward, over
 *     every position, transform and pattern, with documents, GQA and per-head logn s_h;
 *   - building blocks against published values (sinv, ALiBi slopes of Press et al.);
 *   - visibility counts against hand formulas (uniform attention has entropy log n_q). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "core/internal.h"
#include "support/ref_attn.h"

static la_spec spec_of(const char *text) {
    la_spec s;
    if (la_spec_parse(text, &s) != LA_OK) fail_msg("spec '%s': %s", text, la_errmsg());
    return s;
}

static double *randn(la_rng *r, size_t n, double sd) {
    double *x = malloc(sizeof(double) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = sd * la_rng_normal(r);
    return x;
}

/* loss = sum(W * out): its gradient with respect to out is W. */
static double loss_of(const la_spec *sp, const la_shape *sh, const double *q, const double *k, const double *v,
                      const ref_attn_opts *o, const double *W) {
    size_t no = (size_t)sh->B * sh->H * sh->T * sh->D;
    double *out = malloc(sizeof(double) * no), *lse = malloc(sizeof(double) * (size_t)sh->B * sh->H * sh->T);
    assert_int_equal(ref_attn_forward(sp, sh, q, k, v, o, out, lse, NULL, NULL), 0);
    double l = 0;
    for (size_t i = 0; i < no; i++) l += W[i] * out[i];
    free(out);
    free(lse);
    return l;
}

/* Central differences with h = 1e-5 in double. Truncation error h^2/6 * f''' ~ 1e-10 for
 * O(1) third derivatives (logits are O(few)); rounding error ~ eps * |loss| / h ~ 1e-11.
 * Tolerance 1e-7 * (1 + |g|) is three orders above both, and far below any real
 * mistake (a wrong sign, factor or missing term changes gradients at O(1e-2) or more). */
#define FD_H 1e-5
#define FD_TOL 1e-7

static void fd_check(const char *text, la_shape sh, int with_docs, int per_head_s) {
    la_spec sp = spec_of(text);
    la_rng r;
    la_rng_seed(&r, 1234 + (uint64_t)strlen(text));
    size_t nq = (size_t)sh.B * sh.H * sh.T * sh.D, nk = (size_t)sh.B * sh.Hkv * sh.S * sh.D;
    double *q = randn(&r, nq, 1.0), *k = randn(&r, nk, 1.0), *v = randn(&r, nk, 1.0), *W = randn(&r, nq, 1.0);
    double s_h[16];
    for (int h = 0; h < sh.H; h++) s_h[h] = 0.3 + 0.1 * h;
    int32_t *docs = NULL;
    ref_attn_opts o = {0};
    if (with_docs) {
        docs = malloc(sizeof(int32_t) * (size_t)sh.B * sh.S);
        for (int b = 0; b < sh.B; b++)
            for (int j = 0; j < sh.S; j++) docs[b * sh.S + j] = j < sh.S / 3 + b ? 0 : j < 2 * sh.S / 3 ? 1 : 0;
        o.doc_ids = docs;
    }
    if (per_head_s) o.logn_s = s_h;
    double *dq = calloc(nq, sizeof(double)), *dk = calloc(nk, sizeof(double)), *dv = calloc(nk, sizeof(double));
    double ds[16];
    assert_int_equal(ref_attn_backward(&sp, &sh, q, k, v, &o, W, dq, dk, dv, ds), 0);
    struct {
        double *x, *g;
        size_t n;
        const char *name;
    } ps[4] = {{q, dq, nq, "dq"}, {k, dk, nk, "dk"}, {v, dv, nk, "dv"}, {s_h, ds, (size_t)sh.H, "dlogn_s"}};
    int nps = sp.xform == LA_XF_LOGN && per_head_s ? 4 : 3;
    double maxg = 0;
    for (int a = 0; a < nps; a++)
        for (size_t i = 0; i < ps[a].n; i++) {
            double x0 = ps[a].x[i];
            ps[a].x[i] = x0 + FD_H;
            double lp = loss_of(&sp, &sh, q, k, v, &o, W);
            ps[a].x[i] = x0 - FD_H;
            double lm = loss_of(&sp, &sh, q, k, v, &o, W);
            ps[a].x[i] = x0;
            double fd = (lp - lm) / (2 * FD_H), an = ps[a].g[i];
            if (fabs(an) > maxg) maxg = fabs(an);
            if (!(fabs(fd - an) <= FD_TOL * (1 + fabs(an))))
                fail_msg("%s: %s[%zu] analytic %.12g vs finite difference %.12g", text, ps[a].name, i, an, fd);
        }
    assert_true(maxg > 1e-3); /* the check was not vacuous */
    free(q), free(k), free(v), free(W), free(dq), free(dk), free(dv), free(docs);
}

static void test_backward_matches_finite_differences(void **state) {
    (void)state;
    /* every position (with a transform and pattern varying alongside) */
    const char *specs[] = {
        "nope+causal",
        "rope(theta=100)+causal",
        "prope(p=0.5,theta=100)+sinv(tau=2)+window(3)",
        "ntk(s=2,theta=100)+logn(s=0.7)+sinks(1,2)",
        "dynamic-ntk(s=2,train=4,theta=100)+qwen-logn(train=4)+causal",
        "yarn(s=4,train=4,theta=100)+critical(gamma=0.8)+full",
        "alibi+temp(x=0.7)+global(g=2)+window(w=2)",
        "nape+sinv(tau=1)+full",
        "alibi+logn(s=0,train=3)+window(2)",
        "rope(theta=50)+sinv+global(1)+window(3)",
    };
    la_shape sh = {1, 4, 2, 5, 6, 4, LA_POS0_AUTO};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) fd_check(specs[i], sh, 0, 0);
}

static void test_backward_fd_docs_gqa_heads(void **state) {
    (void)state;
    la_shape sh = {2, 4, 2, 4, 7, 4, 2}; /* explicit pos0, T != S, two batches */
    fd_check("rope(theta=30)+logn(s=0.5)+causal", sh, 1, 1);
    fd_check("nape+logn(s=0.5)+full", sh, 0, 1);
    fd_check("yarn(s=2,train=3,theta=30)+sinv(tau=3)+sinks(2,2)", sh, 1, 0);
    la_shape sh2 = {1, 2, 1, 6, 3, 2, LA_POS0_AUTO}; /* T > S: early rows see nothing */
    fd_check("rope(theta=30)+causal", sh2, 0, 0);
    fd_check("alibi+critical(1.5)+full", sh2, 0, 0);
}

static void test_sinv_reference_values(void **state) {
    (void)state;
    double a, m;
    ref_sinv(10, 10, &a, &m); /* SPEC 4: t = 10, tau = 10 -> a = 1.54476, m = -1.3863 */
    assert_true(fabs(a - 1.54476) < 5e-6);
    assert_true(fabs(m - -1.3863) < 5e-5);
    ref_sinv(0, 10, &a, &m);
    assert_true(a == 1.0 && fabs(m) < 1e-15);
    ref_sinv(-5, 10, &a, &m); /* clamped before the log */
    assert_true(a == 1.0 && fabs(m) < 1e-15);
}

static void test_alibi_slopes_press(void **state) {
    (void)state;
    double m[16];
    ref_alibi_slopes(8, m);
    for (int h = 0; h < 8; h++) assert_true(fabs(m[h] - pow(2, -(h + 1))) < 1e-15);
    /* 6 heads: slopes of 4 (2^-2, 2^-4, 2^-6, 2^-8), then even-indexed slopes of 8 */
    const double six[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    ref_alibi_slopes(6, m);
    for (int h = 0; h < 6; h++) assert_true(fabs(m[h] - six[h]) < 1e-15);
    ref_alibi_slopes(12, m);
    for (int h = 0; h < 8; h++) assert_true(fabs(m[h] - pow(2, -(h + 1))) < 1e-15);
    for (int i = 0; i < 4; i++) assert_true(fabs(m[8 + i] - pow(2, -0.5 - i)) < 1e-15);
}

/* With q = 0 and no position or transform, every visible key has the same logit: the
 * row's entropy is log(n_q) and key mass is 1/n_q on exactly the visible keys. */
static void test_visibility_counts(void **state) {
    (void)state;
    struct {
        const char *spec;
        int64_t pos0;
    } cases[] = {{"window(5)", 0}, {"causal", 3}, {"sinks(2,3)", 0}, {"global(2)+window(3)", 0}, {"full", -4}};
    int T = 12, S = 12, D = 2;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        la_spec sp = spec_of(cases[c].spec);
        la_shape sh = {1, 1, 1, T, S, D, cases[c].pos0};
        double q[24] = {0}, k[24], v[24], out[24], lse[12], ent[12], mass[12];
        for (int i = 0; i < 24; i++) k[i] = v[i] = (double)i;
        assert_int_equal(ref_attn_forward(&sp, &sh, q, k, v, NULL, out, lse, ent, mass), 0);
        for (int i = 0; i < T; i++) {
            int64_t p = cases[c].pos0 + i;
            int n = 0;
            for (int64_t j = 0; j < S; j++) {
                int vis;
                switch (sp.pattern) {
                case LA_PAT_WINDOW: vis = j <= p && j > p - 5; break;
                case LA_PAT_CAUSAL: vis = j <= p; break;
                case LA_PAT_SINKS: vis = j <= p && (j < 2 || j > p - 3); break;
                case LA_PAT_GLOBAL: vis = (p >= 0 && p < 2) || j < 2 || (j <= p && j > p - 3); break;
                default: vis = 1;
                }
                n += vis;
            }
            if (sp.pattern == LA_PAT_WINDOW) assert_int_equal(n, p + 1 < 5 ? p + 1 : 5);
            if (n == 0) {
                assert_true(isinf(lse[i]) && lse[i] < 0);
                assert_true(out[2 * i] == 0 && out[2 * i + 1] == 0 && ent[i] == 0);
            } else {
                assert_true(fabs(ent[i] - log((double)n)) < 1e-12);
                assert_true(fabs(lse[i] - log((double)n)) < 1e-12);
            }
        }
    }
}

/* dynamic-ntk at or below the training length is plain RoPE; above it, the NTK base. */
static void test_rope_family_frequencies(void **state) {
    (void)state;
    double w1[8], w2[8];
    la_spec rope = spec_of("rope(theta=10000)"), dn = spec_of("dynamic-ntk(s=4,train=64)");
    ref_rope_omega(&rope, 16, 64, w1);
    ref_rope_omega(&dn, 16, 64, w2);
    assert_memory_equal(w1, w2, sizeof w1);
    ref_rope_omega(&dn, 16, 128, w2); /* s' = 4*128/64 - 3 = 5 */
    for (int i = 0; i < 8; i++) assert_true(fabs(w2[i] - pow(10000 * pow(5, 16.0 / 14), -2.0 * i / 16)) < 1e-15);
    la_spec pr = spec_of("prope(p=0.5)");
    ref_rope_omega(&pr, 16, 0, w2); /* floor(0.5 * 16/2) = 4 highest frequencies rotate */
    for (int i = 0; i < 8; i++) assert_true(i < 4 ? w2[i] == w1[i] : w2[i] == 0);
    la_spec y = spec_of("yarn(s=8,train=64)");
    ref_rope_omega(&y, 16, 0, w2); /* high frequencies kept, low ones divided by s */
    assert_true(w2[0] == w1[0]);
    assert_true(fabs(w2[7] - w1[7] / 8) < 1e-18);
    assert_true(fabs(ref_yarn_mscale2(&y) - pow(0.1 * log(8) + 1, 2)) < 1e-15);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backward_matches_finite_differences),
        cmocka_unit_test(test_backward_fd_docs_gqa_heads),
        cmocka_unit_test(test_sinv_reference_values),
        cmocka_unit_test(test_alibi_slopes_press),
        cmocka_unit_test(test_visibility_counts),
        cmocka_unit_test(test_rope_family_frequencies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
