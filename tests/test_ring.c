/* test_ring.c -- sequence-parallel attention (issue 30, src/attn/ring.c) in one process:
 *   - the zigzag layout: the ranks' row ranges partition [0, T) in whole 64-row tiles, rank
 *     r holding chunks r and 2P-1-r, for many T and P (also T with fewer tiles than 2P);
 *   - exactness of the per-rank computation: for P = 2, 3, 4, 5 the rows computed by each
 *     rank alone (la_attn_sp_forward_rank / _backward_rank, the computation a rank runs once
 *     the ring has delivered the other ranks' rows) put together are bitwise equal (memcmp)
 *     to la_attn_forward / la_attn_backward of the whole sequence: out, lse, entropy,
 *     support, dq, dk, dv, and d logn_s from the ranks' per-tile partial sums added in the
 *     one-process order. Softmax with RoPE, p-RoPE, ALiBi, NAPE, YaRN, dynamic NTK, logn,
 *     qwen-logn, sinv, temp; causal, window, sinks, global+window, full; packed documents;
 *     GQA; B = 2; T not a multiple of 64; a learned sink (d sinks on every rank), softmax-
 *     plus-one, sigmoid rows with a fixed b and the per-row -ln n variant (issue 31);
 *   - the same rows against the float64 reference (tests/support/ref_attn.c), so the
 *     assembled result is right and not only equal: |err| <= 2e-5 forward, 5e-4 backward
 *     relative to the largest reference entry (float32 accumulation over <= 300 keys of
 *     O(1) products: the kernel's own tolerance in test_softmax_kernel.c);
 *   - the entmax family (1.5, bisection at 1.3 with logn, sparsemax with documents, ASEntmax
 *     with its d beta / d gamma) the same way: each rank holds every key, so a row's
 *     threshold is the one-process kernel's;
 *   - refusals with a clear message: ASEntmax without its parameters, T != S, pos0 != 0,
 *     key_mass;
 *   - ASEntmax's beta, gamma computed rank by rank (la_asentmax_params_forward_rows, as
 *     sequence-parallel training does) equal to one call over all rows;
 *   - la_attn_sp_forward / _backward as one process (no MPI in this test: the group has
 *     one rank) equal to the plain kernel.
 * The MPI runs (np 2, 3, 4 against one rank) are in tests/mpi.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "attn/ring.h"
#include "longattn.h"
#include "support/ref_attn.h"

static void test_layout(void **state) {
    (void)state;
    for (int T = 1; T <= 1100; T += 37)
        for (int P = 1; P <= 9; P++) {
            int nt = (T + 63) / 64;
            int *owner = malloc(sizeof(int) * (size_t)T);
            for (int i = 0; i < T; i++) owner[i] = -1;
            for (int r = 0; r < P; r++) {
                int rw[4];
                la_attn_sp_rows(T, P, r, rw);
                assert_true(rw[0] <= rw[1] && rw[1] <= rw[2] && rw[2] <= rw[3] && rw[3] <= T);
                for (int x = 0; x < 4; x++) assert_true(rw[x] % 64 == 0 || rw[x] == T);
                for (int x = 0; x < 4; x += 2)
                    for (int i = rw[x]; i < rw[x + 1]; i++) {
                        assert_int_equal(owner[i], -1);
                        owner[i] = r;
                    }
                /* chunk r then chunk 2P-1-r: the first range starts at tile r nt / 2P */
                assert_int_equal(rw[0], (int)((int64_t)r * nt / (2 * P)) * 64 < T ? (int)((int64_t)r * nt / (2 * P)) * 64 : T);
            }
            for (int i = 0; i < T; i++) assert_true(owner[i] >= 0);
            free(owner);
        }
}

typedef struct {
    const char *spec;
    int B, H, Hkv, T, D, docs;
} rcase;

