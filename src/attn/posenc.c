/* posenc.c -- RoPE family frequencies and rotations, ALiBi slopes, sinv coefficients
 * (SPEC 3 and 4). Angles are formed in double and only cos/sin are rounded to float, so
 * positions past 2^20 keep full float accuracy. */
#define _GNU_SOURCE /* sincos */
#include "attn/attn_internal.h"
#include "longattn/attn.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

int la_pos_rotates(la_pos pos) {
    return pos == LA_POS_ROPE || pos == LA_POS_PROPE || pos == LA_POS_NTK ||
           pos == LA_POS_DYNAMIC_NTK || pos == LA_POS_YARN || pos == LA_POS_PI;
}

double la_yarn_logit_factor(const la_spec *spec) {
    if (spec->pos != LA_POS_YARN || spec->pos_scale <= 1.0) return 1.0;
    double mscale = 0.1 * log(spec->pos_scale) + 1.0; /* YaRN eq. (22): sqrt(1/t) = 0.1 ln s + 1 */
    return mscale * mscale;
}

/* YaRN correction dimension c(r) = D ln(L_train / (2 pi r)) / (2 ln theta) (SPEC 3). */
static double yarn_corr_dim(double r, int D, double train_len, double theta) {
    return D * log(train_len / (2.0 * M_PI * r)) / (2.0 * log(theta));
}

la_status la_rope_freqs(const la_spec *spec, int D, int64_t ctx_len, double *omega) {
    if (!spec || !omega) return la_fail(LA_EINVAL, "la_rope_freqs: spec and omega must not be NULL");
    if (D < 2 || D % 2) return la_fail(LA_ESHAPE, "la_rope_freqs: D = %d must be even and >= 2", D);
    int half = D / 2;
    if (!la_pos_rotates(spec->pos)) {
        for (int k = 0; k < half; k++) omega[k] = 0.0;
        return LA_OK;
    }
    double theta = spec->theta;
    if (!(theta > 1.0)) return la_fail(LA_EINVAL, "RoPE theta = %g must be > 1", theta);
    double s = spec->pos_scale;
    if (spec->pos == LA_POS_NTK || spec->pos == LA_POS_DYNAMIC_NTK) {
        if (!(s > 0)) return la_fail(LA_EINVAL, "ntk scale s = %g must be > 0", s);
        if (D <= 2) return la_fail(LA_ESHAPE, "ntk needs D > 2 (exponent D/(D-2)), got D = %d", D);
        double se = s;
        if (spec->pos == LA_POS_DYNAMIC_NTK) {
            if (spec->train_len < 1)
                return la_fail(LA_EINVAL, "dynamic-ntk needs train_len >= 1 (got %d)", spec->train_len);
            /* s' = s n / L_train - (s - 1) only past the training length; plain RoPE below */
            se = ctx_len > spec->train_len ? s * (double)ctx_len / spec->train_len - (s - 1.0) : 1.0;
        }
        if (se != 1.0) theta = theta * pow(se, (double)D / (D - 2));
    }
    for (int k = 0; k < half; k++) omega[k] = pow(theta, -2.0 * k / D);
    if (spec->pos == LA_POS_PROPE) {
        if (!(spec->rope_p >= 0 && spec->rope_p <= 1))
            return la_fail(LA_EINVAL, "prope p = %g must be in [0, 1]", spec->rope_p);
        int m = (int)floor(spec->rope_p * half); /* m = floor(p D/2) highest frequencies rotate */
        for (int k = m; k < half; k++) omega[k] = 0.0;
    } else if (spec->pos == LA_POS_PI) {
        if (!(s > 0)) return la_fail(LA_EINVAL, "pi scale s = %g must be > 0", s);
        for (int k = 0; k < half; k++) omega[k] /= s; /* positions p -> p/s */
    } else if (spec->pos == LA_POS_YARN) {
        if (!(s > 0)) return la_fail(LA_EINVAL, "yarn scale s = %g must be > 0", s);
        if (spec->train_len < 1)
            return la_fail(LA_EINVAL, "yarn needs train_len >= 1 (got %d)", spec->train_len);
        if (!(spec->beta_fast > 0 && spec->beta_slow > 0))
            return la_fail(LA_EINVAL, "yarn beta_fast = %g and beta_slow = %g must be > 0",
                           spec->beta_fast, spec->beta_slow);
        /* low/high as in the YaRN reference code: floor/ceil, clamped to [0, D-1] */
        double low = floor(yarn_corr_dim(spec->beta_fast, D, spec->train_len, spec->theta));
        double high = ceil(yarn_corr_dim(spec->beta_slow, D, spec->train_len, spec->theta));
        if (low < 0) low = 0;
        if (high > D - 1) high = D - 1;
        if (high == low) high += 0.001;
        for (int k = 0; k < half; k++) {
            double ramp = (k - low) / (high - low);
            if (ramp < 0) ramp = 0;
            if (ramp > 1) ramp = 1;
            /* ramp 0 (high frequency): original; ramp 1 (low frequency): interpolated w/s */
            omega[k] = omega[k] * (1.0 - ramp) + omega[k] / s * ramp;
        }
    }
    return LA_OK;
}

