/* test_attn_diag.c -- la_attn_diagnose (src/attn/attn_diag.c): attention mass and entropy per
 * distance range recomputed tile by tile from q, k and the row statistic of la_attn_forward.
 *
 * (a) analytic: q = 0 gives equal logits, so softmax attention is uniform over the visible
 *     keys: a row at position p has mass c/(p+1) (causal) or c/min(p+1, w) (window) in a
 *     range holding c of its visible keys, and entropy log c.
 * (b) against the naive double reference of tests/support/ref_attn.c, which materialises the
 *     probabilities: one reference call per query row (T = 1 at pos0 = that row's position)
 *     gives the row's probabilities as its key_mass; per-range mass and entropy are formed in
 *     double here and averaged as la_diag defines (rows with a visible key in the range).
 *     Specs: softmax+rope, sinv+prope, alibi, logn, window, sinks, GQA, documents, full
 *     (non-causal, distances |t|), entmax(1.5), sparsemax, entmax(1.3), asentmax+nape.
 * Tolerances: the kernel computes logits in float (|L| <~ 10, rounding ~1e-6) and uses the
 * float row statistic (lse or tau, relative rounding 6e-8 of a value <~ 10), so every p has
 * a relative error of a few 1e-6; per-range masses (<= 1) are compared to 1e-5 and entropies
 * (<= log 150 = 5) to 2e-5 absolute (every case here stays below 2e-6 on x86-64 AVX-512).
 * A distance off by one for a single row, or log p off by 1%, fails by > 1e-3. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "longattn.h"
#include "support/ref_attn.h"

#define MASS_TOL 1e-5
#define ENT_TOL 2e-5

static double gauss(uint64_t *s) {
    double u1, u2;
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    u1 = ((*s >> 11) + 0.5) / 9007199254740992.0;
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    u2 = ((*s >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static la_diag **new_diags(int n, int64_t max_dist, double delta) {
    la_diag **d = calloc((size_t)n, sizeof *d);
    for (int i = 0; i < n; i++) assert_int_equal(la_diag_new(max_dist, delta, 1, &d[i]), LA_OK);
    return d;
}

static void free_diags(la_diag **d, int n) {
    for (int i = 0; i < n; i++) la_diag_free(d[i]);
    free(d);
}

/* A (q, k, v) case with its forward done: H heads of T positions of width D, softmax + RoPE
 * + causal, and a diag per head (max distance T - 1, 10 ranges). seed 0: all zeros (the
 * bad-argument tests start from it); otherwise standard normal entries drawn q, k, v in
 * turn from seed. */
typedef struct {
    la_spec sp;
    la_shape sh;
    float *q, *k, *v, *out, *lse; // (1, H, T, D) each; lse (1, H, T)
    la_diag **d;
    int H;
} fwd_case;

static void fwd_case_new(fwd_case *z, int H, int T, int D, uint64_t seed) {
    assert_int_equal(la_spec_parse("softmax+rope+causal", &z->sp), LA_OK);
    z->sh = (la_shape){1, H, H, T, T, D, LA_POS0_AUTO};
    size_t n = (size_t)H * T * D;
    z->q = calloc(n, sizeof(float)), z->k = calloc(n, sizeof(float)), z->v = calloc(n, sizeof(float));
    z->out = malloc(sizeof(float) * n), z->lse = malloc(sizeof(float) * H * T);
    for (size_t i = 0; seed && i < n; i++)
        z->q[i] = (float)gauss(&seed), z->k[i] = (float)gauss(&seed), z->v[i] = (float)gauss(&seed);
    assert_int_equal(la_attn_forward(&z->sp, &z->sh, z->q, z->k, z->v, z->out, z->lse, NULL), LA_OK);
    z->d = new_diags(H, T - 1, 10);
    z->H = H;
}

static void fwd_case_free(fwd_case *z) {
    free_diags(z->d, z->H);
    free(z->q), free(z->k), free(z->v), free(z->out), free(z->lse);
}

/* ---- (a) analytic uniform attention ---------------------------------------------------- */

