/* entmax_attn.c -- fused alpha-entmax / sparsemax / ASEntmax attention, forward and backward
 * (SPEC 5), on the tiles, visibility and logits of attn_internal.h.
 *
 * Forward, per (batch, head, query tile of LA_BQ rows):
 *   1. one pass over the visible key tiles computes the logits L (QK^T, transform, bias) and
 *      the row maxima M_r and per-tile row maxima; the logits of the query tile's key span
 *      are kept in a per-thread strip (LA_BQ x S floats) when it fits the strip budget,
 *      otherwise every later pass recomputes them (O(T*D + S*D) memory either way);
 *   2. the shifted threshold t_r of every row (c = (alpha-1)(L - M_r), t in [-1, -n^(1-alpha)])
 *      is found by passes that evaluate f(t) = sum [c - t]_+^(1/(alpha-1)) - 1 and f'(t) for
 *      all rows at once: Newton steps guarded by the bracket, bisection when a step leaves it
 *      or fails to halve it (AdaSplash), and for alpha = 2 / 1.5 the closed form on the
 *      support once the candidate set above the lower bracket end is consistent; tiles whose
 *      row maxima are all at or below the rows' current t are skipped;
 *   3. the output pass forms p = [c - t]_+^(1/(alpha-1)) and accumulates p V, skipping tiles
 *      where every p is zero.
 * Row statistic: tau = t + (alpha-1) M (unshifted units of (alpha-1) L), LA_ROW_EMPTY for rows
 * without a visible key.
 *
 * Backward (Peters et al. 2019 eq. 10): u = p^(2-alpha) on the support, dP = dO V^T,
 * delta_r = sum u dP / sum u, dL = u (dP - delta_r) on the support (0 elsewhere, selected, so
 * NaN in masked V rows cannot leak), dS = dL * c_r * a_t. Sparse path (issue 20, default):
 * one work item per (b, kv head) pair sweeps its query tiles, computing delta and dq and
 * adding dk, dv in place over the nonzero p only (em_backward_pair). Dense path (few pairs,
 * or la_entmax_sparse = 0): phase A (query tiles) computes delta and dq; phase B (key tiles,
 * all query heads of the kv group) computes dk and dv. Either way no two threads write the
 * same row, and both give bitwise the same results (the sparse products skip exact zeros
 * only, in the dense products' order).
 *
 * Threads: the work items, their order and each item's visible tiles come from the tile
 * scheduler (sched.c); key_mass is a second pass over key tiles once tau is known
 * (keystat.c) and d logn_s is summed per query item into c->part and reduced in a fixed
 * order, so every output and statistic is bitwise identical for any thread count. All
 * scratch (thread strips, delta, ASEntmax's scaled queries) comes from the workspace.
 *
 * ASEntmax (Vasylenko et al. 2025, eq. 8): the query of head h, token i is scaled by
 * s = delta + beta * (log n)^gamma, n = p + 2 (p the query's document-relative position; n = 2
 * for p < 0), before RoPE and the score. With nape only the NoPE heads (h >= H/2) are scaled.
 * The kernel runs on the scaled queries; backward maps dq_s back: dq = s dq_s,
 * d beta = (q . dq_s) (log n)^gamma, d gamma = (q . dq_s) beta (log n)^gamma log log n. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn_internal.h"
#include "attn/entmax_internal.h"
#include "longattn/attn.h"

/* Strip budget: logits of one query tile against its key span are cached per thread when
 * LA_BQ * span * 4 bytes is at most this (8 MiB: S <= 32768 keys). */
#define EM_STRIP_BYTES ((size_t)8 << 20)

typedef struct {
    const la_attn_ctx *c;
    double alpha, am1, r; /* r = 1/(alpha-1) */
    int rk;               /* 1: r == 1 (sparsemax), 2: r == 2 (1.5-entmax), 0: general */
    int cache;            /* logits strip cached */
    size_t strip_ld;      /* row stride of the strip: nkt * LA_BK */
} em_t;

static inline double em_pow(const em_t *e, double x) {
    return e->rk == 1 ? x : e->rk == 2 ? x * x : pow(x, e->r);
}
/* x^(r-1) = p / x, the derivative factor (u = p^(2-alpha) = x^(r-1)) */
static inline double em_powm1(const em_t *e, double x) {
    return e->rk == 1 ? 1.0 : e->rk == 2 ? x : pow(x, e->r - 1.0);
}

/* A float strictly below the logit threshold y = M + t/(alpha-1) (two float ulps under its
 * rounding), so that every logit l with (alpha-1)(l - M) - t > 0 also has l > the result:
 * the kernels skip the double-precision test for entries at or below it. */
static inline float em_float_below(double y) {
    float f = (float)y;
    if (!isfinite(f)) return isnan(f) ? -INFINITY : f;
    return nextafterf(nextafterf(f, -INFINITY), -INFINITY);
}

/* ---- per-thread scratch layout ------------------------------------------------------- */

typedef struct {
    float *qb;     /* (BQ, D) rotated query tile */
    float *kb;     /* (BK, D) rotated key tile (when rotating) */
    float *kt;     /* (D, BK) transposed key or value tile */
    float *sd;     /* (BQ, BK) raw dots */
    float *L;      /* (BQ, BK) logits (recompute mode) */
    float *P;      /* (BQ, BK) probabilities */
    float *U;      /* (BQ, BK) dL or u */
    float *dP;     /* (BQ, BK) dO V^T */
    float *acc;    /* (BQ, D) output / dq accumulator; (BK, D) dk accumulator */
    float *acc2;   /* (BK, D) dv accumulator */
    float *cr;     /* (BQ) row factors */
    float *tmax;   /* (nkt, BQ) per tile row maxima */
    signed char *cls; /* (nkt) tile classes (-1: outside the span) */
    double *cbuf;  /* (nkt) shifted tile maxima of one row */
    double *rowd;  /* (24, BQ) row state */
    float *strip;  /* (BQ, nkt*BK) logits strip (forward) / raw-dot tiles (backward), or NULL */
    float *strip2; /* (nkt, BQ, BK) dO V^T tiles (backward), or NULL */
    int32_t *idx;  /* (BK) nonzero columns of one row of a tile (sparse products) */
    int32_t *ent_r, *ent_x; /* (BQ * BK) rows, columns of a tile's nonzero p */
    const float *ktp; /* prepared (D, BK) K^T tiles of the item's pair (la_prep_pairs),
                         tile kt at + kt * D * BK; NULL: transpose per use */
} em_scratch;

static size_t em_layout(int D, int nkt, int cache, char *base, em_scratch *s) {
    size_t off = 0;
    LA_SCRATCH_TAKE(base, off, s->qb, float, LA_BQ * D);
    LA_SCRATCH_TAKE(base, off, s->kb, float, LA_BK * D);
    LA_SCRATCH_TAKE(base, off, s->kt, float, D * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->sd, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->L, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->P, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->U, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->dP, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->acc, float, LA_BQ * D);
    LA_SCRATCH_TAKE(base, off, s->acc2, float, LA_BK * D);
    LA_SCRATCH_TAKE(base, off, s->cr, float, LA_BQ);
    LA_SCRATCH_TAKE(base, off, s->tmax, float, (size_t)nkt * LA_BQ);
    LA_SCRATCH_TAKE(base, off, s->cls, signed char, nkt);
    LA_SCRATCH_TAKE(base, off, s->cbuf, double, nkt);
    LA_SCRATCH_TAKE(base, off, s->rowd, double, 24 * LA_BQ); /* row state, R_COUNT <= 24 slots */
    LA_SCRATCH_TAKE(base, off, s->idx, int32_t, LA_BK);
    LA_SCRATCH_TAKE(base, off, s->ent_r, int32_t, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->ent_x, int32_t, LA_BQ * LA_BK);
    if (cache) {
        LA_SCRATCH_TAKE(base, off, s->strip, float, (size_t)LA_BQ * nkt * LA_BK);
        LA_SCRATCH_TAKE(base, off, s->strip2, float, (size_t)LA_BQ * nkt * LA_BK);
    } else if (s) {
        s->strip = s->strip2 = NULL;
    }
    return off;
}

