/* test_attn_sink.c -- issue 31: the learned sink, softmax plus one and sigmoid attention in
 * the spec language and the fused kernels (SPEC 10).
 *   - spec strings: parse / canonical print round trip, the refused combinations (LA_ESPEC
 *     naming the conflict and the fix);
 *   - la_attn_forward / la_attn_backward against the double-precision reference
 *     (tests/support/ref_attn.c) over position encodings x transforms x patterns, packed
 *     documents, grouped-query heads, T != S: out, row_stat (lse with the sink / the sigmoid
 *     row mass), row_entropy, key_mass, dq, dk, dv, d logn_s and d sink;
 *   - the reference's analytic gradients (sink logits, sigmoid dq/dk/dv) against central
 *     finite differences in double, and the kernel's d sink against float finite differences;
 *   - every output bitwise the same for 1, 2 and 3 threads, fused and two-pass backward.
 * Tolerances: as test_attn_sweep.c (float32 rounding of O(1..10) logits, D = 16):
 * out / lse / entropy / key_mass 2e-5 (1 + |ref|); gradients 1e-4 (max(1, max|ref|) + |ref|).
 * The sink adds one exp in double per row and sigmoid one expf per entry (relative error
 * ~1e-7), far inside these. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "attn/attn_internal.h"
#include "support/ref_attn.h"

#define TOL_OUT 2e-5
#define TOL_GRAD 1e-4

/* ---- spec strings ---- */

static void roundtrip(const char *text, const char *canon) {
    la_spec s, s2;
    if (la_spec_parse(text, &s) != LA_OK) fail_msg("parse '%s': %s", text, la_errmsg());
    char buf[256];
    la_spec_format(&s, buf, sizeof buf);
    if (canon && strcmp(buf, canon) != 0) fail_msg("'%s' prints as '%s', want '%s'", text, buf, canon);
    assert_int_equal(la_spec_parse(buf, &s2), LA_OK);
    assert_memory_equal(&s, &s2, sizeof s);
}

static void refused(const char *text, const char *needle1, const char *needle2) {
    la_spec s;
    la_status st = la_spec_parse(text, &s);
    if (st != LA_ESPEC) fail_msg("'%s' parsed (status %d), want LA_ESPEC", text, (int)st);
    const char *m = la_errmsg();
    if (!strstr(m, needle1) || (needle2 && !strstr(m, needle2)))
        fail_msg("'%s': message '%s' lacks '%s' / '%s'", text, m, needle1, needle2 ? needle2 : "");
}

