/* test_entmax.c -- row normalisers sparsemax / 1.5-entmax / alpha-entmax (src/attn/entmax.c):
 * every case of shared/fixtures/entmax_golden.json (forward, input gradient, alpha gradient,
 * float64 and float32 paths), the fixture's failure and alpha -> 1 records, hand cases with
 * exact answers, ties, on-threshold entries, padding invariance, finite differences, and
 * bad arguments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include <cjson/cJSON.h>

#include "core/internal.h"
#include "longattn.h"

/* ---- fixture loading ---------------------------------------------------------------- */

static cJSON *g_fix;

static int load_fixture(void **state) {
    (void)state;
    const char *dir = getenv("LA_FIXTURES");
    char path[1024];
    snprintf(path, sizeof path, "%s/entmax_golden.json", dir ? dir : "../shared/fixtures");
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (set LA_FIXTURES)\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    size_t got = fread(buf, 1, (size_t)len, f);
    fclose(f);
    buf[got] = 0;
    g_fix = cJSON_Parse(buf);
    free(buf);
    return g_fix ? 0 : -1;
}

static int free_fixture(void **state) {
    (void)state;
    cJSON_Delete(g_fix);
    return 0;
}

/* A JSON number or one of the strings "inf", "-inf", "nan". */
static double jnum(const cJSON *v) {
    if (cJSON_IsNumber(v)) return v->valuedouble;
    if (cJSON_IsString(v)) {
        if (!strcmp(v->valuestring, "inf")) return INFINITY;
        if (!strcmp(v->valuestring, "-inf")) return -INFINITY;
        if (!strcmp(v->valuestring, "nan")) return NAN;
    }
    fail_msg("fixture value is neither a number nor inf/-inf/nan");
    return NAN;
}

/* Copy a JSON array into a fresh malloc'ed double array; *n gets its length. */
static double *jarr(const cJSON *a, int *n) {
    assert_true(cJSON_IsArray(a));
    int m = cJSON_GetArraySize(a);
    double *x = malloc(sizeof(double) * (size_t)(m > 0 ? m : 1));
    for (int i = 0; i < m; i++) x[i] = jnum(cJSON_GetArrayItem(a, i));
    *n = m;
    return x;
}

static const cJSON *find_input(const char *id) {
    const cJSON *in;
    cJSON_ArrayForEach(in, cJSON_GetObjectItem(g_fix, "inputs")) {
        if (!strcmp(cJSON_GetObjectItem(in, "id")->valuestring, id)) return in;
    }
    fail_msg("fixture input %s not found", id);
    return NULL;
}

/* ---- running one family ------------------------------------------------------------- */

enum { FAM_BISECT, FAM_SPARSEMAX, FAM_ENTMAX15 };

static int family_of(const char *s) {
    if (!strcmp(s, "entmax_bisect")) return FAM_BISECT;
    if (!strcmp(s, "sparsemax")) return FAM_SPARSEMAX;
    if (!strcmp(s, "entmax15")) return FAM_ENTMAX15;
    fail_msg("unknown family %s", s);
    return -1;
}

static la_status fwd64(int fam, double alpha, const double *z, int n, double *p, double *tau) {
    switch (fam) {
    case FAM_SPARSEMAX: return la_sparsemax_forward_f64(z, 1, n, p, tau);
    case FAM_ENTMAX15: return la_entmax15_forward_f64(z, 1, n, p, tau);
    default: return la_entmax_bisect_forward_f64(z, 1, n, alpha, p, tau);
    }
}

static la_status bwd64(int fam, double alpha, const double *p, const double *g, int n,
                       double *dz, double *dalpha) {
    switch (fam) {
    case FAM_SPARSEMAX: return la_sparsemax_backward_f64(p, g, 1, n, dz);
    case FAM_ENTMAX15: return la_entmax15_backward_f64(p, g, 1, n, dz);
    default: return la_entmax_bisect_backward_f64(p, g, 1, n, alpha, dz, dalpha);
    }
}

static la_status fwd32(int fam, double alpha, const float *z, int n, float *p, double *tau) {
    switch (fam) {
    case FAM_SPARSEMAX: return la_sparsemax_forward_f32(z, 1, n, p, tau);
    case FAM_ENTMAX15: return la_entmax15_forward_f32(z, 1, n, p, tau);
    default: return la_entmax_bisect_forward_f32(z, 1, n, alpha, p, tau);
    }
}

static la_status bwd32(int fam, double alpha, const float *p, const float *g, int n, float *dz,
                       double *dalpha) {
    switch (fam) {
    case FAM_SPARSEMAX: return la_sparsemax_backward_f32(p, g, 1, n, dz);
    case FAM_ENTMAX15: return la_entmax15_backward_f32(p, g, 1, n, dz);
    default: return la_entmax_bisect_backward_f32(p, g, 1, n, alpha, dz, dalpha);
    }
}

static double maxabs_diff(const double *a, const double *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as a failure */
    }
    return m;
}

static double maxabs(const double *a, int n) {
    double m = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(a[i]) && fabs(a[i]) > m) m = fabs(a[i]);
    return m;
}

/* ---- fixture: float64 path ---------------------------------------------------------- */