static size_t em_strip_budget = EM_STRIP_BYTES;

void la_entmax_attn_set_strip_budget(size_t bytes) { em_strip_budget = bytes; }

static int em_use_cache(int nkt) {
    return (size_t)LA_BQ * (size_t)nkt * LA_BK * sizeof(float) <= em_strip_budget;
}

/* Per-thread scratch bytes of the fused entmax kernels for head dimension D and S keys. */
static size_t em_scratch_bytes(int D, int S) {
    int nkt = (S + LA_BK - 1) / LA_BK;
    return em_layout(D, nkt, em_use_cache(nkt), NULL, NULL) + 64;
}

/* ---- logits of one tile ------------------------------------------------------------- */

/* QK^T dots of the query tile qb (nr, D) against key tile kt into sd (nr, BK). */
static void tile_dots(const la_attn_ctx *c, em_scratch *s, int b, int hkv, int kt, int nr,
                      const float *qb, float *sd, int ld) {
    int j0 = kt * LA_BK, nc = c->S - j0 < LA_BK ? c->S - j0 : LA_BK;
    const float *ktr = s->ktp ? s->ktp + (size_t)kt * c->D * LA_BK : NULL;
    if (!ktr) {
        la_transpose(la_load_k(c, b, hkv, j0, nc, s->kb), nc, c->D, c->D, s->kt, LA_BK);
        ktr = s->kt;
    }
    la_mm(nr, nc, c->D, qb, (size_t)c->D, 1, ktr, LA_BK, sd, ld, 0);
}

/* Logits of tile kt for the query tile: a pointer to (nr, *ld) floats, from the strip or
 * recomputed into s->L (raw dots left in s->sd when recomputed or want_dots). */
static const float *tile_L(const em_t *e, em_scratch *s, int b, int h, int i0, int nr, int kt,
                           int *ld, int want_dots) {
    const la_attn_ctx *c = e->c;
    const la_rowvis *rows = c->rows + (size_t)b * c->T + i0;
    int j0 = kt * LA_BK, nc = c->S - j0 < LA_BK ? c->S - j0 : LA_BK;
    if (s->strip && !want_dots) {
        *ld = (int)e->strip_ld;
        return s->strip + (size_t)kt * LA_BK;
    }
    tile_dots(c, s, b, h / c->group, kt, nr, s->qb, s->sd, LA_BK);
    la_tile_logits(c, h, rows, i0, nr, j0, nc, s->cls[kt], s->cr, s->sd, s->L, LA_BK);
    *ld = LA_BK;
    return s->L;
}

/* ---- forward -------------------------------------------------------------------------- */

/* Row state indices in s->rowd (each LA_BQ doubles). */
enum { R_M, R_T, R_LO, R_HI, R_F, R_DF, R_N, R_S1, R_S2, R_CMIN, R_AN, R_AS1, R_AS2, R_ACMIN,
       R_WID, R_DONE, R_FLO, R_DFLO, R_FHI, R_DFHI, R_SLOW, R_COUNT };

#define EM_ROW(s, k) ((s)->rowd + (size_t)(k) * LA_BQ)

/* One query tile of the entmax-family forward, in its four phases (issue 32: one function of
 * 254 lines before): the logits and row maxima, the starting point of each row's
 * threshold, the threshold passes (each: f(t) over the tiles, then every row's bracket and
 * next point), the output pass. The row state lives in s->rowd (EM_ROW) between them. */
typedef struct {
    int b, h, hkv, i0, nr;
    const la_rowvis *rows; /* (nr) the tile's rows */
} em_qtile;

/* pass 1: logits, row maxima M, per-tile row maxima of the visible tiles (cls[kt] = -1 for
 * the others, which every later pass skips) */
static void em_fwd_logits(const em_t *e, em_scratch *s, const em_qtile *tq, int qt) {
    const la_attn_ctx *c = e->c;
    const int b = tq->b, h = tq->h, hkv = tq->hkv, i0 = tq->i0, nr = tq->nr;
    const la_rowvis *rows = tq->rows;
    double *M = EM_ROW(s, R_M);
    la_load_q(c, b, h, i0, nr, s->qb);
    la_row_factors(c, h, rows, nr, s->cr);
    for (int r = 0; r < nr; r++) M[r] = -INFINITY;

    memset(s->cls, -1, (size_t)c->nkt);
    la_kiter ki;
    la_ktile tv;
    la_kiter_init(&ki, c, b, qt);
    while (la_kiter_next(&ki, &tv)) {
        const int kt = tv.kt, j0 = tv.j0, nc = tv.nc, cls = tv.cls;
        s->cls[kt] = (signed char)cls;
        float *tm = s->tmax + (size_t)kt * LA_BQ;
        float *Lt = s->strip ? s->strip + (size_t)kt * LA_BK : s->L;
        int ld = s->strip ? (int)e->strip_ld : LA_BK;
        tile_dots(c, s, b, hkv, kt, nr, s->qb, Lt, ld);
        la_tile_logits(c, h, rows, i0, nr, j0, nc, cls, s->cr, Lt, Lt, ld);
        for (int r = 0; r < nr; r++) {
            const float *l = Lt + (size_t)r * ld;
            float m = -INFINITY;
#pragma omp simd reduction(max : m)
            for (int x = 0; x < nc; x++) m = l[x] > m ? l[x] : m;
            tm[r] = m;
            if (m > M[r]) M[r] = m;
        }
    }
}

