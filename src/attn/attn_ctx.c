/* attn_ctx.c -- the shared tile context of the attention kernels (issue 32: apart from
 * the public entry points of attn.c): argument and shape checks, the per-call context
 * (position tables, row visibility, distance tables, schedule), the query / key tile
 * loaders, the tile logits and the prepared K/V tiles that softmax.c, sigmoid.c,
 * entmax_attn.c, keystat.c, attn_diag.c and ring.c build on. It calls no kernel: the
 * kernels use it, and attn.c dispatches to the kernels. */
#include "attn/attn_internal.h"
#include "longattn/attn.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

size_t la_softmax_scratch_bytes(int D) {
    size_t f = (size_t)4 * LA_BQ * D + (size_t)LA_SOFTMAX_NB * (3 * LA_BK * D + 2 * D * LA_BK) +
               (size_t)4 * LA_BQ * LA_BK + 3 * LA_BQ;
    return f * sizeof(float) + 4 * LA_BQ * sizeof(double) + 16 * 64;
}

static const char *pattern_name(la_pattern p) {
    switch (p) {
    case LA_PAT_WINDOW: return "window";
    case LA_PAT_SINKS: return "sinks";
    case LA_PAT_GLOBAL: return "global";
    default: return "pattern";
    }
}

static la_status check_spec(const la_spec *sp, int H, const la_attn_opts *o) {
    if ((unsigned)sp->pattern > LA_PAT_FULL)
        return la_fail(LA_EINVAL, "spec.pattern = %d is not a valid la_pattern", (int)sp->pattern);
    if ((unsigned)sp->pos > LA_POS_PI)
        return la_fail(LA_EINVAL, "spec.pos = %d is not a valid la_pos", (int)sp->pos);
    if ((unsigned)sp->xform > LA_XF_TEMP)
        return la_fail(LA_EINVAL, "spec.xform = %d is not a valid la_xform", (int)sp->xform);
    if ((sp->pattern == LA_PAT_WINDOW || sp->pattern == LA_PAT_SINKS || sp->pattern == LA_PAT_GLOBAL) &&
        sp->window < 1)
        return la_fail(LA_EINVAL, "%s pattern needs window >= 1 (got %d); write e.g. window(512)",
                       pattern_name(sp->pattern), sp->window);
    if (sp->pattern == LA_PAT_SINKS && sp->sinks < 0)
        return la_fail(LA_EINVAL, "sinks(n, w) needs n >= 0 (got %d)", sp->sinks);
    if (sp->pattern == LA_PAT_GLOBAL && sp->global < 0)
        return la_fail(LA_EINVAL, "global(g) needs g >= 0 (got %d)", sp->global);
    /* issue 31: sinks and sigmoid rows (SPEC 10) */
    if ((unsigned)sp->sink > LA_SINK_FIXED)
        return la_fail(LA_EINVAL, "spec.sink = %d is not a valid la_sink", (int)sp->sink);
    if (sp->sink != LA_SINK_NONE && sp->norm != LA_NORM_SOFTMAX)
        return la_fail(LA_ESPEC, "attention: a sink joins the softmax denominator and the %s normaliser has "
                       "none; drop 'sink' or use softmax+sink",
                       sp->norm >= LA_NORM_SIGMOID ? "sigmoid" : "entmax-family");
    if (sp->sink == LA_SINK_FIXED && !isfinite(sp->sink_fixed))
        return la_fail(LA_EINVAL, "sink(fixed=%g) is not finite", sp->sink_fixed);
    if (sp->sink == LA_SINK_LEARNED && o->sinks)
        for (int h = 0; h < H; h++)
            if (!isfinite(o->sinks[h]))
                return la_fail(LA_EINVAL, "opts.sinks[%d] = %g is not finite (a sink logit must be a number)", h,
                               (double)o->sinks[h]);
    if (sp->norm == LA_NORM_SIGMOID) {
        if (sp->sig_b_set && !isfinite(sp->sig_b))
            return la_fail(LA_EINVAL, "sigmoid(b=%g): b is not finite", sp->sig_b);
        if (!sp->sig_b_set && sp->train_len < 2)
            return la_fail(LA_ESPEC, "attention: sigmoid without b uses b = -ln(train) and needs train >= 2 "
                                     "(got %d); write sigmoid(b=-5.5) or sigmoid(train=256)", sp->train_len);
    }
    switch (sp->xform) {
    case LA_XF_LOGN:
        if (!o->logn_s && sp->logn_s == 0 && sp->train_len <= 1)
            return la_fail(LA_EINVAL, "logn needs s (logn(s=...)), opts.logn_s, or train_len > 1 "
                                      "for the default s = 1/log(train_len)");
        if (o->logn_s)
            for (int h = 0; h < H; h++)
                if (!isfinite(o->logn_s[h]))
                    return la_fail(LA_EINVAL, "opts.logn_s[%d] = %g is not finite", h, o->logn_s[h]);
        break;
    case LA_XF_QWEN_LOGN:
        if (sp->train_len <= 1)
            return la_fail(LA_EINVAL, "qwen-logn needs train_len > 1 (got %d)", sp->train_len);
        break;
    case LA_XF_SINV:
        if (!(sp->tau > 0)) return la_fail(LA_EINVAL, "sinv needs tau > 0 (got %g)", sp->tau);
        break;
    case LA_XF_CRITICAL:
        if (!isfinite(sp->gamma)) return la_fail(LA_EINVAL, "critical gamma = %g is not finite", sp->gamma);
        break;
    case LA_XF_TEMP:
        if (!isfinite(sp->temp)) return la_fail(LA_EINVAL, "temp = %g is not finite", sp->temp);
        break;
    default:
        break;
    }
    return LA_OK;
}

