/* entmax.c -- row normalisers sparsemax, 1.5-entmax and alpha-entmax, forward and backward
 * (SPEC 5). Declared in include/longattn.h, section "Row normalisers".
 *
 * Every forward works on one row at a time in double:
 *   1. c_i = (alpha-1) (z_i - max z)  (<= 0, the maximum entry is 0; -inf stays -inf),
 *   2. find the shifted threshold t in [-1, -n^(1-alpha)] with sum_i [c_i - t]_+^r = 1,
 *      r = 1/(alpha-1),
 *   3. p_i = [c_i - t]_+^r, tau = t + (alpha-1) max z.
 * Entries with c_i - t <= 0 (on or below the threshold) get exactly p_i = 0. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/entmax_internal.h"
#include "core/internal.h"

/* ---- argument checks ---------------------------------------------------------------- */

static la_status check_args(const void *z, const void *p, int64_t rows, int n, const char *fn) {
    if (!z || !p) return la_fail(LA_EINVAL, "%s: input and output arrays must not be NULL", fn);
    if (rows < 0) return la_fail(LA_EINVAL, "%s: rows = %lld is negative", fn, (long long)rows);
    if (n < 1) return la_fail(LA_EINVAL, "%s: row length n = %d, need n >= 1", fn, n);
    return LA_OK;
}

la_status la_entmax_check_alpha(double alpha, const char *fn) {
    if (!isfinite(alpha) || !(alpha > 1.0))
        return la_fail(LA_EINVAL,
                       "%s: alpha = %g, need a finite alpha > 1 (alpha = 1 is softmax, which is "
                       "its own normaliser: use the softmax normaliser, LA_NORM_SOFTMAX)",
                       fn, alpha);
    if (alpha < LA_ENTMAX_ALPHA_MIN)
        return la_fail(LA_EINVAL,
                       "%s: alpha = %.10g is closer to 1 than %g: the threshold tau is then not "
                       "representable in float64 (|sum p - 1| is about 5.5e-17 / (alpha - 1)); "
                       "use alpha >= %.7g, or softmax (alpha = 1), which it approaches",
                       fn, alpha, LA_ENTMAX_ALPHA_MIN - 1.0, LA_ENTMAX_ALPHA_MIN);
    if (alpha > LA_ENTMAX_ALPHA_MAX)
        return la_fail(LA_EINVAL,
                       "%s: alpha = %g is above %g: there the threshold tau needs more than float64 "
                       "precision and the probabilities no longer sum to 1 (|sum - 1| reaches 2e-3 "
                       "at alpha = 8); use 1 < alpha <= %g (alpha = 2 is sparsemax)",
                       fn, alpha, LA_ENTMAX_ALPHA_MAX, LA_ENTMAX_ALPHA_MAX);
    return LA_OK;
}

/* ---- step 1: shift and scale -------------------------------------------------------- */

/* c = (alpha-1)(z - max z). Returns the number of finite entries (0: empty row) in *nfin and
 * max z in *zmax; NaN / +inf entries are an error. */
static la_status shift_row(const double *z, int n, double am1, double *c, int *nfin,
                           double *zmax, int64_t row, const char *fn) {
    double m = -INFINITY;
    int cnt = 0;
    for (int i = 0; i < n; i++) {
        double x = z[i];
        if (isnan(x) || x == INFINITY)
            return la_fail(LA_EINVAL,
                           "%s: row %lld, column %d is %s; scores must be finite or -inf "
                           "(masked)",
                           fn, (long long)row, i, isnan(x) ? "NaN" : "+inf");
        if (x == -INFINITY) continue;
        cnt++;
        if (x > m) m = x;
    }
    *nfin = cnt;
    *zmax = m;
    if (cnt == 0) return LA_OK;
    for (int i = 0; i < n; i++) c[i] = (z[i] == -INFINITY) ? -INFINITY : am1 * (z[i] - m);
    return LA_OK;
}

/* s (k) into descending order: heap sort with inline comparisons (qsort's call per
 * comparison was ~10 % of the entmax attention forward, which sorts one short list of tile
 * maxima per row). Sorting numbers, so the result does not depend on the algorithm (equal
 * values, +0 and -0 included, are interchangeable in every use below). */
