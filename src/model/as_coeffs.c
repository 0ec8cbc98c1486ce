/* as_coeffs.c -- ASEntmax coefficients (Vasylenko et al. 2025; SPEC 5) per head and query:
 *   beta = softplus(a Wb^T + bb),   gamma = gamma_range * tanh(a Wg^T + bg)
 * from the block's normalised input a. This is the model's hook for the entmax work: the
 * kernel consumes beta and gamma through la_attn_opts. */
#include <math.h>

#include "model/layers.h"

static inline float softplusf(float x) { return x > 20 ? x : log1pf(expf(x)); }
static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

void as_coeffs_forward(double *timer, float *beta, float *gamma, float *pre_b, float *pre_g,
                       const float *a, const float *wb, const float *bb, const float *wg,
                       const float *bg, double gamma_range, int B, int T, int H, int C) {
    int N = B * T;
    mm_forward(timer, pre_b, a, wb, N, C, H, 0);  // F1: pre_b (N, H) = a Wb^T
    mm_forward(timer, pre_g, a, wg, N, C, H, 0);  // F2: pre_g (N, H) = a Wg^T
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            pre_b[n * H + h] += bb[h];            // F3
            pre_g[n * H + h] += bg[h];            // F4
            int b = n / T, t = n % T;
            size_t o = ((size_t)b * H + h) * T + t;   // (B, H, T)
            beta[o] = softplusf(pre_b[n * H + h]);                           // F5
            gamma[o] = (float)(gamma_range * tanh((double)pre_g[n * H + h])); // F6
        }
}

void as_coeffs_backward(double *timer, float *da, float *dwb, float *dbb, float *dwg, float *dbg,
                        float *scratch, const float *dbeta, const float *dgamma,
                        const float *pre_b, const float *pre_g, const float *a,
                        const float *wb, const float *wg, double gamma_range, int B, int T,
                        int H, int C) {
    int N = B * T;
    float *dpb = scratch, *dpg = scratch + (size_t)N * H;  // (N, H) each
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            int b = n / T, t = n % T;
            size_t o = ((size_t)b * H + h) * T + t;
            dpb[n * H + h] = dbeta[o] * sigmoidf(pre_b[n * H + h]);               // F5
            float th = tanhf(pre_g[n * H + h]);
            dpg[n * H + h] = dgamma[o] * (float)gamma_range * (1.0f - th * th);   // F6
            dbb[h] += dpb[n * H + h];                                             // F3
            dbg[h] += dpg[n * H + h];                                             // F4
        }
    mm_backward(timer, da, dwb, dpb, a, wb, N, C, H, 1);  // F1
    mm_backward(timer, da, dwg, dpg, a, wg, N, C, H, 1);  // F2
}
