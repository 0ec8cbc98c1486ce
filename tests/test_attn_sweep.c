/* test_attn_sweep.c -- the fused kernels (la_attn_forward / la_attn_backward, softmax)
 * against the independent double-precision reference (tests/support/ref_attn.c) over
 * every position x transform x pattern combination (8 x 6 x 5 = 240), at sizes
 * T, S in {1, 2, 63, 64, 65, 137} with T != S cases, grouped-query heads (H = 4, Hkv = 2),
 * explicit pos0, packed documents and per-head logn s_h; each option once more at
 * T = S = 1025; and the kernel's own backward against float32 finite differences.
 *
 * Size schedule: the full 240 x 36 (T, S) cross is 12x the cases run here (~80 s of CPU
 * in the normal build, several minutes under ASan), over the suite's budget, so
 * combination c takes the 3 size pairs c, c + 12 and c + 24 (mod 36) of the (T, S) list:
 * every combination sees 3 sizes, every size pair about 20 combinations, and
 * test_sweep_all_size_pairs runs all 36 pairs on one spec. At T = S = 1025 the reference
 * alone needs 0.25-1.4 s per combination (measured, normal build, shared 2-core machine),
 * so the full cross there would take ~3 min normal and far longer under ASan: 1025 covers
 * each option once instead (8 cases) plus one T != S case with D = 64.
 * Tolerances (all from float32 rounding; inputs N(0,1), D = 16, logits O(1..10)):
 *   out, lse, entropy, key_mass: |kernel - ref| <= 2e-5 * (1 + |ref|). A logit is a
 *     16-term float dot product times O(1) factors: error ~ 16 * 6e-8 * |L| ~ 1e-6 for
 *     |L| ~ 1; the online softmax rescales at most S/64 times (a few more ulps); out and lse
 *     inherit the logit error times |v|. Measured worst: 1.8e-6 (out), i.e. 0.09 of the
 *     tolerance; a mask, position or slope mistake moves values by >= 1e-3.
 *   dq, dk, dv, dlogn_s: gradients accumulate up to max(T, S) * (H/Hkv) terms of size
 *     O(|dL| |k|); tolerance 1e-4 * (scale + |ref|) with scale = max(1, max |ref| of the
 *     tensor) (relative to the terms' magnitude, because single entries can cancel to ~0,
 *     e.g. dk = 0 exactly when S = 1). Measured worst: 0.04 of the tolerance.
 *   test_report_margins prints the worst error / tolerance per quantity of the run.
 *   Empty rows are exact: out == 0, lse == -inf, dq row == 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <math.h>

#include "core/internal.h"
#include "support/ref_attn.h"

static const char *const positions[9] = {"nope",  "rope(theta=10000)", "prope(p=0.5,theta=10000)",
                                         "ntk(s=4)", "dynamic-ntk(s=4,train=32)", "yarn(s=4,train=32)",
                                         "alibi", "nape", "pi(s=4)"};
static const char *const transforms[6] = {"none", "logn(s=0,train=32)", "qwen-logn(train=32)", "sinv(tau=10)",
                                          "critical(gamma=0.5)", "temp(x=0.7)"};
static const char *const patterns[5] = {"causal", "full", "window(16)", "sinks(2,8)", "global(2)+window(8)"};
static const int sizes[6] = {1, 2, 63, 64, 65, 137};

#define TOL_OUT 2e-5
#define TOL_GRAD 1e-4

typedef struct {
    const char *spec_text;
    la_shape sh;
    int docs;       /* 1: packed documents (B = 2) */
    int head_s;     /* 1: per-head logn s_h from opts */
    int threads;    /* n_threads */
    uint64_t seed;
} sweep_case;

static int n_checked;

/* worst |kernel - ref| / tolerance seen per quantity (printed by the last test, to show
 * the margin the tolerances leave) */
static const char *const qnames[8] = {"out", "lse", "entropy", "key_mass", "dq", "dk", "dv", "dlogn_s"};
static double worst[8];

