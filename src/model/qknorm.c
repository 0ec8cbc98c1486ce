/* qknorm.c -- QK-norm (Henry et al. 2020; Dehghani et al. 2023): RMSNorm of each head's
 * q and k over D with a learnable gain shared by the heads, fused with the permutation from
 * the linear layers' (B, T, H, D) layout to the kernels' (B, H, T, D). */
#include <math.h>
#include <omp.h>

#include "core/prof.h"
#include "model/layers.h"

void la_qknorm_forward(float *y, float *rstd, const float *x, const float *g, int B, int T, int H,
                    int D) {
    LA_PROF_LAP(LA_PROF_OTHER);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * T * H * D >= LA_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const float *xr = x + (((size_t)b * T + t) * H + h) * D;   // (D)
                float *yr = y + (((size_t)b * H + h) * T + t) * D;         // (D)
                float ss = 0;  // float: vectorises; C, D <= a few thousand terms
                #pragma omp simd reduction(+ : ss)
                for (int d = 0; d < D; d++) ss += xr[d] * xr[d];
                float r = 1.0f / sqrtf(ss / D + LA_RMS_EPS);       // F1
                rstd[((size_t)b * T + t) * H + h] = r;
                for (int d = 0; d < D; d++) yr[d] = xr[d] * r * g[d];    // F2
            }
    LA_PROF_LAP(LA_PROF_QKNORM);
}

void la_qknorm_backward(float *dx, float *dg, const float *dy, const float *x, const float *rstd,
                     const float *g, int B, int T, int H, int D) {
    LA_PROF_LAP(LA_PROF_OTHER);
    /* F2: dg[d] += dy * x * rstd, in a fixed (b, t, h) order for every d; threads own
     * ranges of d (the same sums for any thread count) */
#pragma omp parallel if ((size_t)B * T * H * D >= LA_PAR_MIN)
    {
        int me = omp_get_thread_num(), nt = omp_get_num_threads();
        int d0 = (int)((long)D * me / nt), d1 = (int)((long)D * (me + 1) / nt);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int h = 0; h < H; h++) {
                    const float *xr = x + (((size_t)b * T + t) * H + h) * D;
                    const float *dyr = dy + (((size_t)b * H + h) * T + t) * D;
                    float r = rstd[((size_t)b * T + t) * H + h];
                    for (int d = d0; d < d1; d++) dg[d] += dyr[d] * xr[d] * r;
                }
    }
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * T * H * D >= LA_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const float *xr = x + (((size_t)b * T + t) * H + h) * D;
                const float *dyr = dy + (((size_t)b * H + h) * T + t) * D;
                float *dxr = dx + (((size_t)b * T + t) * H + h) * D;
                float r = rstd[((size_t)b * T + t) * H + h];
                /* F1+F2: dx = r*g*dy - x r^3 mean(g*dy*x) */
                float dot = 0;
                #pragma omp simd reduction(+ : dot)
                for (int d = 0; d < D; d++) dot += g[d] * dyr[d] * xr[d];
                float k = dot / D * r * r * r;
                for (int d = 0; d < D; d++) dxr[d] = r * g[d] * dyr[d] - k * xr[d];
            }
    LA_PROF_LAP(LA_PROF_QKNORM);
}

void la_permute_bthd_to_bhtd(float *y, const float *x, int B, int T, int H, int D) {
    LA_PROF_LAP(LA_PROF_OTHER);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * T * H * D >= LA_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const float *xr = x + (((size_t)b * T + t) * H + h) * D;
                float *yr = y + (((size_t)b * H + h) * T + t) * D;
                for (int d = 0; d < D; d++) yr[d] = xr[d];
            }
    LA_PROF_LAP(LA_PROF_PERMUTE);
}

void la_permute_bhtd_to_bthd(float *y, const float *x, int B, int T, int H, int D) {
    LA_PROF_LAP(LA_PROF_OTHER);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * T * H * D >= LA_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const float *xr = x + (((size_t)b * H + h) * T + t) * D;
                float *yr = y + (((size_t)b * T + t) * H + h) * D;
                for (int d = 0; d < D; d++) yr[d] = xr[d];
            }
    LA_PROF_LAP(LA_PROF_PERMUTE);
}
