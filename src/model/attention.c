/* attention.c -- the attention sublayer of a block: q, k, v projections, QK-norm, the
 * library's fused attention (any spec: logn s_h and ASEntmax beta/gamma as parameters) and
 * the output projection, as a forward/backward pair.
 *   a (N, C) -> q (B,T,H,D), k, v (B,T,Hkv,D) -> QK-norm -> la_attn_forward -> y (N, H*D)
 *   out (N, C) += y Wo^T */
#include <assert.h>
#include <omp.h>
#include <string.h>

#include "core/half.h"
#include "core/internal.h"
#include "attn/ring.h"
#include "core/prof.h"
#include "model/layers.h"

static la_attn_opts opts_for(const attn_dims *d, const attn_weights *w, const attn_acts *a) {
    la_attn_opts op = la_attn_opts_default();
    op.ws = d->ws;
    /* a small attention call (under ~2M multiply-adds) runs on one thread: waking a team
     * costs more than the work, and much more on a shared machine */
    op.n_threads = d->n_threads;
    if ((double)d->B * d->H * d->T * (d->T + 1) / 2 * d->D < 2e6) op.n_threads = 1;
    if (d->spec->xform == LA_XF_LOGN) op.logn_s = w->logn_s;
    if (d->spec->sink == LA_SINK_LEARNED) op.sinks = w->sinks;  // issue 31: per-head sink logits
    if (d->spec->norm == LA_NORM_ASENTMAX) {
        op.as_beta = a->as_beta;
        op.as_gamma = a->as_gamma;
    }
    return op;
}

la_status la_attn_layer_forward(const attn_dims *d, const attn_weights *w, attn_acts *a,
                             const float *x, float *out) {
    int B = d->B, T = d->T, N = B * T, C = d->C, H = d->H, K = d->Hkv, D = d->D;
    const la_mm_ctx *tm = d->mm;
    if (d->sp) {  // sequence parallelism: this rank's rows (A1-A3, A10); the row-wise A5-A7, A9
                  // also run on the other rows (scratch, never read: the ring zeroes them)
        la_mm_forward_rows(d->sp, tm, a->q_raw, x, w->wq, C, H * D, 0);
        la_mm_forward_rows(d->sp, tm, a->k_raw, x, w->wk, C, K * D, 0);
        la_mm_forward_rows(d->sp, tm, a->v_raw, x, w->wv, C, K * D, 0);
    } else {
        la_mm_forward(tm, a->q_raw, x, w->wq, N, C, H * D, 0);           // A1: q = a Wq^T
        la_mm_forward(tm, a->k_raw, x, w->wk, N, C, K * D, 0);           // A2: k = a Wk^T
        la_mm_forward(tm, a->v_raw, x, w->wv, N, C, K * D, 0);           // A3: v = a Wv^T
    }
    if (d->spec->norm == LA_NORM_ASENTMAX && d->sp) {  // A4 over the ranks: this rank's rows, then
        // every rank's (the ring scales every query row with them; the backward's weight
        // gradients sum over all rows); each element comes from its own row: one process's bits
        for (int i = 0; i < 2 * B; i++) {
            int n0, n = la_sp_range(d->sp, i, &n0);
            if (n > 0)
                LA_TRY(la_asentmax_params_forward_rows(x, B, T, C, H, w->as_wb, w->as_bb, w->as_wg, w->as_bg,
                                                       d->spec->as_gamma_range, a->as_beta, a->as_gamma, n0,
                                                       n0 + n));
        }
        float *full[] = {a->as_beta, a->as_gamma};
        LA_TRY(la_sp_gather_all(2, full, (int[]){B * H, B * H}, T, (int[]){1, 1}));
    } else if (d->spec->norm == LA_NORM_ASENTMAX) {  // A4: ASEntmax beta, gamma (B, H, T), entmax work's layer
        LA_TRY(la_asentmax_params_forward(x, B, T, C, H, w->as_wb, w->as_bb, w->as_wg, w->as_bg,
                                          d->spec->as_gamma_range, a->as_beta, a->as_gamma));
    }
    la_qknorm_forward(a->qh, a->q_rstd, a->q_raw, w->q_norm_g, B, T, H, D);  // A5: QK-norm q
    la_qknorm_forward(a->kh, a->k_rstd, a->k_raw, w->k_norm_g, B, T, K, D);  // A6: QK-norm k
    la_permute_bthd_to_bhtd(a->vh, a->v_raw, B, T, K, D);                    // A7: v layout
    if (d->mm->buf && !d->kv) {  // bf16 training: the kernel reads bf16 q, k, v (exactly
        // la_attn_forward_typed with LA_DTYPE_BF16 on them: test_attn_half); the backward
        // differentiates at these rounded values (QK-norm's backward reads q_raw, not qh)
        la_round_bf16(a->qh, (size_t)N * H * D);
        la_round_bf16(a->kh, (size_t)N * K * D);
        la_round_bf16(a->vh, (size_t)N * K * D);
    }
    la_shape sh = {B, H, K, T, T, D, LA_POS0_AUTO};
    la_attn_opts op = opts_for(d, w, a);
    LA_PROF_LAP(LA_PROF_OTHER);
    double t0 = omp_get_wtime();
    la_status s;
    if (d->kv) {  // A8 over a KV cache: the hook appends k, v and attends over what it keeps
        assert(B == 1);
        /* the cache's length, not T, sizes the work: the thread count stays the model's,
         * and the hook's own workspace fits its cache */
        op.n_threads = d->n_threads;
        op.ws = NULL;
        s = d->kv->append_attend(d->kv->ctx, d->layer, d->spec, a->qh, a->kh, a->vh, T, a->att, &op);
    } else if (d->sp) {  // A8 over the ranks: k, v return complete, att this rank's rows
        s = la_attn_sp_forward(d->spec, &sh, a->qh, a->kh, a->vh, a->att, a->row_stat, &op, NULL);
    } else {
        s = la_attn_forward(d->spec, &sh, a->qh, a->kh, a->vh, a->att, a->row_stat, &op);  // A8
    }
    *d->t_attn += omp_get_wtime() - t0;
    LA_PROF_LAP(LA_PROF_ATTN);
    if (s != LA_OK) return s;
    la_permute_bhtd_to_bthd(a->y, a->att, B, T, H, D);                       // A9: y (N, H*D)
    if (d->sp) la_mm_forward_rows(d->sp, tm, out, a->y, w->wo, H * D, C, 1);
    else la_mm_forward(tm, out, a->y, w->wo, N, H * D, C, 1);                // A10: out += y Wo^T
    return LA_OK;
}