static void sift_min(double *s, int i, int k) {
    double v = s[i];
    for (;;) {
        int ch = 2 * i + 1;
        if (ch >= k) break;
        if (ch + 1 < k && s[ch + 1] < s[ch]) ch++;
        if (!(s[ch] < v)) break;
        s[i] = s[ch];
        i = ch;
    }
    s[i] = v;
}

static void sort_desc(double *s, int k) {
    for (int i = k / 2 - 1; i >= 0; i--) sift_min(s, i, k);
    for (int e = k - 1; e > 0; e--) { /* the minimum of s[0..e] to the end */
        double t = s[0];
        s[0] = s[e];
        s[e] = t;
        sift_min(s, 0, e);
    }
}

/* Copy the finite entries of c into s and sort them in decreasing order; returns the count. */
static int sorted_finite(const double *c, int n, double *s) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (c[i] != -INFINITY) s[k++] = c[i];
    sort_desc(s, k);
    return k;
}

/* ---- step 2: the shifted threshold --------------------------------------------------- */

/* sparsemax on shifted c (alpha = 2): the support is the largest k with
 * t_k = (sum_{j<=k} s_j - 1)/k < s_k over the sorted s (Martins & Astudillo 2016, Alg. 1);
 * the strict '<' keeps on-threshold entries out. Condition 1 + k s_k > cumsum is
 * non-increasing in k, so the scan stops at the first failure. */
static double tau_sparsemax_sorted(const double *s, int m) {
    double cum = 0.0, t = s[0] - 1.0;
    for (int k = 1; k <= m; k++) {
        double ck = cum + s[k - 1];
        double tk = (ck - 1.0) / k;
        if (!(tk < s[k - 1])) break;
        cum = ck;
        t = tk;
    }
    return t;
}

/* 1.5-entmax on shifted c = (z - max)/2 (Peters et al. 2019, Alg. 2): for the top k,
 * t_k = mean_k - sqrt(max(0, (1 - M2_k)/k)), M2_k = sum (s_j - mean_k)^2 (Welford, no
 * cancellation); the support is the largest k with t_k < s_k. */
static double tau_entmax15_sorted(const double *s, int m) {
    double mean = 0.0, m2 = 0.0, t = s[0] - 1.0;
    for (int k = 1; k <= m; k++) {
        double x = s[k - 1];
        double d = x - mean;
        mean += d / k;
        m2 += d * (x - mean);
        double delta = (1.0 - m2) / k;
        double tk = mean - sqrt(delta > 0.0 ? delta : 0.0);
        if (tk < x) t = tk;
    }
    return t;
}

/* f(t) = sum_i [c_i - t]_+^r - 1 and f'(t) = -r sum_i [c_i - t]_+^(r-1). */
static double entmax_f(const double *c, int n, double t, double r, double *df) {
    double f = -1.0, g = 0.0;
    for (int i = 0; i < n; i++) {
        double x = c[i] - t; /* -inf - t = -inf: masked entries drop out */
        if (x > 0.0) {
            double xr1 = (r == 1.0) ? 1.0 : (r == 2.0) ? x : pow(x, r - 1.0);
            f += xr1 * x;
            g += xr1;
        }
    }
    *df = -r * g;
    return f;
}

/* alpha-entmax shifted threshold by a bracketed root find (any alpha > 1). f is
 * non-increasing in t; lo keeps f(lo) > 0 and hi keeps f(hi) <= 0. */
