/* study_dist.c -- a study's cells (variant x seed) over MPI ranks (src/core/dist.h): the
 * finished variants' results gathered on rank 0, which writes the tables (which rank runs
 * which variant is la_grid_init's choice, src/runner/grid.c). */
#include <stdlib.h>
#include <string.h>

#include "core/dist.h"
#include "study/study_internal.h"
#include "runner/grid.h"

typedef struct {
    void *p;
    size_t n;
} span;

/* Copies the arrays of cell v (buckets, log, fine-tune curve; their lengths are in its
 * struct) to the bytes at p, or from them when into_v; p NULL: none. Returns their size. */
static size_t move_arrays(study_variant *v, int n_lens, char *p, int into_v) {
    span a[2 * LA_STUDY_MAX_LENS + 2];
    int k = 0;
    for (int i = 0; i < n_lens; i++) {
        a[k++] = (span){v->bucket[i], (size_t)v->n_bucket[i] * sizeof(double)};
        a[k++] = (span){v->bucket_tokens[i], (size_t)v->n_bucket[i] * sizeof(int64_t)};
    }
    a[k++] = (span){v->log, (size_t)v->n_log * sizeof(study_log_row)};
    a[k++] = (span){v->ft_curve, (size_t)v->n_ft * sizeof(double)};
    size_t n = 0;
    for (int j = 0; j < k; n += a[j++].n)
        if (p && a[j].n) memcpy(into_v ? a[j].p : p + n, into_v ? p + n : a[j].p, a[j].n);
    return n;
}

/* Arrival of cell v's struct: the sender's pointers mean nothing here; its arrays are
 * allocated anew (log and curve NULL when empty). */
static la_status alloc_arrays(study_variant *v, int n_lens) {
    int ok = 1;
    for (int i = 0; i < LA_STUDY_MAX_LENS; i++) {
        size_t nb = i < n_lens ? (size_t)v->n_bucket[i] : 0;
        v->bucket[i] = i < n_lens ? la_malloc(nb ? nb * sizeof(double) : 1) : NULL;
        v->bucket_tokens[i] = i < n_lens ? la_malloc(nb ? nb * sizeof(int64_t) : 1) : NULL;
        ok &= i >= n_lens || (v->bucket[i] && v->bucket_tokens[i]);
    }
    v->log = v->n_log ? la_malloc((size_t)v->n_log * sizeof(study_log_row)) : NULL;
    v->cap_log = v->n_log;
    v->ft_curve = v->n_ft ? la_malloc((size_t)v->n_ft * sizeof(double)) : NULL;
    ok &= (!v->n_log || v->log) && (!v->n_ft || v->ft_curve);
    return ok ? LA_OK : la_fail(LA_ENOMEM, "study: out of memory unpacking results");
}

la_status la_study_gather(study_results *r, const int *owner) {
    int N = la_dist_size(), me = la_dist_rank(), n = la_study_n_cells(r->st), n_lens = r->st->n_eval_lens;
    if (N == 1) return LA_OK;
    /* every rank learns every cell's size in bytes (rank 0's own: none, they stay in place),
     * then rank 0 receives the cells: each rank's in cell order, ranks in order */
    size_t size[LA_STUDY_MAX_SPECS * LA_STUDY_MAX_SEEDS] = {0}, bytes = 0, total = 0;
    for (int c = 0; c < n; c++)
        if (owner[c] == me && me) bytes += size[c] = sizeof r->v[c] + move_arrays(&r->v[c], n_lens, NULL, 0);
    char *send = la_malloc(bytes ? bytes : 1), *p = send, *recv = NULL;
    size_t *counts = la_calloc((size_t)N, sizeof *counts);
    la_status s = LA_OK;
    if (!send) s = la_fail(LA_ENOMEM, "study: out of memory packing results (%zu bytes)", bytes);
    else if (!counts) s = la_fail(LA_ENOMEM, "study: out of memory (gather)");
    for (int c = 0; c < n && send; c++) {
        if (!size[c]) continue;
        memcpy(p, &r->v[c], sizeof r->v[c]);
        p += sizeof r->v[c];
        p += move_arrays(&r->v[c], n_lens, p, 0);
    }
    s = la_dist_agree(s);
    if (s == LA_OK) s = la_grid_gather(size, sizeof *size, owner, n, 1, "study");
    for (int c = 0; c < n && s == LA_OK; c++) {
        counts[owner[c]] += size[c];
        total += size[c];
    }
    if (s == LA_OK && me == 0 && !(recv = la_malloc(total ? total : 1)))
        s = la_fail(LA_ENOMEM, "study: out of memory receiving results (%zu bytes)", total);
    if (s == LA_OK) s = la_dist_agree(s);
    if (s == LA_OK) s = la_dist_agree(la_dist_gatherv_bytes(send, recv, counts, 0));
    /* rank 0: the other ranks' cells */
    p = recv;
    for (int rank = 1; rank < N && me == 0; rank++)
        for (int c = 0; c < n && s == LA_OK; c++) {
            if (owner[c] != rank) continue;
            memcpy(&r->v[c], p, sizeof r->v[c]);
            p += sizeof r->v[c];
            if ((s = alloc_arrays(&r->v[c], n_lens)) == LA_OK) p += move_arrays(&r->v[c], n_lens, p, 1);
        }
    s = la_dist_agree(s);
    free(send);
    free(recv);
    free(counts);
    return s;
}