static double maxabs_d(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

static void compare(const sweep_case *c, const char *what, const float *got, const double *want, size_t n,
                    double tol, int relative_to_tensor) {
    /* gradient entries are sums of O(1) terms (inputs N(0,1)) that may cancel to ~0 (e.g.
     * dk = 0 exactly when S = 1): measure their error against max(1, max |ref|) */
    double scale = relative_to_tensor ? maxabs_d(want, n) : 1.0;
    if (scale < 1.0) scale = 1.0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        int ok;
        if (isinf(w)) ok = g == w;
        else ok = isfinite(g) && fabs(g - w) <= tol * (scale + fabs(w));
        if (ok && isfinite(w)) {
            double ratio = fabs(g - w) / (tol * (scale + fabs(w)));
            for (int qn = 0; qn < 8; qn++)
                if (!strcmp(what, qnames[qn]) && ratio > worst[qn]) worst[qn] = ratio;
        }
        if (!ok)
            fail_msg("%s B=%d H=%d Hkv=%d T=%d S=%d D=%d pos0=%lld docs=%d: %s[%zu] kernel %.9g ref %.9g "
                     "(tol %.1e)",
                     c->spec_text, c->sh.B, c->sh.H, c->sh.Hkv, c->sh.T, c->sh.S, c->sh.D,
                     (long long)(c->sh.pos0 == LA_POS0_AUTO ? c->sh.S - c->sh.T : c->sh.pos0), c->docs, what, i, g,
                     w, tol);
    }
}

static void fill(la_rng *r, float *f, double *d, size_t n, double sd) {
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(sd * la_rng_normal(r));
        d[i] = f[i];
    }
}

static void run_case(const sweep_case *c) {
    la_spec sp;
    if (la_spec_parse(c->spec_text, &sp) != LA_OK) fail_msg("%s: %s", c->spec_text, la_errmsg());
    const la_shape *sh = &c->sh;
    int B = sh->B, H = sh->H, Hkv = sh->Hkv, T = sh->T, S = sh->S, D = sh->D;
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * Hkv * S * D, nr = (size_t)B * H * T, nm = (size_t)B * H * S;
    la_rng r;
    la_rng_seed(&r, c->seed);
    float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk), *g = malloc(4 * nq);
    double *qd = malloc(8 * nq), *kd = malloc(8 * nk), *vd = malloc(8 * nk), *gd = malloc(8 * nq);
    fill(&r, q, qd, nq, 1.0);
    fill(&r, k, kd, nk, 1.0);
    fill(&r, v, vd, nk, 1.0);
    fill(&r, g, gd, nq, 1.0);
    float s_h[8];
    double s_hd[8];
    for (int h = 0; h < H; h++) s_hd[h] = s_h[h] = 0.2f + 0.15f * (float)h;
    int32_t *docs = NULL;
    if (c->docs) {
        /* random contiguous runs; ids repeat across runs (a reappearing id is a new document) */
        docs = malloc(sizeof(int32_t) * (size_t)B * S);
        for (int b = 0; b < B; b++) {
            int id = 0;
            for (int j = 0; j < S; j++) {
                if (j > 0 && la_rng_below(&r, 16) == 0) id = (id + 1) % 2;
                docs[(size_t)b * S + j] = id;
            }
        }
    }

    /* kernel */
    float *out = malloc(4 * nq), *lse = malloc(4 * nr), *ent = malloc(4 * nr), *mass = malloc(4 * nm);
    float *dq = malloc(4 * nq), *dk = malloc(4 * nk), *dv = malloc(4 * nk), dls[8];
    la_attn_opts o = la_attn_opts_default();
    o.doc_ids = docs;
    o.logn_s = c->head_s ? s_h : NULL;
    o.row_entropy = ent;
    o.key_mass = mass;
    o.n_threads = c->threads;
    la_status st = la_attn_forward(&sp, sh, q, k, v, out, lse, &o);
    if (st != LA_OK) fail_msg("%s T=%d S=%d: forward %s: %s", c->spec_text, T, S, la_status_name(st), la_errmsg());
    o.row_entropy = o.key_mass = NULL;
    o.dlogn_s = sp.xform == LA_XF_LOGN ? dls : NULL;
    st = la_attn_backward(&sp, sh, q, k, v, out, lse, g, dq, dk, dv, &o);
    if (st != LA_OK) fail_msg("%s T=%d S=%d: backward %s: %s", c->spec_text, T, S, la_status_name(st), la_errmsg());

    /* reference */
    double *rout = malloc(8 * nq), *rlse = malloc(8 * nr), *rent = malloc(8 * nr), *rmass = malloc(8 * nm);
    double *rdq = malloc(8 * nq), *rdk = malloc(8 * nk), *rdv = malloc(8 * nk), rdls[8];
    ref_attn_opts ro = {.doc_ids = docs, .logn_s = c->head_s ? s_hd : NULL, .ctx_len = 0};
    if (ref_attn_forward(&sp, sh, qd, kd, vd, &ro, rout, rlse, rent, rmass))
        fail_msg("reference: %s", ref_attn_error());
    if (ref_attn_backward(&sp, sh, qd, kd, vd, &ro, gd, rdq, rdk, rdv, rdls))
        fail_msg("reference: %s", ref_attn_error());

    compare(c, "out", out, rout, nq, TOL_OUT, 0);
    compare(c, "lse", lse, rlse, nr, TOL_OUT, 0);
    compare(c, "entropy", ent, rent, nr, TOL_OUT, 0);
    compare(c, "key_mass", mass, rmass, nm, TOL_OUT, 0);
    compare(c, "dq", dq, rdq, nq, TOL_GRAD, 1);
    compare(c, "dk", dk, rdk, nk, TOL_GRAD, 1);
    compare(c, "dv", dv, rdv, nk, TOL_GRAD, 1);
    if (sp.xform == LA_XF_LOGN) compare(c, "dlogn_s", dls, rdls, (size_t)H, TOL_GRAD, 1);
    /* rows with no visible key: exactly zero output and query gradient */
    for (size_t i = 0; i < nr; i++)
        if (isinf(rlse[i]))
            for (int d = 0; d < D; d++)
                if (out[i * D + d] != 0.0f || dq[i * D + d] != 0.0f)
                    fail_msg("%s T=%d S=%d: empty row %zu has out %g dq %g (must be exactly 0)", c->spec_text, T, S,
                             i, (double)out[i * D + d], (double)dq[i * D + d]);
    n_checked++;

    free(q), free(k), free(v), free(g), free(qd), free(kd), free(vd), free(gd), free(docs);
    free(out), free(lse), free(ent), free(mass), free(dq), free(dk), free(dv);
    free(rout), free(rlse), free(rent), free(rmass), free(rdq), free(rdk), free(rdv);
}