/* keys visible to position p: [p - w + 1, p] clipped at 0 (w = 0: causal) */
static void check_uniform(const char *spec_text, int T, int w) {
    la_spec sp;
    assert_int_equal(la_spec_parse(spec_text, &sp), LA_OK);
    const int H = 2, D = 8;
    la_shape sh = {1, H, H, T, T, D, LA_POS0_AUTO};
    size_t nq = (size_t)H * T * D;
    float *q = calloc(nq, sizeof(float)), *k = malloc(sizeof(float) * nq), *v = malloc(sizeof(float) * nq);
    float *out = malloc(sizeof(float) * nq), *lse = malloc(sizeof(float) * H * T);
    uint64_t seed = 5;
    for (size_t i = 0; i < nq; i++) k[i] = (float)gauss(&seed), v[i] = (float)gauss(&seed);
    assert_int_equal(la_attn_forward(&sp, &sh, q, k, v, out, lse, NULL), LA_OK);
    la_diag **d = new_diags(H, T - 1, 10);
    assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, lse, NULL, d), LA_OK);
    for (int h = 0; h < H; h++)
        for (int r = 0; r < la_diag_num_ranges(d[h]); r++) {
            la_diag_result res;
            assert_int_equal(la_diag_get(d[h], r, &res), LA_OK);
            /* analytic means over the rows with a visible key in [lo, hi) */
            double m = 0, e = 0, keys = 0;
            int64_t rows = 0;
            for (int p = 0; p < T; p++) {
                int n = w ? (p + 1 < w ? p + 1 : w) : p + 1; /* visible keys, distances 0..n-1 */
                int64_t c = (n < res.hi ? n : res.hi) - res.lo;
                if (c <= 0) continue;
                rows++, keys += (double)c;
                m += (double)c / n, e += log((double)c);
            }
            assert_int_equal(res.rows, rows);
            assert_int_equal(res.entropy_rows, rows);
            if (!rows) continue;
            assert_true(fabs(res.keys - keys / rows) < 1e-9);
            assert_true(fabs(res.mass - m / rows) < MASS_TOL);
            assert_true(fabs(res.entropy - e / rows) < ENT_TOL);
        }
    free_diags(d, H);
    free(q), free(k), free(v), free(out), free(lse);
}

static void test_uniform_causal(void **st) {
    (void)st;
    check_uniform("softmax+rope+causal", 300, 0); /* rope rotates nothing of q = 0 */
}

static void test_uniform_window(void **st) {
    (void)st;
    check_uniform("softmax+window(50)", 300, 50);
}

/* ---- (b) against the materialised double reference ------------------------------------- */

typedef struct {
    const char *spec;
    int B, H, Hkv, T, S, D;
    int docs;      /* doc_ids with three documents per batch */
    double qscale; /* q, k ~ N(0, qscale^2): logits spread */
    double delta;
} ref_case;

static int visible(const la_spec *sp, int64_t p, int64_t kp, int64_t n) {
    if (kp < 0 || kp >= n) return 0;
    int64_t w = sp->window;
    switch (sp->pattern) {
    case LA_PAT_CAUSAL: return kp <= p;
    case LA_PAT_WINDOW: return kp <= p && kp > p - w;
    case LA_PAT_SINKS: return kp <= p && (kp < sp->sinks || kp > p - w);
    case LA_PAT_FULL: return 1;
    case LA_PAT_GLOBAL:
        if (p >= 0 && p < sp->global) return 1;
        return kp < sp->global || (kp <= p && kp > p - w);
    }
    return 0;
}

/* Per-range sums of one (b, h): mass, entropy, key counts of every row (double). */
typedef struct {
    int R;
    int64_t edges[64];
    double m[64], e[64], keys[64];
    int64_t rows[64], erows[64];
} ref_ranges;

/* sel: NULL for every row (la_attn_diagnose), else la_attn_diagnose_rows with that row
 * filter: the reference then folds only the chosen rows and checks every span mass */
static void run_ref_case_sel(const ref_case *rc, const la_diag_rows *sel_in);

static void run_ref_case(const ref_case *rc) { run_ref_case_sel(rc, NULL); }