/* Every query row is attended with, so a NaN or Inf in q has no defined result (the row
 * maximum would skip it and the row would pass for one without visible keys): an error
 * naming the element, found by an integer scan of the exponent bits (vectorises; about
 * 1 % of a forward at the study's sizes). K and V are not checked: masked rows may hold
 * anything (SPEC 1). */
static la_status check_q_finite(const float *q, const la_shape *s) {
    size_t n = (size_t)s->B * s->H * s->T * s->D;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, q + i, sizeof u); /* the bits, without breaking aliasing rules */
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    if (!bad) return LA_OK;
    size_t i = 0;
    while (isfinite(q[i])) i++;
    size_t d = i % s->D, t = i / s->D % s->T, h = i / ((size_t)s->D * s->T) % s->H,
           b = i / ((size_t)s->D * s->T * s->H);
    return la_fail(LA_ENUMERIC, "attention: q[%zu, %zu, %zu, %zu] is %g; a query with a NaN or Inf has no "
                   "defined attention (check the inputs, or the model for divergence)", b, h, t, d, (double)q[i]);
}

/* Largest logit magnitude accepted (see check_kv): far below FLT_MAX (3.4e38) so that
 * every product, sum and exponent argument of the kernels stays finite. */
#define LA_LOGIT_BOUND 1e30

/* Largest |x| of n floats as the bits of |x| (sign cleared): for IEEE floats these order
 * like the magnitudes, and Inf / NaN (exponent all ones) are the largest, so one integer max
 * pass (it vectorises) both finds a non-finite value (result >= 0x7f800000) and gives
 * max|x|. */
static uint32_t max_abs_bits(const float *x, size_t n) {
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        u &= 0x7fffffffu;
        m = u > m ? u : m;
    }
    return m;
}

