/* test_attn_half.c -- attention with f16 / bf16 inputs (la_attn_forward_typed,
 * la_attn_backward_typed; issues 27, 29) against the float32 kernel, the float64 reference
 * (tests/support/ref_attn.c) and central differences of the reference.
 *
 * Error model (what the tolerances below come from). Storing an operand x in a type with
 * p significand bits changes it by |dx| <= u |x|, u = 2^-p: bf16 p = 8, u = 2^-8 = 3.9e-3;
 * f16 p = 11, u = 2^-11 = 4.9e-4 (inputs here are O(1), far from f16's subnormals and
 * overflow). A dot product of rounded q and k moves by at most (2u + u^2) |q|_2 |k|_2
 * (Cauchy-Schwarz; RoPE rotates after the rounding and preserves the norms), so a logit
 * moves by at most dL = (2u + u^2) F max|q|_2 max|k|_2, F the largest logit factor
 * c_r a_t of the spec (ALiBi's bias and sinv's m_t are exact). A softmax row then moves by
 * |dp_j| <= p_j (e^{2 dL} - 1), and out = sum p v by at most ((e^{2 dL} - 1) + u) max|v|.
 * Entmax / sparsemax are 1-Lipschitz from logits to probabilities in the sup norm over a
 * row's support at these alphas, so the same bound with 2 dL in place of e^{2 dL} - 1
 * (smaller) holds; the softmax bound is used for every normaliser. Gradients are sums of
 * products of up to three perturbed factors (p, dO, v or q / k) whose terms can cancel, so
 * they are compared on the scale of the largest reference gradient with the tolerance
 * 4 (bound_out / max|v| + 2u) -- the first-order relative change of a three-factor term,
 * doubled (sparsemax's gradients excepted, see check_family). The float32 accumulation is checked on its own against the reference at the
 * rounded inputs with test_softmax_kernel's float32 tolerances (2e-4 outputs, 2e-3
 * gradients, relative to the largest entry), and the typed call must be bitwise the
 * float32 kernel on the converted inputs for 1, 2 and 3 threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "attn/attn_internal.h" /* la_workspace_capacity */
#include "core/half.h"
#include "longattn.h"
#include "support/ref_attn.h"

typedef struct {
    const char *family, *spec;
    int docs;        /* packed documents (doc_ids) */
} fam;

static const fam FAMS[] = {
    {"softmax", "softmax+causal", 0},
    {"softmax+rope", "softmax+rope+causal", 0},
    {"softmax+alibi", "softmax+alibi+causal", 0},
    {"softmax+logn", "softmax+logn(s=0.4)+rope+causal", 0},
    {"softmax+sinv+prope", "softmax+sinv(tau=10)+prope(p=0.5)+causal", 0},
    {"softmax+window", "softmax+rope+window(16)", 0},
    {"softmax+sinks", "softmax+rope+sinks(4,16)", 0},
    {"entmax", "entmax(alpha=1.5)+rope+causal", 0},
    {"sparsemax+window", "sparsemax+alibi+window(16)", 0},
    {"softmax packed", "softmax+rope+causal", 1},
};
#define NFAM ((int)(sizeof FAMS / sizeof FAMS[0]))

enum { B = 1, H = 4, HKV = 2, T = 80, S = 80, D = 32 }; /* T, S cross a 64-row tile edge */
#define NQ ((size_t)B * H * T * D)
#define NK ((size_t)B * HKV * S * D)
#define NR ((size_t)B * H * T)

static uint64_t rng = 88172645463325252ull;
static double unif(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static void fill(float *x, size_t n, double sc) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(sc * (2 * unif() - 1) * 1.7); /* var ~ sc^2 */
}

static void to_half(la_dtype t, const float *x, uint16_t *h, float *r, size_t n) {
    if (t == LA_DTYPE_BF16) la_cvt_f32_to_bf16(h, x, n), la_cvt_bf16_to_f32(r, h, n);
    else la_cvt_f32_to_f16(h, x, n), la_cvt_f16_to_f32(r, h, n);
}
static double *dbl(const float *x, size_t n) {
    double *d = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}
