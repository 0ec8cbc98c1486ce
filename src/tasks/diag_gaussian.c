/* diag_gaussian.c -- the scale-invariance check under the Gaussian model of Anson et al.
 * 2025 (sec. 3; la_diag_gaussian): a query at position N whose base logits are i.i.d.
 * N(0, 1), under the spec's logit transform, normalised by softmax and streamed into a
 * la_diag accumulator (src/attn/diag_stats.c) in key tiles. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "longattn/experiments.h"

/* Transformed logit L_t = coef_a[t] * S_t + coef_m[t] for the spec's transform. */
static la_status gaussian_coeffs(const la_spec *sp, int64_t N, double *ca, double *cm) {
    double nq = (double)(N + 1), scale = 1;
    switch (sp->xform) {
    case LA_XF_NONE: scale = 1; break;
    case LA_XF_TEMP: scale = sp->temp; break;
    case LA_XF_CRITICAL: scale = sp->gamma * log(nq); break;
    case LA_XF_LOGN: {
        double s = sp->logn_s;
        if (s == 0) {
            if (sp->train_len < 2)
                return la_fail(LA_EINVAL, "la_diag_gaussian: logn needs s or train >= 2 (e.g. logn(train=4096)) to set s = 1/log(train)");
            s = 1.0 / log((double)sp->train_len);
        }
        scale = s * log(nq);
        break;
    }
    case LA_XF_QWEN_LOGN:
        if (sp->train_len < 2) return la_fail(LA_EINVAL, "la_diag_gaussian: qwen-logn needs train >= 2");
        scale = fmax(1.0, log(nq) / log((double)sp->train_len));
        break;
    case LA_XF_SINV:
        if (!(sp->tau > 0)) return la_fail(LA_EINVAL, "la_diag_gaussian: sinv needs tau > 0 (got %g)", sp->tau);
        /* SPEC 4: a_t^2 = 1 + 2 log1p(t/tau), m_t = -2 log1p(t/tau) */
        for (int64_t t = 0; t <= N; t++) {
            double l = log1p((double)t / sp->tau);
            ca[t] = sqrt(1 + 2 * l), cm[t] = -2 * l;
        }
        return LA_OK;
    default:
        return la_fail(LA_EUNSUPPORTED, "la_diag_gaussian: unknown transform %d", (int)sp->xform);
    }
    for (int64_t t = 0; t <= N; t++) ca[t] = scale, cm[t] = 0;
    return LA_OK;
}

#define GAUSS_TILE 1024

la_status la_diag_gaussian(const la_spec *spec, int64_t N, int draws, uint64_t seed, la_diag *d) {
    if (!spec || !d) return la_fail(LA_EINVAL, "la_diag_gaussian: NULL argument");
    if (N < 1 || N > ((int64_t)1 << 30)) return la_fail(LA_EINVAL, "la_diag_gaussian: N must be in 1..2^30 (got %lld)", (long long)N);
    if (draws < 1) return la_fail(LA_EINVAL, "la_diag_gaussian: draws must be >= 1 (got %d)", draws);
    if (la_diag_max_dist(d) < N)
        return la_fail(LA_EINVAL, "la_diag_gaussian: the accumulator covers distances up to %lld but N = %lld; create it with max_dist >= N",
                       (long long)la_diag_max_dist(d), (long long)N);
    if (spec->norm != LA_NORM_SOFTMAX)
        return la_fail(LA_EUNSUPPORTED, "la_diag_gaussian: the Gaussian model is defined for softmax only (the spec has another normaliser)");
    if (spec->sink == LA_SINK_LEARNED)
        return la_fail(LA_EUNSUPPORTED, "la_diag_gaussian: a learned sink has no value outside a trained model; use "
                       "sink(fixed=v) for the Gaussian model, or diagnose --ckpt on the trained model");
    if (spec->pattern != LA_PAT_CAUSAL)
        return la_fail(LA_EUNSUPPORTED, "la_diag_gaussian: the Gaussian model uses the causal pattern (the query sees distances 0..N)");
    if (spec->pos == LA_POS_ALIBI || spec->pos == LA_POS_NAPE)
        return la_fail(LA_EUNSUPPORTED, "la_diag_gaussian: alibi/nape add a distance bias the Gaussian model does not include");
    size_t nk = (size_t)N + 1;
    double *ca = la_malloc(sizeof(double) * nk), *cm = la_malloc(sizeof(double) * nk), *L = la_malloc(sizeof(double) * nk);
    float *p = la_malloc(sizeof(float) * GAUSS_TILE);
    la_status s = (!ca || !cm || !L || !p) ? la_fail(LA_ENOMEM, "la_diag_gaussian: out of memory for N = %lld", (long long)N)
                                           : gaussian_coeffs(spec, N, ca, cm);
    for (int k = 0; k < draws && s == LA_OK; k++) {
        la_rng r;
        la_rng_seed(&r, seed * 0x9E3779B97F4A7C15ull + (uint64_t)k);
        double mx = -INFINITY;
        for (size_t t = 0; t < nk; t++) {
            L[t] = ca[t] * la_rng_normal(&r) + cm[t]; /* base logit S_t ~ N(0,1) */
            mx = L[t] > mx ? L[t] : mx;
        }
        /* softmax+sink(fixed=v) (issue 31): the sink joins the denominator, its mass goes to
         * the accumulator's sink statistic at the row's span N */
        const int sink = spec->sink == LA_SINK_FIXED;
        if (sink && spec->sink_fixed > mx) mx = spec->sink_fixed;
        double z = 0;
        for (size_t t = 0; t < nk; t++) z += exp(L[t] - mx);
        if (sink) z += exp(spec->sink_fixed - mx);
        double lse = mx + log(z);
        if (sink) s = la_diag_add_sink(d, 0, N, exp(spec->sink_fixed - lse));
        for (size_t t0 = 0; t0 < nk && s == LA_OK; t0 += GAUSS_TILE) {
            int n = (int)(nk - t0 < GAUSS_TILE ? nk - t0 : GAUSS_TILE);
            for (int i = 0; i < n; i++) p[i] = (float)exp(L[t0 + i] - lse);
            s = la_diag_add(d, 0, (int64_t)t0, 1, p, n);
        }
        if (s == LA_OK) s = la_diag_row_end(d, 0);
    }
    free(ca), free(cm), free(L), free(p);
    return s;
}