static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* K and V rows that at least one query sees must be finite (SPEC 1 lets rows that no query
 * sees hold anything: they are never read into a result), and the logits must stay far
 * from float32 overflow. Visibility per batch: the rows' key ranges (at most two per
 * query) go into a difference array over the S keys, so marking the keys some query sees
 * costs O(T + S) per batch, not O(T * S); cover is (S + 1) int32 scratch. Then every
 * visible K and V row of every kv head is scanned (O(B * Hkv * S * D), like the q check).
 * Errors: LA_ENUMERIC naming the tensor, [b, kv head, row, element] and a query that sees
 * the row; LA_ENUMERIC when |logit| could exceed LA_LOGIT_BOUND, from the bound
 * |c_r a_t q.k + m_t + slope d_t| <= f_max D max|q| max|k| + max|m_t| + max|slope| (T+S+|pos0|)
 * (Cauchy-Schwarz on every partial sum of the dot products; RoPE rotations preserve
 * |q|_2 and |k|_2, so max|.| grows at most by sqrt(2) -- folded into the factor 2). */
static la_status check_kv(const la_attn_ctx *c, int32_t *cover) {
    const size_t S = (size_t)c->S, D = (size_t)c->D;
    double kmax = 0.0;
    for (int b = 0; b < c->B; b++) {
        const la_rowvis *rv = c->rows + (size_t)b * c->T;
        memset(cover, 0, sizeof(int32_t) * (S + 1));
        for (int i = 0; i < c->T; i++) {
            cover[rv[i].lo0]++, cover[rv[i].hi0]--;
            cover[rv[i].lo1]++, cover[rv[i].hi1]--;
        }
        int32_t run = 0;
        for (size_t j = 0; j < S; j++) cover[j] = (run += cover[j]) > 0;
        for (int hkv = 0; hkv < c->Hkv; hkv++) {
            for (int t = 0; t < 2; t++) {
                const float *x = (t ? c->v : c->k) + ((size_t)b * c->Hkv + hkv) * S * D;
                for (size_t j = 0; j < S; j++) {
                    if (!cover[j]) continue;
                    uint32_t mb = max_abs_bits(x + j * D, D);
                    if (mb >= 0x7f800000u) {
                        int d = 0;
                        while (isfinite(x[j * D + d])) d++;
                        int who = 0;
                        for (int i = 0; i < c->T; i++)
                            if (((int32_t)j >= rv[i].lo0 && (int32_t)j < rv[i].hi0) ||
                                ((int32_t)j >= rv[i].lo1 && (int32_t)j < rv[i].hi1)) {
                                who = i;
                                break;
                            }
                        return la_fail(LA_ENUMERIC,
                                       "attention: %s[%d, %d, %zu, %d] is %g, and key row %zu of kv head %d "
                                       "is visible (query %d sees it): a NaN or Inf in a visible key or value "
                                       "row has no defined attention (rows no query sees may hold anything); "
                                       "check the inputs, or the model for divergence",
                                       t ? "v" : "k", b, hkv, j, d, (double)x[j * D + d], j, hkv, who);
                    }
                    if (!t && bits_float(mb) > kmax) kmax = bits_float(mb);
                }
            }
        }
    }
    double qmax = bits_float(max_abs_bits(c->q, (size_t)c->B * c->H * c->T * D)); /* q is finite: checked */
    double fmax = 0.0, xmax = 0.0, smax = 0.0, amax = 1.0, mmax = 0.0;
    for (int h = 0; h < c->H; h++) {
        double f = fabs((double)c->scale * c->head_s[h]);
        fmax = f > fmax ? f : fmax;
        double sl = fabs((double)c->slope[h]);
        smax = sl > smax ? sl : smax;
    }
    for (size_t r = 0; r < (size_t)c->B * c->T; r++) {
        double x = fabs((double)c->rows[r].xrow);
        xmax = x > xmax ? x : xmax;
    }
    if (c->has_sinv)
        for (size_t i = 0; i < (size_t)c->T + c->S - 1; i++) {
            double a = fabs((double)c->t_a[i]), m = fabs((double)c->t_m[i]);
            amax = a > amax ? a : amax;
            mmax = m > mmax ? m : mmax;
        }
    double rot = c->rotate ? 2.0 : 1.0;
    double bound = fmax * xmax * amax * rot * (double)D * qmax * kmax + mmax +
                   smax * ((double)c->T + c->S + fabs((double)c->pos0));
    if (!(bound <= LA_LOGIT_BOUND))
        return la_fail(LA_ENUMERIC,
                       "attention: the logits may overflow float32: max|q| = %g and max|k| = %g over "
                       "visible rows (D = %d, logit factor %g) bound |logit| by %g > %g; scale q and k "
                       "down (e.g. QK-norm) or lower the temperature",
                       qmax, kmax, c->D, fmax * xmax * amax, bound, LA_LOGIT_BOUND);
    return LA_OK;
}