static void run_ref_case_sel(const ref_case *rc, const la_diag_rows *sel_in) {
    la_spec sp;
    assert_int_equal(la_spec_parse(rc->spec, &sp), LA_OK);
    const int B = rc->B, H = rc->H, K = rc->Hkv, T = rc->T, S = rc->S, D = rc->D;
    la_shape sh = {B, H, K, T, S, D, LA_POS0_AUTO};
    int64_t pos0 = S - T;
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * K * S * D;
    float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk), *v = malloc(sizeof(float) * nk);
    float *out = malloc(sizeof(float) * nq), *stat = malloc(sizeof(float) * B * H * T);
    float *beta = malloc(sizeof(float) * B * H * T), *gamma = malloc(sizeof(float) * B * H * T);
    double *betad = malloc(sizeof(double) * B * H * T), *gammad = malloc(sizeof(double) * B * H * T);
    float logn_s[16];
    double logn_sd[16];
    int32_t *docs = malloc(sizeof(int32_t) * B * S);
    uint64_t seed = 42;
    for (size_t i = 0; i < nq; i++) q[i] = (float)(rc->qscale * gauss(&seed));
    for (size_t i = 0; i < nk; i++) k[i] = (float)(rc->qscale * gauss(&seed)), v[i] = (float)gauss(&seed);
    for (int i = 0; i < B * H * T; i++) {
        beta[i] = (float)(0.3 + 0.2 * fabs(gauss(&seed))), gamma[i] = (float)(0.5 * gauss(&seed));
        betad[i] = beta[i], gammad[i] = gamma[i];
    }
    for (int h = 0; h < H; h++) logn_s[h] = (float)(0.15 + 0.05 * h), logn_sd[h] = logn_s[h];
    for (int b = 0; b < B; b++)
        for (int j = 0; j < S; j++) docs[b * S + j] = j < S / 3 + 7 * b ? 0 : j < (2 * S) / 3 ? 1 : 2;
    la_attn_opts op = la_attn_opts_default();
    if (rc->docs) op.doc_ids = docs;
    if (sp.xform == LA_XF_LOGN) op.logn_s = logn_s;
    op.as_beta = beta, op.as_gamma = gamma;
    assert_int_equal(la_attn_forward(&sp, &sh, q, k, v, out, stat, &op), LA_OK);
    int64_t maxd = S + T;
    la_diag **d = new_diags(B * H, maxd, rc->delta);
    la_diag_rows sel;
    double *smass = NULL;
    if (sel_in) {
        sel = *sel_in;
        size_t nm = (size_t)B * H * sel.n_rows * (sel.n_spans > 0 ? sel.n_spans : 1);
        smass = malloc(sizeof(double) * nm);
        for (size_t x = 0; x < nm; x++) smass[x] = -7; /* written, not accumulated */
        sel.mass = sel.n_spans ? smass : NULL;
        assert_int_equal(la_attn_diagnose_rows(&sp, &sh, q, k, stat, &op, &sel, d), LA_OK);
    } else {
        assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, stat, &op, d), LA_OK);
    }

    /* reference: one row at a time, T = 1 at pos0 + i, probabilities from key_mass */
    double *qd = malloc(sizeof(double) * D), *kd = malloc(sizeof(double) * (size_t)K * S * D);
    double *vd = malloc(sizeof(double) * (size_t)K * S * D), *outd = malloc(sizeof(double) * H * D);
    double *qrow = malloc(sizeof(double) * (size_t)H * D), *lsed = malloc(sizeof(double) * H);
    double *km = malloc(sizeof(double) * (size_t)H * S), *bd = malloc(sizeof(double) * H), *gd = malloc(sizeof(double) * H);
    for (int b = 0; b < B; b++) {
        for (size_t x = 0; x < (size_t)K * S * D; x++) kd[x] = k[(size_t)b * K * S * D + x], vd[x] = v[(size_t)b * K * S * D + x];
        ref_ranges *rr = calloc((size_t)H, sizeof *rr);
        for (int h = 0; h < H; h++) {
            rr[h].R = la_diag_num_ranges(d[b * H + h]);
            for (int r = 0; r < rr[h].R; r++) la_diag_get_range_edges(d[b * H + h], r, &rr[h].edges[r], &rr[h].edges[r + 1]);
        }
        for (int i = 0, si = 0; i < T; i++) {
            int ri = -1; /* index of row i in the selection */
            if (sel_in) {
                while (si < sel.n_rows && sel.rows[si] < i) si++;
                if (si == sel.n_rows || sel.rows[si] != i) continue;
                ri = si;
            }
            for (int h = 0; h < H; h++) {
                for (int x = 0; x < D; x++) qrow[h * D + x] = q[(((size_t)b * H + h) * T + i) * D + x];
                bd[h] = betad[((size_t)b * H + h) * T + i], gd[h] = gammad[((size_t)b * H + h) * T + i];
            }
            la_shape s1 = {1, H, K, 1, S, D, pos0 + i};
            ref_attn_opts ro;
            memset(&ro, 0, sizeof ro);
            if (rc->docs) ro.doc_ids = docs + (size_t)b * S;
            if (sp.xform == LA_XF_LOGN) ro.logn_s = logn_sd;
            ro.as_beta = bd, ro.as_gamma = gd;
            if (ref_attn_forward(&sp, &s1, qrow, kd, vd, &ro, outd, lsed, NULL, km))
                fail_msg("reference: %s", ref_attn_error());
            /* the query's document and in-document positions */
            int64_t qa = pos0 + i, ds = 0, de = S;
            if (rc->docs) {
                const int32_t *dd = docs + (size_t)b * S;
                ds = qa, de = qa + 1;
                while (ds > 0 && dd[ds - 1] == dd[qa]) ds--;
                while (de < S && dd[de] == dd[qa]) de++;
            }
            for (int h = 0; h < H; h++) {
                ref_ranges *g = &rr[h];
                double M[64] = {0}, PL[64] = {0}, SM[8] = {0};
                int64_t C[64] = {0};
                for (int j = (int)ds; j < de; j++) {
                    if (!visible(&sp, qa - ds, j - ds, de - ds)) continue;
                    int64_t t = qa - j < 0 ? j - qa : qa - j;
                    int r = 0;
                    while (t >= g->edges[r + 1]) r++;
                    double p = km[(size_t)h * S + j];
                    C[r]++, M[r] += p;
                    if (p > 0) PL[r] += p * log(p);
                    for (int sx = 0; ri >= 0 && sx < sel.n_spans; sx++)
                        if (j >= sel.spans[2 * sx] && j < sel.spans[2 * sx + 1]) SM[sx] += p;
                }
                /* span masses: sums of <= S float probabilities of relative error a few 1e-6
                 * each, so MASS_TOL; one key more or less moves a sum by ~1/S >> 1e-5 */
                for (int sx = 0; ri >= 0 && sx < sel.n_spans; sx++) {
                    double got = smass[(((size_t)b * H + h) * sel.n_rows + ri) * sel.n_spans + sx];
                    if (!(fabs(got - SM[sx]) < MASS_TOL))
                        fail_msg("%s b=%d h=%d row %d span [%lld,%lld): mass %.8f, reference %.8f", rc->spec, b, h,
                                 i, (long long)sel.spans[2 * sx], (long long)sel.spans[2 * sx + 1], got, SM[sx]);
                }
                for (int r = 0; r < g->R; r++) {
                    if (!C[r]) continue;
                    g->rows[r]++, g->keys[r] += (double)C[r], g->m[r] += M[r];
                    if (M[r] > 0) {
                        double e = log(M[r]) - PL[r] / M[r];
                        g->erows[r]++, g->e[r] += e < 0 ? 0 : e;
                    }
                }
            }
        }
        for (int h = 0; h < H; h++) {
            ref_ranges *g = &rr[h];
            int64_t total_rows = 0;
            for (int r = 0; r < g->R; r++) {
                la_diag_result res;
                assert_int_equal(la_diag_get(d[b * H + h], r, &res), LA_OK);
                assert_int_equal(res.rows, g->rows[r]);
                total_rows += res.rows;
                if (!g->rows[r]) continue;
                assert_true(fabs(res.keys - g->keys[r] / (double)g->rows[r]) < 1e-9);
                double m = g->m[r] / (double)g->rows[r];
                if (!(fabs(res.mass - m) < MASS_TOL))
                    fail_msg("%s b=%d h=%d range [%lld,%lld): mass %.8f, reference %.8f", rc->spec, b, h,
                             (long long)res.lo, (long long)res.hi, res.mass, m);
                /* sparse normalisers: a range whose mass is a rounding residue may differ in
                 * whether it counts for the entropy; compare where both see real mass */
                if (g->erows[r] && res.entropy_rows) {
                    double e = g->e[r] / (double)g->erows[r];
                    if (res.entropy_rows == g->erows[r] && !(fabs(res.entropy - e) < ENT_TOL))
                        fail_msg("%s b=%d h=%d range [%lld,%lld): entropy %.8f, reference %.8f", rc->spec, b,
                                 h, (long long)res.lo, (long long)res.hi, res.entropy, e);
                    if (sp.norm == LA_NORM_SOFTMAX) assert_int_equal(res.entropy_rows, g->erows[r]);
                }
            }
            assert_true(total_rows > 0);
        }
        free(rr);
    }
    free_diags(d, B * H);
    free(smass);
    free(q), free(k), free(v), free(out), free(stat), free(beta), free(gamma), free(betad), free(gammad), free(docs);
    free(qd), free(kd), free(vd), free(outd), free(qrow), free(lsed), free(km), free(bd), free(gd);
}