static const rcase cases[] = {
    {"softmax+rope+causal", 1, 2, 1, 300, 16, 0},
    {"softmax+alibi+causal", 2, 4, 2, 257, 8, 0},
    {"softmax+logn+prope(p=0.5)+causal", 1, 4, 2, 200, 16, 0},
    {"softmax+sinv(tau=10)+prope(p=0.5)+causal", 1, 2, 2, 320, 16, 0},
    {"softmax+qwen-logn(train=64)+yarn(s=4,train=64)+sinks(n=4,w=70)", 1, 2, 1, 300, 16, 0},
    {"softmax+temp(x=0.7)+nape+window(w=100)", 1, 4, 4, 290, 8, 0},
    {"softmax+dynamic-ntk(s=2,train=64)+global(g=3)+window(w=65)", 1, 2, 1, 260, 16, 0},
    {"softmax+rope+causal", 2, 2, 1, 250, 16, 1},
    {"softmax+logn+alibi+full", 1, 2, 1, 150, 8, 1},
    {"softmax+nope+causal", 1, 1, 1, 64, 8, 0},
    /* issue 31's normalisers: a learned sink (its gradient from every row, after the ring),
     * softmax-plus-one, sigmoid rows (fixed b and the per-row -ln n variant) */
    {"softmax+sink+rope+causal", 1, 4, 2, 300, 16, 0},
    {"softmax+sink+sinv(tau=10)+prope(p=0.25)+causal", 2, 2, 1, 270, 16, 1},
    {"softmax+sink(fixed=0)+alibi+window(w=100)", 1, 2, 1, 257, 8, 0},
    {"sigmoid(b=-4)+rope+causal", 1, 2, 1, 260, 16, 0},
    {"sigmoid-logn+nape+window(w=90)", 2, 2, 2, 230, 8, 1},
    /* the entmax family: every rank holds every key, so each row's threshold is the
     * one-process kernel's over the whole row */
    {"entmax(alpha=1.5)+rope+causal", 1, 2, 1, 260, 16, 0},
    {"sparsemax+alibi+window(w=100)", 2, 2, 2, 230, 8, 1},
    {"entmax(alpha=1.3)+logn+causal", 1, 2, 1, 200, 8, 0},
    {"asentmax+nape+causal", 1, 4, 2, 210, 8, 0},
};

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *rnd(size_t n, uint64_t seed) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = frand(&seed);
    return x;
}

static double *to_d(const float *x, size_t n) {
    double *y = malloc(sizeof(double) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

/* copy rank r's rows (rows rw) of src (nh, T, w) into dst */
static void copy_rows(float *dst, const float *src, int nh, int T, int w, const int rw[4]) {
    for (int h = 0; h < nh; h++)
        for (int x = 0; x < 4; x += 2)
            memcpy(dst + ((size_t)h * T + rw[x]) * w, src + ((size_t)h * T + rw[x]) * w,
                   sizeof(float) * (size_t)(rw[x + 1] - rw[x]) * w);
}

static double max_rel(const float *a, const double *ref, size_t n) {
    double m = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(ref[i])) continue;
        m = fabs(ref[i]) > m ? fabs(ref[i]) : m;
        double d = fabs(a[i] - ref[i]);
        e = d > e ? d : e;
    }
    return e / (m > 0 ? m : 1);
}