la_status la_attn_ctx_init(la_attn_ctx *c, const la_spec *spec, const la_shape *shape,
                           const float *q, const float *k, const float *v,
                           const la_attn_opts *opts, const la_ctx_extra *extra,
                           la_workspace **own_ws) {
    static const la_attn_opts defaults; /* all zero = la_attn_opts_default() */
    static const la_ctx_extra no_extra;
    if (!extra) extra = &no_extra;
    memset(c, 0, sizeof *c);
    *own_ws = NULL;
    if (!spec || !shape) return la_fail(LA_EINVAL, "attention: spec and shape must not be NULL");
    if (!q || !k || !v) return la_fail(LA_EINVAL, "attention: q, k and v must not be NULL");
    if (!opts) opts = &defaults;
    const la_shape *s = shape;
    if (s->B < 1 || s->H < 1 || s->Hkv < 1 || s->T < 1 || s->S < 1 || s->D < 1)
        return la_fail(LA_ESHAPE, "attention: every dimension must be >= 1 (B=%d H=%d Hkv=%d T=%d S=%d D=%d)",
                       s->B, s->H, s->Hkv, s->T, s->S, s->D);
    if (s->H % s->Hkv)
        return la_fail(LA_ESHAPE, "attention: H = %d is not a multiple of Hkv = %d (grouped-query heads)",
                       s->H, s->Hkv);
    if ((int64_t)s->T + s->S > INT32_MAX / 2)
        return la_fail(LA_ESHAPE, "attention: T + S = %lld is too large", (long long)s->T + s->S);
    int rotate = la_pos_rotates(spec->pos);
    if (rotate && s->D % 2)
        return la_fail(LA_ESHAPE, "attention: D = %d is odd; RoPE-family encodings need an even D", s->D);
    LA_TRY(check_spec(spec, s->H, opts));
    LA_TRY(check_q_finite(q, s));
    int64_t pos0 = s->pos0 == LA_POS0_AUTO ? (int64_t)s->S - s->T : s->pos0;
    if (pos0 < -((int64_t)1 << 53) || pos0 > ((int64_t)1 << 53))
        return la_fail(LA_EINVAL, "attention: pos0 = %lld is out of range (|pos0| <= 2^53)", (long long)pos0);
    if (opts->doc_ids && (pos0 < 0 || pos0 + s->T > s->S))
        return la_fail(LA_ESHAPE, "attention: with doc_ids every query position pos0+i must be a key "
                                  "position in [0, S); got pos0 = %lld, T = %d, S = %d",
                       (long long)pos0, s->T, s->S);

    c->spec = spec; c->opts = opts;
    c->B = s->B; c->H = s->H; c->Hkv = s->Hkv; c->T = s->T; c->S = s->S; c->D = s->D;
    c->group = s->H / s->Hkv;
    c->pos0 = pos0;
    c->q = q; c->k = k; c->v = v;
    c->nthreads = opts->n_threads > 0 ? opts->n_threads : omp_get_max_threads(); /* both >= 1 */
    c->rotate = rotate;
    c->scale = (float)(la_yarn_logit_factor(spec) / sqrt((double)s->D));
    c->nqt = (s->T + LA_BQ - 1) / LA_BQ;
    c->nkt = (s->S + LA_BK - 1) / LA_BK;
    int has_alibi = spec->pos == LA_POS_ALIBI || (spec->pos == LA_POS_NAPE && s->H >= 2);
    c->has_sinv = spec->xform == LA_XF_SINV;
    c->has_t = c->has_sinv || has_alibi;
    int q_in_table = opts->doc_ids || (pos0 >= 0 && pos0 + s->T <= s->S);

    size_t B = (size_t)s->B, T = (size_t)s->T, S = (size_t)s->S, D = (size_t)s->D;
    size_t ntab = T + S - 1;
    c->scratch_bytes = ((la_softmax_scratch_bytes(s->D) + extra->thread_bytes) + 63) & ~(size_t)63;
    double *omega = NULL;
    float *qcs = NULL, *t_a = NULL, *t_m = NULL, *t_d = NULL, *slope = NULL, *head_s = NULL, *sink = NULL;
    int32_t *dstart = NULL, *dend = NULL;
    la_rowvis *rows = NULL;
    la_tilespan *qspan = NULL;
    int32_t *cover = NULL;
    int32_t *kcost = NULL, *cnt = NULL;
    size_t BH = B * (size_t)s->H;
    size_t ncnt = (size_t)(c->nqt > c->nkt ? c->nqt : c->nkt) + 2;
    /* prepared K/V tiles: at least one (b, hkv) pair, at most 16 MiB beyond that */
    size_t pair_floats = (size_t)2 * c->nkt * LA_BK * D;
    size_t npairs = B * (size_t)s->Hkv, fit = ((size_t)4 << 20) / pair_floats;
    if (fit < 1) fit = 1;
    if (fit > npairs) fit = npairs;
    c->prep_pairs = (int)fit;
    size_t prep_floats = fit * pair_floats;
    la_ws_req req[] = {
        {(void **)&omega, rotate ? sizeof(double) * D / 2 : 0},
        {(void **)&qcs, rotate && !q_in_table ? sizeof(float) * T * D : 0},
        {(void **)&dstart, opts->doc_ids ? sizeof(int32_t) * B * S : 0},
        {(void **)&dend, opts->doc_ids ? sizeof(int32_t) * B * S : 0},
        {(void **)&rows, sizeof(la_rowvis) * B * T},
        {(void **)&cover, sizeof(int32_t) * (S + 1)},
        {(void **)&qspan, sizeof(la_tilespan) * B * (size_t)c->nqt},
        {(void **)&t_a, c->has_t ? sizeof(float) * ntab : 0},
        {(void **)&t_m, c->has_t ? sizeof(float) * ntab : 0},
        {(void **)&t_d, c->has_t ? sizeof(float) * ntab : 0},
        {(void **)&slope, sizeof(float) * (size_t)s->H},
        {(void **)&head_s, sizeof(float) * (size_t)s->H},
        {(void **)&sink, spec->sink != LA_SINK_NONE ? sizeof(float) * (size_t)s->H : 0},
        {(void **)&c->prep, sizeof(float) * prep_floats},
        {(void **)&c->part, sizeof(double) * B * (size_t)s->H * (size_t)c->nqt},
        {(void **)&c->thread_scratch, c->scratch_bytes * (size_t)c->nthreads},
        {(void **)&c->rowbuf, extra->rowbuf ? sizeof(float) * BH * T : 0},
        {(void **)&c->rowgs, extra->rowgs && opts->dlogn_s && spec->xform == LA_XF_LOGN ? sizeof(double) * BH * T : 0},
        {(void **)&c->qbuf, extra->qbuf ? sizeof(float) * BH * T * D : 0},
        {(void **)&c->qorder, sizeof(int32_t) * BH * (size_t)c->nqt},
        {(void **)&c->korder, sizeof(int32_t) * B * (size_t)s->Hkv * (size_t)c->nkt},
        {(void **)&kcost, sizeof(int32_t) * B * (size_t)(c->nkt + 1)},
        {(void **)&cnt, sizeof(int32_t) * ncnt},
    };
    la_workspace *ws = opts->ws;
    if (!ws) {
        LA_TRY(la_workspace_create(own_ws));
        ws = *own_ws;
    }
    LA_TRY(la_ws_carve(ws, req, (int)(sizeof req / sizeof req[0])));

    if (rotate) {
        /* context length n of dynamic-ntk: the number of keys S (lead's decision) */
        LA_TRY(la_rope_freqs(spec, s->D, s->S, omega));
        c->nrot = 0;
        for (int kk = 0; kk < s->D / 2; kk++)
            if (omega[kk] != 0.0) c->nrot = kk + 1;
        LA_TRY(la_ws_rope_table(ws, omega, s->D, s->S, c->nthreads, &c->kcs));
        if (qcs) la_rope_table(omega, s->D, pos0, s->T, qcs, c->nthreads);
    }
    c->qcs = qcs;
    if (opts->doc_ids)
        for (int b = 0; b < s->B; b++)
            la_doc_runs(opts->doc_ids + (size_t)b * S, s->S, dstart + (size_t)b * S, dend + (size_t)b * S);
    c->dstart = dstart; c->dend = dend;
    /* row visibility: trivial work per row, so threads only for long inputs */
#pragma omp parallel for num_threads(c->nthreads) schedule(static) if ((size_t)s->B * s->T >= 65536)
    for (int bi = 0; bi < s->B * c->nqt; bi++) {
        int b = bi / c->nqt, qt = bi % c->nqt;
        int i0 = qt * LA_BQ, nr = s->T - i0 < LA_BQ ? s->T - i0 : LA_BQ;
        la_rowvis *rv = rows + (size_t)b * T + i0;
        for (int r = 0; r < nr; r++)
            la_row_visibility(spec, s->S, pos0, i0 + r, dstart ? dstart + (size_t)b * S : NULL,
                              dend ? dend + (size_t)b * S : NULL, &rv[r]);
        la_rows_tilespan(rv, nr, &qspan[bi]);
    }
    c->rows = rows; c->qspan = qspan;
    la_sched_build(c, kcost, cnt);
    if (c->has_t) {
        for (size_t idx = 0; idx < ntab; idx++) {
            int64_t t = pos0 + (int64_t)T - 1 - (int64_t)idx; /* t = pos0 + i - j, idx = j - i + T - 1 */
            double a = 1.0, m = 0.0;
            if (spec->xform == LA_XF_SINV) la_sinv_coeffs((double)t, spec->tau, &a, &m);
            t_a[idx] = (float)a;
            t_m[idx] = (float)m;
            t_d[idx] = (float)(t >= 0 ? -t : t); /* -|t| */
        }
    }
    c->t_a = t_a; c->t_m = t_m; c->t_d = t_d;
    for (int h = 0; h < s->H; h++) slope[h] = 0.0f;
    if (spec->pos == LA_POS_ALIBI) la_alibi_slopes(s->H, slope);
    /* nape: heads h < floor(H/2) carry ALiBi with the slopes of an H/2-head model, the rest
     * are NoPE (Vasylenko et al. 2025, NAPE). */
    if (spec->pos == LA_POS_NAPE && s->H >= 2) la_alibi_slopes(s->H / 2, slope);
    for (int h = 0; h < s->H; h++) {
        double sh = 1.0;
        if (spec->xform == LA_XF_LOGN)
            sh = opts->logn_s ? opts->logn_s[h] : spec->logn_s != 0 ? spec->logn_s : 1.0 / log((double)spec->train_len);
        head_s[h] = (float)sh;
    }
    c->slope = slope; c->head_s = head_s;
    if (sink) /* learned: opts->sinks or 0 (the initial value); fixed: one value */
        for (int h = 0; h < s->H; h++)
            sink[h] = spec->sink == LA_SINK_FIXED ? (float)spec->sink_fixed : opts->sinks ? opts->sinks[h] : 0.0f;
    c->sink = sink;
    c->sigmoid = spec->norm == LA_NORM_SIGMOID ? 1 : spec->norm == LA_NORM_SIGMOID_LOGN ? 2 : 0;
    /* Ramapuram et al. 2024: b = -ln(training length), kept at longer lengths (SPEC 10) */
    c->sig_b = (float)(spec->sig_b_set ? spec->sig_b : spec->norm == LA_NORM_SIGMOID ? -log((double)spec->train_len) : 0.0);
    return check_kv(c, cover);
}