/* the starting point of each row's threshold and its bracket; returns the rows to solve */
static int em_fwd_start(const em_t *e, em_scratch *s, const em_qtile *tq) {
    const la_attn_ctx *c = e->c;
    const int nr = tq->nr;
    const la_rowvis *rows = tq->rows;
    const double am1 = e->am1;
    const double *M = EM_ROW(s, R_M);
    double *t = EM_ROW(s, R_T), *lo = EM_ROW(s, R_LO), *hi = EM_ROW(s, R_HI);
    double *wid = EM_ROW(s, R_WID), *done = EM_ROW(s, R_DONE), *aN = EM_ROW(s, R_AN);
    double *dflo = EM_ROW(s, R_DFLO), *fhi = EM_ROW(s, R_FHI), *dfhi = EM_ROW(s, R_DFHI);
    double *slow = EM_ROW(s, R_SLOW);
    /* pass 2..: thresholds. Starting point: the root of f restricted to the per-tile row
     * maxima. Dropping entries only lowers f, so that root is a lower bound of the true one
     * and usually close to it (the big entries are tile maxima); a small margin keeps it
     * below when the two coincide. */
    int active = 0;
    for (int r = 0; r < nr; r++) {
        done[r] = !(rows[r].nq > 0 && M[r] > -INFINITY);
        lo[r] = -1.0;
        hi[r] = -pow((double)rows[r].nq, 1.0 - e->alpha);
        t[r] = -1.0;
        if (!done[r]) {
            int cnt = 0;
            for (int kt = 0; kt < c->nkt; kt++) {
                if (s->cls[kt] <= 0) continue;
                double cv = am1 * ((double)s->tmax[(size_t)kt * LA_BQ + r] - M[r]);
                if (cv > -1.0) s->cbuf[cnt++] = cv;
            }
            if (cnt > 1) {
                double ts = e->rk ? la_entmax_tau_sorted(e->rk == 1 ? LA_ENTMAX_SPARSEMAX : LA_ENTMAX_15,
                                                         s->cbuf, cnt, s->cbuf)
                                  : la_entmax_tau_bisect(s->cbuf, cnt, cnt, e->alpha);
                ts -= 1e-12 * (1.0 + fabs(ts));
                if (ts > -1.0 && ts < hi[r]) t[r] = ts;
            }
        }
        wid[r] = INFINITY;
        aN[r] = 0;
        slow[r] = 0, dflo[r] = 0, dfhi[r] = 0, fhi[r] = 0;
        if (!done[r]) active++;
    }
    return active;
}

/* f(t) = sum_x [am1 (l_x - M) - t]_+^(1/am1) - 1 at each unfinished row's point t, its
 * derivative, and the sums of the closed forms (count, sum, sum of squares, minimum of
 * the entries above t), over the tiles that can hold such entries */
static void em_fwd_eval_f(const em_t *e, em_scratch *s, const em_qtile *tq) {
    const la_attn_ctx *c = e->c;
    const int b = tq->b, h = tq->h, i0 = tq->i0, nr = tq->nr, S = c->S;
    const double am1 = e->am1;
    const double *M = EM_ROW(s, R_M), *t = EM_ROW(s, R_T), *done = EM_ROW(s, R_DONE);
    double *f = EM_ROW(s, R_F), *df = EM_ROW(s, R_DF);
    double *N = EM_ROW(s, R_N), *S1 = EM_ROW(s, R_S1), *S2 = EM_ROW(s, R_S2);
    double *cmin = EM_ROW(s, R_CMIN);
    for (int r = 0; r < nr; r++) {
        f[r] = -1.0, df[r] = 0.0, N[r] = 0.0, S1[r] = 0.0, S2[r] = 0.0, cmin[r] = INFINITY;
    }
    for (int kt = 0; kt < c->nkt; kt++) {
        if (s->cls[kt] <= 0) continue;
        const float *tm = s->tmax + (size_t)kt * LA_BQ;
        int need = 0;
        for (int r = 0; r < nr && !need; r++)
            need = !done[r] && am1 * ((double)tm[r] - M[r]) - t[r] > 0.0;
        if (!need) continue;
        int ld, nc = S - kt * LA_BK < LA_BK ? S - kt * LA_BK : LA_BK;
        const float *Lt = tile_L(e, s, b, h, i0, nr, kt, &ld, 0);
        for (int r = 0; r < nr; r++) {
            if (done[r] || !(am1 * ((double)tm[r] - M[r]) - t[r] > 0.0)) continue;
            const float *l = Lt + (size_t)r * ld;
            double fr = 0, gr = 0, n_ = 0, s1 = 0, s2 = 0, cm = cmin[r];
            const double mr = M[r], tr = t[r];
            /* only logits above a float bound just under the row's threshold can have
             * x > 0 (a few per row and tile in a long sparse row): the exact test in
             * double runs on those, in increasing x */
            const float lt = em_float_below(mr + tr / am1);
            int nx = la_gt_cols(l, nc, lt, s->idx);
            for (int q = 0; q < nx; q++) {
                double cc = am1 * ((double)l[s->idx[q]] - mr);
                double xx = cc - tr;
                if (xx > 0.0) {
                    double g = em_powm1(e, xx);
                    fr += g * xx;
                    gr += g;
                    n_ += 1;
                    s1 += cc;
                    s2 += cc * cc;
                    cm = cc < cm ? cc : cm;
                }
            }
            f[r] += fr, df[r] -= e->r * gr, N[r] += n_, S1[r] += s1, S2[r] += s2, cmin[r] = cm;
        }
    }
}

/* every unfinished row: its bracket from f at its point, then its next point (closed form,
 * Newton from the monotone side, or bisection); returns the rows still unfinished */
static int em_fwd_update(const em_t *e, em_scratch *s, const em_qtile *tq, int pass, int active) {
    const int nr = tq->nr;
    double *t = EM_ROW(s, R_T), *lo = EM_ROW(s, R_LO), *hi = EM_ROW(s, R_HI);
    const double *f = EM_ROW(s, R_F), *df = EM_ROW(s, R_DF);
    const double *N = EM_ROW(s, R_N), *S1 = EM_ROW(s, R_S1), *S2 = EM_ROW(s, R_S2);
    const double *cmin = EM_ROW(s, R_CMIN);
    double *aN = EM_ROW(s, R_AN), *aS1 = EM_ROW(s, R_AS1);
    double *aS2 = EM_ROW(s, R_AS2), *acmin = EM_ROW(s, R_ACMIN);
    double *wid = EM_ROW(s, R_WID), *done = EM_ROW(s, R_DONE);
    double *flo = EM_ROW(s, R_FLO), *dflo = EM_ROW(s, R_DFLO);
    double *fhi = EM_ROW(s, R_FHI), *dfhi = EM_ROW(s, R_DFHI);
    double *slow = EM_ROW(s, R_SLOW);
    /* update each row's bracket and choose its next point */
    for (int r = 0; r < nr; r++) {
        if (done[r]) continue;
        double fr = f[r];
        if (fr == 0.0) { done[r] = 1; active--; continue; }
        /* progress of the monotone side: |f| there should at least halve per step */
        if (fr > 0.0) {
            if (e->r >= 1.0) slow[r] = (dflo[r] < 0.0 && fr > 0.5 * flo[r]) ? slow[r] + 1 : 0;
            lo[r] = t[r], flo[r] = fr, dflo[r] = df[r];
            aN[r] = N[r], aS1[r] = S1[r], aS2[r] = S2[r], acmin[r] = cmin[r];
        } else {
            if (e->r < 1.0) slow[r] = (dfhi[r] < 0.0 && fr < 0.5 * fhi[r]) ? slow[r] + 1 : 0;
            hi[r] = t[r], fhi[r] = fr, dfhi[r] = df[r];
        }
        if (pass == 0 && t[r] == -1.0 && fr <= 0.0) { /* one-hot at -1 */
            done[r] = 1;
            active--;
            continue;
        }
        /* closed form on the set above lo (alpha = 2, 1.5): exact once consistent */
        if (e->rk && aN[r] > 0) {
            double k = aN[r], mean = aS1[r] / k, tc;
            if (e->rk == 1) tc = (aS1[r] - 1.0) / k;
            else {
                double m2 = aS2[r] - aS1[r] * mean;
                double delta = (1.0 - m2) / k;
                tc = mean - sqrt(delta > 0.0 ? delta : 0.0);
            }
            if (tc > lo[r] && tc <= hi[r] && acmin[r] >= tc) {
                t[r] = tc;
                done[r] = 1;
                active--;
                continue;
            }
        }
        double width = hi[r] - lo[r];
        double mid = lo[r] + 0.5 * width;
        if (!(mid > lo[r] && mid < hi[r]) || fabs(fr) <= 1e-14) {
            done[r] = 1; /* converged: keep the last evaluated point */
            active--;
            continue;
        }
        /* Newton from the side where it is monotone: f is convex for alpha <= 2 (r >= 1),
         * so the step from lo lands in (lo, root]; concave for alpha > 2, step from hi.
         * (For sparsemax the step from lo is the closed form on the set above lo, i.e.
         * Michelot's support shrinking.) Bisection when that side has no evaluation yet,
         * the step leaves the bracket, or |f| on that side failed to halve twice in a row. */
        double next = mid;
        if (e->r >= 1.0 && dflo[r] < 0.0) next = lo[r] - flo[r] / dflo[r];
        else if (dfhi[r] < 0.0 && fhi[r] < 0.0) next = hi[r] - fhi[r] / dfhi[r];
        if (!(next > lo[r] && next < hi[r]) || slow[r] >= 2) next = mid, slow[r] = 0;
        wid[r] = width;
        t[r] = next;
    }
    return active;
}