static void test_spec(void **state) {
    (void)state;
    roundtrip("softmax+sink+rope", "softmax+sink+rope(theta=10000)+causal");
    roundtrip("sink+rope", "softmax+sink+rope(theta=10000)+causal");
    roundtrip("softmax+sink(fixed=0)+sinv(tau=10)+prope(p=0.25)",
              "softmax+sink(fixed=0)+sinv(tau=10)+prope(p=0.25,theta=10000)+causal");
    roundtrip("softmax+sink(1.5)+window(8)", "softmax+sink(fixed=1.5)+nope+window(w=8)");
    roundtrip("sigmoid+rope", "sigmoid(train=0)+rope(theta=10000)+causal");
    roundtrip("sigmoid(b=-5.545)+logn(s=0.3)+alibi", NULL);
    roundtrip("sigmoid(train=256)+sinv", "sigmoid(train=256)+sinv(tau=10)+nope+causal");
    roundtrip("sigmoid(-2,64)", "sigmoid(b=-2,train=64)+nope+causal");
    roundtrip("sigmoid-logn+critical(gamma=0.5)+sinks(2,8)", "sigmoid-logn+critical(gamma=0.5)+nope+sinks(n=2,w=8)");
    la_spec s;
    assert_int_equal(la_spec_parse("softmax+sink", &s), LA_OK);
    assert_int_equal(s.sink, LA_SINK_LEARNED);
    assert_int_equal(la_spec_parse("softmax+sink(fixed=0)", &s), LA_OK);
    assert_int_equal(s.sink, LA_SINK_FIXED);
    assert_true(s.sink_fixed == 0.0);
    assert_int_equal(la_spec_parse("sigmoid(b=-3)", &s), LA_OK);
    assert_int_equal(s.norm, LA_NORM_SIGMOID);
    assert_true(s.sig_b_set && s.sig_b == -3.0);
    /* refused: the conflict and the fix are named */
    refused("entmax(alpha=1.5)+sink", "sink", "softmax+sink");
    refused("sparsemax+sink(fixed=0)", "sink", "softmax+sink");
    refused("sigmoid+sink", "sigmoid", "drop 'sink'");
    refused("softmax+sink+sink(fixed=0)", "second sink", NULL);
    refused("softmax+sink(fixed=x)", "bad number", NULL);
    refused("softmax+sink(width=2)", "unknown parameter", "fixed");
    refused("sigmoid(train=1)", "train >= 2", NULL);
    refused("sigmod+rope", "did you mean 'sigmoid'", NULL);
    /* the kernel refuses what it cannot compute */
    la_shape sh = {1, 1, 1, 2, 2, 4, LA_POS0_AUTO};
    float q[8] = {0}, k[8] = {0}, v[8] = {0}, o[8], st[2];
    assert_int_equal(la_spec_parse("sigmoid+rope", &s), LA_OK); /* train unset */
    assert_int_equal(la_attn_forward(&s, &sh, q, k, v, o, st, NULL), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "sigmoid(train=256)"));
    s = la_spec_default();
    s.norm = LA_NORM_ENTMAX;
    s.sink = LA_SINK_LEARNED; /* built by hand, past the parser */
    assert_int_equal(la_attn_forward(&s, &sh, q, k, v, o, st, NULL), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "sink"));
    s = la_spec_default();
    s.sink = LA_SINK_LEARNED;
    float bad[1] = {NAN};
    la_attn_opts op = la_attn_opts_default();
    op.sinks = bad;
    assert_int_equal(la_attn_forward(&s, &sh, q, k, v, o, st, &op), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "sinks[0]"));
}

/* ---- against the reference ---- */

typedef struct {
    la_shape sh;
    float *q, *k, *v, *dout, *sinks, *logn;
    double *qd, *kd, *vd, *doutd, *sinksd, *lognd;
    int32_t *ids;
} inputs;

static void inputs_new(inputs *in, la_shape sh, uint64_t seed, double qscale) {
    memset(in, 0, sizeof *in);
    in->sh = sh;
    size_t nq = (size_t)sh.B * sh.H * sh.T * sh.D, nk = (size_t)sh.B * sh.Hkv * sh.S * sh.D;
    in->q = malloc(sizeof(float) * nq), in->dout = malloc(sizeof(float) * nq);
    in->k = malloc(sizeof(float) * nk), in->v = malloc(sizeof(float) * nk);
    in->qd = malloc(sizeof(double) * nq), in->doutd = malloc(sizeof(double) * nq);
    in->kd = malloc(sizeof(double) * nk), in->vd = malloc(sizeof(double) * nk);
    in->sinks = malloc(sizeof(float) * sh.H), in->sinksd = malloc(sizeof(double) * sh.H);
    in->logn = malloc(sizeof(float) * sh.H), in->lognd = malloc(sizeof(double) * sh.H);
    in->ids = malloc(sizeof(int32_t) * (size_t)sh.B * sh.S);
    la_rng r;
    la_rng_seed(&r, seed);
    for (size_t i = 0; i < nq; i++) in->qd[i] = in->q[i] = (float)(qscale * la_rng_normal(&r));
    for (size_t i = 0; i < nq; i++) in->doutd[i] = in->dout[i] = (float)la_rng_normal(&r);
    for (size_t i = 0; i < nk; i++) in->kd[i] = in->k[i] = (float)la_rng_normal(&r);
    for (size_t i = 0; i < nk; i++) in->vd[i] = in->v[i] = (float)la_rng_normal(&r);
    for (int h = 0; h < sh.H; h++) { /* sinks from well below to above the typical logit */
        in->sinksd[h] = in->sinks[h] = (float)(-2.0 + 4.0 * la_rng_uniform(&r));
        in->lognd[h] = in->logn[h] = (float)(0.2 + 0.3 * la_rng_uniform(&r));
    }
    for (int b = 0; b < sh.B; b++)
        for (int j = 0; j < sh.S; j++) in->ids[(size_t)b * sh.S + j] = j / (23 + 11 * b);
}