/* Rotate query rows i0..i0+nr-1 of batch b (inverse: back) from src into dst (may alias):
 * each by its own qcs row, or by the key table's row at its position. */
static void rope_q(const la_attn_ctx *c, int b, int i0, int nr, const float *src, float *dst, int inverse) {
    int D = c->D;
    const la_rowvis *rv = c->rows + (size_t)b * c->T + i0;
    for (int r = 0; r < nr; r++) {
        const float *cs = c->qcs ? c->qcs + (size_t)(i0 + r) * D : c->kcs + (size_t)rv[r].p * D;
        la_rope_row(src + (size_t)r * D, dst + (size_t)r * D, cs, D, c->nrot, inverse);
    }
}

void la_load_q(const la_attn_ctx *c, int b, int h, int i0, int nr, float *dst) {
    const float *src = c->q + (((size_t)b * c->H + h) * c->T + i0) * c->D;
    if (c->rotate) rope_q(c, b, i0, nr, src, dst, 0);
    else memcpy(dst, src, sizeof(float) * (size_t)nr * c->D);
}

static inline int64_t key_pos(const la_attn_ctx *c, int b, int j) {
    return c->dstart ? j - c->dstart[(size_t)b * c->S + j] : j;
}

const float *la_load_k(const la_attn_ctx *c, int b, int hkv, int j0, int nc, float *dst) {
    int D = c->D;
    const float *src = c->k + (((size_t)b * c->Hkv + hkv) * c->S + j0) * D;
    if (!c->rotate) return src;
    for (int r = 0; r < nc; r++)
        la_rope_row(src + (size_t)r * D, dst + (size_t)r * D, c->kcs + (size_t)key_pos(c, b, j0 + r) * D, D, c->nrot, 0);
    return dst;
}