la_status la_attn_layer_diagnose(const attn_dims *d, const attn_weights *w, const attn_acts *a,
                              const la_diag_rows *sel, la_diag **diag) {
    la_shape sh = {d->B, d->H, d->Hkv, d->T, d->T, d->D, LA_POS0_AUTO};
    la_attn_opts op = opts_for(d, w, a);  // the forward's inputs: logn s_h, ASEntmax beta/gamma
    double t0 = omp_get_wtime();
    la_status s = la_attn_diagnose_rows(d->spec, &sh, a->qh, a->kh, a->row_stat, &op, sel, diag);
    *d->t_attn += omp_get_wtime() - t0;
    return s;
}

la_status la_attn_layer_backward(const attn_dims *d, const attn_weights *w, attn_weights *g,
                              const attn_acts *a, attn_scratch *sc, const float *x,
                              const float *dout, float *dx) {
    int B = d->B, T = d->T, N = B * T, C = d->C, H = d->H, K = d->Hkv, D = d->D;
    const la_mm_ctx *tm = d->mm;
    const la_sp_part *sp = d->sp;
    /* A10: dy = dout Wo, dWo += dout^T y */
    if (sp) {  // dWo from every rank's rows of y (as one process: the same sgemm), dy of this rank's
        LA_TRY(la_attn_sp_gather(a->y, B, T, H * D, NULL));
        la_mm_backward(tm, NULL, g->wo, dout, a->y, w->wo, N, H * D, C, 0);
        la_mm_dx_rows(sp, tm, sc->dy, dout, w->wo, H * D, C, 0);
    } else {
        la_mm_backward(tm, sc->dy, g->wo, dout, a->y, w->wo, N, H * D, C, 0);
    }
    /* A9: back to (B, H, T, D) */
    la_permute_bthd_to_bhtd(sc->datt, sc->dy, B, T, H, D);
    if (d->mm->buf) la_round_bf16(sc->datt, (size_t)N * H * D);  // bf16: dO tiles in bf16 too
    /* A8: attention; learnable transform parameters get their gradients through opts */
    la_shape sh = {B, H, K, T, T, D, LA_POS0_AUTO};
    la_attn_opts op = opts_for(d, w, a);
    int logn = d->spec->xform == LA_XF_LOGN, asent = d->spec->norm == LA_NORM_ASENTMAX;
    if (logn) op.dlogn_s = sc->dlogn;
    int sink = d->spec->sink == LA_SINK_LEARNED;
    if (sink) op.dsinks = sc->dsinks;
    if (asent) {
        op.das_beta = sc->dbeta;
        op.das_gamma = sc->dgamma;
    }
    LA_PROF_LAP(LA_PROF_OTHER);
    double t0 = omp_get_wtime();
    la_status s = sp ? la_attn_sp_backward(d->spec, &sh, a->qh, a->kh, a->vh, a->att, a->row_stat, sc->datt,
                                           sc->dqh, sc->dkh, sc->dvh, &op, NULL)
                     : la_attn_backward(d->spec, &sh, a->qh, a->kh, a->vh, a->att, a->row_stat,
                                        sc->datt, sc->dqh, sc->dkh, sc->dvh, &op);
    if (s == LA_OK && sp) {  /* every rank's rows of what the gains' and weights' gradients sum over
                              * (dq: query rows, dk, dv: key rows; the QK-norm inputs) */
        float *full[] = {sc->dqh, sc->dkh, sc->dvh, a->q_raw, a->q_rstd, a->k_raw, a->k_rstd, (float *)x};
        s = la_sp_gather_all(8, full, (int[]){B * H, B * K, B * K, B, B, B, B, B}, T,
                             (int[]){D, D, D, H * D, H, K * D, K, C});
        if (s == LA_OK && asent) {  // A4's inputs: d beta, d gamma of this rank's query rows (the ring's)
            float *dp[] = {sc->dbeta, sc->dgamma};
            s = la_sp_gather_all(2, dp, (int[]){B * H, B * H}, T, (int[]){1, 1});
        }
    }
    *d->t_attn += omp_get_wtime() - t0;
    LA_PROF_LAP(LA_PROF_ATTN);
    if (s != LA_OK) return s;
    if (logn)
        for (int h = 0; h < H; h++) g->logn_s[h] += sc->dlogn[h];  // dlogn_s is overwritten per call
    if (sink)
        for (int h = 0; h < H; h++) g->sinks[h] += sc->dsinks[h];  // so is dsinks
    /* A7, A6, A5: back to the projections' (B, T, H, D) layout */
    la_permute_bhtd_to_bthd(sc->dv_raw, sc->dvh, B, T, K, D);
    la_qknorm_backward(sc->dk_raw, g->k_norm_g, sc->dkh, a->k_raw, a->k_rstd, w->k_norm_g, B, T, K, D);
    la_qknorm_backward(sc->dq_raw, g->q_norm_g, sc->dqh, a->q_raw, a->q_rstd, w->q_norm_g, B, T, H, D);
    /* A1, A2, A3: dx = dq Wq + dk Wk + dv Wv; dW += d(q|k|v)^T x */
    la_mm_backward(tm, sp ? NULL : dx, g->wq, sc->dq_raw, x, w->wq, N, C, H * D, 0);
    la_mm_backward(tm, sp ? NULL : dx, g->wk, sc->dk_raw, x, w->wk, N, C, K * D, 1);
    la_mm_backward(tm, sp ? NULL : dx, g->wv, sc->dv_raw, x, w->wv, N, C, K * D, 1);
    if (sp) {  // dx of this rank's rows, the same sums in the same order
        la_mm_dx_rows(sp, tm, dx, sc->dq_raw, w->wq, C, H * D, 0);
        la_mm_dx_rows(sp, tm, dx, sc->dk_raw, w->wk, C, K * D, 1);
        la_mm_dx_rows(sp, tm, dx, sc->dv_raw, w->wv, C, K * D, 1);
    }
    /* A4: dx += through beta, gamma; their weights' gradients accumulate (sp: over every rank's
     * rows, from complete x, beta, gamma, d beta, d gamma, as one process; dx of the other
     * rows is scratch that the block's gather overwrites) */
    if (asent)
        LA_TRY(la_asentmax_params_backward(x, B, T, C, H, w->as_wb, w->as_wg,
                                           d->spec->as_gamma_range, a->as_beta, a->as_gamma,
                                           sc->dbeta, sc->dgamma, dx, g->as_wb, g->as_bb,
                                           g->as_wg, g->as_bg));
    return LA_OK;
}