static void test_vs_reference(void **st) {
    (void)st;
    static const ref_case cases[] = {
        {"softmax+rope+causal", 1, 2, 2, 150, 150, 16, 0, 1.6, 10},
        {"softmax+sinv(tau=10)+prope(p=0.375)+causal", 1, 2, 2, 150, 150, 16, 0, 1.6, 10},
        {"softmax+alibi+causal", 1, 4, 4, 150, 150, 16, 0, 1.0, 3},
        {"softmax+logn(train=64)+rope+causal", 1, 2, 2, 150, 150, 16, 0, 1.6, 10},
        {"softmax+rope+window(40)", 1, 2, 2, 150, 150, 16, 0, 1.6, 2},
        {"softmax+rope+sinks(4,30)", 1, 2, 2, 150, 150, 16, 0, 1.6, 4},
        {"softmax+rope+causal", 2, 4, 2, 150, 150, 16, 1, 1.6, 10},   /* GQA, documents */
        {"softmax+rope+causal", 1, 2, 1, 70, 150, 16, 0, 1.6, 10},    /* T < S: pos0 = 80 */
        {"softmax+alibi+full", 1, 2, 2, 150, 150, 16, 0, 1.0, 10},    /* non-causal: |t| */
        {"softmax+rope+global(3)+window(20)", 1, 2, 2, 150, 150, 16, 0, 1.6, 10},
        {"entmax(alpha=1.5)+rope+causal", 1, 2, 2, 150, 150, 16, 0, 2.0, 10},
        {"sparsemax+alibi+causal", 1, 2, 2, 150, 150, 16, 0, 2.0, 10},
        {"entmax(alpha=1.3)+sinv(tau=10)+causal", 1, 2, 1, 150, 150, 16, 0, 2.0, 10},
        {"asentmax+nape+causal", 1, 4, 4, 150, 150, 16, 0, 1.5, 10},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) run_ref_case(&cases[c]);
}