static void spec_text(char *buf, size_t n, int pi, int xi, int ti) {
    snprintf(buf, n, "softmax+%s+%s+%s", transforms[xi], positions[pi], patterns[ti]);
}

/* One test per position so a failure names its position and the runner shows progress. */
static void sweep_position(int pi) {
    char text[256];
    n_checked = 0;
    for (int xi = 0; xi < 6; xi++)
        for (int ti = 0; ti < 5; ti++) {
            int combo = (pi * 6 + xi) * 5 + ti;
            spec_text(text, sizeof text, pi, xi, ti);
            for (int rep = 0; rep < 3; rep++) {
                int pair = (combo + 12 * rep) % 36;
                sweep_case c = {text, {1, 4, 2, sizes[pair / 6], sizes[pair % 6], 16, LA_POS0_AUTO}, 0, 0, 1,
                                (uint64_t)(combo * 3 + rep + 1)};
                switch ((combo + rep) % 4) {
                case 0: break;                                   /* bottom-right aligned */
                case 1: c.sh.pos0 = c.sh.S / 2 - c.sh.T / 3; break; /* explicit, maybe negative */
                case 2:                                          /* packed documents, B = 2 */
                    c.docs = 1;
                    c.sh.B = 2;
                    if (c.sh.T > c.sh.S) c.sh.T = c.sh.S; /* queries must sit inside the keys */
                    break;
                default: /* per-head s_h, two threads */
                    c.head_s = 1;
                    c.threads = 2;
                    break;
                }
                run_case(&c);
            }
        }
    assert_int_equal(n_checked, 90);
}

static void test_sweep_nope(void **s) { (void)s; sweep_position(0); }
static void test_sweep_rope(void **s) { (void)s; sweep_position(1); }
static void test_sweep_prope(void **s) { (void)s; sweep_position(2); }
static void test_sweep_ntk(void **s) { (void)s; sweep_position(3); }
static void test_sweep_dynamic_ntk(void **s) { (void)s; sweep_position(4); }
static void test_sweep_yarn(void **s) { (void)s; sweep_position(5); }
static void test_sweep_alibi(void **s) { (void)s; sweep_position(6); }
static void test_sweep_nape(void **s) { (void)s; sweep_position(7); }
static void test_sweep_pi(void **s) { (void)s; sweep_position(8); }

