/* test_model_diagnose.c -- la_model_diagnose (src/model/gpt.c, attention.c): the per-layer
 * attention diagnostics of a (tiny, random) model on one text.
 *   - layer 0 against a materialised double computation from the model's own weights:
 *     x = wte[tokens], a = RMSNorm(x; ln1.g), q = a Wq^T, k = a Wk^T, QK-norm per head, then
 *     the naive reference (tests/support/ref_attn.c) row by row (T = 1 at pos0 = i; the row's
 *     probabilities are its key_mass), per-range mass / entropy averaged as la_diag defines.
 *     Tolerance: the model runs in float (q, k relative rounding ~1e-6 after the projections
 *     and norms, logits |L| <~ 5), so masses and entropies agree to ~1e-5; compared to 5e-5.
 *   - every layer and head: each row's masses sum to 1 (sum over ranges of rows * mean mass
 *     = T), to 1e-5 relative.
 *   - the row filter (la_model_diagnose_rows): layer 0's span masses of the chosen rows
 *     against the same reference's probabilities (same 5e-5), every layer's all-keys span
 *     = 1, only the chosen rows folded;
 *   - bad arguments. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "longattn.h"
#include "support/ref_attn.h"

#define TOL 5e-5

static const float *tensor(la_model *m, const char *name, la_tensor_info *info) {
    for (int i = 0; i < la_model_num_tensors(m); i++) {
        la_tensor_info t;
        assert_int_equal(la_model_get_tensor(m, i, &t), LA_OK);
        if (!strcmp(t.name, name)) {
            if (info) *info = t;
            return la_model_params(m) + t.offset;
        }
    }
    fail_msg("tensor %s not found", name);
    return NULL;
}

/* y (T, n_out) = rows of a (T, C) times W^T, W (n_out, C) */
static void matmul_t(const double *a, const float *W, int T, int C, int n_out, double *y) {
    for (int t = 0; t < T; t++)
        for (int o = 0; o < n_out; o++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += a[(size_t)t * C + c] * W[(size_t)o * C + c];
            y[(size_t)t * n_out + o] = s;
        }
}

/* x (T, nh*D) per-head RMSNorm with gain g (D) -> y (nh, T, D) */
static void headnorm(const double *x, const float *g, int T, int nh, int D, double *y) {
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            const double *xr = x + ((size_t)t * nh + h) * D;
            double ss = 0;
            for (int d = 0; d < D; d++) ss += xr[d] * xr[d];
            double r = 1 / sqrt(ss / D + 1e-6);
            for (int d = 0; d < D; d++) y[((size_t)h * T + t) * D + d] = xr[d] * r * g[d];
        }
}

