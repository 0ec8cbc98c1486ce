/* attn_diag.c -- attention diagnostics of a finished attention call (la_attn_diagnose):
 * the probabilities of every query row are recomputed tile by tile from q, k and the row
 * statistic (lse for softmax, tau for the entmax family) with the kernels' own machinery of
 * attn_internal.h (la_attn_ctx_init: RoPE tables, visibility, documents, distance tables,
 * ALiBi slopes, logn factors; la_prep_pairs: rotated, transposed K tiles; la_tile_logits: the
 * logit formula), and streamed into la_diag accumulators (src/attn/diag_stats.c). No T x S
 * buffer: per thread one LA_BQ x LA_BK tile of dots, logits, p and log p.
 *
 *   softmax:         p = exp(L - lse), log p = L - lse                      (SPEC 5)
 *   entmax family:   p = [(alpha-1) L - tau]_+^(1/(alpha-1)),
 *                    log p = log((alpha-1) L - tau) / (alpha-1) on the support (SPEC 5,
 *                    tau in the units of entmax_attn.c: tau = t + (alpha-1) M)
 *   sigmoid (issue 31): p = sigmoid(L + b), log p = -log(1 + e^-(L + b))  (SPEC 10)
 *   softmax+sink:    as softmax (lse includes the sink); the sink's own mass
 *                    exp(sigma_h - lse) is reported per row (la_diag_add_sink)
 *
 * Row filter (la_attn_diagnose_rows): only the query tiles holding a chosen row are
 * computed, only chosen rows reach the accumulators, and each chosen row's probabilities
 * over the visible keys of each key span are summed in double into sel->mass (every row is
 * handled by one chunk, so the writes never race).
 *
 * Parallel split: the query tiles of one (b, h) are cut into DG_CHUNKS fixed chunks, each
 * with its own accumulator, merged in chunk order: the sums do not depend on the number of
 * threads or on the schedule. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn_internal.h"
#include "attn/entmax_internal.h"
#include "longattn/attn.h"

#define DG_CHUNKS 16

typedef struct {
    float *Qt;  /* (BQ, D)  rotated query tile */
    float *Sb;  /* (BQ, BK) raw dots */
    float *Lb;  /* (BQ, BK) logits */
    float *Pb;  /* (BQ, BK) probabilities */
    float *Gb;  /* (BQ, BK) log probabilities */
    float *cr;  /* (BQ)     row factors */
} dg_scratch;

static size_t dg_layout(int D, char *base, dg_scratch *s) {
    size_t off = 0;
    LA_SCRATCH_TAKE(base, off, s->Qt, float, (size_t)LA_BQ * D);
    LA_SCRATCH_TAKE(base, off, s->Sb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->Lb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->Pb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->Gb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->cr, float, LA_BQ);
    return off;
}

typedef struct {
    const la_attn_ctx *c;
    const float *row_stat; /* (B, H, T) */
    int entmax;            /* 0 softmax, 1 entmax family, 2 sigmoid (issue 31) */
    double am1, r;         /* alpha - 1, 1 / (alpha - 1) */
    int rk;                /* 1: r == 1 (sparsemax), 2: r == 2 (1.5-entmax), 0: general */
    const la_diag_rows *sel; /* NULL: every row */
} dg_t;

/* Index range [*a, *b) of the chosen rows (strictly increasing) inside [i0, i1). */
static void sel_range(const la_diag_rows *sel, int i0, int i1, int *a, int *b) {
    int lo = 0, hi = sel->n_rows;
    while (lo < hi) { /* first chosen row >= i0 */
        int mid = lo + (hi - lo) / 2;
        if (sel->rows[mid] < i0) lo = mid + 1;
        else hi = mid;
    }
    *a = lo;
    while (lo < sel->n_rows && sel->rows[lo] < i1) lo++;
    *b = lo;
}

/* Span masses of one chosen row: p over the tile's visible columns [c0, c1) (keys j0 + x)
 * added into out (n_spans), in double. */