static void run_case(const rcase *tc) {
    la_spec spec;
    assert_int_equal(la_spec_parse(tc->spec, &spec), LA_OK);
    const int B = tc->B, H = tc->H, Hkv = tc->Hkv, T = tc->T, D = tc->D;
    la_shape sh = {B, H, Hkv, T, T, D, 0};
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * Hkv * T * D, nr = (size_t)B * H * T;
    float *q = rnd(nq, 1), *k = rnd(nk, 2), *v = rnd(nk, 3), *g = rnd(nq, 4);
    for (size_t i = 0; i < nq; i++) q[i] *= 2.0f; /* peakier rows */
    int32_t *docs = NULL;
    if (tc->docs) {
        docs = malloc(sizeof(int32_t) * (size_t)B * T);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < T; j++) docs[(size_t)b * T + j] = (j + 13 * b) / 77; /* runs of 77 */
    }
    float logn_s[16];
    for (int h = 0; h < H; h++) logn_s[h] = 0.15f + 0.02f * h;
    float *asb = malloc(sizeof(float) * nr), *asg = malloc(sizeof(float) * nr);
    double *asbd = malloc(sizeof(double) * nr), *asgd = malloc(sizeof(double) * nr);
    for (size_t i = 0; i < nr; i++) {
        asb[i] = 0.3f + 0.001f * (float)(i % 97), asg[i] = 0.5f + 0.002f * (float)(i % 53);
        asbd[i] = asb[i], asgd[i] = asg[i];
    }
    int as = spec.norm == LA_NORM_ASENTMAX, sk = spec.sink == LA_SINK_LEARNED;
    float sinks[16], ds1[16], ds2[16];
    double sinksd[16], dsr[16];
    for (int h = 0; h < H; h++) sinks[h] = -0.5f + 0.4f * (float)h, sinksd[h] = sinks[h];
    la_attn_opts o = la_attn_opts_default();
    if (sk) o.sinks = sinks;
    o.doc_ids = docs;
    if (as) o.as_beta = asb, o.as_gamma = asg;
    o.logn_s = spec.xform == LA_XF_LOGN ? logn_s : NULL;
    o.n_threads = 2;
    float *ent1 = malloc(sizeof(float) * nr), *sup1 = malloc(sizeof(float) * nr);
    float dl1[16], dl2[16];
    /* one process */
    float *out1 = malloc(sizeof(float) * nq), *lse1 = malloc(sizeof(float) * nr);
    float *dq1 = malloc(sizeof(float) * nq), *dk1 = malloc(sizeof(float) * nk), *dv1 = malloc(sizeof(float) * nk);
    o.row_entropy = ent1, o.row_support = sup1;
    assert_int_equal(la_attn_forward(&spec, &sh, q, k, v, out1, lse1, &o), LA_OK);
    o.row_entropy = o.row_support = NULL;
    o.dlogn_s = dl1;
    float *db1 = malloc(sizeof(float) * nr), *dg1 = malloc(sizeof(float) * nr);
    float *db2 = malloc(sizeof(float) * nr), *dg2 = malloc(sizeof(float) * nr);
    float *tdb = malloc(sizeof(float) * nr), *tdg = malloc(sizeof(float) * nr);
    if (as) o.das_beta = db1, o.das_gamma = dg1;
    if (sk) o.dsinks = ds1;
    assert_int_equal(la_attn_backward(&spec, &sh, q, k, v, out1, lse1, g, dq1, dk1, dv1, &o), LA_OK);
    o.das_beta = o.das_gamma = NULL;
    o.dsinks = NULL;
    int nqt = (T + 63) / 64;
    for (int P = 2; P <= 5; P++) {
        float *out2 = malloc(sizeof(float) * nq), *lse2 = malloc(sizeof(float) * nr);
        float *ent2 = malloc(sizeof(float) * nr), *sup2 = malloc(sizeof(float) * nr);
        float *dq2 = malloc(sizeof(float) * nq), *dk2 = malloc(sizeof(float) * nk), *dv2 = malloc(sizeof(float) * nk);
        float *to = malloc(sizeof(float) * nq), *tl = malloc(sizeof(float) * nr), *te = malloc(sizeof(float) * nr);
        float *ts = malloc(sizeof(float) * nr), *tq = malloc(sizeof(float) * nq), *tk = malloc(sizeof(float) * nk);
        float *tv = malloc(sizeof(float) * nk);
        double *part = calloc((size_t)B * H * nqt, sizeof(double)), *tp = malloc(sizeof(double) * (size_t)B * H * nqt);
        memset(out2, 0xA5, sizeof(float) * nq), memset(lse2, 0xA5, sizeof(float) * nr);
        memset(dq2, 0xA5, sizeof(float) * nq), memset(dk2, 0xA5, sizeof(float) * nk), memset(dv2, 0xA5, sizeof(float) * nk);
        for (int r = 0; r < P; r++) {
            int rw[4];
            la_attn_sp_rows(T, P, r, rw);
            /* a rank's scratch rows hold garbage of its own: never read into its rows */
            memset(to, 0x5A, sizeof(float) * nq), memset(tl, 0x5A, sizeof(float) * nr);
            memset(tq, 0x5A, sizeof(float) * nq), memset(tk, 0x5A, sizeof(float) * nk), memset(tv, 0x5A, sizeof(float) * nk);
            la_attn_opts orank = o;
            orank.dlogn_s = NULL;
            orank.row_entropy = te, orank.row_support = ts;
            assert_int_equal(la_attn_sp_forward_rank(&spec, &sh, q, k, v, to, tl, &orank, P, r), LA_OK);
            copy_rows(out2, to, B * H, T, D, rw);
            copy_rows(lse2, tl, B * H, T, 1, rw);
            copy_rows(ent2, te, B * H, T, 1, rw);
            copy_rows(sup2, ts, B * H, T, 1, rw);
            orank.row_entropy = orank.row_support = NULL;
            orank.dlogn_s = dl2; /* asks for the parts */
            if (as) orank.das_beta = tdb, orank.das_gamma = tdg;
            if (sk) orank.dsinks = ds2, memset(ds2, 0x5A, sizeof ds2);
            memset(tp, 0x5A, sizeof(double) * (size_t)B * H * nqt);
            assert_int_equal(la_attn_sp_backward_rank(&spec, &sh, q, k, v, out1, lse1, g, tq, tk, tv, tp, &orank, P, r),
                             LA_OK);
            if (sk) assert_memory_equal(ds1, ds2, sizeof(float) * (size_t)H); /* every rank: the whole gradient */
            copy_rows(dq2, tq, B * H, T, D, rw);
            copy_rows(dk2, tk, B * Hkv, T, D, rw);
            copy_rows(dv2, tv, B * Hkv, T, D, rw);
            if (as) copy_rows(db2, tdb, B * H, T, 1, rw), copy_rows(dg2, tdg, B * H, T, 1, rw);
            int tt[4];
            for (int x = 0; x < 4; x++) tt[x] = (rw[x] + 63) / 64;
            for (size_t bh = 0; bh < (size_t)B * H; bh++)
                for (int x = 0; x < 4; x += 2)
                    for (int t = tt[x]; t < tt[x + 1]; t++) part[bh * nqt + t] = tp[bh * nqt + t];
        }
        assert_memory_equal(out1, out2, sizeof(float) * nq);
        assert_memory_equal(lse1, lse2, sizeof(float) * nr);
        assert_memory_equal(ent1, ent2, sizeof(float) * nr);
        assert_memory_equal(sup1, sup2, sizeof(float) * nr);
        assert_memory_equal(dq1, dq2, sizeof(float) * nq);
        assert_memory_equal(dk1, dk2, sizeof(float) * nk);
        assert_memory_equal(dv1, dv2, sizeof(float) * nk);
        if (as) assert_memory_equal(db1, db2, sizeof(float) * nr), assert_memory_equal(dg1, dg2, sizeof(float) * nr);
        if (spec.xform == LA_XF_LOGN)
            for (int h = 0; h < H; h++) { /* la_sum_parts' order: b, then query tile */
                double acc = 0.0;
                for (int b = 0; b < B; b++)
                    for (int t = 0; t < nqt; t++) acc += part[((size_t)b * H + h) * nqt + t];
                float f = (float)acc;
                assert_memory_equal(&f, &dl1[h], sizeof f);
            }
        if (P == 3) { /* the assembled rows against the float64 reference */
            double *qd = to_d(q, nq), *kd = to_d(k, nk), *vd = to_d(v, nk), *gd = to_d(g, nq);
            double *ro = malloc(sizeof(double) * nq), *rl = malloc(sizeof(double) * nr);
            double *rq = malloc(sizeof(double) * nq), *rk = malloc(sizeof(double) * nk), *rv = malloc(sizeof(double) * nk);
            double ls[16];
            for (int h = 0; h < H; h++) ls[h] = logn_s[h];
            ref_attn_opts ro_ = {.doc_ids = docs, .logn_s = spec.xform == LA_XF_LOGN ? ls : NULL,
                                 .as_beta = as ? asbd : NULL, .as_gamma = as ? asgd : NULL,
                                 .sinks = sk ? sinksd : NULL, .dsinks = sk ? dsr : NULL};
            assert_int_equal(ref_attn_forward(&spec, &sh, qd, kd, vd, &ro_, ro, rl, NULL, NULL), 0);
            assert_int_equal(ref_attn_backward(&spec, &sh, qd, kd, vd, &ro_, gd, rq, rk, rv, NULL), 0);
            double e1 = max_rel(out2, ro, nq), e2 = max_rel(lse2, rl, nr);
            double e3 = max_rel(dq2, rq, nq), e4 = max_rel(dk2, rk, nk), e5 = max_rel(dv2, rv, nk);
            if (e1 > 2e-5 || e2 > 2e-5 || e3 > 5e-4 || e4 > 5e-4 || e5 > 5e-4)
                fail_msg("%s: vs float64 out %.2g lse %.2g dq %.2g dk %.2g dv %.2g", tc->spec, e1, e2, e3, e4, e5);
            if (sk) { /* a sum over every row of the batch: relative to the largest entry */
                double mx = 0, e6 = 0;
                for (int h = 0; h < H; h++) mx = fmax(mx, fabs(dsr[h])), e6 = fmax(e6, fabs(ds1[h] - dsr[h]));
                if (e6 > 5e-4 * fmax(mx, 1e-3)) fail_msg("%s: d sinks vs float64 %.2g (largest %.2g)", tc->spec, e6, mx);
            }
            free(qd), free(kd), free(vd), free(gd), free(ro), free(rl), free(rq), free(rk), free(rv);
        }
        free(out2), free(lse2), free(ent2), free(sup2), free(dq2), free(dk2), free(dv2);
        free(to), free(tl), free(te), free(ts), free(tq), free(tk), free(tv), free(part), free(tp);
    }
    /* the collective calls as one process: equal to the kernel */
    {
        float *q2 = malloc(sizeof(float) * nq), *k2 = malloc(sizeof(float) * nk), *v2 = malloc(sizeof(float) * nk);
        float *g2 = malloc(sizeof(float) * nq);
        float *out2 = malloc(sizeof(float) * nq), *lse2 = malloc(sizeof(float) * nr);
        float *dq2 = malloc(sizeof(float) * nq), *dk2 = malloc(sizeof(float) * nk), *dv2 = malloc(sizeof(float) * nk);
        memcpy(q2, q, sizeof(float) * nq), memcpy(k2, k, sizeof(float) * nk), memcpy(v2, v, sizeof(float) * nk);
        memcpy(g2, g, sizeof(float) * nq);
        la_sp_stats st;
        la_attn_opts o2 = o;
        o2.dlogn_s = NULL;
        assert_int_equal(la_attn_sp_forward(&spec, &sh, q2, k2, v2, out2, lse2, &o2, &st), LA_OK);
        assert_memory_equal(out1, out2, sizeof(float) * nq);
        assert_memory_equal(lse1, lse2, sizeof(float) * nr);
        assert_true(st.bytes_sent == 0 && st.steps == 0);
        o2.dlogn_s = dl2;
        if (sk) o2.dsinks = ds2, memset(ds2, 0x5A, sizeof ds2);
        assert_int_equal(la_attn_sp_backward(&spec, &sh, q2, k2, v2, out2, lse2, g2, dq2, dk2, dv2, &o2, &st), LA_OK);
        if (sk) assert_memory_equal(ds1, ds2, sizeof(float) * (size_t)H);
        assert_memory_equal(dq1, dq2, sizeof(float) * nq);
        assert_memory_equal(dk1, dk2, sizeof(float) * nk);
        assert_memory_equal(dv1, dv2, sizeof(float) * nk);
        if (spec.xform == LA_XF_LOGN) assert_memory_equal(dl1, dl2, sizeof(float) * (size_t)H);
        free(q2), free(k2), free(v2), free(g2), free(out2), free(lse2), free(dq2), free(dk2), free(dv2);
    }
    free(q), free(k), free(v), free(g), free(docs), free(ent1), free(sup1), free(asb), free(asg), free(asbd), free(asgd);
    free(out1), free(lse1), free(dq1), free(dk1), free(dv1), free(db1), free(dg1), free(db2), free(dg2), free(tdb), free(tdg);
}

