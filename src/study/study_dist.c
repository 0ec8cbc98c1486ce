/* study_dist.c -- a study's cells (variant x seed) spread over MPI ranks (src/core/dist.h): which rank
 * runs which variant (balanced by estimated cost), and the finished variants' results
 * gathered on rank 0, which writes the tables. */
#include <stdlib.h>
#include <string.h>

#include "core/dist.h"
#include "study/study_internal.h"

/* Bytes of cell v as sent: its index, the struct (pointers are rewritten on arrival),
 * then its buckets, log and fine-tune curve. */
static size_t packed_size(const study_variant *v, int n_lens) {
    size_t n = sizeof(int) + sizeof *v;
    for (int i = 0; i < n_lens; i++) n += (size_t)v->n_bucket[i] * (sizeof(double) + sizeof(int64_t));
    return n + (size_t)v->n_log * sizeof(study_log_row) + (size_t)v->n_ft * sizeof(double);
}

static char *put(char *p, const void *src, size_t n) {
    if (n) memcpy(p, src, n);
    return p + n;
}

la_status la_study_gather(study_results *r, const int *owner) {
    int N = la_dist_size(), me = la_dist_rank(), n = la_study_n_cells(r->st), n_lens = r->st->n_eval_lens;
    if (N == 1) return LA_OK;
    /* sizes first (every rank learns every rank's count), then the bytes to rank 0 */
    size_t bytes = 0;
    for (int vi = 0; vi < n; vi++)
        if (owner[vi] == me) bytes += packed_size(&r->v[vi], n_lens);
    la_status s = LA_OK;
    char *send = la_malloc(bytes ? bytes : 1), *p = send;
    if (!send) s = la_fail(LA_ENOMEM, "study: out of memory packing results (%zu bytes)", bytes);
    for (int vi = 0; vi < n && send; vi++) {
        const study_variant *v = &r->v[vi];
        if (owner[vi] != me) continue;
        p = put(p, &vi, sizeof vi);
        p = put(p, v, sizeof *v);
        for (int i = 0; i < n_lens; i++) {
            p = put(p, v->bucket[i], (size_t)v->n_bucket[i] * sizeof(double));
            p = put(p, v->bucket_tokens[i], (size_t)v->n_bucket[i] * sizeof(int64_t));
        }
        p = put(p, v->log, (size_t)v->n_log * sizeof(study_log_row));
        p = put(p, v->ft_curve, (size_t)v->n_ft * sizeof(double));
    }
    size_t *counts = la_calloc((size_t)N, sizeof *counts), *one = la_calloc((size_t)N, sizeof *one);
    size_t *all_sizes = la_calloc((size_t)N, sizeof *all_sizes);
    if (s == LA_OK && (!counts || !one || !all_sizes)) s = la_fail(LA_ENOMEM, "study: out of memory (gather)");
    s = la_dist_agree(s);
    for (int q = 0; q < N && s == LA_OK; q++) one[q] = sizeof(size_t);
    if (s == LA_OK) s = la_dist_agree(la_dist_gatherv_bytes(&bytes, all_sizes, one, 0));
    if (s == LA_OK && me == 0) memcpy(counts, all_sizes, (size_t)N * sizeof *counts);
    if (s == LA_OK) s = la_dist_agree(la_dist_bcast(counts, (size_t)N * sizeof *counts, 0));
    char *recv = NULL;
    size_t total = 0;
    for (int q = 0; q < N && s == LA_OK; q++) total += counts[q];
    if (s == LA_OK && me == 0 && !(recv = la_malloc(total ? total : 1)))
        s = la_fail(LA_ENOMEM, "study: out of memory receiving results (%zu bytes)", total);
    if (s == LA_OK) s = la_dist_agree(s);
    if (s == LA_OK) s = la_dist_agree(la_dist_gatherv_bytes(send, recv, counts, 0));
    /* rank 0: unpack the other ranks' variants (its own are already in place) */
    const char *q = recv, *end = recv + total;
    while (s == LA_OK && me == 0 && q < end) {
        int vi;
        memcpy(&vi, q, sizeof vi);
        q += sizeof vi;
        study_variant *v = &r->v[vi];
        if (owner[vi] == 0) { /* own variant: skip its bytes */
            study_variant tmp;
            memcpy(&tmp, q, sizeof tmp);
            q += packed_size(&tmp, n_lens) - sizeof(int);
            continue;
        }
        memcpy(v, q, sizeof *v);
        q += sizeof *v;
        /* the sender's pointers mean nothing here */
        for (int i = 0; i < LA_STUDY_MAX_LENS; i++) v->bucket[i] = NULL, v->bucket_tokens[i] = NULL;
        v->log = NULL;
        v->cap_log = 0;
        v->ft_curve = NULL;
        for (int i = 0; i < n_lens; i++) {
            size_t nb = (size_t)v->n_bucket[i];
            v->bucket[i] = la_malloc(nb ? nb * sizeof(double) : 1);
            v->bucket_tokens[i] = la_malloc(nb ? nb * sizeof(int64_t) : 1);
            if (!v->bucket[i] || !v->bucket_tokens[i]) {
                s = la_fail(LA_ENOMEM, "study: out of memory unpacking results");
                break;
            }
            memcpy(v->bucket[i], q, nb * sizeof(double));
            q += nb * sizeof(double);
            memcpy(v->bucket_tokens[i], q, nb * sizeof(int64_t));
            q += nb * sizeof(int64_t);
        }
        if (s == LA_OK && v->n_log) {
            if (!(v->log = la_malloc((size_t)v->n_log * sizeof(study_log_row)))) {
                s = la_fail(LA_ENOMEM, "study: out of memory unpacking results");
                break;
            }
            memcpy(v->log, q, (size_t)v->n_log * sizeof(study_log_row));
            v->cap_log = v->n_log;
        }
        q += (size_t)v->n_log * sizeof(study_log_row);
        if (s == LA_OK && v->n_ft) {
            if (!(v->ft_curve = la_malloc((size_t)v->n_ft * sizeof(double)))) {
                s = la_fail(LA_ENOMEM, "study: out of memory unpacking results");
                break;
            }
            memcpy(v->ft_curve, q, (size_t)v->n_ft * sizeof(double));
        }
        q += (size_t)v->n_ft * sizeof(double);
    }
    s = la_dist_agree(s);
    free(send);
    free(recv);
    free(counts);
    free(one);
    free(all_sizes);
    return s;
}