/* Every (T, S) pair of the size list at least once, on a spec that uses every mechanism. */
static void test_sweep_all_size_pairs(void **s) {
    (void)s;
    for (int pair = 0; pair < 36; pair++) {
        sweep_case c = {"softmax+sinv(tau=10)+prope(p=0.5,theta=10000)+sinks(2,8)",
                        {1, 4, 2, sizes[pair / 6], sizes[pair % 6], 16, LA_POS0_AUTO}, 0, 0, 2, (uint64_t)(500 + pair)};
        run_case(&c);
    }
}

/* T = S = 1025 (more than 16 key tiles): each position, transform and pattern once.
 * Under the sanitizers (LA_SANITIZED, set by `make test-san`) the eight option cases run at
 * T = S = 300 (5 key tiles, still every multi-tile path): at 1025 they took 21 s of the
 * sweep's 44 s CPU there, and the normal build already checks the numbers at 1025. */
static void test_sweep_1025(void **s) {
    (void)s;
    char text[256];
    const int big = getenv("LA_SANITIZED") ? 300 : 1025;
    for (int i = 0; i < 8; i++) {
        spec_text(text, sizeof text, i, i % 6, i % 5);
        sweep_case c = {text, {1, 4, 2, big, big, 16, LA_POS0_AUTO}, i == 3, i == 1, 2, (uint64_t)(900 + i)};
        if (c.docs) c.sh.B = 2;
        run_case(&c);
    }
    /* T != S at long context: decoding-style block of queries at the end, wider D */
    sweep_case c = {"softmax+logn(s=0,train=32)+yarn(s=4,train=32)+window(100)", {1, 4, 2, 65, 1025, 64, LA_POS0_AUTO},
                    0, 0, 2, 999};
    run_case(&c);
}

/* ---- kernel backward by finite differences in float32 ----
 * loss = sum(W * out) accumulated in double from the kernel's float output. Central
 * differences with h = 1e-2: truncation h^2/6 |f'''| ~ 2e-5 * |f'''| (f''' = O(1..10) for
 * logits of size O(few)); rounding: each out entry carries ~6e-8 relative error, summed
 * with random W over N <= 2000 entries ~ 3e-6, divided by 2h -> 1.5e-4. Tolerance
 * 1e-3 + 2e-2 |g| covers both with margin and still catches a missing factor or term
 * (those change gradients by > 10%). Checked on a sample of entries of every tensor. */
static double kernel_loss(const la_spec *sp, const la_shape *sh, const float *q, const float *k, const float *v,
                          const la_attn_opts *o, const float *W, float *out, float *lse) {
    assert_int_equal(la_attn_forward(sp, sh, q, k, v, out, lse, o), LA_OK);
    double l = 0;
    size_t n = (size_t)sh->B * sh->H * sh->T * sh->D;
    for (size_t i = 0; i < n; i++) l += (double)W[i] * out[i];
    return l;
}