static double maxabs(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}
static double maxdiff(const float *a, const double *r, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(r[i]) || a[i] != r[i]) m = fmax(m, fabs(a[i] - r[i]));
    return m;
}
static double rownorm_max(const float *x, size_t rows) {
    double m = 0;
    for (size_t r = 0; r < rows; r++) {
        double s = 0;
        for (int d = 0; d < D; d++) s += (double)x[r * D + d] * x[r * D + d];
        m = fmax(m, sqrt(s));
    }
    return m;
}

/* largest logit factor c_r a_t of the spec at these shapes (see the error model) */
static double logit_factor(const la_spec *sp) {
    double f = 1.0 / sqrt((double)D);
    if (sp->xform == LA_XF_LOGN) f *= sp->logn_s * log((double)S);
    if (sp->xform == LA_XF_SINV) {
        double amax = 0;
        for (int t = 0; t < S + T; t++) {
            double a, m;
            la_sinv_coeffs(t, sp->tau, &a, &m);
            amax = fmax(amax, fabs(a));
        }
        f *= amax;
    }
    return f;
}

typedef struct {
    float *q, *k, *v, *dout;           /* float32 originals */
    float *qr, *kr, *vr, *dor;         /* rounded to the half type, as float32 */
    uint16_t *qh, *kh, *vh, *doh;      /* half bit patterns */
    int32_t docs[B * S];
} inputs;

static void make_inputs(inputs *in, la_dtype t) {
    float **f[8] = {&in->q, &in->k, &in->v, &in->dout, &in->qr, &in->kr, &in->vr, &in->dor};
    size_t n[4] = {NQ, NK, NK, NQ};
    for (int i = 0; i < 8; i++) *f[i] = malloc(sizeof(float) * n[i % 4]);
    uint16_t **h[4] = {&in->qh, &in->kh, &in->vh, &in->doh};
    for (int i = 0; i < 4; i++) {
        *h[i] = malloc(sizeof(uint16_t) * n[i]);
        fill(*f[i], n[i], i == 0 ? 1.0 : i == 1 ? 1.0 : 1.0);
        to_half(t, *f[i], *h[i], *f[i + 4], n[i]);
    }
    for (int j = 0; j < S; j++) in->docs[j] = j < 23 ? 0 : j < 61 ? 1 : 2; /* three documents */
}
static void free_inputs(inputs *in) {
    void *p[12] = {in->q, in->k, in->v, in->dout, in->qr, in->kr, in->vr, in->dor, in->qh, in->kh, in->vh, in->doh};
    for (int i = 0; i < 12; i++) free(p[i]);
}

typedef struct { float *out, *lse, *dq, *dk, *dv; } result;
static result res_new(void) {
    result r = {malloc(sizeof(float) * NQ), malloc(sizeof(float) * NR), malloc(sizeof(float) * NQ),
                malloc(sizeof(float) * NK), malloc(sizeof(float) * NK)};
    return r;
}
static void res_free(result *r) { free(r->out), free(r->lse), free(r->dq), free(r->dk), free(r->dv); }

static la_shape shape(void) { return (la_shape){B, H, HKV, T, S, D, LA_POS0_AUTO}; }

/* typed call (half inputs) or the float32 call on float inputs */
static void run_typed(la_dtype t, const la_spec *sp, const inputs *in, const int32_t *docs, int threads,
                      la_workspace *ws, result *r) {
    la_shape sh = shape();
    la_attn_opts o = la_attn_opts_default();
    o.doc_ids = docs, o.n_threads = threads, o.ws = ws;
    la_status st = la_attn_forward_typed(t, sp, &sh, in->qh, in->kh, in->vh, r->out, r->lse, &o);
    if (st != LA_OK) fail_msg("forward_typed: %s", la_errmsg());
    st = la_attn_backward_typed(t, sp, &sh, in->qh, in->kh, in->vh, r->out, r->lse, in->doh, r->dq, r->dk,
                                r->dv, &o);
    if (st != LA_OK) fail_msg("backward_typed: %s", la_errmsg());
}
static void run_f32(const la_spec *sp, const float *q, const float *k, const float *v, const float *dout,
                    const int32_t *docs, int threads, result *r) {
    la_shape sh = shape();
    la_attn_opts o = la_attn_opts_default();
    o.doc_ids = docs, o.n_threads = threads;
    assert_int_equal(la_attn_forward(sp, &sh, q, k, v, r->out, r->lse, &o), LA_OK);
    assert_int_equal(la_attn_backward(sp, &sh, q, k, v, r->out, r->lse, dout, r->dq, r->dk, r->dv, &o), LA_OK);
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }
static int res_same(const result *a, const result *b) {
    return same_bits(a->out, b->out, NQ) && same_bits(a->lse, b->lse, NR) && same_bits(a->dq, b->dq, NQ) &&
           same_bits(a->dk, b->dk, NK) && same_bits(a->dv, b->dv, NK);
}