static void inputs_free(inputs *in) {
    free(in->q), free(in->k), free(in->v), free(in->dout), free(in->sinks), free(in->logn);
    free(in->qd), free(in->kd), free(in->vd), free(in->doutd), free(in->sinksd), free(in->lognd);
    free(in->ids);
}

static double maxabs(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static void cmp(const char *spec, const char *what, const float *got, const double *want, size_t n, double tol,
                int grad) {
    double scale = grad ? fmax(1.0, maxabs(want, n)) : 1.0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(want[i]) && got[i] == want[i]) continue;
        double err = fabs((double)got[i] - want[i]);
        if (!(err <= tol * (scale + fabs(want[i]))))
            fail_msg("%s: %s[%zu] = %.9g, reference %.9g (err %.3g)", spec, what, i, (double)got[i], want[i], err);
    }
}

static int n_checked;

static void check_case(const char *text, la_shape sh, int docs, int head_s, uint64_t seed) {
    la_spec sp;
    if (la_spec_parse(text, &sp) != LA_OK) fail_msg("parse '%s': %s", text, la_errmsg());
    inputs in;
    inputs_new(&in, sh, seed, 1.0);
    size_t nq = (size_t)sh.B * sh.H * sh.T * sh.D, nk = (size_t)sh.B * sh.Hkv * sh.S * sh.D;
    size_t bht = (size_t)sh.B * sh.H * sh.T, bhs = (size_t)sh.B * sh.H * sh.S;
    float *out = malloc(sizeof(float) * nq), *st = malloc(sizeof(float) * bht), *ent = malloc(sizeof(float) * bht);
    float *km = malloc(sizeof(float) * bhs), *dq = malloc(sizeof(float) * nq), *dk = malloc(sizeof(float) * nk);
    float *dv = malloc(sizeof(float) * nk), dsk[16], dln[16];
    double *rout = malloc(sizeof(double) * nq), *rst = malloc(sizeof(double) * bht);
    double *rent = malloc(sizeof(double) * bht), *rkm = malloc(sizeof(double) * bhs);
    double *rdq = malloc(sizeof(double) * nq), *rdk = malloc(sizeof(double) * nk), *rdv = malloc(sizeof(double) * nk);
    double rdsk[16], rdln[16];
    la_attn_opts o = la_attn_opts_default();
    o.doc_ids = docs ? in.ids : NULL;
    o.logn_s = head_s ? in.logn : NULL;
    o.sinks = in.sinks;
    o.dsinks = dsk;
    o.dlogn_s = dln;
    o.row_entropy = ent;
    o.key_mass = km;
    o.n_threads = 2;
    ref_attn_opts ro = {0};
    ro.doc_ids = o.doc_ids;
    ro.logn_s = head_s ? in.lognd : NULL;
    ro.sinks = in.sinksd;
    ro.dsinks = rdsk;
    if (la_attn_forward(&sp, &sh, in.q, in.k, in.v, out, st, &o) != LA_OK)
        fail_msg("%s: forward: %s", text, la_errmsg());
    if (la_attn_backward(&sp, &sh, in.q, in.k, in.v, out, st, in.dout, dq, dk, dv, &o) != LA_OK)
        fail_msg("%s: backward: %s", text, la_errmsg());
    if (ref_attn_forward(&sp, &sh, in.qd, in.kd, in.vd, &ro, rout, rst, rent, rkm))
        fail_msg("%s: reference: %s", text, ref_attn_error());
    if (ref_attn_backward(&sp, &sh, in.qd, in.kd, in.vd, &ro, in.doutd, rdq, rdk, rdv, rdln))
        fail_msg("%s: reference backward: %s", text, ref_attn_error());
    cmp(text, "out", out, rout, nq, TOL_OUT, 0);
    cmp(text, "row_stat", st, rst, bht, TOL_OUT, 0);
    cmp(text, "row_entropy", ent, rent, bht, TOL_OUT, 0);
    cmp(text, "key_mass", km, rkm, bhs, TOL_OUT, 0);
    cmp(text, "dq", dq, rdq, nq, TOL_GRAD, 1);
    cmp(text, "dk", dk, rdk, nk, TOL_GRAD, 1);
    cmp(text, "dv", dv, rdv, nk, TOL_GRAD, 1);
    cmp(text, "dsinks", dsk, rdsk, (size_t)sh.H, TOL_GRAD, 1);
    if (sp.xform == LA_XF_LOGN) cmp(text, "dlogn_s", dln, rdln, (size_t)sh.H, TOL_GRAD, 1);
    if (sp.sink != LA_SINK_LEARNED)
        for (int h = 0; h < sh.H; h++) assert_true(dsk[h] == 0.0f);
    else { /* a real gradient: not all zero */
        double m = 0;
        for (int h = 0; h < sh.H; h++) m = fmax(m, fabs(dsk[h]));
        if (sh.T > 1) assert_true(m > 1e-3);
    }
    n_checked++;
    free(out), free(st), free(ent), free(km), free(dq), free(dk), free(dv);
    free(rout), free(rst), free(rent), free(rkm), free(rdq), free(rdk), free(rdv);
    inputs_free(&in);
}

