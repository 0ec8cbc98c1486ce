/* stats.c -- the statistics of the evaluation tables (issue #28, SPEC 10 "Statistics"):
 * Wilson score interval for a proportion, the paired exact McNemar test, and a paired
 * percentile bootstrap of a ratio difference. Experiments layer; no I/O. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "longattn/longeval.h"

/* Wilson (1927) score interval, SPEC 10:
 *   (x + z^2/2)/(n + z^2) +- z sqrt(x(n - x)/n + z^2/4)/(n + z^2).
 * n = 0: [0, 1] (nothing observed). The bounds are clamped to [0, 1] against rounding. */
la_status la_stats_wilson(int x, int n, double z, double *lo, double *hi) {
    if (!lo || !hi) return la_fail(LA_EINVAL, "la_stats_wilson: NULL output");
    if (n < 0 || x < 0 || x > n || !(z > 0))
        return la_fail(LA_EINVAL, "la_stats_wilson: need 0 <= x <= n and z > 0 (x = %d, n = %d, z = %g)", x, n, z);
    if (n == 0) {
        *lo = 0, *hi = 1;
        return LA_OK;
    }
    const double X = x, N = n, z2 = z * z;
    const double mid = (X + z2 / 2) / (N + z2);
    const double half = z * sqrt(X * (N - X) / N + z2 / 4) / (N + z2);
    *lo = mid - half < 0 ? 0 : mid - half;
    *hi = mid + half > 1 ? 1 : mid + half;
    if (x == 0) *lo = 0; /* exact: mid == half when x = 0 */
    if (x == n) *hi = 1;
    return LA_OK;
}

/* Binomial(m, 1/2) CDF at k, summed in log space (lgamma) from the smallest term up so
 * that m in the thousands neither overflows nor loses the small tail. */
static double binom_half_cdf(int k, int m) {
    if (k < 0) return 0;
    if (k >= m) return 1;
    double s = 0;
    const double lm = lgamma(m + 1.0), l2 = m * log(2.0);
    for (int i = 0; i <= k; i++) s += exp(lm - lgamma(i + 1.0) - lgamma(m - i + 1.0) - l2);
    return s > 1 ? 1 : s;
}

/* Exact (binomial) McNemar test, SPEC 10: b, c the discordant pairs (b: the first method
 * right and the second wrong, c the reverse); p = min(1, 2 BinomCDF(min(b, c); b + c, 1/2)).
 * b + c = 0: p = 1 (no evidence either way). */
double la_stats_mcnemar_exact(int b, int c) {
    if (b < 0 || c < 0) return NAN;
    if (b + c == 0) return 1;
    double p = 2 * binom_half_cdf(b < c ? b : c, b + c);
    return p > 1 ? 1 : p;
}

/* Paired percentile bootstrap (SPEC 10: 95 % percentile, >= 1000 resamples, fixed seed) of
 *   sum_u (a_u - b_u) / sum_u w_u
 * over n units resampled with replacement (a, b: per-unit totals of the two methods, w: the
 * shared weight, e.g. bits and bytes of one (document, position bucket) unit). Writes the
 * point estimate and the (alpha/2, 1 - alpha/2) percentiles (alpha = 0.05); percentiles by
 * the nearest-rank rule on the sorted resamples. */
static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

la_status la_stats_bootstrap_diff(const double *a, const double *b, const double *w, int n, int resamples,
                                  uint64_t seed, double *est, double *lo, double *hi) {
    if (!a || !b || !w || !est || !lo || !hi || n < 1 || resamples < 1)
        return la_fail(LA_EINVAL, "la_stats_bootstrap_diff: NULL argument, n < 1 or resamples < 1");
    double sd = 0, sw = 0;
    for (int u = 0; u < n; u++) sd += a[u] - b[u], sw += w[u];
    if (!(sw > 0)) return la_fail(LA_EINVAL, "la_stats_bootstrap_diff: the weights sum to %g (need > 0)", sw);
    *est = sd / sw;
    double *r = la_malloc(sizeof(double) * (size_t)resamples);
    if (!r) return la_fail(LA_ENOMEM, "la_stats_bootstrap_diff: out of memory");
    la_rng g;
    la_rng_seed(&g, seed);
    for (int k = 0; k < resamples; k++) {
        double d = 0, ww = 0;
        for (int u = 0; u < n; u++) {
            int j = (int)la_rng_below(&g, (uint64_t)n);
            d += a[j] - b[j];
            ww += w[j];
        }
        r[k] = ww > 0 ? d / ww : 0;
    }
    qsort(r, (size_t)resamples, sizeof *r, cmp_double);
    /* nearest rank: the ceil(q R)-th smallest (1-based) */
    int il = (int)ceil(0.025 * resamples) - 1, ih = (int)ceil(0.975 * resamples) - 1;
    if (il < 0) il = 0;
    if (ih > resamples - 1) ih = resamples - 1;
    *lo = r[il];
    *hi = r[ih];
    free(r);
    return LA_OK;
}