static void run_model_case(const char *spec, int n_kv_head) {
    la_model_config cfg = la_model_config_default();
    cfg.n_layer = 2, cfg.n_head = 2, cfg.n_kv_head = n_kv_head, cfg.d_model = 32, cfg.d_ff = 64;
    cfg.train_len = 32;
    snprintf(cfg.spec, sizeof cfg.spec, "%s", spec);
    la_model *m;
    assert_int_equal(la_model_new(&cfg, 3, &m), LA_OK);
    const int T = 150, C = 32, H = 2, K = n_kv_head, D = 16, L = 2;
    /* non-trivial gains, so that a norm or gain mix-up shows */
    uint64_t s = 11;
    float *P = la_model_params(m);
    for (int i = 0; i < la_model_num_tensors(m); i++) {
        la_tensor_info t;
        la_model_get_tensor(m, i, &t);
        /* gains and logn s_h in [0.6, 1.4) x their value; ASEntmax weights random */
        int gain = strstr(t.name, ".g") != NULL, logn = strstr(t.name, "logn_s") != NULL;
        int as = strstr(t.name, "attn.as_") != NULL;
        for (size_t x = 0; x < t.numel && (gain || logn || as); x++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(s >> 11) / 9007199254740992.0;
            P[t.offset + x] = as ? (float)(0.6 * (u - 0.5)) : gain ? (float)(0.6 + 0.8 * u) : (float)(P[t.offset + x] * (0.6 + 0.8 * u));
        }
    }
    int32_t tokens[150];
    for (int i = 0; i < T; i++) tokens[i] = (int32_t)((i * 37 + (i / 7) * 11) % 256);
    la_diag *d[4];
    for (int i = 0; i < L * H; i++) assert_int_equal(la_diag_new(T - 1, 3, 1, &d[i]), LA_OK);
    assert_int_equal(la_model_diagnose(m, tokens, T, d), LA_OK);
    /* the row filter (la_model_diagnose_rows): rows across the 64-row tile edge, spans of
     * every key, a middle stretch and a late stretch; mass (L, H, NR, NS) */
    enum { NR = 5, NS = 3 };
    static const int sel_rows[NR] = {0, 63, 64, 100, 149};
    static const int64_t sel_spans[2 * NS] = {0, 150, 20, 35, 140, 150};
    double smass[2 * 2 * NR * NS];
    la_diag *d2[4];
    for (int i = 0; i < L * H; i++) assert_int_equal(la_diag_new(T - 1, 3, 1, &d2[i]), LA_OK);
    la_diag_rows sel = {sel_rows, NR, sel_spans, NS, smass};
    assert_int_equal(la_model_diagnose_rows(m, tokens, T, &sel, d2), LA_OK);
    for (int i = 0; i < L * H; i++) {
        la_diag_result r0;
        la_diag_get(d2[i], 0, &r0); /* [0,1): one entry per folded row */
        assert_int_equal(r0.rows, NR);
        for (int r = 0; r < NR; r++) /* every layer's block: all keys hold mass 1 */
            assert_true(fabs(smass[((size_t)i * NR + r) * NS] - 1) < 1e-5);
    }

    /* every layer and head: rows' masses sum to 1 */
    for (int i = 0; i < L * H; i++) {
        double tot = 0;
        for (int r = 0; r < la_diag_num_ranges(d[i]); r++) {
            la_diag_result res;
            la_diag_get(d[i], r, &res);
            tot += (double)res.rows * res.mass;
        }
        assert_true(fabs(tot - T) < T * 1e-5);
    }

    /* layer 0 in double from the weights */
    const float *wte = tensor(m, "wte", NULL), *g1 = tensor(m, "h.0.ln1.g", NULL);
    const float *wq = tensor(m, "h.0.attn.wq", NULL), *wk = tensor(m, "h.0.attn.wk", NULL);
    const float *gq = tensor(m, "h.0.attn.q_norm.g", NULL), *gk = tensor(m, "h.0.attn.k_norm.g", NULL);
    double *a = malloc(sizeof(double) * T * C), *qr = malloc(sizeof(double) * T * H * D);
    double *kr = malloc(sizeof(double) * T * K * D), *q = malloc(sizeof(double) * T * H * D);
    double *k = malloc(sizeof(double) * T * K * D), *v = calloc((size_t)T * K * D, sizeof(double));
    for (int t = 0; t < T; t++) {
        const float *x = wte + (size_t)tokens[t] * C;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
        double r = 1 / sqrt(ss / C + 1e-6);
        for (int c = 0; c < C; c++) a[(size_t)t * C + c] = x[c] * r * g1[c];
    }
    matmul_t(a, wq, T, C, H * D, qr);
    matmul_t(a, wk, T, C, K * D, kr);
    headnorm(qr, gq, T, H, D, q);
    headnorm(kr, gk, T, K, D, k);
    la_spec sp;
    assert_int_equal(la_spec_parse(spec, &sp), LA_OK);
    if (!sp.train_len) sp.train_len = cfg.train_len;
    double logn_s[2] = {0, 0};
    float *af = malloc(sizeof(float) * T * C), *beta = malloc(sizeof(float) * H * T), *gamma = malloc(sizeof(float) * H * T);
    if (sp.xform == LA_XF_LOGN) {
        const float *ls = tensor(m, "h.0.attn.logn_s", NULL);
        for (int h = 0; h < H; h++) logn_s[h] = ls[h];
    }
    if (sp.norm == LA_NORM_ASENTMAX) { /* beta, gamma from the layer input a, as the model does */
        for (size_t x = 0; x < (size_t)T * C; x++) af[x] = (float)a[x];
        assert_int_equal(la_asentmax_params_forward(af, 1, T, C, H, tensor(m, "h.0.attn.as_wb", NULL),
                                                    tensor(m, "h.0.attn.as_bb", NULL), tensor(m, "h.0.attn.as_wg", NULL),
                                                    tensor(m, "h.0.attn.as_bg", NULL), sp.as_gamma_range, beta, gamma),
                         LA_OK);
    }
    double bd[2], gd[2];
    double *qrow = malloc(sizeof(double) * H * D), *out = malloc(sizeof(double) * H * D);
    double lse[8], *km = malloc(sizeof(double) * H * T);
    double M[2][16] = {{0}}, E[2][16] = {{0}};
    int64_t rows[2][16] = {{0}}, erows[2][16] = {{0}};
    la_diag_result res;
    for (int i = 0; i < T; i++) {
        for (int h = 0; h < H; h++) memcpy(qrow + h * D, q + ((size_t)h * T + i) * D, sizeof(double) * D);
        la_shape s1 = {1, H, K, 1, T, D, i};
        ref_attn_opts ro;
        memset(&ro, 0, sizeof ro);
        if (sp.xform == LA_XF_LOGN) ro.logn_s = logn_s;
        for (int h = 0; h < H; h++) bd[h] = beta[h * T + i], gd[h] = gamma[h * T + i];
        ro.as_beta = bd, ro.as_gamma = gd;
        if (ref_attn_forward(&sp, &s1, qrow, k, v, &ro, out, lse, NULL, km)) fail_msg("reference: %s", ref_attn_error());
        for (int r = 0; r < NR; r++) { /* layer 0's span masses of the chosen rows */
            if (sel_rows[r] != i) continue;
            for (int h = 0; h < H; h++)
                for (int sx = 0; sx < NS; sx++) {
                    double want = 0;
                    for (int j = (int)sel_spans[2 * sx]; j < sel_spans[2 * sx + 1] && j <= i; j++) want += km[(size_t)h * T + j];
                    double got = smass[((size_t)h * NR + r) * NS + sx];
                    if (!(fabs(got - want) < TOL))
                        fail_msg("%s head %d row %d span %d: mass %.7f, reference %.7f", spec, h, i, sx, got, want);
                }
        }
        for (int h = 0; h < H; h++)
            for (int r = 0; r < la_diag_num_ranges(d[h]); r++) {
                la_diag_get(d[h], r, &res);
                double mr = 0, pl = 0;
                int c = 0;
                for (int j = 0; j <= i; j++) {
                    int64_t t = i - j;
                    if (t < res.lo || t >= res.hi) continue;
                    double p = km[(size_t)h * T + j];
                    c++, mr += p;
                    if (p > 0) pl += p * log(p);
                }
                if (!c) continue;
                rows[h][r]++, M[h][r] += mr;
                if (mr > 0) erows[h][r]++, E[h][r] += fmax(0, log(mr) - pl / mr);
            }
    }
    for (int h = 0; h < H; h++)
        for (int r = 0; r < la_diag_num_ranges(d[h]); r++) {
            la_diag_get(d[h], r, &res);
            assert_int_equal(res.rows, rows[h][r]);
            if (!rows[h][r]) continue;
            double mm = M[h][r] / rows[h][r];
            /* entropy: defined on rows with mass in the range (entmax: may be none) */
            if (sp.norm == LA_NORM_SOFTMAX) assert_int_equal(res.entropy_rows, erows[h][r]);
            double ee = res.entropy_rows == erows[h][r] && erows[h][r] ? E[h][r] / erows[h][r] : res.entropy;
            if (!(fabs(res.mass - mm) < TOL) || !(erows[h][r] == 0 || fabs(res.entropy - ee) < TOL))
                fail_msg("%s head %d range [%lld,%lld): mass %.7f / %.7f, entropy %.7f / %.7f", spec, h,
                         (long long)res.lo, (long long)res.hi, res.mass, mm, res.entropy, ee);
        }
    /* layer 1 differs from layer 0 (the hook really moves on to the next layer's q, k) */
    int differ = 0;
    for (int r = 1; r < la_diag_num_ranges(d[0]); r++) {
        la_diag_result r0, r1;
        la_diag_get(d[0], r, &r0), la_diag_get(d[H], r, &r1);
        differ |= fabs(r0.mass - r1.mass) > 1e-3;
    }
    assert_true(differ);
    for (int i = 0; i < L * H; i++) la_diag_free(d[i]), la_diag_free(d2[i]);
    free(af), free(beta), free(gamma);
    free(a), free(qr), free(kr), free(q), free(k), free(v), free(qrow), free(out), free(km);
    la_model_free(m);
}