static void add_span_mass(const la_diag_rows *sel, int j0, int c0, int c1, const float *p, double *out) {
    for (int s = 0; s < sel->n_spans; s++) {
        int64_t a = sel->spans[2 * s] - j0, b = sel->spans[2 * s + 1] - j0;
        int x0 = a > c0 ? (int)a : c0, x1 = b < c1 ? (int)b : c1;
        double m = 0;
        for (int x = x0; x < x1; x++) m += p[x];
        out[s] += m;
    }
}

/* p and log p of visible columns [c0, c1) of one row (logits l, statistic st). */
static void row_probs(const dg_t *g, const float *l, float st, float bias, int c0, int c1, float *p,
                      float *lp) {
    if (g->entmax == 2) { /* sigmoid rows: p = sigmoid(z), log p = -softplus(-z), z = L + b */
        for (int x = c0; x < c1; x++) {
            float z = l[x] + bias;
            p[x] = 1.0f / (1.0f + expf(-z));
            lp[x] = z >= 0.0f ? -log1pf(expf(-z)) : z - log1pf(expf(z));
        }
        return;
    }
    if (!g->entmax) {
        la_exp_sub(l + c0, st, p + c0, c1 - c0);
        for (int x = c0; x < c1; x++) {
            lp[x] = l[x] - st;
            /* float rounding of lse can put the largest p a few ulps above 1 */
            if (p[x] > 1.0f) p[x] = 1.0f, lp[x] = 0.0f;
        }
        return;
    }
    const double am1 = g->am1, tau = st;
    for (int x = c0; x < c1; x++) {
        double xx = am1 * (double)l[x] - tau;
        if (!(xx > 0.0)) { /* outside the support (entries on the threshold too, SPEC 5) */
            p[x] = 0.0f, lp[x] = 0.0f;
            continue;
        }
        double pv = g->rk == 1 ? xx : g->rk == 2 ? xx * xx : pow(xx, g->r);
        double lv = g->r * log(xx);
        if (pv > 1.0) pv = 1.0, lv = 0.0;
        p[x] = (float)pv, lp[x] = (float)lv;
    }
}

/* Rows of query tile qt of (b, h) into d (one slot per row of the tile). On error the
 * message is copied into msg. */