/* ---- (c) row filter and span masses (la_attn_diagnose_rows) --------------------------- */

/* Rows on both sides of the 64-row tile edges, the first and last row; spans: everything
 * (each row's masses sum to 1), a middle stretch, one late stretch that early rows cannot
 * see (their mass must be exactly 0 under causal patterns), a single key. */
static void test_rows_vs_reference(void **st) {
    (void)st;
    static const ref_case cases[] = {
        {"softmax+rope+causal", 1, 2, 2, 150, 150, 16, 0, 1.6, 10},
        {"softmax+sinv(tau=10)+prope(p=0.375)+causal", 1, 2, 2, 150, 150, 16, 0, 1.6, 10},
        {"softmax+alibi+causal", 1, 4, 4, 150, 150, 16, 0, 1.0, 3},
        {"softmax+logn(train=64)+rope+causal", 1, 2, 2, 150, 150, 16, 0, 1.6, 10},
        {"softmax+rope+causal", 2, 4, 2, 150, 150, 16, 1, 1.6, 10},   /* GQA, documents */
        {"softmax+rope+causal", 1, 2, 1, 70, 150, 16, 0, 1.6, 10},    /* T < S: pos0 = 80 */
        {"softmax+alibi+full", 1, 2, 2, 150, 150, 16, 0, 1.0, 10},    /* non-causal */
        {"softmax+rope+window(40)", 1, 2, 2, 150, 150, 16, 0, 1.6, 2},
        {"entmax(alpha=1.5)+rope+causal", 1, 2, 2, 150, 150, 16, 0, 2.0, 10},
        {"sparsemax+alibi+causal", 1, 2, 2, 150, 150, 16, 0, 2.0, 10},
        {"asentmax+nape+causal", 1, 4, 4, 150, 150, 16, 0, 1.5, 10},
    };
    static const int rows[] = {0, 5, 63, 64, 65, 69, 100, 127, 128, 149};
    static const int64_t spans[] = {0, 150, 20, 35, 120, 150, 64, 65};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = 0;
        while (n < 10 && rows[n] < cases[c].T) n++;
        la_diag_rows sel = {rows, n, spans, 4, NULL};
        run_ref_case_sel(&cases[c], &sel);
    }
    /* rows only (no spans): the accumulators alone are filtered */
    la_diag_rows only = {rows + 3, 4, NULL, 0, NULL};
    run_ref_case_sel(&cases[0], &only);
}