static const char *const norms[] = {"softmax+sink", "softmax+sink(fixed=0)", "softmax+sink(fixed=2.5)",
                                    "sigmoid(b=-2)", "sigmoid(train=32)", "sigmoid-logn"};
static const char *const positions[] = {"nope", "rope", "prope(p=0.25)", "yarn(s=4,train=32)", "alibi", "nape"};
static const char *const transforms[] = {"none", "logn(s=0,train=32)", "sinv(tau=10)", "critical(gamma=0.5)",
                                         "qwen-logn(train=32)"};
static const char *const patterns[] = {"causal", "full", "window(16)", "sinks(2,8)", "global(2)+window(8)"};
#define NA(x) ((int)(sizeof(x) / sizeof((x)[0])))

static void test_vs_reference(void **state) {
    (void)state;
    /* every normaliser x position x transform x pattern, sizes rotating through the list
     * (each combination once; the sizes cover one tile, tile edges, T != S) */
    static const int ts[][2] = {{1, 1}, {65, 65}, {63, 137}, {137, 70}, {20, 130}, {64, 64}};
    int c = 0;
    for (int n = 0; n < NA(norms); n++)
        for (int p = 0; p < NA(positions); p++)
            for (int x = 0; x < NA(transforms); x++)
                for (int t = 0; t < NA(patterns); t++, c++) {
                    if ((c % 3) != 0 && !(p == 0 || x == 0)) continue; /* a third of the full cross */
                    char text[256];
                    snprintf(text, sizeof text, "%s+%s+%s+%s", norms[n], transforms[x], positions[p], patterns[t]);
                    const int *sz = ts[c % NA(ts)];
                    int docs = sz[0] == sz[1] && (c % 2);
                    la_shape sh = {docs ? 2 : 1, 4, 2, sz[0], sz[1], 16, LA_POS0_AUTO};
                    check_case(text, sh, docs, c % 4 == 1, 1000 + (uint64_t)c);
                }
    /* explicit pos0 and a query beyond the keys */
    check_case("softmax+sink+rope+causal", (la_shape){1, 2, 1, 9, 40, 8, 100}, 0, 0, 7);
    check_case("sigmoid(b=-1)+rope+window(5)", (la_shape){1, 2, 2, 9, 40, 8, -3}, 0, 0, 8);
    print_message("checked %d cases against the reference\n", n_checked);
}

/* ---- finite differences ---- */