typedef struct { double *out, *lse, *dq, *dk, *dv; } dref;
static dref ref_run(const la_spec *sp, const float *q, const float *k, const float *v, const float *dout,
                    const int32_t *docs) {
    dref r = {malloc(sizeof(double) * NQ), malloc(sizeof(double) * NR), malloc(sizeof(double) * NQ),
              malloc(sizeof(double) * NK), malloc(sizeof(double) * NK)};
    double *qd = dbl(q, NQ), *kd = dbl(k, NK), *vd = dbl(v, NK), *dd = dbl(dout, NQ);
    la_shape sh = shape();
    ref_attn_opts o = {0};
    o.doc_ids = docs;
    if (ref_attn_forward(sp, &sh, qd, kd, vd, &o, r.out, r.lse, NULL, NULL) ||
        ref_attn_backward(sp, &sh, qd, kd, vd, &o, dd, r.dq, r.dk, r.dv, NULL))
        fail_msg("reference: %s", ref_attn_error());
    free(qd), free(kd), free(vd), free(dd);
    return r;
}
static void dref_free(dref *r) { free(r->out), free(r->lse), free(r->dq), free(r->dk), free(r->dv); }

/* max |x - ref| / max |ref| of each tensor: out, dq, dk, dv */
static void rel_errs(const result *x, const dref *r, double e[4]) {
    e[0] = maxdiff(x->out, r->out, NQ) / fmax(maxabs(r->out, NQ), 1e-30);
    e[1] = maxdiff(x->dq, r->dq, NQ) / fmax(maxabs(r->dq, NQ), 1e-30);
    e[2] = maxdiff(x->dk, r->dk, NK) / fmax(maxabs(r->dk, NK), 1e-30);
    e[3] = maxdiff(x->dv, r->dv, NK) / fmax(maxabs(r->dv, NK), 1e-30);
}