static void test_exact(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
}

static void test_refusals(void **state) {
    (void)state;
    la_spec spec;
    float x[4 * 64 * 8] = {0}, y[4 * 64 * 8], l[4 * 64], km[64];
    la_shape sh = {1, 1, 1, 64, 64, 8, 0};
    assert_int_equal(la_spec_parse("asentmax+causal", &spec), LA_OK); /* needs as_beta, as_gamma */
    assert_int_equal(la_attn_sp_forward_rank(&spec, &sh, x, x, x, y, l, NULL, 2, 0), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "as_beta"));
    assert_int_equal(la_attn_sp_forward(&spec, &sh, x, x, x, y, l, NULL, NULL), LA_EINVAL);
    assert_int_equal(la_spec_parse("softmax+causal", &spec), LA_OK);
    la_shape s2 = {1, 1, 1, 32, 64, 8, LA_POS0_AUTO};
    assert_int_equal(la_attn_sp_forward_rank(&spec, &s2, x, x, x, y, l, NULL, 2, 0), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "must be equal"));
    la_shape s3 = {1, 1, 1, 64, 64, 8, 5};
    assert_int_equal(la_attn_sp_forward_rank(&spec, &s3, x, x, x, y, l, NULL, 2, 0), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "pos0 = 0"));
    la_attn_opts o = la_attn_opts_default();
    o.key_mass = km;
    assert_int_equal(la_attn_sp_forward_rank(&spec, &sh, x, x, x, y, l, &o, 2, 0), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "key_mass"));
    assert_int_equal(la_attn_sp_forward_rank(&spec, &sh, x, x, x, y, l, NULL, 2, 2), LA_EINVAL);
}