static la_status dg_query_tile(const dg_t *g, const dg_scratch *s, int b, int h, int qt,
                               const float *ktiles, la_diag *d) {
    const la_attn_ctx *c = g->c;
    const int D = c->D, T = c->T;
    const int i0 = qt * LA_BQ, nr = T - i0 < LA_BQ ? T - i0 : LA_BQ;
    const la_rowvis *rows = c->rows + (size_t)b * T + i0;
    const float *stat = g->row_stat + ((size_t)b * c->H + h) * T + i0;
    /* chosen rows of this tile (all of them without a selection): row r is chosen iff
     * pick[r] >= 0, its index into sel->rows */
    int pick[LA_BQ];
    double *mass = NULL; /* (n_rows, n_spans) of (b, h) */
    if (g->sel) {
        int a, e;
        sel_range(g->sel, i0, i0 + nr, &a, &e);
        if (a == e) return LA_OK;
        for (int r = 0; r < nr; r++) pick[r] = -1;
        for (int x = a; x < e; x++) pick[g->sel->rows[x] - i0] = x;
        if (g->sel->n_spans) mass = g->sel->mass + ((size_t)b * c->H + h) * g->sel->n_rows * g->sel->n_spans;
    } else {
        for (int r = 0; r < nr; r++) pick[r] = r;
    }
    int live = 0;
    for (int r = 0; r < nr; r++) live |= pick[r] >= 0 && rows[r].nq > 0 && stat[r] != LA_ROW_EMPTY;
    if (!live) return LA_OK;
    la_row_factors(c, h, rows, nr, s->cr);
    la_load_q(c, b, h, i0, nr, s->Qt);
    la_kiter ki;
    la_ktile t;
    la_kiter_init(&ki, c, b, qt);
    while (la_kiter_next(&ki, &t)) { /* visible tiles only (the scheduler's iterator) */
        const int kt = t.kt, j0 = t.j0, nc = t.nc, cls = t.cls;
        la_mm(nr, nc, D, s->Qt, (size_t)D, 1, ktiles + (size_t)kt * D * LA_BK, LA_BK, s->Sb, LA_BK, 0);
        la_tile_logits(c, h, rows, i0, nr, j0, nc, cls, s->cr, s->Sb, s->Lb, LA_BK);
        for (int r = 0; r < nr; r++) {
            if (pick[r] < 0 || rows[r].nq == 0 || stat[r] == LA_ROW_EMPTY) continue;
            int cols[4] = {0, nc, 0, 0};
            int ng = cls == 1 ? 1 : la_row_cols(&rows[r], j0, nc, cols);
            const float *l = s->Lb + (size_t)r * LA_BK;
            float *p = s->Pb + (size_t)r * LA_BK, *lp = s->Gb + (size_t)r * LA_BK;
            int64_t qa = c->pos0 + i0 + r; /* absolute query position; t = qa - j */
            for (int gi = 0; gi < ng; gi++) {
                int c0 = cols[2 * gi], c1 = cols[2 * gi + 1];
                if (c1 <= c0) continue;
                row_probs(g, l, stat[r], g->entmax == 2 ? la_sigmoid_bias(c, &rows[r]) : 0.0f, c0, c1, p, lp);
                if (mass) add_span_mass(g->sel, j0, c0, c1, p, mass + (size_t)pick[r] * g->sel->n_spans);
                /* keys j <= qa (t >= 0, read forward: t decreases), then keys after the
                 * query (non-causal patterns: distance j - qa, increasing) */
                int64_t xm64 = qa - j0 + 1;
                int xm = xm64 < c0 ? c0 : xm64 > c1 ? c1 : (int)xm64;
                if (xm > c0)
                    LA_TRY(la_diag_add_logp(d, r, qa - (j0 + c0), -1, p + c0, lp + c0, xm - c0));
                if (c1 > xm)
                    LA_TRY(la_diag_add_logp(d, r, (j0 + xm) - qa, 1, p + xm, lp + xm, c1 - xm));
            }
        }
    }
    if (c->sink) /* the sink's share of each row, by how far back the row sees */
        for (int r = 0; r < nr; r++) {
            if (pick[r] < 0 || rows[r].nq == 0 || stat[r] == LA_ROW_EMPTY) continue;
            const la_rowvis *rv = &rows[r];
            int64_t qa = c->pos0 + i0 + r, hi = rv->hi1 > rv->lo1 ? rv->hi1 : rv->hi0;
            int64_t span = qa - rv->lo0 > hi - 1 - qa ? qa - rv->lo0 : hi - 1 - qa;
            LA_TRY(la_diag_add_sink(d, r, span, exp((double)c->sink[h] - stat[r])));
        }
    for (int r = 0; r < nr; r++) LA_TRY(la_diag_row_end(d, r));
    return LA_OK;
}

/* Largest |t| any row of the call sees (0 when no row sees a key). */
static int64_t max_distance(const la_attn_ctx *c) {
    int64_t m = 0;
    for (size_t n = 0; n < (size_t)c->B * c->T; n++) {
        const la_rowvis *rv = &c->rows[n];
        if (rv->nq == 0) continue;
        int64_t qa = c->pos0 + (int64_t)(n % (size_t)c->T);
        int64_t lo = rv->lo0, hi = rv->hi1 > rv->lo1 ? rv->hi1 : rv->hi0; /* first, one past last key */
        if (qa - lo > m) m = qa - lo;
        if (hi - 1 - qa > m) m = hi - 1 - qa;
    }
    return m;
}