/* output pass: p = [am1 (l - M) - t]_+^(1/am1), out = p V, the row statistic, support and
 * entropy */
static void em_fwd_output(const em_t *e, em_scratch *s, const em_qtile *tq, float *out, float *row_stat) {
    const la_attn_ctx *c = e->c;
    const int b = tq->b, h = tq->h, hkv = tq->hkv, i0 = tq->i0, nr = tq->nr, D = c->D, T = c->T, S = c->S;
    const la_rowvis *rows = tq->rows;
    const double am1 = e->am1;
    const double *M = EM_ROW(s, R_M), *t = EM_ROW(s, R_T);
    /* output pass */
    double *supp = EM_ROW(s, R_N), *ent = EM_ROW(s, R_S1);
    for (int r = 0; r < nr; r++) supp[r] = 0, ent[r] = 0;
    memset(s->acc, 0, sizeof(float) * (size_t)nr * D);
    const float *vbase = c->v + ((size_t)b * c->Hkv + hkv) * (size_t)S * D;
    for (int kt = 0; kt < c->nkt; kt++) {
        if (s->cls[kt] <= 0) continue;
        const float *tm = s->tmax + (size_t)kt * LA_BQ;
        int need = 0;
        for (int r = 0; r < nr && !need; r++)
            need = rows[r].nq > 0 && am1 * ((double)tm[r] - M[r]) - t[r] > 0.0;
        if (!need) continue;
        int ld, j0 = kt * LA_BK, nc = S - j0 < LA_BK ? S - j0 : LA_BK;
        const float *Lt = tile_L(e, s, b, h, i0, nr, kt, &ld, 0);
        for (int r = 0; r < nr; r++) {
            const float *l = Lt + (size_t)r * ld;
            float *p = s->P + (size_t)r * LA_BK;
            if (!(rows[r].nq > 0 && am1 * ((double)tm[r] - M[r]) - t[r] > 0.0)) {
                for (int x = 0; x < nc; x++) p[x] = 0.0f;
                continue;
            }
            const double mr = M[r], tr = t[r];
            double sp_ = 0, en = 0;
            if (e->rk) { /* alpha = 2 / 1.5 */
                /* the exact test in double only for logits above the float prefilter bound
                 * (a few per row and tile in a long sparse row); the others get p = 0 */
                memset(p, 0, sizeof(float) * (size_t)nc);
                int n = la_gt_cols(l, nc, em_float_below(mr + tr / am1), s->idx);
                for (int q = 0; q < n; q++) {
                    int x = s->idx[q];
                    double xx = am1 * ((double)l[x] - mr) - tr;
                    double xp = xx > 0.0 ? xx : 0.0;
                    float pf = (float)(e->rk == 2 ? xp * xp : xp);
                    p[x] = pf;
                    sp_ += pf > 0.0f ? 1.0 : 0.0; /* support = p > 0 after rounding */
                }
                if (c->opts->row_entropy)
                    for (int x = 0; x < nc; x++)
                        if (p[x] > 0.0f) en -= (double)p[x] * log((double)p[x]);
                supp[r] += sp_, ent[r] += en;
                continue;
            }
            const float lt = em_float_below(mr + tr / am1);
            for (int x = 0; x < nc; x++) {
                if (!(l[x] > lt)) { /* cheap float prefilter, exact test below */
                    p[x] = 0.0f;
                    continue;
                }
                double xx = am1 * ((double)l[x] - mr) - tr;
                double pv = xx > 0.0 ? em_pow(e, xx) : 0.0;
                p[x] = (float)pv;
                if (pv > 0.0) sp_ += 1, en -= pv * log(pv);
            }
            supp[r] += sp_, ent[r] += en;
        }
        if (la_entmax_sparse) /* p V over the nonzero p only: bitwise the dense product */
            for (int r = 0; r < nr; r++) {
                const float *p = s->P + (size_t)r * LA_BK;
                int nnz = la_nz_cols(p, nc, s->idx);
                la_spmm_row(p, s->idx, nnz, vbase + (size_t)j0 * D, D, s->acc + (size_t)r * D, D);
            }
        else if (s->cls[kt] == 1)
            la_mm(nr, D, nc, s->P, LA_BK, 1, vbase + (size_t)j0 * D, D, s->acc, D, 1);
        else
            la_mm_rows(rows, nr, j0, nc, D, s->P, LA_BK, vbase + (size_t)j0 * D, D, s->acc, D);
    }
    size_t rbase = ((size_t)b * c->H + h) * T + i0;
    memcpy(out + rbase * D, s->acc, sizeof(float) * (size_t)nr * D);
    for (int r = 0; r < nr; r++) {
        int empty = !(rows[r].nq > 0 && M[r] > -INFINITY);
        row_stat[rbase + r] = empty ? LA_ROW_EMPTY : (float)(t[r] + am1 * M[r]);
        if (c->opts->row_support) c->opts->row_support[rbase + r] = (float)supp[r];
        if (c->opts->row_entropy) c->opts->row_entropy[rbase + r] = (float)ent[r];
    }
}


static void em_forward_tile(const em_t *e, em_scratch *s, int b, int h, int qt, float *out,
                            float *row_stat) {
    const la_attn_ctx *c = e->c;
    const int i0 = qt * LA_BQ;
    const em_qtile tq = {b, h, h / c->group, i0, c->T - i0 < LA_BQ ? c->T - i0 : LA_BQ,
                        c->rows + (size_t)b * c->T + i0};
    em_fwd_logits(e, s, &tq, qt);
    int active = em_fwd_start(e, s, &tq);
    for (int pass = 0; pass < 200 && active > 0; pass++) {
        em_fwd_eval_f(e, s, &tq);
        active = em_fwd_update(e, s, &tq, pass, active);
    }
    em_fwd_output(e, s, &tq, out, row_stat);
}

static la_status em_init(em_t *e, const la_attn_ctx *c, double alpha) {
    e->c = c;
    e->alpha = alpha;
    e->am1 = alpha - 1.0;
    e->r = 1.0 / e->am1;
    e->rk = alpha == 2.0 ? 1 : alpha == 1.5 ? 2 : 0;
    e->cache = em_use_cache(c->nkt);
    e->strip_ld = (size_t)c->nkt * LA_BK;
    size_t need = em_layout(c->D, c->nkt, e->cache, NULL, NULL);
    if (need > c->scratch_bytes)
        return la_fail(LA_ENOMEM, "entmax attention: thread scratch of %zu bytes < %zu needed",
                       c->scratch_bytes, need);
    return LA_OK;
}