static void check_family(const fam *f, la_dtype t, double u) {
    la_spec sp;
    if (la_spec_parse(f->spec, &sp) != LA_OK) fail_msg("spec %s: %s", f->spec, la_errmsg());
    inputs in;
    make_inputs(&in, t);
    const int32_t *docs = f->docs ? in.docs : NULL;
    la_workspace *ws = la_workspace_new();
    result a = res_new(), b = res_new(), c = res_new();

    /* 1. bitwise the float32 kernel on the converted inputs, for 1, 2 and 3 threads, with
     *    and without a caller's workspace (a reused one keeps its arenas) */
    run_f32(&sp, in.qr, in.kr, in.vr, in.dor, docs, 2, &a);
    for (int th = 1; th <= 3; th++) {
        run_typed(t, &sp, &in, docs, th, th == 2 ? NULL : ws, &b);
        if (!res_same(&a, &b)) fail_msg("%s %s: typed call != float32 kernel on converted inputs (%d threads)",
                                        f->family, la_dtype_name(t), th);
    }
    size_t cap = la_workspace_capacity(ws);
    run_typed(t, &sp, &in, docs, 3, ws, &c);
    assert_true(res_same(&a, &c));
    assert_int_equal(la_workspace_capacity(ws), cap); /* second call: no growth */

    /* 2. float32 accumulation: against the float64 reference at the rounded inputs */
    dref rr = ref_run(&sp, in.qr, in.kr, in.vr, in.dor, docs);
    double e[4];
    rel_errs(&b, &rr, e);
    if (!(e[0] <= 2e-4 && e[1] <= 2e-3 && e[2] <= 2e-3 && e[3] <= 2e-3))
        fail_msg("%s %s vs reference at rounded inputs: out %.2e dq %.2e dk %.2e dv %.2e", f->family,
                 la_dtype_name(t), e[0], e[1], e[2], e[3]);

    /* 3. against the float64 reference at the original float inputs: the input rounding */
    dref ro = ref_run(&sp, in.q, in.k, in.v, in.dout, docs);
    rel_errs(&b, &ro, e);
    double dL = (2 * u + u * u) * logit_factor(&sp) * rownorm_max(in.q, NR) * rownorm_max(in.k, (size_t)B * HKV * S);
    double vmax = 0;
    for (size_t i = 0; i < NK; i++) vmax = fmax(vmax, fabs(in.v[i]));
    double bout = (expm1(2 * dL) + u) * vmax + 2e-4 * maxabs(ro.out, NQ);
    double tout = bout / maxabs(ro.out, NQ), tg = 4 * (bout / vmax + 2 * u) + 2e-3;
    printf("  %-20s %-4s  out %.2e (bound %.2e)  dq %.2e  dk %.2e  dv %.2e (bound %.2e)\n", f->family,
           la_dtype_name(t), e[0], tout, e[1], e[2], e[3], tg);
    /* sparsemax (alpha = 2): its Jacobian jumps where a key enters or leaves a row's support
     * (dL = dP - mean over the support), and rounding the inputs moves keys near the
     * threshold across it, so its gradients at the rounded inputs differ from those at the
     * float inputs by O(1) for such rows (0.2-0.4 of the largest gradient measured, for f16
     * as for bf16): no kernel can do better, so only its output is held to the bound here;
     * its gradients are checked at the rounded inputs (2. above, 4. below). Entmax 1.5's
     * Jacobian (u = p^(1/2)) is continuous there. */
    int grads = !(sp.norm == LA_NORM_SPARSEMAX);
    if (!(e[0] <= tout && (!grads || (e[1] <= tg && e[2] <= tg && e[3] <= tg))))
        fail_msg("%s %s vs reference at float inputs over the bound", f->family, la_dtype_name(t));

    /* 4. central differences of the float64 reference at the rounded inputs -- the function
     *    the typed backward differentiates (loss = sum dout o out, h = 1e-5: truncation
     *    ~1e-10, rounding ~1e-11) -- against the typed backward, four entries each of q, k,
     *    v, with the float32 gradient tolerance of 2. (2e-3 of the largest gradient) */
    double *qd = dbl(in.qr, NQ), *kd = dbl(in.kr, NK), *vd = dbl(in.vr, NK), *dd = dbl(in.dor, NQ);
    double *o1 = malloc(sizeof(double) * NQ), *l1 = malloc(sizeof(double) * NR);
    la_shape sh = shape();
    ref_attn_opts ro_opts = {0};
    ro_opts.doc_ids = docs;
    double gscale[3] = {maxabs(rr.dq, NQ), maxabs(rr.dk, NK), maxabs(rr.dv, NK)};
    for (int which = 0; which < 3; which++) {
        double *x = which == 0 ? qd : which == 1 ? kd : vd;
        const float *g = which == 0 ? b.dq : which == 1 ? b.dk : b.dv;
        size_t n = which == 0 ? NQ : NK;
        for (int s = 0; s < 4; s++) {
            size_t i = (size_t)(unif() * (double)n) % n;
            double keep = x[i], lp = 0, lm = 0;
            const double h = 1e-5;
            x[i] = keep + h;
            ref_attn_forward(&sp, &sh, qd, kd, vd, &ro_opts, o1, l1, NULL, NULL);
            for (size_t j = 0; j < NQ; j++) lp += dd[j] * o1[j];
            x[i] = keep - h;
            ref_attn_forward(&sp, &sh, qd, kd, vd, &ro_opts, o1, l1, NULL, NULL);
            for (size_t j = 0; j < NQ; j++) lm += dd[j] * o1[j];
            x[i] = keep;
            double fd = (lp - lm) / (2 * h);
            if (!(fabs(g[i] - fd) <= 2e-3 * gscale[which]))
                fail_msg("%s %s: d%c[%zu] = %g, central difference %g (tol %g)", f->family, la_dtype_name(t),
                         "qkv"[which], i, (double)g[i], fd, 2e-3 * gscale[which]);
        }
    }
    free(qd), free(kd), free(vd), free(dd), free(o1), free(l1);
    dref_free(&rr), dref_free(&ro);
    res_free(&a), res_free(&b), res_free(&c);
    la_workspace_free(ws);
    free_inputs(&in);
}