/* Tolerances of the float64 path against the 50-digit reference. The inputs are shifted by
 * their maximum, which is exact (Sterbenz) for the offset cases, so the only error is the
 * rounding of O(n) sums and of the final power. Measured worst cases: outputs 3e-16, input
 * gradients 1.8e-15 (alpha = 3, n = 1000), tau 1.1e-16 relative. We allow 1e-14 on outputs
 * (~45 ulp of 1), 1e-13 * max(1, |grad|) on input gradients (u = 1/p at alpha = 3 amplifies
 * the relative error of small p), 1e-14 * (1 + |tau|) on tau (it carries the unshifted offset,
 * up to 1e6), and 1e-12 * max(1, |dalpha|) on the alpha gradient (it divides by
 * (alpha-1)^2 = 1/16 at alpha = 1.25, multiplying sum errors by 16). */
static void check_case64(const cJSON *c, int *checked) {
    const char *iid = cJSON_GetObjectItem(c, "input_id")->valuestring;
    int fam = family_of(cJSON_GetObjectItem(c, "family")->valuestring);
    double alpha = cJSON_GetObjectItem(c, "alpha")->valuedouble;
    const cJSON *ref = cJSON_GetObjectItem(c, "ref");
    const cJSON *in = find_input(iid);
    int n, nr, ng;
    double *z = jarr(cJSON_GetObjectItem(in, "values"), &n);
    double *g = jarr(cJSON_GetObjectItem(in, "upstream_grad"), &ng);
    double *pref = jarr(cJSON_GetObjectItem(ref, "output"), &nr);
    double *dref = jarr(cJSON_GetObjectItem(ref, "grad_input"), &nr);
    assert_int_equal(nr, n);
    assert_int_equal(ng, n);
    double *p = malloc(sizeof(double) * n), *dz = malloc(sizeof(double) * n);
    double tau = 0, dalpha = 0;
    assert_int_equal(fwd64(fam, alpha, z, n, p, &tau), LA_OK);
    assert_int_equal(bwd64(fam, alpha, p, g, n, dz, &dalpha), LA_OK);

    double e_out = maxabs_diff(p, pref, n);
    double e_grad = maxabs_diff(dz, dref, n);
    double tref = jnum(cJSON_GetObjectItem(ref, "tau"));
    double e_tau = fabs(tau - tref);
    int supp = 0;
    for (int i = 0; i < n; i++) supp += p[i] > 0;
    int supp_ref = cJSON_GetObjectItem(ref, "support_size")->valueint;
    double tol_out = 1e-14;
    double tol_grad = 1e-13 * fmax(1.0, maxabs(dref, n));
    double tol_tau = 1e-14 * (1.0 + fabs(tref));
    if (!(e_out <= tol_out && e_grad <= tol_grad && e_tau <= tol_tau && supp == supp_ref))
        fail_msg("f64 %s %s alpha=%g: |dp|=%.3g |dz|=%.3g |dtau|=%.3g support %d vs %d", iid,
                 cJSON_GetObjectItem(c, "family")->valuestring, alpha, e_out, e_grad, e_tau, supp,
                 supp_ref);
    const cJSON *ga = cJSON_GetObjectItem(ref, "grad_alpha");
    if (fam == FAM_BISECT) {
        assert_non_null(ga);
        double gref = jnum(ga);
        double tol_a = 1e-12 * fmax(1.0, fabs(gref));
        if (getenv("LA_ENTMAX_VERBOSE")) printf("dalpha err %.2e\n", fabs(dalpha - gref));
        if (!(fabs(dalpha - gref) <= tol_a))
            fail_msg("f64 %s alpha=%g: dalpha %.17g vs ref %.17g", iid, alpha, dalpha, gref);
    }
    if (getenv("LA_ENTMAX_VERBOSE"))
        printf("%-22s %-13s a=%-4g out %.2e grad %.2e tau %.2e\n", iid,
               cJSON_GetObjectItem(c, "family")->valuestring, alpha, e_out, e_grad, e_tau);
    free(z), free(g), free(pref), free(dref), free(p), free(dz);
    (*checked)++;
}

static int n_ref_cases(void) {
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g_fix, "cases")) {
        if (cJSON_IsObject(cJSON_GetObjectItem(c, "ref"))) k++;
    }
    return k;
}

static void test_fixture_f64(void **state) {
    (void)state;
    int checked = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g_fix, "cases")) {
        if (!cJSON_IsObject(cJSON_GetObjectItem(c, "ref"))) continue; /* mask_all: see below */
        check_case64(c, &checked);
    }
    /* 126 cases, 6 of them (mask_all) without a reference value */
    assert_int_equal(checked, n_ref_cases());
    assert_true(checked >= 120);
    printf("fixture float64: %d/%d cases with a reference pass\n", checked, n_ref_cases());
}

/* ---- fixture: float32 path ---------------------------------------------------------- */

/* The float32 path rounds z and the upstream gradient to float, computes in double and
 * rounds the result. Two checks per case:
 *  (a) against the exact solution of the rounded problem (our float64 path on the rounded
 *      inputs, itself checked against the 50-digit reference above): only the final
 *      rounding to float remains, so 2 float ulp of the largest value (2.4e-7 * max);
 *  (b) against the fixture reference, for inputs whose float rounding is small (max|z| <= 10,
 *      rounding error <= 10 * 2^-24 = 6e-7 per entry): the entmax Jacobian has norm at most
 *      max u / (alpha-1) <= 1/(alpha-1) <= 4, so outputs within 4e-6 and gradients within
 *      1e-5 (alpha = 3 excluded: its Jacobian u = 1/p is unbounded near the threshold). */