double la_entmax_tau_bisect(const double *c, int n, int nfin, double alpha) {
    const double r = 1.0 / (alpha - 1.0);
    double lo = -1.0;                            /* f(lo) >= 0: the max entry alone gives 1 */
    double hi = -pow((double)nfin, 1.0 - alpha); /* f(hi) <= 0: nfin entries, each <= hi+... */
    double df;
    double flo = entmax_f(c, n, lo, r, &df);
    if (flo <= 0.0 || !(hi > lo)) return lo; /* one-hot (other entries on or below -1) */
    double fhi = entmax_f(c, n, hi, r, &df);
    if (fhi >= 0.0) return hi; /* uniform row: every entry is the maximum */
    /* Newton from the endpoint on the convex side: for alpha <= 2 (r >= 1) f is convex and
     * Newton from the left never overshoots; for alpha > 2 it is concave, start right. */
    double t = (r >= 1.0) ? lo : hi;
    double ft = (r >= 1.0) ? flo : fhi;
    double dft;
    entmax_f(c, n, t, r, &dft);
    for (int it = 0; it < 200; it++) {
        double width = hi - lo;
        double mid = lo + 0.5 * width;
        if (!(mid > lo && mid < hi)) break; /* bracket is one ulp wide */
        /* Newton step kept only if strictly inside (lo, hi); otherwise bisect (the guarded
         * Newton/Halley idea of AdaSplash). */
        double next = (dft < 0.0) ? t - ft / dft : mid;
        if (!(next > lo && next < hi)) next = mid;
        double fn = entmax_f(c, n, next, r, &df);
        if (fn == 0.0) return next;
        if (fn > 0.0) { lo = next; flo = fn; }
        else { hi = next; fhi = fn; }
        t = next;
        ft = fn;
        dft = df;
        /* A step that shrank the bracket by less than half is followed by a bisection, so the
         * bracket at least halves every two evaluations. */
        if (hi - lo > 0.5 * width) {
            double m2 = lo + 0.5 * (hi - lo);
            if (!(m2 > lo && m2 < hi)) break;
            double fm = entmax_f(c, n, m2, r, &df);
            if (fm == 0.0) return m2;
            if (fm > 0.0) { lo = m2; flo = fm; }
            else { hi = m2; fhi = fm; }
            t = m2;
            ft = fm;
            dft = df;
        }
        if (fabs(ft) <= 4 * 2.220446049250313e-16) break; /* sum is 1 to rounding */
    }
    double best = (flo < -fhi) ? lo : hi;
    /* For alpha = 2 and 1.5, re-solve t in closed form so that exact inputs give exact
     * thresholds. The closed form assumes a support set S; it is the root only when every
     * entry of S lies at or above it (entries outside S lie at or below lo <= root). Try
     * S = {c > lo} (holds the whole true support, since the root is >= lo), then, when the
     * bracket was left wide and S holds entries below the root, S = {c > best}. An
     * on-threshold entry in S contributes 0 to the closed form either way. */
    if (alpha == 2.0 || alpha == 1.5) {
        const double slack = 8 * 2.220446049250313e-16 * (fabs(lo) + fabs(hi));
        const double floors[2] = {lo, best};
        for (int pass = 0; pass < 2; pass++) {
            int k = 0;
            double mean = 0.0, m2 = 0.0, sum = 0.0, smin = INFINITY;
            for (int i = 0; i < n; i++) {
                double x = c[i];
                if (!(x > floors[pass])) continue;
                k++;
                sum += x;
                double d = x - mean;
                mean += d / k;
                m2 += d * (x - mean);
                if (x < smin) smin = x;
            }
            if (k == 0) break;
            double tc;
            if (alpha == 2.0) tc = (sum - 1.0) / k;
            else {
                double delta = (1.0 - m2) / k;
                tc = mean - sqrt(delta > 0.0 ? delta : 0.0);
            }
            /* keep it only if S is its support and it lies in the final bracket */
            if (smin >= tc - slack && tc >= lo - slack && tc <= hi + slack) return tc;
        }
    }
    return best;
}

double la_entmax_tau_sorted(int kind, const double *c, int n, double *s) {
    int m = sorted_finite(c, n, s); /* s may be c: compaction never overtakes the reader */
    return kind == LA_ENTMAX_SPARSEMAX ? tau_sparsemax_sorted(s, m) : tau_entmax15_sorted(s, m);
}

/* ---- step 3 + one row --------------------------------------------------------------- */

/* One row: z (n) -> p (n), *tau (unshifted units of (alpha-1) z, LA_ROW_EMPTY for a row with
 * no finite entry; tau may be NULL). work: 2n doubles of scratch. row and fn only name the
 * place in error messages (NaN / +inf input). */
static la_status entmax_row(int kind, double alpha, const double *z, int n, double *p,
                            double *tau, double *work, int64_t row, const char *fn) {
    double am1 = alpha - 1.0;
    double *c = work, *s = work + n;
    int nfin = 0;
    double zmax = 0.0;
    LA_TRY(shift_row(z, n, am1, c, &nfin, &zmax, row, fn));
    if (nfin == 0) {
        for (int i = 0; i < n; i++) p[i] = 0.0;
        if (tau) *tau = LA_ROW_EMPTY;
        return LA_OK;
    }
    double t = kind == LA_ENTMAX_BISECT ? la_entmax_tau_bisect(c, n, nfin, alpha)
                                        : la_entmax_tau_sorted(kind, c, n, s);
    const double r = 1.0 / am1;
    for (int i = 0; i < n; i++) {
        double x = c[i] - t;
        p[i] = (x > 0.0) ? (kind == LA_ENTMAX_SPARSEMAX || alpha == 2.0) ? x
                           : (kind == LA_ENTMAX_15 || alpha == 1.5)     ? x * x
                                                                        : pow(x, r)
                         : 0.0;
    }
    if (tau) *tau = t + am1 * zmax;
    return LA_OK;
}

