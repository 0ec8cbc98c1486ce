/* workspace.c -- grow-only scratch arena reused across attention calls. */
#include "attn/attn_internal.h"
#include "longattn/attn.h"

#include <stdlib.h>
#include <string.h>

la_status la_workspace_create(la_workspace **out) {
    if (!out) return la_fail(LA_EINVAL, "la_workspace_create: out is NULL");
    *out = la_calloc(1, sizeof **out);
    if (!*out) return la_fail(LA_ENOMEM, "la_workspace_create: out of memory (%zu bytes)", sizeof **out);
    return LA_OK;
}

la_workspace *la_workspace_new(void) {
    la_workspace *ws = NULL;
    (void)la_workspace_create(&ws);
    return ws;
}

void la_workspace_free(la_workspace *ws) {
    if (!ws) return;
    free(ws->base);
    free(ws->rope);
    free(ws->rope_omega);
    free(ws->cvt_base);
    free(ws);
}

size_t la_workspace_capacity(const la_workspace *ws) {
    return ws ? ws->cap + ws->cvt_cap + ws->rope_cap * sizeof(float) : 0;
}

la_status la_ws_rope_table(la_workspace *ws, const double *omega, int D, int64_t n, int nthreads,
                           const float **tab) {
    int half = D / 2;
    if (ws->rope_n >= n && ws->rope_D == D && ws->rope &&
        memcmp(ws->rope_omega, omega, sizeof(double) * (size_t)half) == 0) {
        *tab = ws->rope; /* same frequencies, covers positions 0..n-1: rows depend only on the position */
        return LA_OK;
    }
    /* rows depend only on the position: build past n (to a multiple of 1024) so that a
     * decode loop, whose S grows by one per call, rebuilds the table once per 1024 tokens
     * instead of at every call */
    n = (n + 1023) / 1024 * 1024;
    size_t need = (size_t)n * (size_t)D;
    ws->rope_n = 0;
    if (need > ws->rope_cap) {
        void *p = la_aligned_alloc(64, need * sizeof(float));
        if (!p)
            return la_fail(LA_ENOMEM, "attention workspace: cannot allocate the RoPE table (%zu bytes)",
                           need * sizeof(float));
        free(ws->rope);
        ws->rope = p;
        ws->rope_cap = need;
        ws->grows++;
    }
    if (ws->rope_D != D || !ws->rope_omega) {
        free(ws->rope_omega);
        ws->rope_omega = la_malloc(sizeof(double) * (size_t)half);
        if (!ws->rope_omega) return la_fail(LA_ENOMEM, "attention workspace: out of memory");
    }
    la_rope_table(omega, D, 0, (int)n, ws->rope, nthreads);
    memcpy(ws->rope_omega, omega, sizeof(double) * (size_t)half);
    ws->rope_D = D;
    ws->rope_n = n;
    *tab = ws->rope;
    return LA_OK;
}

/* Grow the arena (*base, *cap) to hold every request, then hand out the blocks. */
static la_status carve(la_workspace *ws, void **base, size_t *cap, la_ws_req *reqs, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (reqs[i].bytes + 63) & ~(size_t)63;
    if (total == 0) total = 64;
    if (total > *cap) {
        void *p = la_aligned_alloc(64, total);
        if (!p)
            return la_fail(LA_ENOMEM, "attention workspace: cannot allocate %zu bytes", total);
        free(*base);
        *base = p;
        *cap = total;
        ws->grows++;
    }
    char *at = *base;
    for (int i = 0; i < n; i++) {
        *reqs[i].dst = reqs[i].bytes ? at : NULL;
        at += (reqs[i].bytes + 63) & ~(size_t)63;
    }
    return LA_OK;
}

la_status la_ws_carve(la_workspace *ws, la_ws_req *reqs, int n) {
    return carve(ws, &ws->base, &ws->cap, reqs, n);
}

la_status la_ws_carve_cvt(la_workspace *ws, la_ws_req *reqs, int n) {
    return carve(ws, &ws->cvt_base, &ws->cvt_cap, reqs, n);
}