static void check_case32(const cJSON *c, int *checked, int *checked_ref) {
    const char *iid = cJSON_GetObjectItem(c, "input_id")->valuestring;
    int fam = family_of(cJSON_GetObjectItem(c, "family")->valuestring);
    double alpha = cJSON_GetObjectItem(c, "alpha")->valuedouble;
    const cJSON *ref = cJSON_GetObjectItem(c, "ref");
    const cJSON *in = find_input(iid);
    int n, nr;
    double *z = jarr(cJSON_GetObjectItem(in, "values"), &n);
    double *g = jarr(cJSON_GetObjectItem(in, "upstream_grad"), &nr);
    double *pref = jarr(cJSON_GetObjectItem(ref, "output"), &nr);
    double *dref = jarr(cJSON_GetObjectItem(ref, "grad_input"), &nr);
    float *zf = malloc(sizeof(float) * n), *gf = malloc(sizeof(float) * n);
    float *pf = malloc(sizeof(float) * n), *dzf = malloc(sizeof(float) * n);
    double *zr = malloc(sizeof(double) * n), *gr = malloc(sizeof(double) * n);
    double *pr = malloc(sizeof(double) * n), *dzr = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        zf[i] = (float)z[i], gf[i] = (float)g[i];
        zr[i] = zf[i], gr[i] = gf[i];
    }
    double tau32, taur, da32 = 0, dar = 0;
    assert_int_equal(fwd32(fam, alpha, zf, n, pf, &tau32), LA_OK);
    assert_int_equal(bwd32(fam, alpha, pf, gf, n, dzf, &da32), LA_OK);
    assert_int_equal(fwd64(fam, alpha, zr, n, pr, &taur), LA_OK);
    assert_int_equal(bwd64(fam, alpha, pr, gr, n, dzr, &dar), LA_OK);
    double mp = 0, mg = 0, ep = 0, eg = 0;
    for (int i = 0; i < n; i++) {
        mp = fmax(mp, fabs(pr[i]));
        mg = fmax(mg, fabs(dzr[i]));
        ep = fmax(ep, fabs(pf[i] - pr[i]));
        eg = fmax(eg, fabs(dzf[i] - dzr[i]));
    }
    /* backward from float p: u = p^(2-alpha) sees p's rounding (relative 6e-8, amplified by
     * |2-alpha| <= 1 and by 1/p near the threshold for alpha = 3) */
    double tol_g = (alpha == 3.0 ? 1e-4 : 2e-6) * fmax(1.0, mg);
    if (!(ep <= 2.4e-7 * mp && eg <= tol_g))
        fail_msg("f32 %s alpha=%g vs exact on rounded input: |dp|=%.3g |dz|=%.3g", iid, alpha, ep,
                 eg);
    if (fam == FAM_BISECT && !(fabs(da32 - dar) <= 1e-4 * fmax(1.0, fabs(dar))))
        fail_msg("f32 %s alpha=%g dalpha %.9g vs %.9g", iid, alpha, da32, dar);
    (*checked)++;
    if (maxabs(z, n) <= 10.0 && alpha != 3.0) {
        double e1 = 0, e2 = 0;
        for (int i = 0; i < n; i++) {
            e1 = fmax(e1, fabs(pf[i] - pref[i]));
            e2 = fmax(e2, fabs(dzf[i] - dref[i]));
        }
        if (!(e1 <= 4e-6 && e2 <= 1e-5 * fmax(1.0, maxabs(dref, n))))
            fail_msg("f32 %s alpha=%g vs reference: |dp|=%.3g |dz|=%.3g", iid, alpha, e1, e2);
        (*checked_ref)++;
    }
    free(z), free(g), free(pref), free(dref), free(zf), free(gf), free(pf), free(dzf);
    free(zr), free(gr), free(pr), free(dzr);
}

static void test_fixture_f32(void **state) {
    (void)state;
    int checked = 0, checked_ref = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g_fix, "cases")) {
        if (!cJSON_IsObject(cJSON_GetObjectItem(c, "ref"))) continue;
        check_case32(c, &checked, &checked_ref);
    }
    assert_int_equal(checked, n_ref_cases());
    printf("fixture float32: %d/%d cases pass (%d also against the 50-digit reference)\n",
           checked, n_ref_cases(), checked_ref);
}

/* float32_behaviour[]: the package's float32 errors against the exact solution of the rounded
 * input. Our float32 path must do at least as well (it computes in double), and in any case
 * within 2.4e-7 of the largest output (final rounding) and 1e-4 on gradients. */