/* loss(sinks, q, k, v) = sum out . dout in double through the reference */
static double ref_loss(const la_spec *sp, const inputs *in, const double *sinks, const double *q, const double *k,
                       const double *v) {
    la_shape sh = in->sh;
    size_t nq = (size_t)sh.B * sh.H * sh.T * sh.D, bht = (size_t)sh.B * sh.H * sh.T;
    double *out = malloc(sizeof(double) * nq), *lse = malloc(sizeof(double) * bht);
    ref_attn_opts ro = {0};
    ro.sinks = sinks;
    assert_int_equal(ref_attn_forward(sp, &sh, q, k, v, &ro, out, lse, NULL, NULL), 0);
    double L = 0;
    for (size_t i = 0; i < nq; i++) L += out[i] * in->doutd[i];
    free(out), free(lse);
    return L;
}

static void test_finite_differences(void **state) {
    (void)state;
    const char *specs[] = {"softmax+sink+rope+causal", "softmax+sink+sinv(tau=10)+prope(p=0.25)+window(6)",
                           "sigmoid(b=-1.5)+rope+causal", "sigmoid-logn+logn(s=0.4)+alibi+causal",
                           "softmax+sink(fixed=0)+critical(gamma=0.7)+causal"};
    for (int si = 0; si < NA(specs); si++) {
        la_spec sp;
        assert_int_equal(la_spec_parse(specs[si], &sp), LA_OK);
        la_shape sh = {1, 3, 1, 7, 9, 6, LA_POS0_AUTO};
        inputs in;
        inputs_new(&in, sh, 50 + si, 1.0);
        size_t nq = (size_t)sh.B * sh.H * sh.T * sh.D, nk = (size_t)sh.B * sh.Hkv * sh.S * sh.D;
        double *dq = malloc(sizeof(double) * nq), *dk = malloc(sizeof(double) * nk), *dv = malloc(sizeof(double) * nk);
        double dsk[3];
        ref_attn_opts ro = {0};
        ro.sinks = in.sinksd;
        ro.dsinks = dsk;
        assert_int_equal(ref_attn_backward(&sp, &sh, in.qd, in.kd, in.vd, &ro, in.doutd, dq, dk, dv, NULL), 0);
        /* central differences in double, h = 1e-5: truncation ~h^2 |L'''| ~ 1e-10, rounding
         * ~1e-16 |L| / h ~ 1e-11; tolerance 1e-6 (1 + |g|) */
        const double eps = 1e-5;
        struct { const char *name; double *x, *g; size_t n; } vars[] = {
            {"sink", in.sinksd, dsk, (size_t)sh.H}, {"q", in.qd, dq, nq}, {"k", in.kd, dk, nk}, {"v", in.vd, dv, nk}};
        for (int vi = 0; vi < 4; vi++) {
            if (vi == 0 && sp.sink != LA_SINK_LEARNED) {
                for (int h = 0; h < sh.H; h++) assert_true(dsk[h] == 0.0);
                continue;
            }
            for (size_t i = 0; i < vars[vi].n; i += vi ? 5 : 1) {
                double x0 = vars[vi].x[i];
                vars[vi].x[i] = x0 + eps;
                double lp = ref_loss(&sp, &in, in.sinksd, in.qd, in.kd, in.vd);
                vars[vi].x[i] = x0 - eps;
                double lm = ref_loss(&sp, &in, in.sinksd, in.qd, in.kd, in.vd);
                vars[vi].x[i] = x0;
                double fd = (lp - lm) / (2 * eps), g = vars[vi].g[i];
                if (!(fabs(fd - g) <= 1e-6 * (1 + fabs(g))))
                    fail_msg("%s: d%s[%zu] analytic %.10g, finite difference %.10g", specs[si], vars[vi].name, i, g,
                             fd);
            }
        }
        /* the kernel's d sink against float finite differences: h = 1e-2 on the sink logit,
         * loss a float sum of T*H*D terms ~ O(10) with rounding ~1e-5 -> error ~1e-3 / h ~ 1e-3;
         * truncation h^2 |L'''| ~ 1e-4. Tolerance 5e-3 (1 + |g|). */
        if (sp.sink == LA_SINK_LEARNED) {
            float *out = malloc(sizeof(float) * nq), *st = malloc(sizeof(float) * nq);
            float *fdq = malloc(sizeof(float) * nq), *fdk = malloc(sizeof(float) * nk), *fdv = malloc(sizeof(float) * nk);
            float kds[3];
            la_attn_opts o = la_attn_opts_default();
            o.sinks = in.sinks;
            o.dsinks = kds;
            assert_int_equal(la_attn_forward(&sp, &sh, in.q, in.k, in.v, out, st, &o), LA_OK);
            assert_int_equal(la_attn_backward(&sp, &sh, in.q, in.k, in.v, out, st, in.dout, fdq, fdk, fdv, &o), LA_OK);
            for (int h = 0; h < sh.H; h++) {
                double l2[2];
                float s0 = in.sinks[h];
                for (int sgn = 0; sgn < 2; sgn++) {
                    in.sinks[h] = s0 + (sgn ? -1e-2f : 1e-2f);
                    assert_int_equal(la_attn_forward(&sp, &sh, in.q, in.k, in.v, out, st, &o), LA_OK);
                    double L = 0;
                    for (size_t i = 0; i < nq; i++) L += (double)out[i] * in.dout[i];
                    l2[sgn] = L;
                }
                in.sinks[h] = s0;
                double fd = (l2[0] - l2[1]) / (2 * 1e-2);
                if (!(fabs(fd - kds[h]) <= 5e-3 * (1 + fabs(kds[h]))))
                    fail_msg("%s: kernel dsinks[%d] = %.7g, finite difference %.7g", specs[si], h, (double)kds[h], fd);
            }
            free(out), free(st), free(fdq), free(fdk), free(fdv);
        }
        free(dq), free(dk), free(dv);
        inputs_free(&in);
    }
}