/* Spans sum to 1 over all keys, are exactly 0 where a causal row cannot see them, and do
 * not depend on the thread count; rows outside the filter leave the accumulators alone. */
static void test_rows_properties(void **st) {
    (void)st;
    const int H = 2, T = 700;
    fwd_case z;
    fwd_case_new(&z, H, T, 16, 11);
    const la_spec sp = z.sp;
    const la_shape sh = z.sh;
    const float *q = z.q, *k = z.k, *lse = z.lse;
    const int rows[] = {3, 300, 640, 699};
    const int64_t spans[] = {0, T, 310, 400, 0, 4};
    double m1[2 * 4 * 3], m3[2 * 4 * 3];
    la_diag **d1 = z.d, **d3 = new_diags(H, T - 1, 10);
    la_attn_opts op = la_attn_opts_default();
    op.n_threads = 1;
    la_diag_rows sel = {rows, 4, spans, 3, m1};
    assert_int_equal(la_attn_diagnose_rows(&sp, &sh, q, k, lse, &op, &sel, d1), LA_OK);
    op.n_threads = 3;
    sel.mass = m3;
    assert_int_equal(la_attn_diagnose_rows(&sp, &sh, q, k, lse, &op, &sel, d3), LA_OK);
    assert_true(memcmp(m1, m3, sizeof m1) == 0);
    for (int h = 0; h < H; h++) {
        int64_t total_rows = 0;
        for (int r = 0; r < 4; r++) {
            const double *m = m1 + ((size_t)h * 4 + r) * 3;
            assert_true(fabs(m[0] - 1) < 1e-5);          /* all keys */
            if (rows[r] < 310) assert_true(m[1] == 0.0); /* keys after the query: invisible */
            else assert_true(m[1] > 0 && m[1] < 1);
            assert_true(m[2] > 0 && m[2] <= m[0]);
        }
        for (int r = 0; r < la_diag_num_ranges(d1[h]); r++) {
            la_diag_result a, b;
            la_diag_get(d1[h], r, &a), la_diag_get(d3[h], r, &b);
            assert_true(memcmp(&a, &b, sizeof a) == 0);
            total_rows = a.rows > total_rows ? a.rows : total_rows;
        }
        assert_int_equal(total_rows, 4); /* the [0,1) range holds every folded row once */
    }
    free_diags(d3, H);
    fwd_case_free(&z);
}