static void test_bf16_families(void **state) {
    (void)state;
    for (int i = 0; i < NFAM; i++) check_family(&FAMS[i], LA_DTYPE_BF16, ldexp(1, -8));
}
static void test_f16_families(void **state) {
    (void)state;
    for (int i = 0; i < NFAM; i++) check_family(&FAMS[i], LA_DTYPE_F16, ldexp(1, -11));
}

/* LA_DTYPE_F32 through the typed entry points is la_attn_forward itself, bitwise */
static void test_f32_is_the_float_kernel(void **state) {
    (void)state;
    la_spec sp;
    assert_int_equal(la_spec_parse("softmax+rope+causal", &sp), LA_OK);
    inputs in;
    make_inputs(&in, LA_DTYPE_BF16);
    result a = res_new(), b = res_new();
    run_f32(&sp, in.q, in.k, in.v, in.dout, NULL, 2, &a);
    la_shape sh = shape();
    la_attn_opts o = la_attn_opts_default();
    o.n_threads = 2;
    assert_int_equal(la_attn_forward_typed(LA_DTYPE_F32, &sp, &sh, in.q, in.k, in.v, b.out, b.lse, &o), LA_OK);
    assert_int_equal(la_attn_backward_typed(LA_DTYPE_F32, &sp, &sh, in.q, in.k, in.v, b.out, b.lse, in.dout,
                                            b.dq, b.dk, b.dv, &o), LA_OK);
    assert_true(res_same(&a, &b));
    res_free(&a), res_free(&b);
    free_inputs(&in);
}

static void test_bad_arguments(void **state) {
    (void)state;
    la_spec sp;
    assert_int_equal(la_spec_parse("softmax+causal", &sp), LA_OK);
    la_shape sh = shape();
    uint16_t x[4] = {0};
    float out[4], lse[4];
    assert_int_equal(la_attn_forward_typed(LA_DTYPE_I8, &sp, &sh, x, x, x, out, lse, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "f32, f16 or bf16"));
    assert_int_equal(la_attn_forward_typed((la_dtype)9, &sp, &sh, x, x, x, out, lse, NULL), LA_EINVAL);
    assert_int_equal(la_attn_forward_typed(LA_DTYPE_BF16, &sp, &sh, NULL, x, x, out, lse, NULL), LA_EINVAL);
    assert_int_equal(la_attn_backward_typed(LA_DTYPE_F16, &sp, &sh, x, x, x, out, lse, NULL, out, out, out, NULL),
                     LA_EINVAL);
    la_shape bad = sh;
    bad.D = 0;
    assert_int_equal(la_attn_forward_typed(LA_DTYPE_BF16, &sp, &bad, x, x, x, out, lse, NULL), LA_ESHAPE);
    /* a NaN query stored in bf16 is the float kernel's error, naming the element */
    uint16_t *q = calloc(NQ, 2), *k = calloc(NK, 2), *v = calloc(NK, 2);
    float *o = malloc(sizeof(float) * NQ), *l = malloc(sizeof(float) * NR);
    q[5] = 0x7fc0; /* bf16 quiet NaN */
    assert_int_equal(la_attn_forward_typed(LA_DTYPE_BF16, &sp, &sh, q, k, v, o, l, NULL), LA_ENUMERIC);
    assert_non_null(strstr(la_errmsg(), "q[0, 0, 0, 5]"));
    free(q), free(k), free(v), free(o), free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_families),
        cmocka_unit_test(test_f16_families),
        cmocka_unit_test(test_f32_is_the_float_kernel),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