void la_rope_table(const double *omega, int D, int64_t base, int n, float *cs, int nthreads) {
    int half = D / 2;
#pragma omp parallel for num_threads(nthreads) schedule(static) if ((size_t)n * D >= 65536)
    for (int r = 0; r < n; r++) {
        double pos = (double)(base + r);
        float *row = cs + (size_t)r * D;
        for (int k = 0; k < half; k++) {
            double sn = 0.0, cs1 = 1.0;
            if (omega[k] != 0.0) sincos(pos * omega[k], &sn, &cs1);
            row[k] = (float)cs1;
            row[half + k] = (float)sn;
        }
    }
}

la_status la_rope_apply(const la_spec *spec, float *x, int N, int D, const int64_t *pos,
                        int64_t ctx_len, int inverse) {
    if (!spec || (N > 0 && (!x || !pos)))
        return la_fail(LA_EINVAL, "la_rope_apply: spec, x and pos must not be NULL");
    if (N < 0) return la_fail(LA_EINVAL, "la_rope_apply: N = %d must be >= 0", N);
    if (D < 2 || D % 2) return la_fail(LA_ESHAPE, "la_rope_apply: D = %d must be even and >= 2", D);
    double *omega = la_malloc(sizeof(double) * (size_t)(D / 2));
    float *cs = la_malloc(sizeof(float) * (size_t)D);
    la_status st = omega && cs ? la_rope_freqs(spec, D, ctx_len, omega)
                               : la_fail(LA_ENOMEM, "la_rope_apply: out of memory");
    for (int r = 0; st == LA_OK && r < N; r++) {
        la_rope_table(omega, D, pos[r], 1, cs, 1);
        la_rope_row(x + (size_t)r * D, x + (size_t)r * D, cs, D, D / 2, inverse);
    }
    free(omega);
    free(cs);
    return st;
}

void la_alibi_slopes(int n_heads, float *slopes) {
    if (n_heads <= 0 || !slopes) return;
    int c = 1;
    while (c * 2 <= n_heads) c *= 2;
    /* power-of-two part: m_h = 2^(-8(h+1)/c) (Press et al. 2022, sec. 3) */
    for (int h = 0; h < c; h++) slopes[h] = (float)exp2(-8.0 * (h + 1) / c);
    /* remainder: every other slope of the 2c set, 2^(-8(2i+1)/(2c)), i = 0.. */
    for (int i = 0; c + i < n_heads; i++) slopes[c + i] = (float)exp2(-8.0 * (2 * i + 1) / (2.0 * c));
}

void la_sinv_coeffs(double t, double tau, double *a, double *m) {
    double tt = t > 0 ? t : 0; /* clamp before the log (SPEC 4) */
    double l = log1p(tt / tau);
    if (a) *a = sqrt(1.0 + 2.0 * l);
    if (m) *m = -2.0 * l;
}