static la_status dg_run(const dg_t *g, la_diag **diag) {
    const la_attn_ctx *c = g->c;
    int nch = c->nqt < DG_CHUNKS ? c->nqt : DG_CHUNKS;
    la_diag *tmp[DG_CHUNKS] = {0};
    la_status cst[DG_CHUNKS];
    char (*msg)[256] = la_calloc(DG_CHUNKS, 256);
    la_status st = msg ? LA_OK : la_fail(LA_ENOMEM, "la_attn_diagnose: out of memory");
    for (int bp = 0; bp < c->B * c->Hkv && st == LA_OK; bp++) {
        int b = bp / c->Hkv, hkv = bp % c->Hkv;
        la_prep_pairs(c, bp, 1, 0); /* rotated, transposed K tiles of (b, hkv) in c->prep */
        for (int h = hkv * c->group; h < (hkv + 1) * c->group && st == LA_OK; h++) {
            la_diag *dst = diag[(size_t)b * c->H + h];
            for (int ch = 0; ch < nch && st == LA_OK; ch++) {
                if (tmp[ch] && la_diag_max_dist(tmp[ch]) == la_diag_max_dist(dst) &&
                    la_diag_delta(tmp[ch]) == la_diag_delta(dst)) {
                    la_diag_reset(tmp[ch]);
                    continue;
                }
                la_diag_free(tmp[ch]);
                tmp[ch] = NULL;
                st = la_diag_new(la_diag_max_dist(dst), la_diag_delta(dst), LA_BQ, &tmp[ch]);
            }
            if (st != LA_OK) break;
#pragma omp parallel num_threads(c->nthreads)
            {
                dg_scratch s = {0}; /* filled by dg_layout (zeroed: the compiler cannot see that) */
                dg_layout(c->D, la_ctx_scratch(c, omp_get_thread_num()), &s);
#pragma omp for schedule(dynamic, 1)
                for (int k = 0; k < nch; k++) {
                    int ch = nch - 1 - k; /* causal: later chunks hold more pairs, start them first */
                    int q0 = (int)((int64_t)ch * c->nqt / nch), q1 = (int)((int64_t)(ch + 1) * c->nqt / nch);
                    cst[ch] = LA_OK;
                    for (int qt = q0; qt < q1 && cst[ch] == LA_OK; qt++)
                        cst[ch] = dg_query_tile(g, &s, b, h, qt, c->prep, tmp[ch]);
                    if (cst[ch] != LA_OK) snprintf(msg[ch], 256, "%s", la_errmsg());
                }
            }
            for (int ch = 0; ch < nch && st == LA_OK; ch++)
                if (cst[ch] != LA_OK)
                    st = la_fail(cst[ch], "la_attn_diagnose (b=%d, h=%d): %s", b, h, msg[ch]);
            for (int ch = 0; ch < nch && st == LA_OK; ch++) st = la_diag_merge(dst, tmp[ch]);
        }
    }
    for (int ch = 0; ch < DG_CHUNKS; ch++) la_diag_free(tmp[ch]);
    free(msg);
    return st;
}

/* The selection against the call's shape: the message names the field and the fix. */
static la_status check_sel(const la_diag_rows *sel, const la_shape *shape) {
    if (sel->n_rows < 1 || !sel->rows)
        return la_fail(LA_EINVAL, "la_diag_rows: n_rows = %d with rows %s; choose at least one query row",
                       sel->n_rows, sel->rows ? "set" : "NULL");
    for (int x = 0; x < sel->n_rows; x++) {
        if (sel->rows[x] < 0 || sel->rows[x] >= shape->T)
            return la_fail(LA_EINVAL, "la_diag_rows: rows[%d] = %d is outside the query rows 0..%d (T = %d)", x,
                           sel->rows[x], shape->T - 1, shape->T);
        if (x && sel->rows[x] <= sel->rows[x - 1])
            return la_fail(LA_EINVAL, "la_diag_rows: rows[%d] = %d after rows[%d] = %d; rows must be strictly "
                           "increasing (sort them and drop repeats)", x, sel->rows[x], x - 1, sel->rows[x - 1]);
    }
    if (sel->n_spans < 0) return la_fail(LA_EINVAL, "la_diag_rows: n_spans = %d is negative", sel->n_spans);
    if (sel->n_spans > 0 && (!sel->spans || !sel->mass))
        return la_fail(LA_EINVAL, "la_diag_rows: n_spans = %d needs spans (n_spans, 2) and mass (B, H, n_rows, "
                       "n_spans); one is NULL", sel->n_spans);
    for (int s = 0; s < sel->n_spans; s++) {
        int64_t a = sel->spans[2 * s], e = sel->spans[2 * s + 1];
        if (!(a >= 0 && a < e && e <= shape->S))
            return la_fail(LA_EINVAL, "la_diag_rows: span %d = [%lld, %lld) is %s; a span is [k0, k1) with "
                           "0 <= k0 < k1 <= S = %d", s, (long long)a, (long long)e,
                           a >= e ? "empty" : "outside the keys", shape->S);
    }
    return LA_OK;
}