static void test_fixture_f32_not_worse_than_package(void **state) {
    (void)state;
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g_fix, "float32_behaviour")) {
        const char *iid = cJSON_GetObjectItem(c, "input_id")->valuestring;
        int fam = family_of(cJSON_GetObjectItem(c, "family")->valuestring);
        double alpha = cJSON_GetObjectItem(c, "alpha")->valuedouble;
        double pkg_out = jnum(cJSON_GetObjectItem(c, "max_abs_err_output_vs_ref"));
        const cJSON *in = find_input(iid);
        int n;
        double *z = jarr(cJSON_GetObjectItem(in, "values"), &n);
        float *zf = malloc(sizeof(float) * n), *pf = malloc(sizeof(float) * n);
        double *zr = malloc(sizeof(double) * n), *pr = malloc(sizeof(double) * n);
        for (int i = 0; i < n; i++) zf[i] = (float)z[i], zr[i] = zf[i];
        assert_int_equal(fwd32(fam, alpha, zf, n, pf, NULL), LA_OK);
        assert_int_equal(fwd64(fam, alpha, zr, n, pr, NULL), LA_OK);
        double e = 0, sum = 0;
        for (int i = 0; i < n; i++) e = fmax(e, fabs(pf[i] - pr[i])), sum += pf[i];
        if (!(e <= fmax(pkg_out, 1.2e-7)))
            fail_msg("f32 %s %g: our error %.3g, package %.3g", iid, alpha, e, pkg_out);
        assert_true(fabs(sum - 1.0) <= 1e-6);
        free(z), free(zf), free(pf), free(zr), free(pr);
        k++;
    }
    assert_int_equal(k, 20);
}

/* ---- fixture: failures and alpha -> 1 ---------------------------------------------- */

/* failures[]: mask_all (package returns NaN or raises) gets our documented empty-row result:
 * p = 0, tau = LA_ROW_EMPTY, dz = 0, dalpha = 0; randn_n7 at alpha = 1 is LA_EINVAL. */
static void test_fixture_failures(void **state) {
    (void)state;
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g_fix, "failures")) {
        const char *iid = cJSON_GetObjectItem(c, "input_id")->valuestring;
        int fam = family_of(cJSON_GetObjectItem(c, "family")->valuestring);
        double alpha = cJSON_GetObjectItem(c, "alpha")->valuedouble;
        int n;
        double *z = jarr(cJSON_GetObjectItem(find_input(iid), "values"), &n);
        double p[64], dz[64], g[64], tau = 0, da = 1;
        float zf[64], pf[64], gf[64], dzf[64];
        assert_true(n <= 64);
        for (int i = 0; i < n; i++) g[i] = NAN, gf[i] = NAN, zf[i] = (float)z[i]; /* must not leak */
        if (alpha <= 1.0) {
            assert_int_equal(fwd64(fam, alpha, z, n, p, &tau), LA_EINVAL);
            assert_non_null(strstr(la_errmsg(), "softmax"));
            assert_int_equal(fwd32(fam, alpha, zf, n, pf, &tau), LA_EINVAL);
            assert_int_equal(la_entmax_bisect_backward_f64(p, g, 1, n, alpha, dz, &da), LA_EINVAL);
        } else {
            assert_int_equal(fwd64(fam, alpha, z, n, p, &tau), LA_OK);
            assert_true(tau == LA_ROW_EMPTY);
            assert_int_equal(bwd64(fam, alpha, p, g, n, dz, &da), LA_OK);
            assert_int_equal(fwd32(fam, alpha, zf, n, pf, &tau), LA_OK);
            assert_int_equal(bwd32(fam, alpha, pf, gf, n, dzf, &da), LA_OK);
            for (int i = 0; i < n; i++) {
                assert_true(p[i] == 0.0 && dz[i] == 0.0 && pf[i] == 0.0f && dzf[i] == 0.0f);
            }
            if (fam == FAM_BISECT) assert_true(da == 0.0);
        }
        free(z);
        k++;
    }
    assert_int_equal(k, 7);
}

/* edge_alpha_to_1[]: alpha = 1 is an error (softmax); for alpha = 1.0001, 1.01, 1.1 our
 * output matches the package's (which converges to ~1e-15 there; we allow 1e-9 since
 * p = s^(1/(alpha-1)) amplifies a relative error in s by 1/(alpha-1) = 1e4), and approaches
 * softmax: |p - softmax| <= 2 (alpha - 1) (the package's own distances are ~0.4 (alpha-1)). */
static void test_fixture_alpha_to_1(void **state) {
    (void)state;
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g_fix, "edge_alpha_to_1")) {
        double alpha = cJSON_GetObjectItem(c, "alpha")->valuedouble;
        int n, m;
        double *z = jarr(cJSON_GetObjectItem(find_input("randn_n7"), "values"), &n);
        double *sm = jarr(cJSON_GetObjectItem(c, "softmax_ref"), &m);
        double p[16], tau;
        if (alpha <= 1.0) {
            assert_int_equal(la_entmax_bisect_forward_f64(z, 1, n, alpha, p, &tau), LA_EINVAL);
            assert_non_null(strstr(la_errmsg(), "softmax"));
        } else {
            const cJSON *pkg = cJSON_GetObjectItem(c, "pkg");
            double *ppkg = jarr(cJSON_GetObjectItem(pkg, "output"), &m);
            assert_int_equal(la_entmax_bisect_forward_f64(z, 1, n, alpha, p, &tau), LA_OK);
            double e = maxabs_diff(p, ppkg, n), es = maxabs_diff(p, sm, n);
            if (!(e <= 1e-9 && es <= 2 * (alpha - 1)))
                fail_msg("alpha=%g: |p-pkg|=%.3g |p-softmax|=%.3g", alpha, e, es);
            free(ppkg);
        }
        free(z), free(sm);
        k++;
    }
    assert_int_equal(k, 4);
}

/* ---- hand cases --------------------------------------------------------------------- */