static void kernel_fd(const char *text, la_shape sh, int use_docs) {
    la_spec sp;
    assert_int_equal(la_spec_parse(text, &sp), LA_OK);
    la_rng r;
    la_rng_seed(&r, 77);
    size_t nq = (size_t)sh.B * sh.H * sh.T * sh.D, nk = (size_t)sh.B * sh.Hkv * sh.S * sh.D;
    float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk), *W = malloc(4 * nq);
    double *tmp = malloc(8 * (nq > nk ? nq : nk));
    fill(&r, q, tmp, nq, 1.0);
    fill(&r, k, tmp, nk, 1.0);
    fill(&r, v, tmp, nk, 1.0);
    fill(&r, W, tmp, nq, 1.0);
    float s_h[8] = {0.3f, 0.45f, 0.6f, 0.75f, 0.3f, 0.3f, 0.3f, 0.3f};
    int32_t docs[64];
    for (int b = 0; b < sh.B; b++)
        for (int j = 0; j < sh.S; j++) docs[b * sh.S + j] = j < 5 + b ? 3 : 4;
    la_attn_opts o = la_attn_opts_default();
    o.logn_s = s_h;
    o.doc_ids = use_docs ? docs : NULL;
    o.n_threads = 1;
    float *out = malloc(4 * nq), *lse = malloc(4 * (size_t)sh.B * sh.H * sh.T);
    float *dq = malloc(4 * nq), *dk = malloc(4 * nk), *dv = malloc(4 * nk), dls[8];
    kernel_loss(&sp, &sh, q, k, v, &o, W, out, lse);
    la_attn_opts ob = o;
    ob.dlogn_s = sp.xform == LA_XF_LOGN ? dls : NULL;
    assert_int_equal(la_attn_backward(&sp, &sh, q, k, v, out, lse, W, dq, dk, dv, &ob), LA_OK);
    struct {
        float *x, *g;
        size_t n;
        const char *name;
    } ps[4] = {{q, dq, nq, "dq"}, {k, dk, nk, "dk"}, {v, dv, nk, "dv"}, {s_h, dls, (size_t)sh.H, "dlogn_s"}};
    int nps = sp.xform == LA_XF_LOGN ? 4 : 3;
    const float h = 1e-2f;
    for (int a = 0; a < nps; a++)
        for (size_t i = 0; i < ps[a].n; i += (ps[a].n > 40 ? 7 : 1)) {
            float x0 = ps[a].x[i];
            ps[a].x[i] = x0 + h;
            double lp = kernel_loss(&sp, &sh, q, k, v, &o, W, out, lse);
            ps[a].x[i] = x0 - h;
            double lm = kernel_loss(&sp, &sh, q, k, v, &o, W, out, lse);
            ps[a].x[i] = x0;
            double fd = (lp - lm) / (2.0 * ((double)(x0 + h) - (double)x0));
            double an = ps[a].g[i];
            if (!(fabs(fd - an) <= 1e-3 + 2e-2 * fabs(an)))
                fail_msg("%s: kernel %s[%zu] = %.6g, finite difference %.6g", text, ps[a].name, i, an, fd);
        }
    free(q), free(k), free(v), free(W), free(tmp), free(out), free(lse), free(dq), free(dk), free(dv);
}

static void test_kernel_backward_finite_differences(void **s) {
    (void)s;
    la_shape sh = {1, 4, 2, 6, 9, 8, LA_POS0_AUTO};
    kernel_fd("softmax+rope(theta=100)+causal", sh, 0);
    kernel_fd("softmax+sinv(tau=3)+prope(p=0.5,theta=100)+window(4)", sh, 0);
    kernel_fd("softmax+logn(s=0.5)+alibi+full", sh, 0);
    kernel_fd("softmax+qwen-logn(train=4)+yarn(s=4,train=4,theta=100)+sinks(2,3)", sh, 0);
    la_shape sh2 = {2, 4, 2, 5, 9, 8, 3};
    kernel_fd("softmax+logn(s=0.5)+nape+global(2)+window(3)", sh2, 1);
}

static void test_report_margins(void **s) {
    (void)s;
    for (int qn = 0; qn < 8; qn++) print_message("worst error / tolerance for %-8s: %.3f\n", qnames[qn], worst[qn]);
}

/* CPU seconds per test, printed so the suite's budget can be checked */
static clock_t t_start;
static int tic(void **s) {
    (void)s;
    t_start = clock();
    return 0;
}
static int toc(void **s) {
    (void)s;
    print_message("  (%.1f s CPU)\n", (double)(clock() - t_start) / CLOCKS_PER_SEC);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sweep_nope, tic, toc),
        cmocka_unit_test_setup_teardown(test_sweep_rope, tic, toc),
        cmocka_unit_test_setup_teardown(test_sweep_prope, tic, toc),
        cmocka_unit_test_setup_teardown(test_sweep_ntk, tic, toc),
        cmocka_unit_test_setup_teardown(test_sweep_dynamic_ntk, tic, toc),
        cmocka_unit_test_setup_teardown(test_sweep_yarn, tic, toc),
        cmocka_unit_test_setup_teardown(test_sweep_pi, tic, toc),
        cmocka_unit_test_setup_teardown(test_sweep_alibi, tic, toc),
        cmocka_unit_test_setup_teardown(test_sweep_nape, tic, toc),
        cmocka_unit_test_setup_teardown(test_sweep_all_size_pairs, tic, toc),
        cmocka_unit_test_setup_teardown(test_sweep_1025, tic, toc),
        cmocka_unit_test_setup_teardown(test_kernel_backward_finite_differences, tic, toc),
        cmocka_unit_test_setup_teardown(test_report_margins, tic, toc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