static void test_layer0_vs_reference(void **st) {
    (void)st;
    run_model_case("softmax+rope+causal", 2);
    run_model_case("softmax+sinv(tau=10)+prope(p=0.5)+causal", 1); /* GQA */
    run_model_case("entmax(alpha=1.5)+alibi+causal", 2);
    run_model_case("softmax+logn+rope+causal", 2);    /* learned s_h per head */
    run_model_case("asentmax+nape+causal", 2);        /* beta, gamma from the layer input */
}

static void test_bad_arguments(void **st) {
    (void)st;
    la_model_config cfg = la_model_config_default();
    cfg.n_layer = 1, cfg.n_head = 2, cfg.d_model = 16;
    la_model *m;
    assert_int_equal(la_model_new(&cfg, 1, &m), LA_OK);
    int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    la_diag *d[2];
    assert_int_equal(la_diag_new(9, 10, 1, &d[0]), LA_OK);
    assert_int_equal(la_diag_new(8, 10, 1, &d[1]), LA_OK);
    assert_int_equal(la_model_diagnose(m, tok, 10, NULL), LA_EINVAL);
    assert_int_equal(la_model_diagnose(m, tok, 10, d), LA_EINVAL); /* d[1] too short */
    assert_non_null(strstr(la_errmsg(), "max_dist"));
    assert_int_equal(la_model_diagnose(m, tok, 9, d), LA_OK);
    /* a bad row filter is refused before anything is added */
    int rows[2] = {3, 9};
    la_diag_rows sel = {rows, 2, NULL, 0, NULL};
    assert_int_equal(la_model_diagnose_rows(m, tok, 9, &sel, d), LA_EINVAL); /* row 9 of T = 9 */
    assert_non_null(strstr(la_errmsg(), "outside the query rows"));
    rows[1] = 8;
    assert_int_equal(la_model_diagnose_rows(m, tok, 9, &sel, d), LA_OK);
    tok[3] = 300;
    assert_int_equal(la_model_diagnose(m, tok, 9, d), LA_EINVAL); /* outside the vocabulary */
    assert_int_equal(la_model_diagnose(m, tok, 0, d), LA_EINVAL);
    la_diag_free(d[0]), la_diag_free(d[1]);
    la_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer0_vs_reference),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