/* ---- bitwise thread invariance ---- */

typedef struct {
    float *out, *st, *ent, *sup, *km, *dq, *dk, *dv;
    float dsk[8], dln[8];
} outs;

static void run_threads(const la_spec *sp, const inputs *in, int docs, int threads, outs *o, int fill) {
    la_shape sh = in->sh;
    size_t nq = (size_t)sh.B * sh.H * sh.T * sh.D, nk = (size_t)sh.B * sh.Hkv * sh.S * sh.D;
    size_t bht = (size_t)sh.B * sh.H * sh.T, bhs = (size_t)sh.B * sh.H * sh.S;
    float **p[8] = {&o->out, &o->st, &o->ent, &o->sup, &o->km, &o->dq, &o->dk, &o->dv};
    size_t n[8] = {nq, bht, bht, bht, bhs, nq, nk, nk};
    for (int i = 0; i < 8; i++) {
        *p[i] = malloc(sizeof(float) * n[i]);
        memset(*p[i], fill, sizeof(float) * n[i]);
    }
    memset(o->dsk, fill, sizeof o->dsk);
    memset(o->dln, fill, sizeof o->dln);
    la_attn_opts a = la_attn_opts_default();
    a.n_threads = threads;
    a.doc_ids = docs ? in->ids : NULL;
    a.row_entropy = o->ent, a.row_support = o->sup, a.key_mass = o->km;
    a.sinks = in->sinks, a.dsinks = o->dsk, a.dlogn_s = o->dln;
    assert_int_equal(la_attn_forward(sp, &sh, in->q, in->k, in->v, o->out, o->st, &a), LA_OK);
    assert_int_equal(la_attn_backward(sp, &sh, in->q, in->k, in->v, o->out, o->st, in->dout, o->dq, o->dk, o->dv, &a),
                     LA_OK);
    memset(o->dsk + sh.H, 0, sizeof(float) * (size_t)(8 - sh.H));
    memset(o->dln + sh.H, 0, sizeof(float) * (size_t)(8 - sh.H));
}