static void check_vec(const double *a, const double *b, int n, double tol) {
    for (int i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= tol)) fail_msg("entry %d: %.17g vs %.17g", i, a[i], b[i]);
}

/* Closed forms worked by hand:
 *  sparsemax([0.175, 0, -2]): top-2 support, tau = (0.175 - 1)/2 = -0.4125,
 *      p = (0.5875, 0.4125, 0).
 *  sparsemax([0.5, 0.25, -1]) = (0.625, 0.375, 0), tau = -0.125 (all dyadic: exact).
 *  entmax15([0, -0.4]): c = z/2 = (0, -0.2), tau = -0.1 - sqrt((1 - 0.02)/2) = -0.8,
 *      p = (0.8^2, 0.6^2) = (0.64, 0.36).
 *  entmax(alpha=3)([0.1, 0]): c = 2z, sqrt(0.2 - t) + sqrt(-t) = 1 -> -t = 0.36,
 *      p = (0.6, 0.4), tau = 0.2 - 0.36 = -0.16.
 *  [2, 0, -1] at alpha = 1.5: the second entry is exactly on the threshold -> (1, 0, 0). */
static void test_hand_cases_exact(void **state) {
    (void)state;
    double p[3], tau;
    double z1[3] = {0.175, 0, -2}, e1[3] = {0.5875, 0.4125, 0};
    assert_int_equal(la_sparsemax_forward_f64(z1, 1, 3, p, &tau), LA_OK);
    check_vec(p, e1, 3, 1e-16);
    assert_true(fabs(tau + 0.4125) <= 1e-16);
    assert_int_equal(la_entmax_bisect_forward_f64(z1, 1, 3, 2.0, p, &tau), LA_OK);
    check_vec(p, e1, 3, 1e-16);
    assert_true(p[2] == 0.0);

    double z2[3] = {0.5, 0.25, -1}, e2[3] = {0.625, 0.375, 0};
    assert_int_equal(la_sparsemax_forward_f64(z2, 1, 3, p, &tau), LA_OK);
    check_vec(p, e2, 3, 0.0);
    assert_true(tau == -0.125);
    assert_int_equal(la_entmax_bisect_forward_f64(z2, 1, 3, 2.0, p, &tau), LA_OK);
    check_vec(p, e2, 3, 0.0);
    assert_true(tau == -0.125);

    double z3[2] = {0, -0.4}, e3[2] = {0.64, 0.36};
    assert_int_equal(la_entmax15_forward_f64(z3, 1, 2, p, &tau), LA_OK);
    check_vec(p, e3, 2, 2e-16);
    assert_true(fabs(tau + 0.8) <= 2e-16);
    assert_int_equal(la_entmax_bisect_forward_f64(z3, 1, 2, 1.5, p, &tau), LA_OK);
    check_vec(p, e3, 2, 2e-16);

    double z4[2] = {0.1, 0}, e4[2] = {0.6, 0.4};
    assert_int_equal(la_entmax_bisect_forward_f64(z4, 1, 2, 3.0, p, &tau), LA_OK);
    check_vec(p, e4, 2, 1e-15);
    assert_true(fabs(tau + 0.16) <= 1e-15);

    float zf[3] = {0.5f, 0.25f, -1.0f}, pf[3];
    assert_int_equal(la_sparsemax_forward_f32(zf, 1, 3, pf, &tau), LA_OK);
    assert_true(pf[0] == 0.625f && pf[1] == 0.375f && pf[2] == 0.0f);
}

/* Ties: equal maxima share the mass equally for every alpha; [1, 1, 1] is uniform. */
static void test_ties(void **state) {
    (void)state;
    double z[4] = {1, 1, 0.2, -0.5}, u[3] = {3, 3, 3}, p[4];
    double alphas[] = {1.25, 1.5, 2.0, 3.0};
    for (int a = 0; a < 4; a++) {
        assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 4, alphas[a], p, NULL), LA_OK);
        assert_true(p[0] == p[1]);
        assert_true(fabs(p[0] + p[1] + p[2] + p[3] - 1.0) <= 1e-15);
        assert_int_equal(la_entmax_bisect_forward_f64(u, 1, 3, alphas[a], p, NULL), LA_OK);
        check_vec(p, (double[]){1. / 3, 1. / 3, 1. / 3}, 3, 1e-16);
    }
    assert_int_equal(la_sparsemax_forward_f64(z, 1, 4, p, NULL), LA_OK);
    check_vec(p, (double[]){0.5, 0.5, 0, 0}, 4, 0);
    assert_int_equal(la_entmax15_forward_f64(u, 1, 3, p, NULL), LA_OK);
    check_vec(p, (double[]){1. / 3, 1. / 3, 1. / 3}, 3, 1e-16);
}

/* On-threshold entries are outside the support: sparsemax([0.5, 0.5, 0]) has tau = 0 so the
 * third entry sits exactly on it; p3 = 0 and its gradient is 0 (with the entry inside, u
 * would be (1,1,1) and dz3 = 3 - 2 = 1). With g = (1, 2, 3): u = (1, 1, 0), mean u.g = 1.5,
 * dz = (-0.5, 0.5, 0). Same through the bisection path at alpha = 2. */