static void test_rows_bad_arguments(void **st) {
    (void)st;
    const int H = 2, T = 20;
    fwd_case z;
    fwd_case_new(&z, H, T, 8, 0);
    la_spec sp = z.sp;
    la_shape sh = z.sh;
    float *q = z.q, *k = z.k, *lse = z.lse;
    la_diag **d = z.d;
    double mass[2 * 3 * 2];
    int rows[3] = {2, 7, 19};
    int64_t spans[4] = {0, 5, 5, 20};
    la_diag_rows ok = {rows, 3, spans, 2, mass}, b;
    struct { const char *what; int row_idx, row_val; int span_idx; int64_t span_val; int n_rows, n_spans, null_rows, null_spans, null_mass; } bad[] = {
        {"outside the query rows", 2, 20, -1, 0, 3, 2, 0, 0, 0},   /* row == T */
        {"outside the query rows", 0, -1, -1, 0, 3, 2, 0, 0, 0},   /* negative row */
        {"strictly increasing", 1, 2, -1, 0, 3, 2, 0, 0, 0},       /* repeated row */
        {"strictly increasing", 1, 1, -1, 0, 3, 2, 0, 0, 0},       /* decreasing */
        {"at least one query row", -1, 0, -1, 0, 0, 2, 0, 0, 0},   /* n_rows 0 */
        {"at least one query row", -1, 0, -1, 0, 3, 2, 1, 0, 0},   /* rows NULL */
        {"negative", -1, 0, -1, 0, 3, -1, 0, 0, 0},                /* n_spans < 0 */
        {"NULL", -1, 0, -1, 0, 3, 2, 0, 1, 0},                     /* spans NULL */
        {"NULL", -1, 0, -1, 0, 3, 2, 0, 0, 1},                     /* mass NULL */
        {"empty", -1, 0, 3, 5, 3, 2, 0, 0, 0},                     /* [5, 5) */
        {"empty", -1, 0, 3, 3, 3, 2, 0, 0, 0},                     /* [5, 3) */
        {"outside the keys", -1, 0, 3, 21, 3, 2, 0, 0, 0},         /* k1 > S */
        {"outside the keys", -1, 0, 0, -1, 3, 2, 0, 0, 0},         /* k0 < 0 */
    };
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        int r2[3] = {2, 7, 19};
        int64_t s2[4] = {0, 5, 5, 20};
        if (bad[c].row_idx >= 0) r2[bad[c].row_idx] = bad[c].row_val;
        if (bad[c].span_idx >= 0) s2[bad[c].span_idx] = bad[c].span_val;
        b = ok;
        b.rows = bad[c].null_rows ? NULL : r2;
        b.spans = bad[c].null_spans ? NULL : s2;
        b.mass = bad[c].null_mass ? NULL : mass;
        b.n_rows = bad[c].n_rows, b.n_spans = bad[c].n_spans;
        for (int x = 0; x < 12; x++) mass[x] = -3;
        if (la_attn_diagnose_rows(&sp, &sh, q, k, lse, NULL, &b, d) != LA_EINVAL)
            fail_msg("case %zu (%s) was accepted", c, bad[c].what);
        if (!strstr(la_errmsg(), bad[c].what)) fail_msg("case %zu: message '%s' lacks '%s'", c, la_errmsg(), bad[c].what);
        for (int x = 0; x < 12; x++) assert_true(mass[x] == -3); /* nothing written on error */
        for (int h = 0; h < H; h++) {
            la_diag_result res;
            la_diag_get(d[h], 0, &res);
            assert_int_equal(res.rows, 0);
        }
    }
    /* the valid selection passes, and mass NULL is fine without spans */
    assert_int_equal(la_attn_diagnose_rows(&sp, &sh, q, k, lse, NULL, &ok, d), LA_OK);
    b = ok;
    b.n_spans = 0, b.spans = NULL, b.mass = NULL;
    assert_int_equal(la_attn_diagnose_rows(&sp, &sh, q, k, lse, NULL, &b, d), LA_OK);
    fwd_case_free(&z);
}

/* Results do not depend on the number of threads (fixed chunks merged in order). */
static void test_threads_bitwise(void **st) {
    (void)st;
    const int H = 2, T = 1100;
    fwd_case z;
    fwd_case_new(&z, H, T, 16, 9);
    const la_spec sp = z.sp;
    const la_shape sh = z.sh;
    const float *q = z.q, *k = z.k;
    float *lse = z.lse;
    la_diag **d1 = z.d, **d2 = new_diags(H, T - 1, 10);
    la_attn_opts op = la_attn_opts_default();
    op.n_threads = 1;
    assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, lse, &op, d1), LA_OK);
    op.n_threads = 3;
    assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, lse, &op, d2), LA_OK);
    for (int h = 0; h < H; h++)
        for (int r = 0; r < la_diag_num_ranges(d1[h]); r++) {
            la_diag_result a, b;
            la_diag_get(d1[h], r, &a), la_diag_get(d2[h], r, &b);
            assert_true(memcmp(&a, &b, sizeof a) == 0);
        }
    /* every row's masses sum to 1: sum over ranges of rows * mean mass = T rows */
    for (int h = 0; h < H; h++) {
        double tot = 0;
        for (int r = 0; r < la_diag_num_ranges(d1[h]); r++) {
            la_diag_result a;
            la_diag_get(d1[h], r, &a);
            tot += (double)a.rows * a.mass;
        }
        assert_true(fabs(tot - T) < T * 1e-5);
    }
    /* a wrong statistic (lse shifted by 0.01) breaks the sum: the check can fail */
    for (int i = 0; i < H * T; i++) lse[i] += 0.01f;
    la_diag **d3 = new_diags(H, T - 1, 10);
    assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, lse, NULL, d3), LA_OK);
    double tot = 0;
    for (int r = 0; r < la_diag_num_ranges(d3[0]); r++) {
        la_diag_result a;
        la_diag_get(d3[0], r, &a);
        tot += (double)a.rows * a.mass;
    }
    assert_true(fabs(tot - T) > T * 5e-3);
    free_diags(d2, H), free_diags(d3, H);
    fwd_case_free(&z);
}