static void test_threads_bitwise(void **state) {
    (void)state;
    struct { const char *spec; la_shape sh; int docs; } cases[] = {
        {"softmax+sink+rope+causal", {2, 4, 2, 150, 200, 32, LA_POS0_AUTO}, 0},
        {"softmax+sink+sinv(tau=10)+prope(p=0.25)+window(70)", {2, 4, 1, 130, 130, 16, LA_POS0_AUTO}, 1},
        {"softmax+sink(fixed=0)+logn(s=0.3)+alibi+causal", {2, 4, 2, 150, 150, 16, LA_POS0_AUTO}, 0},
        {"sigmoid(b=-4)+rope+causal", {2, 4, 2, 150, 200, 32, LA_POS0_AUTO}, 0},
        {"sigmoid-logn+logn(s=0.3)+global(3)+window(40)", {1, 4, 2, 200, 200, 16, LA_POS0_AUTO}, 1},
    };
    for (int ci = 0; ci < NA(cases); ci++) {
        la_spec sp;
        assert_int_equal(la_spec_parse(cases[ci].spec, &sp), LA_OK);
        inputs in;
        inputs_new(&in, cases[ci].sh, 300 + ci, 1.5);
        la_shape sh = in.sh;
        size_t nq = (size_t)sh.B * sh.H * sh.T * sh.D, nk = (size_t)sh.B * sh.Hkv * sh.S * sh.D;
        size_t bht = (size_t)sh.B * sh.H * sh.T, bhs = (size_t)sh.B * sh.H * sh.S;
        size_t n[10] = {nq, bht, bht, bht, bhs, nq, nk, nk, 8, 8};
        const char *names[10] = {"out", "row_stat", "entropy", "support", "key_mass", "dq", "dk", "dv", "dsinks",
                                 "dlogn_s"};
        outs r;
        la_softmax_bwd_fused = 0;
        run_threads(&sp, &in, cases[ci].docs, 1, &r, 0x5a);
        for (int fused = 0; fused <= 1; fused++)
            for (int th = 1 + !fused; th <= 3; th++) {
                la_softmax_bwd_fused = fused;
                outs o;
                run_threads(&sp, &in, cases[ci].docs, th, &o, 0x11 * th + fused);
                const float *a[10] = {r.out, r.st, r.ent, r.sup, r.km, r.dq, r.dk, r.dv, r.dsk, r.dln};
                const float *b[10] = {o.out, o.st, o.ent, o.sup, o.km, o.dq, o.dk, o.dv, o.dsk, o.dln};
                for (int i = 0; i < 10; i++)
                    if (memcmp(a[i], b[i], sizeof(float) * n[i]))
                        fail_msg("%s: %s differs between 1 thread (two-pass) and %d threads (fused %d)",
                                 cases[ci].spec, names[i], th, fused);
                float **f[8] = {&o.out, &o.st, &o.ent, &o.sup, &o.km, &o.dq, &o.dk, &o.dv};
                for (int i = 0; i < 8; i++) free(*f[i]);
            }
        la_softmax_bwd_fused = -1;
        float **f[8] = {&r.out, &r.st, &r.ent, &r.sup, &r.km, &r.dq, &r.dk, &r.dv};
        for (int i = 0; i < 8; i++) free(*f[i]);
        inputs_free(&in);
    }
}

/* softmax+sink(fixed=0) is softmax plus one: out = sum e^L v / (1 + sum e^L), checked by hand
 * on one row; and a sink far below every logit changes nothing. */
static void test_plus_one(void **state) {
    (void)state;
    la_spec sp;
    assert_int_equal(la_spec_parse("softmax+sink(fixed=0)+full", &sp), LA_OK);
    la_shape sh = {1, 1, 1, 1, 3, 2, LA_POS0_AUTO};
    /* logits q.k / sqrt(2): k rows chosen so that L = ln 1, ln 2, ln 3 */
    float q[2] = {(float)sqrt(2.0), 0}, k[6] = {0, 0, (float)log(2.0), 0, (float)log(3.0), 0};
    float v[6] = {1, 0, 0, 1, 1, 1}, out[2], st[1];
    assert_int_equal(la_attn_forward(&sp, &sh, q, k, v, out, st, NULL), LA_OK);
    /* e^L = 1, 2, 3; denominator 1 + 6 = 7 */
    assert_true(fabs(out[0] - 4.0 / 7) < 1e-6 && fabs(out[1] - 5.0 / 7) < 1e-6);
    assert_true(fabs(st[0] - log(7.0)) < 1e-6);
    la_spec s2, s3;
    assert_int_equal(la_spec_parse("softmax+full", &s2), LA_OK);
    assert_int_equal(la_spec_parse("softmax+sink(fixed=-200)+full", &s3), LA_OK);
    float o2[2], o3[2], st2[1], st3[1];
    assert_int_equal(la_attn_forward(&s2, &sh, q, k, v, o2, st2, NULL), LA_OK);
    assert_int_equal(la_attn_forward(&s3, &sh, q, k, v, o3, st3, NULL), LA_OK);
    assert_memory_equal(o2, o3, sizeof o2);
}