static void test_on_threshold(void **state) {
    (void)state;
    double z[3] = {0.5, 0.5, 0}, g[3] = {1, 2, 3}, p[3], dz[3], tau, da;
    assert_int_equal(la_sparsemax_forward_f64(z, 1, 3, p, &tau), LA_OK);
    check_vec(p, (double[]){0.5, 0.5, 0}, 3, 0);
    assert_true(tau == 0.0);
    assert_int_equal(la_sparsemax_backward_f64(p, g, 1, 3, dz), LA_OK);
    check_vec(dz, (double[]){-0.5, 0.5, 0}, 3, 0);
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, 2.0, p, &tau), LA_OK);
    check_vec(p, (double[]){0.5, 0.5, 0}, 3, 0);
    assert_int_equal(la_entmax_bisect_backward_f64(p, g, 1, 3, 2.0, dz, &da), LA_OK);
    check_vec(dz, (double[]){-0.5, 0.5, 0}, 3, 0);
    /* alpha = 3 on [0.1, 0.1 - 1/2, ...]: c = 2(z - max) = (0, -1); t = -1 exactly (one-hot),
     * the second entry is on the threshold and must not get u = 1/p = inf */
    double z3[2] = {0.1, 0.1 - 0.5}, g3[2] = {1, -1};
    assert_int_equal(la_entmax_bisect_forward_f64(z3, 1, 2, 3.0, p, &tau), LA_OK);
    assert_true(p[0] == 1.0 && p[1] == 0.0);
    assert_int_equal(la_entmax_bisect_backward_f64(p, g3, 1, 2, 3.0, dz, &da), LA_OK);
    assert_true(dz[0] == 0.0 && dz[1] == 0.0 && da == 0.0);
    /* entmax15 [2, 0, -1]: (1, 0, 0) although the second entry ties the threshold */
    double z4[3] = {2, 0, -1};
    assert_int_equal(la_entmax15_forward_f64(z4, 1, 3, p, &tau), LA_OK);
    check_vec(p, (double[]){1, 0, 0}, 3, 0);
    assert_true(tau == 0.0);
}

/* ---- random rows ---------------------------------------------------------------------- */

static void randn(la_rng *r, double *x, int n, double scale) {
    for (int i = 0; i < n; i++) x[i] = scale * la_rng_normal(r);
}

/* Padding a row with -inf entries anywhere leaves p, dz and dalpha bit-identical on the
 * original entries and exactly 0 (with NaN upstream) on the padding. */
static void test_padding_invariance(void **state) {
    (void)state;
    la_rng rng;
    la_rng_seed(&rng, 7);
    enum { N = 20, M = 37 };
    double z[N], g[N], p[N], dz[N], zp[M], gp[M], pp[M], dzp[M];
    int slot[M];
    double alphas[] = {1.25, 1.5, 2.0, 3.0};
    for (int trial = 0; trial < 8; trial++) {
        randn(&rng, z, N, 2.0);
        randn(&rng, g, N, 1.0);
        /* scatter the N real entries among M slots */
        int k = 0;
        for (int i = 0; i < M; i++) slot[i] = -1;
        while (k < N) {
            int s = (int)la_rng_below(&rng, M);
            if (slot[s] < 0) slot[s] = k++;
        }
        k = 0;
        for (int i = 0; i < M; i++) {
            if (slot[i] >= 0) slot[i] = k++; /* keep the original order */
            zp[i] = slot[i] >= 0 ? z[slot[i]] : -INFINITY;
            gp[i] = slot[i] >= 0 ? g[slot[i]] : NAN;
        }
        for (int f = 0; f < 3; f++) {
            for (int a = 0; a < 4; a++) {
                double alpha = f == FAM_SPARSEMAX ? 2.0 : f == FAM_ENTMAX15 ? 1.5 : alphas[a];
                double t1, t2, d1 = 0, d2 = 0;
                assert_int_equal(fwd64(f, alpha, z, N, p, &t1), LA_OK);
                assert_int_equal(bwd64(f, alpha, p, g, N, dz, &d1), LA_OK);
                assert_int_equal(fwd64(f, alpha, zp, M, pp, &t2), LA_OK);
                assert_int_equal(bwd64(f, alpha, pp, gp, M, dzp, &d2), LA_OK);
                assert_true(t1 == t2 && d1 == d2);
                for (int i = 0; i < M; i++) {
                    if (slot[i] >= 0) assert_true(pp[i] == p[slot[i]] && dzp[i] == dz[slot[i]]);
                    else assert_true(pp[i] == 0.0 && dzp[i] == 0.0);
                }
                if (f != FAM_BISECT) break;
            }
        }
    }
}

/* The bisection path agrees with the exact sort-based ones at alpha = 2 and 1.5, and each
 * output sums to 1, on rows of several lengths and scales (1e-14: a few ulp of O(n) sums). */