la_status la_attn_diagnose(const la_spec *spec, const la_shape *shape, const float *q,
                           const float *k, const float *row_stat, const la_attn_opts *opts,
                           la_diag **diag) {
    return la_attn_diagnose_rows(spec, shape, q, k, row_stat, opts, NULL, diag);
}

la_status la_attn_diagnose_rows(const la_spec *spec, const la_shape *shape, const float *q,
                                const float *k, const float *row_stat, const la_attn_opts *opts,
                                const la_diag_rows *sel, la_diag **diag) {
    if (!spec || !shape) return la_fail(LA_EINVAL, "la_attn_diagnose: spec and shape must not be NULL");
    if (!row_stat || !diag) return la_fail(LA_EINVAL, "la_attn_diagnose: row_stat and diag must not be NULL");
    if ((unsigned)spec->norm > LA_NORM_SIGMOID_LOGN)
        return la_fail(LA_EINVAL, "spec.norm = %d is not a valid la_norm", (int)spec->norm);
    if (sel) LA_TRY(check_sel(sel, shape));
    dg_t g = {.row_stat = row_stat, .sel = sel};
    g.entmax = spec->norm == LA_NORM_SIGMOID || spec->norm == LA_NORM_SIGMOID_LOGN ? 2 : spec->norm != LA_NORM_SOFTMAX;
    if (g.entmax == 1) {
        double alpha = spec->norm == LA_NORM_SPARSEMAX ? 2.0 : spec->alpha;
        LA_TRY(la_entmax_check_alpha(alpha, "la_attn_diagnose"));
        g.am1 = alpha - 1.0;
        g.r = 1.0 / g.am1;
        g.rk = alpha == 2.0 ? 1 : alpha == 1.5 ? 2 : 0;
    }
    if (shape->B >= 1 && shape->H >= 1)
        for (size_t n = 0; n < (size_t)shape->B * shape->H; n++)
            if (!diag[n]) return la_fail(LA_EINVAL, "la_attn_diagnose: diag[%zu] is NULL (one accumulator per (b, h))", n);
    int as = spec->norm == LA_NORM_ASENTMAX;
    if (as && (!opts || !opts->as_beta || !opts->as_gamma))
        return la_fail(LA_EINVAL, "asentmax: opts.as_beta and opts.as_gamma (B, H, T) are required "
                                  "(compute them with la_asentmax_params_forward)");
    la_attn_ctx c;
    la_workspace *own = NULL;
    la_ctx_extra x = {.thread_bytes = dg_layout(shape->D, NULL, NULL) + 64, .qbuf = as};
    /* v is never read here: k stands in for the kernel's non-NULL check */
    la_status st = la_attn_ctx_init(&c, spec, shape, q, k, k, opts, &x, &own);
    if (st == LA_OK && as) st = la_asentmax_ctx_scale(&c); /* the queries the kernel attended with */
    if (st == LA_OK) {
        g.c = &c;
        size_t nrow = (size_t)c.B * c.H * c.T;
        for (size_t n = 0; n < nrow && st == LA_OK; n++)
            if (isnan(row_stat[n]) || row_stat[n] == INFINITY)
                st = la_fail(LA_EINVAL, "la_attn_diagnose: row_stat[%zu] = %g is not a row statistic of "
                                        "la_attn_forward (finite, or LA_ROW_EMPTY)", n, (double)row_stat[n]);
        int64_t md = st == LA_OK ? max_distance(&c) : 0;
        for (size_t n = 0; n < (size_t)c.B * c.H && st == LA_OK; n++)
            if (la_diag_max_dist(diag[n]) < md)
                st = la_fail(LA_EINVAL, "la_attn_diagnose: diag[%zu] covers distances up to %lld but the rows "
                                        "see keys up to distance %lld; create it with max_dist >= %lld",
                             n, (long long)la_diag_max_dist(diag[n]), (long long)md, (long long)md);
        if (st == LA_OK && sel && sel->n_spans) /* written, not accumulated: rows with no key stay 0 */
            memset(sel->mass, 0, sizeof(double) * (size_t)c.B * c.H * sel->n_rows * sel->n_spans);
        if (st == LA_OK) st = dg_run(&g, diag);
    }
    la_workspace_free(own);
    return st;
}