/* ASEntmax's beta, gamma computed rank by rank (each rank its zigzag rows of every sequence,
 * la_asentmax_params_forward_rows: what sequence-parallel training does before gathering
 * them) put together equal one call over all rows byte for byte, for P = 1..4 and T not a
 * multiple of 64; rows outside [0, B*T) are refused. */
static void test_asentmax_rows(void **state) {
    (void)state;
    const int B = 2, T = 300, C = 24, H = 3;
    float *x = malloc(sizeof(float) * B * T * C), *w = malloc(sizeof(float) * 2 * H * C);
    float bb[3] = {0.3f, -0.2f, 0.1f}, bg[3] = {-0.4f, 0.5f, 0.0f};
    float *ref = malloc(sizeof(float) * 4 * B * H * T), *beta = ref + 2 * B * H * T, *gamma = beta + B * H * T;
    uint32_t u = 12345;
    for (int i = 0; i < B * T * C; i++) x[i] = (float)((u = u * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < 2 * H * C; i++) w[i] = (float)((u = u * 1664525u + 1013904223u) >> 8) / 8388608.0f - 1.0f;
    assert_int_equal(la_asentmax_params_forward(x, B, T, C, H, w, bb, w + H * C, bg, 2.0, ref, ref + B * H * T), LA_OK);
    for (int P = 1; P <= 4; P++) {
        memset(beta, 0xff, sizeof(float) * 2 * B * H * T); /* NaN: a row left out shows */
        for (int r = 0; r < P; r++) {
            int rw[4];
            la_attn_sp_rows(T, P, r, rw);
            for (int b = 0; b < B; b++)
                for (int k = 0; k < 4; k += 2)
                    assert_int_equal(la_asentmax_params_forward_rows(x, B, T, C, H, w, bb, w + H * C, bg, 2.0, beta,
                                                                     gamma, (int64_t)b * T + rw[k],
                                                                     (int64_t)b * T + rw[k + 1]), LA_OK);
        }
        assert_memory_equal(beta, ref, sizeof(float) * 2 * B * H * T);
    }
    assert_int_equal(la_asentmax_params_forward_rows(x, B, T, C, H, w, bb, w + H * C, bg, 2.0, beta, gamma, 10,
                                                     (int64_t)B * T + 1), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "not inside [0, 600)"));
    free(x);
    free(w);
    free(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_asentmax_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
