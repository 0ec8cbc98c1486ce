/* diag_stats.c -- the attention-statistics accumulator la_diag (layer attn: the kernels'
 * la_attn_diagnose streams into it, the model checks it): attention mass and entropy per
 * distance range [t, t*delta), the two properties of scale-invariant attention (Anson
 * et al. 2025, arXiv 2505.17083: Def. 3.1 scale-invariant total attention, Defs. 3.3/3.4
 * scale-invariant sparsity), accumulated from per-row probabilities streamed over key
 * tiles (the paper's Gaussian model that fills it, la_diag_gaussian, is an experiment:
 * src/tasks/diag_gaussian.c).
 *
 * Per row and range r the accumulator keeps M_r = sum p_t and P_r = sum p_t log p_t over the
 * keys of the range; at the end of the row
 *     H_r = -sum (p_t/M_r) log(p_t/M_r) = log M_r - P_r / M_r
 * is the entropy of the attention renormalised within the range. Means and standard errors
 * over rows are kept as running sums of x and x^2 in double.
 *
 * Sink mass (issue 31): a softmax+sink row also reports the probability its sink took,
 * p_sink = exp(sigma_h - lse), and its span (the largest distance it sees); at the end of
 * the row p_sink joins the range holding the span, so that la_diag_get_sink reads the mean
 * sink mass of rows by how far back they see: how the sink's share moves as context grows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "longattn/attn.h"

struct la_diag {
    int64_t max_dist;
    double delta;
    int n_ranges;
    int64_t *edges;   /* (n_ranges + 1): range r is [edges[r], edges[r+1]) */
    int n_slots;
    double *s_mass;   /* (n_slots, n_ranges) current row: sum p */
    double *s_plogp;  /* (n_slots, n_ranges) current row: sum p log p */
    int64_t *s_keys;  /* (n_slots, n_ranges) current row: keys seen */
    int64_t *rows;    /* (n_ranges) rows with keys in the range */
    double *keys;     /* (n_ranges) sum of keys per row */
    double *m1, *m2;  /* (n_ranges) sum M, sum M^2 */
    int64_t *erows;   /* (n_ranges) rows with M > 0 */
    double *h1, *h2;  /* (n_ranges) sum H, sum H^2 */
    double *s_sink;   /* (n_slots) current row's sink mass, NAN: none reported */
    int64_t *s_span;  /* (n_slots) current row's span */
    int64_t *krows;   /* (n_ranges) rows with a sink whose span lies in the range */
    double *k1, *k2;  /* (n_ranges) sum p_sink, sum p_sink^2 */
};

la_status la_diag_new(int64_t max_dist, double delta, int n_slots, la_diag **out) {
    if (!out) return la_fail(LA_EINVAL, "la_diag_new: out must not be NULL");
    *out = NULL;
    if (max_dist < 0) return la_fail(LA_EINVAL, "la_diag_new: max_dist must be >= 0 (got %lld)", (long long)max_dist);
    if (!(delta > 1) || !isfinite(delta)) return la_fail(LA_EINVAL, "la_diag_new: delta must be a finite number > 1 (got %g)", delta);
    if (n_slots < 1) return la_fail(LA_EINVAL, "la_diag_new: n_slots must be >= 1 (got %d)", n_slots);
    if (max_dist > ((int64_t)1 << 50))
        return la_fail(LA_EINVAL, "la_diag_new: max_dist must be <= 2^50 (got %lld)", (long long)max_dist);
    /* edges 0, 1, then e_{k+1} = max(e_k + 1, ceil(e_k * delta)) until past max_dist */
    int64_t e[130];
    int n = 0;
    e[n++] = 0;
    e[n++] = 1;
    while (e[n - 1] <= max_dist) {
        double nx = ceil((double)e[n - 1] * delta - 1e-9 * (double)e[n - 1]);
        int64_t v = nx < 0x1p63 ? (int64_t)nx : INT64_MAX; /* past int64: the last range, unbounded */
        if (v < e[n - 1] + 1) v = e[n - 1] + 1;
        if (n == 129) return la_fail(LA_EINVAL, "la_diag_new: delta %g gives more than 128 ranges up to %lld; use a larger delta", delta, (long long)max_dist);
        e[n++] = v;
    }
    la_diag *d = la_calloc(1, sizeof *d);
    if (!d) return la_fail(LA_ENOMEM, "la_diag_new: out of memory");
    d->max_dist = max_dist, d->delta = delta, d->n_ranges = n - 1, d->n_slots = n_slots;
    size_t R = (size_t)d->n_ranges, SR = (size_t)n_slots * R;
    d->edges = la_malloc(sizeof(int64_t) * (R + 1));
    d->s_sink = la_malloc(sizeof(double) * (size_t)n_slots);
    /* every sum and count (8 bytes each) in one zeroed block from s_mass on, which
     * la_diag_reset clears at once: 3 per slot and range, the slots' spans, 10 per range */
    double *b = d->s_mass = la_calloc(3 * SR + (size_t)n_slots + 10 * R, sizeof(double));
    if (!d->edges || !d->s_sink || !b) {
        la_diag_free(d);
        return la_fail(LA_ENOMEM, "la_diag_new: out of memory");
    }
    d->s_plogp = b + SR, d->s_keys = (int64_t *)(b + 2 * SR), d->s_span = (int64_t *)(b + 3 * SR);
    b += 3 * SR + (size_t)n_slots;
    d->rows = (int64_t *)b, d->erows = (int64_t *)(b + R), d->krows = (int64_t *)(b + 2 * R);
    d->keys = b + 3 * R, d->m1 = b + 4 * R, d->m2 = b + 5 * R, d->h1 = b + 6 * R, d->h2 = b + 7 * R;
    d->k1 = b + 8 * R, d->k2 = b + 9 * R;
    memcpy(d->edges, e, sizeof(int64_t) * (R + 1));
    for (int s = 0; s < n_slots; s++) d->s_sink[s] = NAN;
    *out = d;
    return LA_OK;
}