static em_scratch em_thread(const em_t *e, int tid) {
    em_scratch s;
    char *base = la_ctx_scratch(e->c, tid);
    em_layout(e->c->D, e->c->nkt, e->cache, base, &s);
    s.ktp = NULL;
    return s;
}

static void em_probs(const void *arg, const la_rowvis *rows, const float *L, int nr, int nc,
                     const float *tau, float *P, float *W);

typedef struct {
    const em_t *e;
    em_scratch s;
    float *out, *row_stat;
    const float *dout, *crow_stat; /* backward */
    float *delta, *dq, *dk, *dv;
    int p0;        /* first (b, kv head) pair of the prepared chunk; -1: no prepared tiles */
} em_arg;

/* Point the scratch at the prepared tiles of the item's (b, kv head) pair, if any. */
static void em_set_prep(em_arg *a, int b, int hkv) {
    const la_attn_ctx *c = a->e->c;
    a->s.ktp = a->p0 < 0 ? NULL : c->prep + (size_t)(b * c->Hkv + hkv - a->p0) * la_prep_stride(c, 0);
}

static void em_forward_item(void *arg, la_item it) {
    em_arg *a = arg;
    em_set_prep(a, it.b, it.h / a->e->c->group);
    em_forward_tile(a->e, &a->s, it.b, it.h, it.tile, a->out, a->row_stat);
}

static la_status em_forward(const la_attn_ctx *c, double alpha, float *out, float *row_stat) {
    em_t e;
    LA_TRY(em_init(&e, c, alpha));
#pragma omp parallel num_threads(c->nthreads)
    {
        em_arg a = {.e = &e, .s = em_thread(&e, omp_get_thread_num()), .out = out, .row_stat = row_stat};
        /* query items chunk by chunk of (b, kv head) pairs whose K^T tiles are prepared once
         * (as the softmax forward): no transpose (and rotation) of a key tile per query tile */
        for (int ch = 0; ch < la_sched_nchunks(c); ch++) {
            int i0, i1;
            la_sched_chunk(c, ch, &i0, &i1);
            if (!la_sched_any_q(c, i0, i1)) continue; /* nothing selected (ring.c) */
            a.p0 = ch * c->prep_pairs;
            la_prep_pairs_for(c, a.p0, (i1 - i0) / (c->group * c->nqt), 0);
            la_sched_for(c, LA_ITEMS_Q, i0, i1, em_forward_item, &a);
        }
        /* key_mass once every tau is known: one head item per key tile, fixed order */
        if (c->opts->key_mass) la_key_mass_for(c, row_stat, em_probs, &e);
    }
    return LA_OK;
}

/* ---- backward ----------------------------------------------------------------------- */

/* p and the derivative factor u of one tile from logits and tau: P, U (nr, BK). Returns the
 * number of nonzero p. */
static int tile_pu(const em_t *e, const float *Lt, int ld, int nr, int nc, const float *tau,
                   float *P, float *U) {
    int nz = 0;
    const double am1 = e->am1;
    int32_t idx[LA_BK];
    for (int r = 0; r < nr; r++) {
        const float *l = Lt + (size_t)r * ld;
        float *p = P + (size_t)r * LA_BK, *u = U + (size_t)r * LA_BK;
        double tr = tau[r];
        memset(p, 0, sizeof(float) * (size_t)nc);
        memset(u, 0, sizeof(float) * (size_t)nc);
        if (tr == LA_ROW_EMPTY) continue;
        /* only logits above a float bound just under tau / (alpha-1) can have p > 0 (most of a
         * long sparse row's entries are not): the exact test in double runs on those only, so
         * every entry is the same as from a full pass */
        int n = la_gt_cols(l, nc, em_float_below(tr / am1), idx);
        for (int t = 0; t < n; t++) {
            int x = idx[t];
            double xx = am1 * (double)l[x] - tr;
            if (e->rk == 2) {
                double xp = xx > 0.0 ? xx : 0.0;
                float pf = (float)(xp * xp);
                p[x] = pf;
                u[x] = pf > 0.0f ? (float)xp : 0.0f;
                nz += pf > 0.0f;
            } else if (e->rk == 1) {
                float pf = (float)(xx > 0.0 ? xx : 0.0);
                p[x] = pf;
                u[x] = pf > 0.0f ? 1.0f : 0.0f;
                nz += pf > 0.0f;
            } else if (xx > 0.0) {
                p[x] = (float)em_pow(e, xx);
                u[x] = (float)em_powm1(e, xx);
                nz++;
            }
        }
    }
    return nz;
}

/* p of a tile (the probability callback of the key statistics, keystat.c). */
static void em_probs(const void *arg, const la_rowvis *rows, const float *L, int nr, int nc,
                     const float *tau, float *P, float *W) {
    (void)rows;
    tile_pu(arg, L, LA_BK, nr, nc, tau, P, W);
}

/* dO V^T of tile kt into s->dP (nr, BK). */
static void tile_dov(const la_attn_ctx *c, em_scratch *s, int b, int hkv, int kt, int nr,
                     const float *dob) {
    int j0 = kt * LA_BK, nc = c->S - j0 < LA_BK ? c->S - j0 : LA_BK;
    const float *vp = c->v + (((size_t)b * c->Hkv + hkv) * c->S + j0) * c->D;
    la_transpose(vp, nc, c->D, c->D, s->kt, LA_BK);
    la_mm(nr, nc, c->D, dob, (size_t)c->D, 1, s->kt, LA_BK, s->dP, LA_BK, 0);
}

/* dS = dL * c_r * a_t into s->U in place (dL given in U); returns sum dL * dS/ds_h for logn. */
static double tile_dscore(const em_t *e, em_scratch *s, int h, const la_rowvis *rows, int i0,
                          int nr, int j0, int nc) {
    const la_attn_ctx *c = e->c;
    double dls = 0.0;
    int want_s = c->spec->xform == LA_XF_LOGN && c->opts->dlogn_s;
    for (int r = 0; r < nr; r++) {
        float *dl = s->U + (size_t)r * LA_BK;
        const float *sd = s->sd + (size_t)r * LA_BK;
        const float *ta = c->has_t ? c->t_a + (size_t)(j0 - (i0 + r) + c->T - 1) : NULL;
        float cr = s->cr[r];
        double sx = (double)c->scale * rows[r].xrow;
        if (want_s)
            for (int x = 0; x < nc; x++)
                if (dl[x] != 0.0f) dls += (double)dl[x] * sx * (ta ? ta[x] : 1.0f) * sd[x];
        /* dl is exactly 0 off the support; multiplying keeps it 0 (cr, a finite) */
        if (ta) {
#pragma omp simd
            for (int x = 0; x < nc; x++) dl[x] = dl[x] * cr * ta[x];
        } else {
#pragma omp simd
            for (int x = 0; x < nc; x++) dl[x] = dl[x] * cr;
        }
    }
    return dls;
}

/* dO V^T of tile kt at the entries with p > 0 only (sparse path; P in s->P): each entry the
 * chain over d that the dense product forms, from V's rows (no transpose); other entries of
 * s->dP are stale and never read. */