void la_unrotate_q(const la_attn_ctx *c, int b, int i0, int nr, float *x) {
    if (c->rotate) rope_q(c, b, i0, nr, x, x, 1);
}

void la_unrotate_k(const la_attn_ctx *c, int b, int j0, int nc, float *x) {
    if (!c->rotate) return;
    int D = c->D;
    for (int r = 0; r < nc; r++)
        la_rope_row(x + (size_t)r * D, x + (size_t)r * D, c->kcs + (size_t)key_pos(c, b, j0 + r) * D, D, c->nrot, 1);
}

void la_row_factors(const la_attn_ctx *c, int h, const la_rowvis *rows, int nr, float *cr) {
    float f = c->scale * c->head_s[h];
    for (int r = 0; r < nr; r++) cr[r] = f * rows[r].xrow;
}

void la_tile_logits(const la_attn_ctx *c, int h, const la_rowvis *rows, int i0, int nr,
                    int j0, int nc, int cls, const float *cr, const float *sdot,
                    float *L, int ld) {
    float slope = c->slope[h];
    for (int r = 0; r < nr; r++) {
        int cols[4] = {0, nc, 0, 0};
        int ng = cls == 1 ? 1 : la_row_cols(&rows[r], j0, nc, cols);
        const float *sd = sdot + (size_t)r * ld;
        float *l = L + (size_t)r * ld;
        float f = cr[r];
        int prev = 0;
        for (int g = 0; g < ng; g++) {
            int c0 = cols[2 * g], c1 = cols[2 * g + 1];
            for (int x = prev; x < c0; x++) l[x] = -INFINITY;
            if (!c->has_t) {
                for (int x = c0; x < c1; x++) l[x] = f * sd[x];
            } else {
                size_t base = (size_t)(j0 - (i0 + r) + c->T - 1); /* idx = j - i + T - 1 */
                const float *ta = c->t_a + base, *tm = c->t_m + base, *td = c->t_d + base;
                if (slope == 0.0f) /* sinv only */
                    for (int x = c0; x < c1; x++) l[x] = f * ta[x] * sd[x] + tm[x];
                else if (!c->has_sinv) /* alibi only */
                    for (int x = c0; x < c1; x++) l[x] = f * sd[x] + slope * td[x];
                else
                    for (int x = c0; x < c1; x++) l[x] = f * ta[x] * sd[x] + tm[x] + slope * td[x];
            }
            prev = c1;
        }
        for (int x = prev; x < nc; x++) l[x] = -INFINITY;
    }
}

