/* asentmax.c -- ASEntmax scale parameters per head and token (Vasylenko et al. 2025, eq. 9-10):
 *   beta  = softplus(W_beta x + b_beta),   gamma = gamma_range * tanh(W_gamma x + b_gamma),
 * forward and backward (llm.c style: gradients accumulate). The attention kernels use them in
 * s = delta + beta (log n)^gamma (entmax_attn.c). */
#include <math.h>

#include "core/internal.h"
#include "attn/ring.h"
#include "longattn/attn.h"

static la_status check(const float *x, int B, int T, int C, int H, const float *wb,
                       const float *wg, const char *fn) {
    if (!x || !wb || !wg)
        return la_fail(LA_EINVAL, "%s: x, w_beta and w_gamma must not be NULL", fn);
    if (B < 1 || T < 1 || C < 1 || H < 1)
        return la_fail(LA_ESHAPE, "%s: B=%d T=%d C=%d H=%d, every size must be >= 1", fn, B, T, C, H);
    return LA_OK;
}

/* beta, gamma of rows [n0, n1) of the B*T (row n = token n % T of sequence n / T), after the
 * checks of the forward entry point fn: every output element is computed from its row alone,
 * so any split of the rows writes the bits of one call over all of them */
static la_status params_rows(const float *x, int B, int T, int C, int H, const float *w_beta, const float *b_beta,
                             const float *w_gamma, const float *b_gamma, double gamma_range, float *beta,
                             float *gamma, int64_t n0, int64_t n1, const char *fn) {
    LA_TRY(check(x, B, T, C, H, w_beta, w_gamma, fn));
    if (!beta || !gamma) return la_fail(LA_EINVAL, "%s: beta and gamma must not be NULL", fn);
    if (!isfinite(gamma_range)) return la_fail(LA_EINVAL, "%s: gamma_range = %g is not finite", fn, gamma_range);
    if (n0 < 0 || n1 < n0 || n1 > (int64_t)B * T)
        return la_fail(LA_EINVAL, "%s: rows [%lld, %lld) are not inside [0, %lld)", fn, (long long)n0,
                       (long long)n1, (long long)B * T);
#pragma omp parallel for schedule(static)
    for (int64_t n = n0; n < n1; n++) {
        const int64_t b = n / T, t = n % T;
        const float *xt = x + (size_t)n * C;
        for (int h = 0; h < H; h++) {
            const float *wb = w_beta + (size_t)h * C, *wg = w_gamma + (size_t)h * C;
            double ab = b_beta ? b_beta[h] : 0.0, ag = b_gamma ? b_gamma[h] : 0.0;
            for (int c = 0; c < C; c++) ab += (double)wb[c] * xt[c], ag += (double)wg[c] * xt[c];
            size_t o = ((size_t)b * H + h) * T + t;
            /* softplus(a) = max(a, 0) + log1p(exp(-|a|)), stable for every a */
            beta[o] = (float)(fmax(ab, 0.0) + log1p(exp(-fabs(ab))));
            gamma[o] = (float)(gamma_range * tanh(ag));
        }
    }
    return LA_OK;
}

la_status la_asentmax_params_forward(const float *x, int B, int T, int C, int H,
                                     const float *w_beta, const float *b_beta,
                                     const float *w_gamma, const float *b_gamma,
                                     double gamma_range, float *beta, float *gamma) {
    return params_rows(x, B, T, C, H, w_beta, b_beta, w_gamma, b_gamma, gamma_range, beta, gamma, 0,
                       (int64_t)B * T, "la_asentmax_params_forward");
}

la_status la_asentmax_params_forward_rows(const float *x, int B, int T, int C, int H, const float *w_beta,
                                          const float *b_beta, const float *w_gamma, const float *b_gamma,
                                          double gamma_range, float *beta, float *gamma, int64_t n0,
                                          int64_t n1) {
    return params_rows(x, B, T, C, H, w_beta, b_beta, w_gamma, b_gamma, gamma_range, beta, gamma, n0, n1,
                       "la_asentmax_params_forward_rows");
}

la_status la_asentmax_params_backward(const float *x, int B, int T, int C, int H,
                                      const float *w_beta, const float *w_gamma,
                                      double gamma_range, const float *beta, const float *gamma,
                                      const float *dbeta, const float *dgamma, float *dx,
                                      float *dw_beta, float *db_beta, float *dw_gamma,
                                      float *db_gamma) {
    LA_TRY(check(x, B, T, C, H, w_beta, w_gamma, "la_asentmax_params_backward"));
    if (!beta || !gamma || !dbeta || !dgamma)
        return la_fail(LA_EINVAL,
                       "la_asentmax_params_backward: beta, gamma, dbeta and dgamma must not be NULL");
    /* d beta / d a = sigmoid(a) = 1 - exp(-beta) (since exp(-softplus(a)) = 1 - sigmoid(a));
     * d gamma / d a' = gamma_range (1 - tanh^2) = gamma_range - gamma^2 / gamma_range. */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *xt = x + ((size_t)b * T + t) * C;
            float *dxt = dx ? dx + ((size_t)b * T + t) * C : NULL;
            for (int h = 0; h < H; h++) {
                size_t o = ((size_t)b * H + h) * T + t;
                double ga = dbeta[o] * -expm1(-(double)beta[o]);
                double gg = gamma_range != 0.0
                                ? dgamma[o] * (gamma_range - (double)gamma[o] * gamma[o] / gamma_range)
                                : 0.0;
                if (db_beta) db_beta[h] += (float)ga;
                if (db_gamma) db_gamma[h] += (float)gg;
                const float *wb = w_beta + (size_t)h * C, *wg = w_gamma + (size_t)h * C;
                float *dwb = dw_beta ? dw_beta + (size_t)h * C : NULL;
                float *dwg = dw_gamma ? dw_gamma + (size_t)h * C : NULL;
                for (int c = 0; c < C; c++) {
                    if (dxt) dxt[c] += (float)(ga * wb[c] + gg * wg[c]);
                    if (dwb) dwb[c] += (float)(ga * xt[c]);
                    if (dwg) dwg[c] += (float)(gg * xt[c]);
                }
            }
        }
    return LA_OK;
}