/* la_attn_diagnose: one query row per (b, h) (T = 1, S = 60) so that a range's mean mass is
 * the row's own sum over the range's keys: compared with the reference's probabilities; the
 * sink's share (softmax+sink) lands in the range of the row's span S - 1 and the key masses
 * plus the sink sum to 1. Tolerance 1e-5: float probabilities summed in double. */
static void test_diagnose(void **state) {
    (void)state;
    const char *specs[] = {"softmax+sink+rope+causal", "softmax+sink(fixed=0)+alibi+causal", "sigmoid(b=-2)+rope+causal",
                           "sigmoid-logn+sinv(tau=10)+nope+causal"};
    for (int si = 0; si < NA(specs); si++) {
        la_spec sp;
        assert_int_equal(la_spec_parse(specs[si], &sp), LA_OK);
        la_shape sh = {1, 2, 1, 1, 60, 8, LA_POS0_AUTO};
        inputs in;
        inputs_new(&in, sh, 70 + si, 1.0);
        float out[16], st[2];
        la_attn_opts o = la_attn_opts_default();
        o.sinks = in.sinks;
        assert_int_equal(la_attn_forward(&sp, &sh, in.q, in.k, in.v, out, st, &o), LA_OK);
        la_diag *dg[2];
        for (int h = 0; h < 2; h++) assert_int_equal(la_diag_new(59, 10.0, 4, &dg[h]), LA_OK);
        assert_int_equal(la_attn_diagnose(&sp, &sh, in.q, in.k, st, &o, dg), LA_OK);
        double rout[16], rlse[2], rkm[120];
        ref_attn_opts ro = {0};
        ro.sinks = in.sinksd;
        assert_int_equal(ref_attn_forward(&sp, &sh, in.qd, in.kd, in.vd, &ro, rout, rlse, NULL, rkm), 0);
        for (int h = 0; h < 2; h++) {
            double tot = 0;
            for (int r = 0; r < la_diag_num_ranges(dg[h]); r++) {
                la_diag_result res;
                assert_int_equal(la_diag_get(dg[h], r, &res), LA_OK);
                double want = 0;
                for (int j = 0; j < 60; j++) {
                    int64_t t = 59 - j;
                    if (t >= res.lo && t < res.hi) want += rkm[h * 60 + j];
                }
                if (res.rows) {
                    if (fabs(res.mass - want) > 1e-5) fail_msg("%s h%d range %d: mass %.8g, reference %.8g", specs[si], h, r, res.mass, want);
                    tot += res.mass;
                }
                int64_t kr;
                double km, kse;
                assert_int_equal(la_diag_get_sink(dg[h], r, &kr, &km, &kse), LA_OK);
                int holds = 59 >= res.lo && 59 < res.hi;
                if (sp.sink == LA_SINK_NONE || !holds) {
                    assert_int_equal(kr, 0);
                } else {
                    assert_int_equal(kr, 1);
                    double sg = sp.sink == LA_SINK_FIXED ? sp.sink_fixed : in.sinksd[h];
                    double want_s = exp(sg - rlse[h]);
                    if (fabs(km - want_s) > 1e-5) fail_msg("%s h%d: sink mass %.8g, reference %.8g", specs[si], h, km, want_s);
                    tot += km;
                }
            }
            if (sp.sink != LA_SINK_NONE) assert_true(fabs(tot - 1.0) < 1e-5);
            la_diag_free(dg[h]);
        }
        inputs_free(&in);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_plus_one),
        cmocka_unit_test(test_vs_reference),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_diagnose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
