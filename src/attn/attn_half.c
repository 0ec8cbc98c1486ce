/* attn_half.c -- attention with f16 / bf16 inputs (issues 27, 29): la_attn_forward_typed,
 * la_attn_backward_typed.
 *
 * Portable path (the one this build has): the half inputs are converted to float32 once
 * per call into the workspace's conversion arena (la_ws_carve_cvt; src/core/half.h's
 * dispatched la_cvt_*_to_f32, F16C where the CPU has it), then the float32 kernels run
 * unchanged. A bf16 or f16 value is exact in float32, so every product of the tiles is
 * the product of the stored operands and every sum accumulates in float32: this is
 * "half operands, float32 accumulation", bitwise the float32 kernel on the converted
 * inputs, for every normaliser, pattern and encoding.
 *
 * Not here: a fast path whose tile products read the half tiles directly (AVX512-BF16
 * vdpbf16ps, AVX512-FP16). The machine this was written on (AMD EPYC Zen 3) has neither,
 * and an untested fast path is not added; it belongs in the tile loaders (la_load_q,
 * la_prep_pairs) once it can be measured. Cost of the portable path: one pass over q, k,
 * v (and dout) and 4 bytes per element of workspace; the attention itself runs at the
 * float32 kernel's speed.
 */
#include "attn/attn_internal.h"
#include "core/half.h"
#include "longattn/attn.h"

#include <omp.h>
#include <stdint.h>
#include <string.h>

static la_status check_dtype(la_dtype t, const char *fn) {
    if (t == LA_DTYPE_F32 || t == LA_DTYPE_F16 || t == LA_DTYPE_BF16) return LA_OK;
    return la_fail(LA_EINVAL, "%s: dtype %s (%d) is not an attention input type; use f32, f16 or bf16",
                   fn, la_dtype_name(t), (int)t);
}

/* src (n elements of type t) -> dst (n floats), in chunks over the threads (each element
 * converted independently: the result does not depend on the thread count). */
static void to_f32(la_dtype t, const void *src, float *dst, size_t n, int nthreads) {
    const uint16_t *h = src;
    const size_t chunk = (size_t)1 << 14;
    const long nch = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for num_threads(nthreads) schedule(static) if (nch > 1)
    for (long c = 0; c < nch; c++) {
        size_t i0 = (size_t)c * chunk, m = n - i0 < chunk ? n - i0 : chunk;
        if (t == LA_DTYPE_BF16) la_cvt_bf16_to_f32(dst + i0, h + i0, m);
        else la_cvt_f16_to_f32(dst + i0, h + i0, m);
    }
}

typedef struct {
    la_attn_opts o;      /* the caller's options with o.ws set */
    la_workspace *own;   /* allocated here when the caller gave no workspace */
    float *x[4];         /* float32 copies of q, k, v, dout */
} cvt_call;

/* Convert the n_in inputs (q, k, v[, dout]) into float32 copies in the conversion arena. */
static la_status cvt_inputs(cvt_call *cc, la_dtype t, const la_shape *s, const la_attn_opts *opts,
                            const void *const *in, int n_in, const char *fn) {
    memset(cc, 0, sizeof *cc);
    cc->o = opts ? *opts : la_attn_opts_default();
    if (!s) return la_fail(LA_EINVAL, "%s: shape must not be NULL", fn);
    if (s->B < 1 || s->H < 1 || s->Hkv < 1 || s->T < 1 || s->S < 1 || s->D < 1)
        return la_fail(LA_ESHAPE, "%s: every dimension must be >= 1 (B=%d H=%d Hkv=%d T=%d S=%d D=%d)", fn,
                       s->B, s->H, s->Hkv, s->T, s->S, s->D);
    for (int i = 0; i < n_in; i++)
        if (!in[i]) return la_fail(LA_EINVAL, "%s: q, k, v (and dout) must not be NULL", fn);
    size_t nq = (size_t)s->B * s->H * s->T * s->D, nk = (size_t)s->B * s->Hkv * s->S * s->D;
    size_t n[4] = {nq, nk, nk, nq};
    if (!cc->o.ws) {
        LA_TRY(la_workspace_create(&cc->own));
        cc->o.ws = cc->own;
    }
    la_ws_req req[4];
    for (int i = 0; i < n_in; i++) req[i] = (la_ws_req){(void **)&cc->x[i], sizeof(float) * n[i]};
    LA_TRY(la_ws_carve_cvt(cc->o.ws, req, n_in));
    int nt = cc->o.n_threads > 0 ? cc->o.n_threads : omp_get_max_threads();
    for (int i = 0; i < n_in; i++) to_f32(t, in[i], cc->x[i], n[i], nt < 1 ? 1 : nt);
    return LA_OK;
}

la_status la_attn_forward_typed(la_dtype dtype, const la_spec *spec, const la_shape *shape,
                                 const void *q, const void *k, const void *v,
                                 float *out, float *row_stat, const la_attn_opts *opts) {
    LA_TRY(check_dtype(dtype, "la_attn_forward_typed"));
    if (dtype == LA_DTYPE_F32) return la_attn_forward(spec, shape, q, k, v, out, row_stat, opts);
    cvt_call cc;
    const void *in[3] = {q, k, v};
    la_status st = cvt_inputs(&cc, dtype, shape, opts, in, 3, "la_attn_forward_typed");
    if (st == LA_OK) st = la_attn_forward(spec, shape, cc.x[0], cc.x[1], cc.x[2], out, row_stat, &cc.o);
    la_workspace_free(cc.own);
    return st;
}

la_status la_attn_backward_typed(la_dtype dtype, const la_spec *spec, const la_shape *shape,
                                  const void *q, const void *k, const void *v,
                                  const float *out, const float *row_stat, const void *dout,
                                  float *dq, float *dk, float *dv, const la_attn_opts *opts) {
    LA_TRY(check_dtype(dtype, "la_attn_backward_typed"));
    if (dtype == LA_DTYPE_F32)
        return la_attn_backward(spec, shape, q, k, v, out, row_stat, dout, dq, dk, dv, opts);
    cvt_call cc;
    const void *in[4] = {q, k, v, dout};
    la_status st = cvt_inputs(&cc, dtype, shape, opts, in, 4, "la_attn_backward_typed");
    if (st == LA_OK)
        st = la_attn_backward(spec, shape, cc.x[0], cc.x[1], cc.x[2], out, row_stat, cc.x[3], dq, dk, dv,
                              &cc.o);
    la_workspace_free(cc.own);
    return st;
}