/* ---- backward of one row ------------------------------------------------------------ */

static la_status check_backward(const void *p, const void *dp, const void *dz, int64_t rows,
                                int n, const char *fn) {
    if (!dp || !dz) return la_fail(LA_EINVAL, "%s: dp and dz must not be NULL", fn);
    return check_args(p, dz, rows, n, fn);
}

/* u_i = p_i^(2-alpha) for p_i > 0. */
static inline double entmax_u(double p, double alpha) {
    if (alpha == 2.0) return 1.0;
    if (alpha == 1.5) return sqrt(p);
    return pow(p, 2.0 - alpha);
}

/* NAME: the backward of one row; BATCH: rows of them, arguments checked first (fn names the
 * caller in errors). */
#define DEFINE_BACKWARD(NAME, BATCH, T)                                                     \
    static void NAME(const T *p, const T *dp, int n, double alpha, T *dz, double *dalpha) { \
        double su = 0.0, sug = 0.0, sp = 0.0, h = 0.0, splpg = 0.0;                         \
        for (int i = 0; i < n; i++) {                                                       \
            double pi = p[i];                                                               \
            if (!(pi > 0.0)) continue;                                                      \
            double u = entmax_u(pi, alpha), g = dp[i];                                      \
            su += u;                                                                        \
            sug += u * g;                                                                   \
            if (dalpha) {                                                                   \
                double pl = pi * log(pi);                                                   \
                sp += pi * g; /* sum p g */                                                 \
                h += pl;      /* sum p log p */                                             \
                splpg += pl * g;                                                            \
            }                                                                               \
        }                                                                                   \
        double q = (su > 0.0) ? sug / su : 0.0;                                             \
        for (int i = 0; i < n; i++) {                                                       \
            double pi = p[i];                                                               \
            dz[i] = (pi > 0.0) ? (T)(entmax_u(pi, alpha) * ((double)dp[i] - q)) : (T)0;     \
        }                                                                                   \
        if (dalpha) {                                                                       \
            /* sum_i g_i dp_i/dalpha with ut = u/su:                                        \
             *   [sum p g - sum ut g]/(a-1)^2 - [sum p log p g - h sum ut g]/(a-1) */       \
            double am1 = alpha - 1.0, sutg = q;                                             \
            *dalpha = (su > 0.0) ? (sp - sutg) / (am1 * am1) - (splpg - h * sutg) / am1     \
                                 : 0.0;                                                     \
        }                                                                                   \
    }                                                                                       \
    static la_status BATCH(const T *p, const T *dp, int64_t rows, int n, double alpha,      \
                           T *dz, double *dalpha, const char *fn) {                         \
        LA_TRY(check_backward(p, dp, dz, rows, n, fn));                                     \
        LA_TRY(la_entmax_check_alpha(alpha, fn));                                           \
        for (int64_t r = 0; r < rows; r++)                                                  \
            NAME(p + r * n, dp + r * n, n, alpha, dz + r * n, dalpha ? dalpha + r : NULL);  \
        return LA_OK;                                                                       \
    }

DEFINE_BACKWARD(backward_row_f64, backward_f64, double)
DEFINE_BACKWARD(backward_row_f32, backward_f32, float)

/* ---- public batched API ------------------------------------------------------------- */

static la_status forward_f64(int kind, double alpha, const double *z, int64_t rows, int n,
                             double *p, double *tau, const char *fn) {
    LA_TRY(check_args(z, p, rows, n, fn));
    LA_TRY(la_entmax_check_alpha(alpha, fn));
    double *work = la_malloc(sizeof(double) * 2 * (size_t)n);
    if (!work) return la_fail(LA_ENOMEM, "%s: cannot allocate %d doubles of scratch", fn, 2 * n);
    la_status st = LA_OK;
    for (int64_t r = 0; r < rows && st == LA_OK; r++)
        st = entmax_row(kind, alpha, z + r * n, n, p + r * n, tau ? tau + r : NULL, work, r, fn);
    free(work);
    return st;
}