static void test_bisect_matches_exact(void **state) {
    (void)state;
    la_rng rng;
    la_rng_seed(&rng, 11);
    int ns[] = {1, 2, 5, 64, 1000, 20000};
    double scales[] = {0.1, 1.0, 10.0};
    for (int a = 0; a < 6; a++) {
        int n = ns[a];
        double *z = malloc(sizeof(double) * n), *p1 = malloc(sizeof(double) * n);
        double *p2 = malloc(sizeof(double) * n);
        for (int s = 0; s < 3; s++) {
            randn(&rng, z, n, scales[s]);
            double t1, t2;
            assert_int_equal(la_sparsemax_forward_f64(z, 1, n, p1, &t1), LA_OK);
            assert_int_equal(la_entmax_bisect_forward_f64(z, 1, n, 2.0, p2, &t2), LA_OK);
            check_vec(p1, p2, n, 1e-14);
            assert_true(fabs(t1 - t2) <= 1e-14 * (1 + fabs(t1)));
            assert_int_equal(la_entmax15_forward_f64(z, 1, n, p1, &t1), LA_OK);
            assert_int_equal(la_entmax_bisect_forward_f64(z, 1, n, 1.5, p2, &t2), LA_OK);
            check_vec(p1, p2, n, 1e-14);
            double alphas[] = {1.05, 1.25, 1.7, 2.5, 4.0};
            for (int k = 0; k < 5; k++) {
                assert_int_equal(la_entmax_bisect_forward_f64(z, 1, n, alphas[k], p2, &t2), LA_OK);
                double sum = 0;
                for (int i = 0; i < n; i++) sum += p2[i];
                if (!(fabs(sum - 1) <= 1e-13)) fail_msg("n=%d alpha=%g sum-1=%.3g", n, alphas[k], sum - 1);
            }
        }
        free(z), free(p1), free(p2);
    }
}

/* Regression: with alpha = 2 or 1.5 the root finder could stop with its lower bracket end far
 * below the root, and the closed-form re-solve over {c > lo} then summed entries outside the
 * support (|sum p - 1| up to 0.13 on uniform rows of 256 entries in [-1, 1]). Over many such
 * rows the generic path must equal the sort-based one to 1e-14 (both are exact up to
 * rounding of sums of <= 256 terms of size <= 1). */
static void test_bisect_closed_form_support(void **state) {
    (void)state;
    la_rng rng;
    la_rng_seed(&rng, 1);
    enum { N = 256 };
    double z[N], p1[N], p2[N], t1, t2;
    for (int row = 0; row < 1500; row++) {
        double scale = row % 3 == 0 ? 0.01 : row % 3 == 1 ? 1.0 : 100.0;
        for (int i = 0; i < N; i++) z[i] = scale * (2.0 * la_rng_uniform(&rng) - 1.0);
        assert_int_equal(la_sparsemax_forward_f64(z, 1, N, p1, &t1), LA_OK);
        assert_int_equal(la_entmax_bisect_forward_f64(z, 1, N, 2.0, p2, &t2), LA_OK);
        check_vec(p1, p2, N, 1e-14);
        assert_int_equal(la_entmax15_forward_f64(z, 1, N, p1, &t1), LA_OK);
        assert_int_equal(la_entmax_bisect_forward_f64(z, 1, N, 1.5, p2, &t2), LA_OK);
        check_vec(p1, p2, N, 1e-14);
    }
}

/* Finite differences: L(z, alpha) = sum_i g_i p_i(z, alpha).
 *   dL/dalpha vs central difference with h = 1e-6 (truncation ~h^2 * L''' ~ 1e-12, rounding
 *   ~1e-16/h = 1e-10), tolerance 1e-6 relative + 1e-8 absolute;
 *   dL/dz_j the same with h = 1e-6 on each entry of the support (the map is smooth there
 *   unless an entry is within h of the threshold; the random rows keep a margin, checked). */
static void test_finite_differences(void **state) {
    (void)state;
    la_rng rng;
    la_rng_seed(&rng, 5);
    enum { N = 12 };
    double z[N], g[N], p[N], dz[N], zz[N], pa[N], pb[N];
    double alphas[] = {1.1, 1.25, 1.5, 1.8, 2.0, 2.5, 3.0};
    int checked = 0;
    for (int trial = 0; trial < 6; trial++) {
        randn(&rng, z, N, 1.5);
        randn(&rng, g, N, 1.0);
        for (int a = 0; a < 7; a++) {
            double alpha = alphas[a], tau, da;
            assert_int_equal(la_entmax_bisect_forward_f64(z, 1, N, alpha, p, &tau), LA_OK);
            assert_int_equal(la_entmax_bisect_backward_f64(p, g, 1, N, alpha, dz, &da), LA_OK);
            /* skip rows where some entry is within 1e-4 of the threshold (kink) */
            int near = 0;
            for (int i = 0; i < N; i++) near |= fabs((alpha - 1) * z[i] - tau) < 1e-4;
            if (near) continue;
            const double h = 1e-6;
            double la = 0, lb = 0;
            assert_int_equal(la_entmax_bisect_forward_f64(z, 1, N, alpha + h, pa, NULL), LA_OK);
            assert_int_equal(la_entmax_bisect_forward_f64(z, 1, N, alpha - h, pb, NULL), LA_OK);
            for (int i = 0; i < N; i++) la += g[i] * pa[i], lb += g[i] * pb[i];
            double fd = (la - lb) / (2 * h);
            if (!(fabs(fd - da) <= 1e-6 * fabs(da) + 1e-8))
                fail_msg("alpha=%g: dalpha %.12g vs fd %.12g", alpha, da, fd);
            for (int j = 0; j < N; j++) {
                memcpy(zz, z, sizeof z);
                zz[j] = z[j] + h;
                assert_int_equal(la_entmax_bisect_forward_f64(zz, 1, N, alpha, pa, NULL), LA_OK);
                zz[j] = z[j] - h;
                assert_int_equal(la_entmax_bisect_forward_f64(zz, 1, N, alpha, pb, NULL), LA_OK);
                la = lb = 0;
                for (int i = 0; i < N; i++) la += g[i] * pa[i], lb += g[i] * pb[i];
                fd = (la - lb) / (2 * h);
                if (!(fabs(fd - dz[j]) <= 1e-6 * fabs(dz[j]) + 1e-8))
                    fail_msg("alpha=%g dz[%d] %.12g vs fd %.12g", alpha, j, dz[j], fd);
            }
            checked++;
        }
    }
    assert_true(checked >= 30); /* most rows have no entry near the threshold */
}