static void test_bad_arguments(void **st) {
    (void)st;
    const int H = 2, T = 20;
    fwd_case z;
    fwd_case_new(&z, H, T, 8, 0);
    la_spec sp = z.sp;
    la_shape sh = z.sh;
    float *q = z.q, *k = z.k, *lse = z.lse;
    la_diag **d = z.d;
    assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, NULL, NULL, d), LA_EINVAL);
    assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, lse, NULL, NULL), LA_EINVAL);
    la_shape bad = sh;
    bad.Hkv = 3;
    assert_int_equal(la_attn_diagnose(&sp, &bad, q, k, lse, NULL, d), LA_ESHAPE);
    la_diag *keep = d[1];
    d[1] = NULL;
    assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, lse, NULL, d), LA_EINVAL);
    d[1] = keep;
    la_diag_free(d[0]);
    assert_int_equal(la_diag_new(T - 2, 10, 1, &d[0]), LA_OK); /* one distance short */
    assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, lse, NULL, d), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "max_dist"));
    la_diag_free(d[0]);
    assert_int_equal(la_diag_new(T - 1, 10, 1, &d[0]), LA_OK);
    lse[3] = NAN;
    assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, lse, NULL, d), LA_EINVAL);
    assert_int_equal(la_spec_parse("asentmax+causal", &sp), LA_OK); /* needs beta, gamma */
    assert_int_equal(la_attn_diagnose(&sp, &sh, q, k, lse, NULL, d), LA_EINVAL);
    fwd_case_free(&z);
}

/* la_diag at the ends of int64: a t0 near INT64_MAX or INT64_MIN is refused before
 * t0 + (n-1) dt is formed (that overflowed, and the message named wrapped distances); a
 * delta whose first step leaves int64 gives two ranges [0, 1), [1, past max_dist) (the
 * double was converted to int64, and gave 101 width-1 ranges for max_dist 100 or "more than
 * 128 ranges; use a larger delta" for 1000). */
static void test_diag_int64_ends(void **state) {
    (void)state;
    la_diag *d;
    float p[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    assert_int_equal(la_diag_new(1000, 10, 1, &d), LA_OK);
    assert_int_equal(la_diag_add(d, 0, INT64_MAX - 1, 1, p, 4), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "t0 = 9223372036854775806 falls outside 0..1000"));
    assert_int_equal(la_diag_add(d, 0, INT64_MIN, -1, p, 4), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "t0 = -9223372036854775808"));
    assert_int_equal(la_diag_add(d, 0, 2, -1, p, 4), LA_EINVAL);  /* ends at -1 */
    assert_int_equal(la_diag_add(d, 0, 998, 1, p, 4), LA_EINVAL); /* ends at 1001 */
    assert_int_equal(la_diag_add(d, 0, 997, 1, p, 4), LA_OK);
    la_diag_free(d);
    const int64_t md[2] = {100, 1000};
    for (int i = 0; i < 2; i++) {
        if (la_diag_new(md[i], 1e19, 1, &d) != LA_OK) fail_msg("max_dist %lld: %s", (long long)md[i], la_errmsg());
        assert_int_equal(la_diag_num_ranges(d), 2);
        int64_t lo, hi;
        assert_int_equal(la_diag_get_range_edges(d, 1, &lo, &hi), LA_OK);
        assert_true(lo == 1 && hi > md[i]);
        la_diag_free(d);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_causal),
        cmocka_unit_test(test_uniform_window),
        cmocka_unit_test(test_vs_reference),
        cmocka_unit_test(test_rows_vs_reference),
        cmocka_unit_test(test_rows_properties),
        cmocka_unit_test(test_rows_bad_arguments),
        cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_diag_int64_ends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
