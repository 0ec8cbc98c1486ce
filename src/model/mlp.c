/* mlp.c -- ReLU^2 MLP (So et al. 2021, "Primer"; used by the scale-invariant attention
 * paper's baseline): y += relu(x Wfc^T)^2 Wproj^T. */
#include "core/prof.h"
#include "model/layers.h"

void la_mlp_forward(const la_mm_ctx *mm, float *y, float *h_pre, float *h_act, const float *x,
                 const float *w_fc, const float *w_proj, int N, int C, int F) {
    la_mm_forward(mm, h_pre, x, w_fc, N, C, F, 0);           // F1: h_pre (N,F) = x Wfc^T
    size_t NF = (size_t)N * F;
#pragma omp parallel for schedule(static) if (NF >= LA_PAR_MIN)
    for (size_t i = 0; i < NF; i++) {
        float r = h_pre[i] > 0 ? h_pre[i] : 0;
        h_act[i] = r * r;                                     // F2: h_act = relu(h_pre)^2
    }
    LA_PROF_LAP(LA_PROF_ACT);
    la_mm_forward(mm, y, h_act, w_proj, N, F, C, 1);          // F3: y (N,C) += h_act Wproj^T
}

void la_mlp_backward(const la_mm_ctx *mm, float *dx, float *dw_fc, float *dw_proj, float *dh,
                  const float *dy, const float *x, const float *h_pre, const float *h_act,
                  const float *w_fc, const float *w_proj, int N, int C, int F) {
    la_mm_backward(mm, dh, dw_proj, dy, h_act, w_proj, N, F, C, 0);  // F3: dh_act, dWproj
    la_mlp_act_backward(dh, h_pre, (size_t)N * F);                    // F2
    la_mm_backward(mm, dx, dw_fc, dh, x, w_fc, N, C, F, 0);           // F1: dx, dWfc
}

void la_mlp_act_backward(float *dh, const float *h_pre, size_t n) {
#pragma omp parallel for schedule(static) if (n >= LA_PAR_MIN)
    for (size_t i = 0; i < n; i++) dh[i] *= h_pre[i] > 0 ? 2.0f * h_pre[i] : 0.0f;  // F2: d relu(h)^2
    LA_PROF_LAP(LA_PROF_ACT);
}
