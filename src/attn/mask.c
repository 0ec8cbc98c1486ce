/* mask.c -- visibility patterns (SPEC 2) and document runs -> which keys each query row
 * sees, as at most two key ranges per row. No T x S mask is ever built: tiles are
 * classified from the row ranges, and fully masked tiles are skipped. */
#include "attn/attn_internal.h"
#include "longattn/attn.h"

#include <math.h>

void la_doc_runs(const int32_t *doc_ids, int S, int32_t *dstart, int32_t *dend) {
    int start = 0;
    for (int j = 0; j < S; j++) {
        if (j > 0 && doc_ids[j] != doc_ids[j - 1]) start = j;
        dstart[j] = start;
    }
    int end = S;
    for (int j = S - 1; j >= 0; j--) {
        if (j < S - 1 && doc_ids[j] != doc_ids[j + 1]) end = j + 1;
        dend[j] = end;
    }
}

static int64_t i64min(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t i64max(int64_t a, int64_t b) { return a > b ? a : b; }

void la_row_visibility(const la_spec *spec, int S, int64_t pos0, int i,
                       const int32_t *dstart, const int32_t *dend, la_rowvis *rv) {
    int64_t qa = pos0 + i;
    int64_t ds = 0, n = S;
    if (dstart) {
        ds = dstart[qa];
        n = dend[qa] - ds;
    }
    int64_t p = qa - ds; /* position within the document */
    /* two ranges of document-relative key positions, half-open */
    int64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    int64_t w = spec->window;
    switch (spec->pattern) {
    case LA_PAT_CAUSAL: /* keys 0..p */
        a1 = i64min(p + 1, n);
        break;
    case LA_PAT_WINDOW: /* keys p-w+1..p: exactly min(p+1, w) of them when p < n */
        a0 = i64max(p - w + 1, 0);
        a1 = i64min(p + 1, n);
        break;
    case LA_PAT_SINKS: /* keys 0..n_s-1 (causally) plus p-w+1..p (StreamingLLM) */
        a1 = i64min(i64min((int64_t)spec->sinks, p + 1), n);
        b0 = i64max(p - w + 1, 0);
        b1 = i64min(p + 1, n);
        break;
    case LA_PAT_GLOBAL: /* Longformer: the first g tokens see and are seen by all */
        if (p >= 0 && p < spec->global) {
            a1 = n;
        } else {
            a1 = i64min((int64_t)spec->global, n);
            b0 = i64max(p - w + 1, 0);
            b1 = i64min(p + 1, n);
        }
        break;
    case LA_PAT_FULL:
        a1 = n;
        break;
    }
    if (a1 < a0) a1 = a0;
    if (b1 < b0) b1 = b0;
    if (a1 <= a0) { a0 = b0; a1 = b1; b0 = b1; }   /* first range empty: move second up */
    else if (b1 > b0 && b0 <= a1) {                  /* overlapping or touching: merge */
        a1 = i64max(a1, b1);
        b0 = b1 = a1;
    }
    if (b1 <= b0) b0 = b1 = a1;
    if (a1 <= a0) a0 = a1 = b0 = b1 = 0;
    rv->lo0 = (int32_t)(a0 + ds);
    rv->hi0 = (int32_t)(a1 + ds);
    rv->lo1 = (int32_t)(b0 + ds);
    rv->hi1 = (int32_t)(b1 + ds);
    rv->nq = (int32_t)((a1 - a0) + (b1 - b0));
    rv->dstart = (int32_t)ds;
    rv->p = p;
    double lq = rv->nq > 0 ? log((double)rv->nq) : 0.0;
    switch (spec->xform) {
    case LA_XF_LOGN: rv->xrow = (float)lq; break;                 /* s_h log(n_q) */
    case LA_XF_CRITICAL: rv->xrow = (float)(spec->gamma * lq); break; /* gamma log(n_q) */
    case LA_XF_QWEN_LOGN: /* max(1, log(p+1)/log(L_train)) */
        rv->xrow = (p + 1 > spec->train_len) ? (float)(log((double)(p + 1)) / log((double)spec->train_len)) : 1.0f;
        break;
    case LA_XF_TEMP: rv->xrow = (float)spec->temp; break;
    default: rv->xrow = 1.0f; break;
    }
}

void la_rows_tilespan(const la_rowvis *rows, int nr, la_tilespan *sp) {
    int32_t a0 = INT32_MAX, a1 = INT32_MIN, b0 = INT32_MAX, b1 = INT32_MIN;
    for (int r = 0; r < nr; r++) {
        const la_rowvis *rv = &rows[r];
        if (rv->hi0 > rv->lo0) {
            int32_t t0 = rv->lo0 / LA_BK, t1 = (rv->hi0 - 1) / LA_BK + 1;
            if (t0 < a0) a0 = t0;
            if (t1 > a1) a1 = t1;
        }
        if (rv->hi1 > rv->lo1) {
            int32_t t0 = rv->lo1 / LA_BK, t1 = (rv->hi1 - 1) / LA_BK + 1;
            if (t0 < b0) b0 = t0;
            if (t1 > b1) b1 = t1;
        }
    }
    if (a1 <= a0) { a0 = b0; a1 = b1; b0 = INT32_MAX; b1 = INT32_MIN; }
    if (a1 <= a0) { sp->a0 = sp->a1 = sp->b0 = sp->b1 = 0; return; }
    if (b1 > b0) {
        if (b0 < a0) { int32_t x = a0, y = a1; a0 = b0; a1 = b1; b0 = x; b1 = y; }
        if (b0 <= a1) { if (b1 > a1) a1 = b1; b0 = b1 = a1; }
    } else {
        b0 = b1 = a1;
    }
    sp->a0 = a0; sp->a1 = a1; sp->b0 = b0; sp->b1 = b1;
}

static int32_t overlap(int32_t lo, int32_t hi, int32_t j0, int32_t j1) {
    int32_t a = lo > j0 ? lo : j0, b = hi < j1 ? hi : j1;
    return b > a ? b - a : 0;
}

int la_tile_class(const la_rowvis *rows, int nr, int j0, int nc) {
    int any = 0, all = 1;
    for (int r = 0; r < nr; r++) {
        int32_t cnt = overlap(rows[r].lo0, rows[r].hi0, j0, j0 + nc) +
                      overlap(rows[r].lo1, rows[r].hi1, j0, j0 + nc);
        if (cnt) any = 1;
        if (cnt != nc) all = 0;
    }
    return !any ? 0 : all ? 1 : 2;
}

int la_row_cols(const la_rowvis *rv, int j0, int nc, int c[4]) {
    int n = 0;
    int32_t j1 = j0 + nc;
    int32_t a = rv->lo0 > j0 ? rv->lo0 : j0, b = rv->hi0 < j1 ? rv->hi0 : j1;
    if (b > a) { c[0] = a - j0; c[1] = b - j0; n = 1; }
    a = rv->lo1 > j0 ? rv->lo1 : j0;
    b = rv->hi1 < j1 ? rv->hi1 : j1;
    if (b > a) { c[2 * n] = a - j0; c[2 * n + 1] = b - j0; n++; }
    return n;
}