static void tile_dov_need(const la_attn_ctx *c, em_scratch *s, int b, int hkv, int kt, int nr,
                          int nc, const float *dob) {
    int j0 = kt * LA_BK, n = 0;
    const float *vp = c->v + (((size_t)b * c->Hkv + hkv) * c->S + j0) * c->D;
    for (int r = 0; r < nr; r++) {
        int k = la_nz_cols(s->P + (size_t)r * LA_BK, nc, s->ent_x + n);
        for (int t = 0; t < k; t++) s->ent_r[n + t] = r;
        n += k;
    }
    la_dot_entries(n, s->ent_r, s->ent_x, dob, c->D, vp, c->D, c->D, s->dP, LA_BK);
}

/* Query tile qt of head h: delta, dq and the item's d logn_s (into c->part); with dkp, dvp
 * (the (S, D) dk, dv rows of the pair, sparse path) also adds this tile's terms to dk and dv,
 * over the nonzero p only. */
static void em_backward_dq(const em_t *e, em_scratch *s, int b, int h, int qt,
                           const float *row_stat, const float *dout, float *delta, float *dq,
                           float *dkp, float *dvp) {
    const int sparse = dkp != NULL;
    const la_attn_ctx *c = e->c;
    const int D = c->D, T = c->T, S = c->S, hkv = h / c->group;
    const int i0 = qt * LA_BQ, nr = T - i0 < LA_BQ ? T - i0 : LA_BQ;
    const la_rowvis *rows = c->rows + (size_t)b * T + i0;
    size_t rbase = ((size_t)b * c->H + h) * T + i0;
    const float *tau = row_stat + rbase, *dob = dout + rbase * D;
    double *su = s->rowd, *sug = s->rowd + LA_BQ;
    double dls = 0.0; /* d logn_s of this item */
    la_load_q(c, b, h, i0, nr, s->qb);
    la_row_factors(c, h, rows, nr, s->cr);
    for (int r = 0; r < nr; r++) su[r] = 0, sug[r] = 0;
    /* sweep 1: delta_r = sum u dP / sum u; remember which tiles carry any p > 0 */
    memset(s->cls, -1, (size_t)c->nkt);
    la_kiter ki;
    la_ktile tv;
    la_kiter_init(&ki, c, b, qt);
    while (la_kiter_next(&ki, &tv)) {
        const int kt = tv.kt, nc = tv.nc;
        s->cls[kt] = (signed char)tv.cls;
        int ld;
        const float *Lt = tile_L(e, s, b, h, i0, nr, kt, &ld, 1);
        if (!tile_pu(e, Lt, ld, nr, nc, tau, s->P, s->U)) {
            s->cls[kt] = -1;
            continue;
        }
        if (sparse) tile_dov_need(c, s, b, hkv, kt, nr, nc, dob);
        else tile_dov(c, s, b, hkv, kt, nr, dob);
        if (s->strip) { /* keep the dots and dO V^T of this tile for sweep 2 */
            size_t blk = (size_t)kt * LA_BQ * LA_BK, bytes = sizeof(float) * (size_t)nr * LA_BK;
            memcpy(s->strip + blk, s->sd, bytes);
            memcpy(s->strip2 + blk, s->dP, bytes);
        }
        for (int r = 0; r < nr; r++) { /* over the p > 0 (p is never negative) */
            const float *u = s->U + (size_t)r * LA_BK, *dp = s->dP + (size_t)r * LA_BK;
            int nnz = la_nz_cols(s->P + (size_t)r * LA_BK, nc, s->idx);
            double a = 0, g = 0;
            for (int t = 0; t < nnz; t++) {
                int x = s->idx[t];
                a += u[x], g += (double)u[x] * dp[x];
            }
            su[r] += a, sug[r] += g;
        }
    }
    for (int r = 0; r < nr; r++) delta[rbase + r] = su[r] > 0 ? (float)(sug[r] / su[r]) : 0.0f;
    /* sweep 2: dL = u (dP - delta) on the support; dq += dS K */
    memset(s->acc, 0, sizeof(float) * (size_t)nr * D);
    for (int kt = 0; kt < c->nkt; kt++) {
        if (s->cls[kt] <= 0) continue;
        int j0 = kt * LA_BK, nc = S - j0 < LA_BK ? S - j0 : LA_BK;
        if (s->strip) {
            size_t blk = (size_t)kt * LA_BQ * LA_BK, bytes = sizeof(float) * (size_t)nr * LA_BK;
            memcpy(s->sd, s->strip + blk, bytes);
            memcpy(s->dP, s->strip2 + blk, bytes);
        } else {
            tile_dots(c, s, b, hkv, kt, nr, s->qb, s->sd, LA_BK);
        }
        la_tile_logits(c, h, rows, i0, nr, j0, nc, s->cls[kt], s->cr, s->sd, s->L, LA_BK);
        tile_pu(e, s->L, LA_BK, nr, nc, tau, s->P, s->U);
        if (!s->strip) {
            if (sparse) tile_dov_need(c, s, b, hkv, kt, nr, nc, dob);
            else tile_dov(c, s, b, hkv, kt, nr, dob);
        }
        for (int r = 0; r < nr; r++) {
            float *u = s->U + (size_t)r * LA_BK;
            const float *p = s->P + (size_t)r * LA_BK, *dp = s->dP + (size_t)r * LA_BK;
            float dr = delta[rbase + r];
            for (int x = 0; x < nc; x++) u[x] = p[x] > 0.0f ? u[x] * (dp[x] - dr) : 0.0f;
        }
        dls += tile_dscore(e, s, h, rows, i0, nr, j0, nc);
        const float *kp = la_load_k(c, b, hkv, j0, nc, s->kb);
        if (sparse) {
            /* the dense path's products over the nonzero entries only, in its orders: dq row
             * r over increasing key x; dk, dv row x over increasing r (query tiles, heads of
             * the pair in the dense dk/dv pass's order, see em_backward_pair) */
            for (int r = 0; r < nr; r++) {
                const float *u = s->U + (size_t)r * LA_BK, *p = s->P + (size_t)r * LA_BK;
                int nnz = la_nz_cols(u, nc, s->idx);
                la_spmm_row(u, s->idx, nnz, kp, D, s->acc + (size_t)r * D, D);
                la_spscatter_row(u, s->idx, nnz, s->qb + (size_t)r * D, dkp + (size_t)j0 * D, D, D);
                nnz = la_nz_cols(p, nc, s->idx);
                la_spscatter_row(p, s->idx, nnz, dob + (size_t)r * D, dvp + (size_t)j0 * D, D, D);
            }
        } else if (s->cls[kt] == 1) {
            la_mm(nr, D, nc, s->U, LA_BK, 1, kp, D, s->acc, D, 1);
        } else {
            la_mm_rows(rows, nr, j0, nc, D, s->U, LA_BK, kp, D, s->acc, D);
        }
    }
    la_unrotate_q(c, b, i0, nr, s->acc);
    memcpy(dq + rbase * D, s->acc, sizeof(float) * (size_t)nr * D);
    c->part[((size_t)b * c->H + h) * c->nqt + qt] = dls;
}

