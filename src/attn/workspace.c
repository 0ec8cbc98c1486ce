/* workspace.c -- grow-only scratch arena reused across attention calls. */
#include "attn/attn_internal.h"

#include <stdlib.h>
#include <string.h>

la_workspace *la_workspace_new(void) {
    la_workspace *ws = calloc(1, sizeof *ws);
    return ws;
}

void la_workspace_free(la_workspace *ws) {
    if (!ws) return;
    free(ws->base);
    free(ws);
}

size_t la_workspace_capacity(const la_workspace *ws) { return ws ? ws->cap : 0; }

la_status la_ws_carve(la_workspace *ws, la_ws_req *reqs, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (reqs[i].bytes + 63) & ~(size_t)63;
    if (total == 0) total = 64;
    if (total > ws->cap) {
        void *p = NULL;
        if (posix_memalign(&p, 64, total) != 0 || !p)
            return la_fail(LA_ENOMEM, "attention workspace: cannot allocate %zu bytes", total);
        free(ws->base);
        ws->base = p;
        ws->cap = total;
    }
    char *at = ws->base;
    for (int i = 0; i < n; i++) {
        *reqs[i].dst = reqs[i].bytes ? at : NULL;
        at += (reqs[i].bytes + 63) & ~(size_t)63;
    }
    return LA_OK;
}