size_t la_prep_stride(const la_attn_ctx *c, int with_v) {
    return (size_t)(with_v ? 2 : 1) * c->nkt * (size_t)c->D * LA_BK;
}

/* 1 when a (b, hkv) pair has a selected query item (always without c->qsel). Under the
 * ring (ring.c) only the pair whose rows have arrived is selected: the others' k and v
 * rows may still be the buffers of pending receives, which MPI forbids reading. */
static int pair_selected(const la_attn_ctx *c, int pr) {
    if (!c->qsel) return 1;
    const int b = pr / c->Hkv, hkv = pr % c->Hkv;
    for (int h = hkv * c->group; h < (hkv + 1) * c->group; h++) {
        const uint8_t *q = c->qsel + ((size_t)b * c->H + h) * c->nqt;
        for (int qt = 0; qt < c->nqt; qt++)
            if (q[qt]) return 1;
    }
    return 0;
}

void la_prep_pairs_for(const la_attn_ctx *c, int p0, int n, int with_v) {
    const int D = c->D;
    size_t tile = (size_t)D * LA_BK, stride = la_prep_stride(c, with_v);
    float *kr = la_ctx_scratch(c, omp_get_thread_num()); /* (BK, D) rotated rows */
#pragma omp for schedule(static)
    for (int t = 0; t < n * c->nkt; t++) {
        int pr = p0 + t / c->nkt, kt = t % c->nkt;
        if (!pair_selected(c, pr)) continue; /* no item of this pair runs: its tiles are not read */
        int b = pr / c->Hkv, hkv = pr % c->Hkv;
        int j0 = kt * LA_BK, nc = c->S - j0 < LA_BK ? c->S - j0 : LA_BK;
        float *dst = c->prep + (size_t)(pr - p0) * stride + (size_t)kt * tile;
        la_transpose(la_load_k(c, b, hkv, j0, nc, kr), nc, D, D, dst, LA_BK);
        if (with_v)
            la_transpose(c->v + (((size_t)b * c->Hkv + hkv) * c->S + j0) * D, nc, D, D,
                         dst + (size_t)c->nkt * tile, LA_BK);
    }
}

size_t la_prep_pairs(const la_attn_ctx *c, int p0, int n, int with_v) {
#pragma omp parallel num_threads(c->nthreads)
    la_prep_pairs_for(c, p0, n, with_v);
    return la_prep_stride(c, with_v);
}

/* ---- public entry points --------------------------------------------------------- */

/* Last line of defence behind check_kv: a row statistic is finite, or LA_ROW_EMPTY for a
 * row without visible keys; NaN or +Inf would mean the kernel lost the row, and the call
 * must not report that as success. O(B * H * T). */