static void em_backward_dkv(const em_t *e, em_scratch *s, int b, int hkv, int kt,
                            const float *row_stat, const float *dout, const float *delta,
                            float *dk, float *dv) {
    const la_attn_ctx *c = e->c;
    const int D = c->D, T = c->T, S = c->S;
    const int j0 = kt * LA_BK, nc = S - j0 < LA_BK ? S - j0 : LA_BK;
    float *dka = s->acc, *dva = s->acc2;
    memset(dka, 0, sizeof(float) * (size_t)nc * D);
    memset(dva, 0, sizeof(float) * (size_t)nc * D);
    for (int g = 0; g < c->group; g++) {
        int h = hkv * c->group + g;
        la_qiter qi;
        la_qtile tq;
        la_qiter_init(&qi, c, b, kt);
        while (la_qiter_next(&qi, &tq)) {
            const int i0 = tq.i0, nr = tq.nr, cls = tq.cls;
            const la_rowvis *rows = tq.rows;
            size_t rbase = ((size_t)b * c->H + h) * T + i0;
            const float *tau = row_stat + rbase, *dob = dout + rbase * D;
            la_load_q(c, b, h, i0, nr, s->qb);
            la_row_factors(c, h, rows, nr, s->cr);
            tile_dots(c, s, b, hkv, kt, nr, s->qb, s->sd, LA_BK);
            la_tile_logits(c, h, rows, i0, nr, j0, nc, cls, s->cr, s->sd, s->L, LA_BK);
            if (!tile_pu(e, s->L, LA_BK, nr, nc, tau, s->P, s->U)) continue;
            tile_dov(c, s, b, hkv, kt, nr, dob);
            for (int r = 0; r < nr; r++) {
                float *u = s->U + (size_t)r * LA_BK;
                const float *p = s->P + (size_t)r * LA_BK, *dp = s->dP + (size_t)r * LA_BK;
                float dr = delta[rbase + r];
                for (int x = 0; x < nc; x++) u[x] = p[x] > 0.0f ? u[x] * (dp[x] - dr) : 0.0f;
            }
            tile_dscore(e, s, h, rows, i0, nr, j0, nc);
            /* dv (nc, D) += P^T dO ; dk (nc, D) += dS^T Q  (rotated frame) */
            la_mm(nc, D, nr, s->P, 1, LA_BK, dob, D, dva, D, 1);
            la_mm(nc, D, nr, s->U, 1, LA_BK, s->qb, D, dka, D, 1);
        }
    }
    la_unrotate_k(c, b, j0, nc, dka);
    size_t kbase = (((size_t)b * c->Hkv + hkv) * S + j0) * D;
    memcpy(dk + kbase, dka, sizeof(float) * (size_t)nc * D);
    memcpy(dv + kbase, dva, sizeof(float) * (size_t)nc * D);
}

static void em_dq_item(void *arg, la_item it) {
    em_arg *a = arg;
    em_backward_dq(a->e, &a->s, it.b, it.h, it.tile, a->crow_stat, a->dout, a->delta, a->dq, NULL,
                   NULL);
}

/* Sparse backward of one (b, kv head) pair: the group's heads, then their query tiles, in
 * increasing order, each computing delta and dq (as em_dq_item) and adding its nonzero
 * terms to the pair's dk and dv in place: every dk / dv row gets its terms in the order
 * em_backward_dkv adds them (heads, query tiles, rows increasing), so the gradients are
 * bitwise those of the dense two passes, without their second QK^T and dO V^T per tile. */
static void em_backward_pair(const em_t *e, em_scratch *s, int b, int hkv, const float *row_stat,
                             const float *dout, float *delta, float *dq, float *dk, float *dv) {
    const la_attn_ctx *c = e->c;
    const int D = c->D, S = c->S;
    size_t kbase = ((size_t)b * c->Hkv + hkv) * S * D;
    memset(dk + kbase, 0, sizeof(float) * (size_t)S * D);
    memset(dv + kbase, 0, sizeof(float) * (size_t)S * D);
    for (int g = 0; g < c->group; g++) {
        int h = hkv * c->group + g;
        for (int qt = 0; qt < c->nqt; qt++)
            em_backward_dq(e, s, b, h, qt, row_stat, dout, delta, dq, dk + kbase, dv + kbase);
    }
    la_unrotate_k(c, b, 0, S, dk + kbase);
}

static void em_pair_item(void *arg, la_item it) {
    em_arg *a = arg;
    em_set_prep(a, it.b, it.h);
    em_backward_pair(a->e, &a->s, it.b, it.h, a->crow_stat, a->dout, a->delta, a->dq, a->dk, a->dv);
}

int la_entmax_sparse = 1; /* tests: 0 = the dense products everywhere */

/* n items of equal cost keep nt threads busy enough: the rule of the softmax backward's
 * fused path (softmax.c) */
static int em_balanced(long n, long nt) { return 4 * nt * ((n + nt - 1) / nt) <= 5 * n; }

/* Backward path: 1 the sparse pair items chunk by chunk of prepared K^T tiles, when a
 * chunk's pairs keep every thread busy; 2 the same without prepared tiles (one chunk of all
 * pairs, tiles transposed per use) when only all the pairs do; 0 the dense two passes.
 * Bitwise the same results either way. */
static int em_use_pairs(const la_attn_ctx *c) {
    if (!la_entmax_sparse || c->qsel || c->ksel) return 0; /* selected items (ring.c): two passes */
    if (la_entmax_sparse > 1) return la_entmax_sparse == 2 ? 1 : 2;
    if (em_balanced(c->prep_pairs, c->nthreads)) return 1;
    return em_balanced((long)c->B * c->Hkv, c->nthreads) ? 2 : 0;
}

static void em_dkv_item(void *arg, la_item it) {
    em_arg *a = arg;
    em_backward_dkv(a->e, &a->s, it.b, it.h, it.tile, a->crow_stat, a->dout, a->delta, a->dk, a->dv);
}

/* delta (B, H, T) lives in c->rowbuf; the d logn_s of every query item in c->part, summed
 * in a fixed order afterwards (la_sum_parts), so every output is the same for any thread
 * count. */
static la_status em_backward(const la_attn_ctx *c, double alpha, const float *row_stat,
                             const float *dout, float *dq, float *dk, float *dv) {
    em_t e;
    LA_TRY(em_init(&e, c, alpha));
    const int pairs = em_use_pairs(c);
#pragma omp parallel num_threads(c->nthreads)
    {
        em_arg a = {.e = &e, .s = em_thread(&e, omp_get_thread_num()), .dout = dout,
                    .crow_stat = row_stat, .delta = c->rowbuf, .dq = dq, .dk = dk, .dv = dv, .p0 = -1};
        if (pairs == 1) {
            for (int p0 = 0; p0 < la_sched_np(c); p0 += c->prep_pairs) {
                int n = la_sched_np(c) - p0 < c->prep_pairs ? la_sched_np(c) - p0 : c->prep_pairs;
                a.p0 = p0;
                la_prep_pairs_for(c, p0, n, 0);
                la_sched_for(c, LA_ITEMS_PAIR, p0, p0 + n, em_pair_item, &a);
            }
        } else if (pairs == 2) {
            la_sched_for(c, LA_ITEMS_PAIR, 0, la_sched_np(c), em_pair_item, &a);
        } else {
            la_sched_for(c, LA_ITEMS_Q, 0, la_sched_nq(c), em_dq_item, &a);
            /* the loop's barrier: delta is complete */
            la_sched_for(c, LA_ITEMS_KV, 0, la_sched_nk(c), em_dkv_item, &a);
        }
    }
    if (c->opts->dlogn_s) la_sum_parts(c, c->opts->dlogn_s);
    return LA_OK;
}