/* Batched calls: rows are independent (a batch equals row-by-row calls), an empty row in the
 * middle does not disturb its neighbours. */
static void test_batched_rows(void **state) {
    (void)state;
    la_rng rng;
    la_rng_seed(&rng, 3);
    enum { R = 5, N = 9 };
    double z[R * N], p[R * N], q[N], tau[R], t1;
    randn(&rng, z, R * N, 1.0);
    for (int i = 0; i < N; i++) z[2 * N + i] = -INFINITY;
    assert_int_equal(la_entmax_bisect_forward_f64(z, R, N, 1.7, p, tau), LA_OK);
    for (int r = 0; r < R; r++) {
        assert_int_equal(la_entmax_bisect_forward_f64(z + r * N, 1, N, 1.7, q, &t1), LA_OK);
        assert_true(memcmp(q, p + r * N, sizeof q) == 0 && (t1 == tau[r]));
    }
    assert_true(tau[2] == LA_ROW_EMPTY);
    /* zero rows is a valid no-op */
    assert_int_equal(la_entmax15_forward_f64(z, 0, N, p, tau), LA_OK);
}

/* Large offsets and scales: shifting by the maximum keeps full precision. */
static void test_offset_invariance(void **state) {
    (void)state;
    double z[5] = {0.3125, -0.1875, 0.125, -1.5, 0.25}, zo[5], p[5], po[5], t, to;
    for (int i = 0; i < 5; i++) zo[i] = z[i] + 1048576.0; /* dyadic: exact in double */
    double alphas[] = {1.25, 1.5, 2.0, 3.0};
    for (int a = 0; a < 4; a++) {
        assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 5, alphas[a], p, &t), LA_OK);
        assert_int_equal(la_entmax_bisect_forward_f64(zo, 1, 5, alphas[a], po, &to), LA_OK);
        check_vec(p, po, 5, 0);
        assert_true(fabs((to - t) - (alphas[a] - 1) * 1048576.0) <= 1e-9);
    }
}

/* ---- bad arguments ------------------------------------------------------------------ */

static void test_bad_arguments(void **state) {
    (void)state;
    double z[3] = {1, 2, 3}, p[3], g[3] = {0}, dz[3];
    float zf[3] = {1, 2, 3}, pf[3];
    assert_int_equal(la_sparsemax_forward_f64(NULL, 1, 3, p, NULL), LA_EINVAL);
    assert_int_equal(la_sparsemax_forward_f64(z, 1, 3, NULL, NULL), LA_EINVAL);
    assert_int_equal(la_entmax15_forward_f64(z, 1, 0, p, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "n = 0"));
    assert_int_equal(la_entmax15_forward_f64(z, -1, 3, p, NULL), LA_EINVAL);
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, 1.0, p, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "softmax"));
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, 0.5, p, NULL), LA_EINVAL);
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, NAN, p, NULL), LA_EINVAL);
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, INFINITY, p, NULL), LA_EINVAL);
    /* above LA_ENTMAX_ALPHA_MAX tau is not representable: refused, naming the bound */
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, 4.5, p, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "1 < alpha <= 4"));
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, 1e308, p, NULL), LA_EINVAL);
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, LA_ENTMAX_ALPHA_MAX, p, NULL), LA_OK);
    assert_int_equal(la_entmax_bisect_forward_f32(zf, 1, 3, 1.0, pf, NULL), LA_EINVAL);
    z[1] = NAN;
    assert_int_equal(la_sparsemax_forward_f64(z, 1, 3, p, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "column 1"));
    z[1] = INFINITY;
    assert_int_equal(la_entmax_bisect_forward_f64(z, 1, 3, 1.5, p, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "+inf"));
    zf[2] = NAN;
    assert_int_equal(la_entmax15_forward_f32(zf, 1, 3, pf, NULL), LA_EINVAL);
    assert_int_equal(la_sparsemax_backward_f64(p, NULL, 1, 3, dz), LA_EINVAL);
    assert_int_equal(la_entmax15_backward_f64(p, g, 1, 3, NULL), LA_EINVAL);
    assert_int_equal(la_entmax_bisect_backward_f64(p, g, 1, 3, 1.0, dz, NULL), LA_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_f64),
        cmocka_unit_test(test_fixture_f32),
        cmocka_unit_test(test_fixture_f32_not_worse_than_package),
        cmocka_unit_test(test_fixture_failures),
        cmocka_unit_test(test_fixture_alpha_to_1),
        cmocka_unit_test(test_hand_cases_exact),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_on_threshold),
        cmocka_unit_test(test_padding_invariance),
        cmocka_unit_test(test_bisect_matches_exact),
        cmocka_unit_test(test_bisect_closed_form_support),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_batched_rows),
        cmocka_unit_test(test_offset_invariance),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, load_fixture, free_fixture);
}