static la_status forward_f32(int kind, double alpha, const float *z, int64_t rows, int n,
                             float *p, double *tau, const char *fn) {
    LA_TRY(check_args(z, p, rows, n, fn));
    LA_TRY(la_entmax_check_alpha(alpha, fn));
    double *work = la_malloc(sizeof(double) * 4 * (size_t)n);
    if (!work) return la_fail(LA_ENOMEM, "%s: cannot allocate %d doubles of scratch", fn, 4 * n);
    double *zd = work + 2 * n, *pd = work + 3 * n;
    la_status st = LA_OK;
    for (int64_t r = 0; r < rows && st == LA_OK; r++) {
        for (int i = 0; i < n; i++) zd[i] = z[r * n + i];
        st = entmax_row(kind, alpha, zd, n, pd, tau ? tau + r : NULL, work, r, fn);
        for (int i = 0; i < n; i++) p[r * n + i] = (float)pd[i];
    }
    free(work);
    return st;
}

la_status la_sparsemax_forward_f64(const double *z, int64_t rows, int n, double *p, double *tau) {
    return forward_f64(LA_ENTMAX_SPARSEMAX, 2.0, z, rows, n, p, tau, "la_sparsemax_forward_f64");
}
la_status la_sparsemax_forward_f32(const float *z, int64_t rows, int n, float *p, double *tau) {
    return forward_f32(LA_ENTMAX_SPARSEMAX, 2.0, z, rows, n, p, tau, "la_sparsemax_forward_f32");
}
la_status la_entmax15_forward_f64(const double *z, int64_t rows, int n, double *p, double *tau) {
    return forward_f64(LA_ENTMAX_15, 1.5, z, rows, n, p, tau, "la_entmax15_forward_f64");
}
la_status la_entmax15_forward_f32(const float *z, int64_t rows, int n, float *p, double *tau) {
    return forward_f32(LA_ENTMAX_15, 1.5, z, rows, n, p, tau, "la_entmax15_forward_f32");
}
la_status la_entmax_bisect_forward_f64(const double *z, int64_t rows, int n, double alpha,
                                       double *p, double *tau) {
    return forward_f64(LA_ENTMAX_BISECT, alpha, z, rows, n, p, tau,
                       "la_entmax_bisect_forward_f64");
}
la_status la_entmax_bisect_forward_f32(const float *z, int64_t rows, int n, double alpha,
                                       float *p, double *tau) {
    return forward_f32(LA_ENTMAX_BISECT, alpha, z, rows, n, p, tau,
                       "la_entmax_bisect_forward_f32");
}

la_status la_sparsemax_backward_f64(const double *p, const double *dp, int64_t rows, int n,
                                    double *dz) {
    return backward_f64(p, dp, rows, n, 2.0, dz, NULL, "la_sparsemax_backward_f64");
}
la_status la_sparsemax_backward_f32(const float *p, const float *dp, int64_t rows, int n,
                                    float *dz) {
    return backward_f32(p, dp, rows, n, 2.0, dz, NULL, "la_sparsemax_backward_f32");
}
la_status la_entmax15_backward_f64(const double *p, const double *dp, int64_t rows, int n,
                                   double *dz) {
    return backward_f64(p, dp, rows, n, 1.5, dz, NULL, "la_entmax15_backward_f64");
}
la_status la_entmax15_backward_f32(const float *p, const float *dp, int64_t rows, int n,
                                   float *dz) {
    return backward_f32(p, dp, rows, n, 1.5, dz, NULL, "la_entmax15_backward_f32");
}
la_status la_entmax_bisect_backward_f64(const double *p, const double *dp, int64_t rows, int n,
                                        double alpha, double *dz, double *dalpha) {
    return backward_f64(p, dp, rows, n, alpha, dz, dalpha, "la_entmax_bisect_backward_f64");
}
la_status la_entmax_bisect_backward_f32(const float *p, const float *dp, int64_t rows, int n,
                                        double alpha, float *dz, double *dalpha) {
    return backward_f32(p, dp, rows, n, alpha, dz, dalpha, "la_entmax_bisect_backward_f32");
}