/* ---- ASEntmax query scaling and the public dispatch ---------------------------------- */

static double norm_alpha(const la_spec *spec) {
    return spec->norm == LA_NORM_SPARSEMAX ? 2.0 : spec->alpha;
}

static int as_head_scaled(const la_spec *spec, int H, int h) {
    return !(spec->pos == LA_POS_NAPE && H >= 2 && h < H / 2);
}

/* Scale of query row (b, h, i): s = delta + beta (log n)^gamma with n = max(p + 2, 2), p the
 * row's document-relative position (c->rows); *ln = log n and *lnp = (log n)^gamma for the
 * backward. Returns 0 for heads that are not scaled (s = 1). */
static int as_row_scale(const la_attn_ctx *c, const la_attn_opts *o, int b, int h, int i,
                        double *sc, double *ln, double *lnp) {
    size_t ri = ((size_t)b * c->H + h) * c->T + i;
    *sc = 1.0, *ln = 0.0, *lnp = 0.0;
    if (!as_head_scaled(c->spec, c->H, h)) return 0;
    int64_t p = c->rows[(size_t)b * c->T + i].p;
    *ln = log((double)(p + 2 > 2 ? p + 2 : 2));
    *lnp = pow(*ln, o->as_gamma[ri]);
    *sc = c->spec->as_delta + o->as_beta[ri] * *lnp;
    return 1;
}

la_status la_asentmax_ctx_scale(la_attn_ctx *c) {
    const la_attn_opts *o = c->opts;
    const int D = c->D;
    const float *q = c->q;
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++)
            for (int i = 0; i < c->T; i++) {
                size_t ri = ((size_t)b * c->H + h) * c->T + i;
                double sc, ln, lnp;
                as_row_scale(c, o, b, h, i, &sc, &ln, &lnp);
                float *dst = c->qbuf + ri * D;
                uint32_t bad = 0;
                for (int d = 0; d < D; d++) {
                    dst[d] = (float)(sc * q[ri * D + d]);
                    bad |= !isfinite(dst[d]);
                }
                if (bad)
                    return la_fail(LA_ENUMERIC, "asentmax: the scaled query at [%d, %d, %d] is not finite "
                                   "(scale delta + beta (log n)^gamma = %g with as_beta = %g, as_gamma = %g); "
                                   "check as_beta / as_gamma", b, h, i, sc, (double)o->as_beta[ri],
                                   (double)o->as_gamma[ri]);
            }
    c->q = c->qbuf;
    return LA_OK;
}

/* dq holds d loss / d q_s: map it back to q (see the file comment) and write d beta,
 * d gamma. q: the unscaled queries. */
static void as_backward_map(const la_attn_ctx *c, const float *q, float *dq) {
    const la_attn_opts *o = c->opts;
    const int D = c->D;
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++)
            for (int i = 0; i < c->T; i++) {
                size_t ri = ((size_t)b * c->H + h) * c->T + i;
                float *g = dq + ri * D;
                const float *x = q + ri * D;
                double sc, ln, lnp, ds = 0.0;
                int scaled = as_row_scale(c, o, b, h, i, &sc, &ln, &lnp);
                for (int d = 0; d < D; d++) {
                    ds += (double)x[d] * g[d];
                    g[d] = (float)(sc * g[d]);
                }
                if (o->das_beta) o->das_beta[ri] = scaled ? (float)(ds * lnp) : 0.0f;
                if (o->das_gamma)
                    o->das_gamma[ri] = scaled ? (float)(ds * o->as_beta[ri] * lnp * log(ln)) : 0.0f;
            }
}

/* Context of an entmax-family call: the per-thread scratch of these kernels, delta (B, H, T)
 * for the backward and, for ASEntmax, the scaled queries, all from the workspace (*own, NULL
 * or to be freed, on failure too). fn names the entry point in the message of a bad alpha. */
static la_status em_ctx(la_attn_ctx *c, const la_spec *spec, const la_shape *shape,
                        const float *q, const float *k, const float *v, const la_attn_opts *opts,
                        int backward, la_workspace **own, const char *fn) {
    *own = NULL;
    LA_TRY(la_entmax_check_alpha(norm_alpha(spec), fn));
    int as = spec->norm == LA_NORM_ASENTMAX;
    if (as && (!opts || !opts->as_beta || !opts->as_gamma))
        return la_fail(LA_EINVAL, "asentmax: opts.as_beta and opts.as_gamma (B, H, T) are required "
                                  "(compute them with la_asentmax_params_forward)");
    la_ctx_extra x = {.thread_bytes = em_scratch_bytes(shape->D, shape->S), .rowbuf = backward, .qbuf = as};
    LA_TRY(la_attn_ctx_init(c, spec, shape, q, k, v, opts, &x, own));
    return as ? la_asentmax_ctx_scale(c) : LA_OK;
}

la_status la_entmax_attn_forward(const la_spec *spec, const la_shape *shape, const float *q,
                                 const float *k, const float *v, float *out, float *row_stat,
                                 const la_attn_opts *opts) {
    if (!spec || !shape) return la_fail(LA_EINVAL, "attention: spec and shape must not be NULL");
    la_attn_ctx c;
    la_workspace *own;
    la_status st = em_ctx(&c, spec, shape, q, k, v, opts, 0, &own,
                          "la_attn_forward (entmax normaliser)");
    if (st == LA_OK) st = em_forward(&c, norm_alpha(spec), out, row_stat);
    la_workspace_free(own);
    return st;
}

la_status la_entmax_attn_backward(const la_spec *spec, const la_shape *shape, const float *q,
                                  const float *k, const float *v, const float *out,
                                  const float *row_stat, const float *dout, float *dq, float *dk,
                                  float *dv, const la_attn_opts *opts) {
    if (!spec || !shape) return la_fail(LA_EINVAL, "attention: spec and shape must not be NULL");
    la_attn_ctx c;
    la_workspace *own;
    la_status st = em_ctx(&c, spec, shape, q, k, v, opts, 1, &own,
                          "la_attn_backward (entmax normaliser)");
    if (st == LA_OK) st = em_backward(&c, norm_alpha(spec), row_stat, dout, dq, dk, dv);
    if (st == LA_OK && spec->norm == LA_NORM_ASENTMAX) as_backward_map(&c, q, dq);
    la_workspace_free(own);
    return st;
}

/* ---- sequence parallelism (ring.c) -------------------------------------------------- */

la_status la_entmax_ctx(la_attn_ctx *c, const la_spec *spec, const la_shape *shape, const float *q,
                        const float *k, const float *v, const la_attn_opts *opts, int backward,
                        la_workspace **own) {
    return em_ctx(c, spec, shape, q, k, v, opts, backward, own,
                  "sequence-parallel attention (entmax normaliser)");
}

la_status la_entmax_ctx_forward(const la_attn_ctx *c, float *out, float *row_stat) {
    return em_forward(c, norm_alpha(c->spec), out, row_stat);
}

la_status la_entmax_ctx_backward(const la_attn_ctx *c, const float *row_stat, const float *dout, float *dq,
                                 float *dk, float *dv) {
    return em_backward(c, norm_alpha(c->spec), row_stat, dout, dq, dk, dv);
}

void la_entmax_ctx_as_map(const la_attn_ctx *c, const float *q, float *dq) { as_backward_map(c, q, dq); }