void la_diag_free(la_diag *d) {
    if (!d) return;
    free(d->edges), free(d->s_sink), free(d->s_mass); /* s_mass: the block of every sum */
    free(d);
}

int la_diag_num_ranges(const la_diag *d) { return d ? d->n_ranges : 0; }

la_status la_diag_get_range_edges(const la_diag *d, int r, int64_t *lo, int64_t *hi) {
    if (!d || r < 0 || r >= d->n_ranges)
        return la_fail(LA_EINVAL, "la_diag_get_range_edges: range %d out of 0..%d", r, d ? d->n_ranges - 1 : -1);
    if (lo) *lo = d->edges[r];
    if (hi) *hi = d->edges[r + 1];
    return LA_OK;
}

/* index of the range holding distance t (0 <= t <= max_dist) */
static int range_of(const la_diag *d, int64_t t) {
    int lo = 0, hi = d->n_ranges - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (d->edges[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Shared body of la_diag_add and la_diag_add_logp: logp (n) or NULL (then log p is taken
 * here). The run of distances is cut where it crosses a range edge; each piece is summed in
 * a plain loop. */
static la_status diag_add(la_diag *d, int slot, int64_t t0, int dt, const float *prob,
                          const float *logp, int n, const char *fn) {
    if (!d || (!prob && n > 0)) return la_fail(LA_EINVAL, "%s: NULL argument", fn);
    if (slot < 0 || slot >= d->n_slots) return la_fail(LA_EINVAL, "%s: slot %d out of 0..%d", fn, slot, d->n_slots - 1);
    if (dt != 1 && dt != -1) return la_fail(LA_EINVAL, "%s: dt must be +1 or -1 (got %d)", fn, dt);
    if (n < 0) return la_fail(LA_EINVAL, "%s: n must be >= 0 (got %d)", fn, n);
    if (n == 0) return LA_OK;
    if (t0 < 0 || t0 > d->max_dist) /* first, so that t_last below cannot overflow */
        return la_fail(LA_EINVAL, "%s: distance t0 = %lld falls outside 0..%lld (max_dist of la_diag_new)", fn,
                       (long long)t0, (long long)d->max_dist);
    int64_t t_last = t0 + (int64_t)(n - 1) * dt;
    int64_t tmin = t0 < t_last ? t0 : t_last, tmax = t0 < t_last ? t_last : t0;
    if (tmin < 0 || tmax > d->max_dist)
        return la_fail(LA_EINVAL, "%s: distances %lld..%lld fall outside 0..%lld (max_dist of la_diag_new)",
                       fn, (long long)tmin, (long long)tmax, (long long)d->max_dist);
    int ok = 1; /* branch-free first pass (vectorises); the offender is searched only on error */
#pragma omp simd reduction(& : ok)
    for (int i = 0; i < n; i++) ok &= (prob[i] >= 0.0f) & (prob[i] <= 1.0f + 1e-5f);
    if (!ok)
        for (int i = 0; i < n; i++)
            if (!(prob[i] >= 0.0f && prob[i] <= 1.0f + 1e-5f))
                return la_fail(LA_EINVAL, "%s: probability %d is %g, not in [0, 1]", fn, i, (double)prob[i]);
    size_t base = (size_t)slot * d->n_ranges;
    int r = range_of(d, t0);
    int i = 0;
    while (i < n) {
        /* keys i .. i1-1 lie in range r */
        int64_t t = t0 + (int64_t)i * dt;
        int64_t left = dt > 0 ? d->edges[r + 1] - t : t - d->edges[r] + 1;
        int i1 = (int64_t)(n - i) < left ? n : i + (int)left;
        double m = 0, pl = 0;
        if (logp) {
            /* 16 float lanes over blocks of at most 256 keys, folded into double after each
             * block: vectorises, keeps a fixed summation order (deterministic), and float
             * partial sums of <= 16 terms lose < 1e-6 relative. This loop sees every visible
             * pair of a diagnosis. */
            int x = i;
            while (x < i1) {
                int xe = i1 - x > 256 ? x + 256 : i1;
                float ms[16] = {0}, ls[16] = {0};
                for (; x + 16 <= xe; x += 16)
                    for (int u = 0; u < 16; u++) {
                        float p = prob[x + u], l = logp[x + u];
                        ms[u] += p;
                        ls[u] += p > 0.0f ? p * l : 0.0f;
                    }
                for (int u = 0; x < xe; x++, u++) {
                    float p = prob[x];
                    ms[u] += p;
                    if (p > 0.0f) ls[u] += p * logp[x];
                }
                for (int u = 0; u < 16; u++) m += ms[u], pl += ls[u];
            }
        } else {
            for (int x = i; x < i1; x++) {
                double p = prob[x];
                m += p;
                if (p > 0) pl += p * log(p);
            }
        }
        d->s_mass[base + r] += m, d->s_plogp[base + r] += pl, d->s_keys[base + r] += i1 - i;
        i = i1;
        r += dt;
    }
    return LA_OK;
}

la_status la_diag_add(la_diag *d, int slot, int64_t t0, int dt, const float *prob, int n) {
    return diag_add(d, slot, t0, dt, prob, NULL, n, "la_diag_add");
}

la_status la_diag_add_logp(la_diag *d, int slot, int64_t t0, int dt, const float *prob,
                           const float *logp, int n) {
    if (!logp && n > 0) return la_fail(LA_EINVAL, "la_diag_add_logp: logp is NULL (use la_diag_add)");
    return diag_add(d, slot, t0, dt, prob, logp, n, "la_diag_add_logp");
}

int64_t la_diag_max_dist(const la_diag *d) { return d ? d->max_dist : -1; }
double la_diag_delta(const la_diag *d) { return d ? d->delta : NAN; }

void la_diag_reset(la_diag *d) {
    if (!d) return;
    size_t R = (size_t)d->n_ranges, SR = (size_t)d->n_slots * R;
    memset(d->s_mass, 0, sizeof(double) * (3 * SR + (size_t)d->n_slots + 10 * R)); /* every sum (la_diag_new) */
    for (int s = 0; s < d->n_slots; s++) d->s_sink[s] = NAN;
}

la_status la_diag_merge(la_diag *dst, const la_diag *src) {
    if (!dst || !src) return la_fail(LA_EINVAL, "la_diag_merge: NULL argument");
    if (dst->n_ranges != src->n_ranges || memcmp(dst->edges, src->edges, sizeof(int64_t) * (size_t)(dst->n_ranges + 1)))
        return la_fail(LA_EINVAL, "la_diag_merge: the accumulators have different ranges (max_dist %lld, delta %g vs "
                                  "max_dist %lld, delta %g); create them with the same max_dist and delta",
                       (long long)dst->max_dist, dst->delta, (long long)src->max_dist, src->delta);
    for (int r = 0; r < dst->n_ranges; r++) {
        dst->rows[r] += src->rows[r], dst->erows[r] += src->erows[r];
        dst->keys[r] += src->keys[r];
        dst->m1[r] += src->m1[r], dst->m2[r] += src->m2[r];
        dst->h1[r] += src->h1[r], dst->h2[r] += src->h2[r];
        dst->krows[r] += src->krows[r], dst->k1[r] += src->k1[r], dst->k2[r] += src->k2[r];
    }
    return LA_OK;
}

static double mean_se(double s1, double s2, int64_t n, double *se) {
    if (n < 1) {
        *se = NAN;
        return NAN;
    }
    double mu = s1 / (double)n;
    double var = n > 1 ? (s2 - (double)n * mu * mu) / (double)(n - 1) : 0;
    *se = n > 1 ? sqrt(var > 0 ? var / (double)n : 0) : 0;
    return mu;
}

la_status la_diag_add_sink(la_diag *d, int slot, int64_t span, double p_sink) {
    if (!d) return la_fail(LA_EINVAL, "la_diag_add_sink: NULL argument");
    if (slot < 0 || slot >= d->n_slots)
        return la_fail(LA_EINVAL, "la_diag_add_sink: slot %d out of 0..%d", slot, d->n_slots - 1);
    if (span < 0 || span > d->max_dist)
        return la_fail(LA_EINVAL, "la_diag_add_sink: span %lld outside 0..%lld (max_dist of la_diag_new)",
                       (long long)span, (long long)d->max_dist);
    if (!(p_sink >= 0.0 && p_sink <= 1.0 + 1e-6))
        return la_fail(LA_EINVAL, "la_diag_add_sink: sink probability %g is not in [0, 1]", p_sink);
    d->s_sink[slot] = p_sink > 1.0 ? 1.0 : p_sink;
    d->s_span[slot] = span;
    return LA_OK;
}

la_status la_diag_get_sink(const la_diag *d, int r, int64_t *rows, double *mass, double *mass_se) {
    if (!d) return la_fail(LA_EINVAL, "la_diag_get_sink: NULL argument");
    if (r < 0 || r >= d->n_ranges) return la_fail(LA_EINVAL, "la_diag_get_sink: range %d out of 0..%d", r, d->n_ranges - 1);
    double se;
    double mu = mean_se(d->k1[r], d->k2[r], d->krows[r], &se);
    if (rows) *rows = d->krows[r];
    if (mass) *mass = mu;
    if (mass_se) *mass_se = se;
    return LA_OK;
}

la_status la_diag_row_end(la_diag *d, int slot) {
    if (!d) return la_fail(LA_EINVAL, "la_diag_row_end: NULL argument");
    if (slot < 0 || slot >= d->n_slots) return la_fail(LA_EINVAL, "la_diag_row_end: slot %d out of 0..%d", slot, d->n_slots - 1);
    size_t base = (size_t)slot * d->n_ranges;
    for (int r = 0; r < d->n_ranges; r++) {
        if (d->s_keys[base + r] == 0) continue;
        double M = d->s_mass[base + r], P = d->s_plogp[base + r];
        d->rows[r]++;
        d->keys[r] += (double)d->s_keys[base + r];
        d->m1[r] += M, d->m2[r] += M * M;
        if (M > 0) {
            double H = log(M) - P / M;
            if (H < 0) H = 0; /* rounding when one key holds all the range's mass */
            d->erows[r]++;
            d->h1[r] += H, d->h2[r] += H * H;
        }
        d->s_mass[base + r] = d->s_plogp[base + r] = 0;
        d->s_keys[base + r] = 0;
    }
    if (!isnan(d->s_sink[slot])) {
        int r = range_of(d, d->s_span[slot]);
        double p = d->s_sink[slot];
        d->krows[r]++, d->k1[r] += p, d->k2[r] += p * p;
        d->s_sink[slot] = NAN;
    }
    return LA_OK;
}


la_status la_diag_get(const la_diag *d, int r, la_diag_result *out) {
    if (!d || !out) return la_fail(LA_EINVAL, "la_diag_get: NULL argument");
    if (r < 0 || r >= d->n_ranges) return la_fail(LA_EINVAL, "la_diag_get: range %d out of 0..%d", r, d->n_ranges - 1);
    memset(out, 0, sizeof *out);
    out->lo = d->edges[r], out->hi = d->edges[r + 1];
    out->rows = d->rows[r];
    out->keys = d->rows[r] ? d->keys[r] / (double)d->rows[r] : 0;
    out->mass = mean_se(d->m1[r], d->m2[r], d->rows[r], &out->mass_se);
    out->entropy_rows = d->erows[r];
    out->entropy = mean_se(d->h1[r], d->h2[r], d->erows[r], &out->entropy_se);
    return LA_OK;
}

la_status la_diag_summary(const la_diag *d, int64_t lo_min, double *mass_ratio, double *entropy_slope, int *n_used) {
    if (!d || !mass_ratio || !entropy_slope) return la_fail(LA_EINVAL, "la_diag_summary: NULL argument");
    double mmax = -INFINITY, mmin = INFINITY, sx = 0, sy = 0, sxx = 0, sxy = 0;
    int k = 0;
    for (int r = 0; r < d->n_ranges; r++) {
        int64_t lo = d->edges[r], hi = d->edges[r + 1];
        if (lo < lo_min || lo < 1 || hi - 1 > d->max_dist || d->erows[r] == 0) continue;
        double M = d->m1[r] / (double)d->rows[r], H = d->h1[r] / (double)d->erows[r], x = log((double)lo);
        mmax = fmax(mmax, M), mmin = fmin(mmin, M);
        sx += x, sy += H, sxx += x * x, sxy += x * H;
        k++;
    }
    if (n_used) *n_used = k;
    if (k < 2) {
        *mass_ratio = *entropy_slope = NAN;
        return LA_OK;
    }
    *mass_ratio = mmax / mmin;
    *entropy_slope = (k * sxy - sx * sy) / (k * sxx - sx * sx);
    return LA_OK;
}
