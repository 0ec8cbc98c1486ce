/* kv_fork.c -- copying a KV cache's state into another cache of the same shape (a fork /
 * snapshot: issue #28's shared-prefix evaluation computes a common prefix once and
 * continues each example from a copy of it). Only the kept rows are copied (len slots
 * per kv head), so a fork costs the prefix's bytes, not the budget's. */
#include <string.h>

#include "infer/kv_internal.h"
#include "longattn/infer.h"

la_status la_kv_copy(la_kv_cache *dst, const la_kv_cache *src) {
    if (!dst || !src) return la_fail(LA_EINVAL, "la_kv_copy: NULL cache");
    if (dst == src) return LA_OK;
    const la_kv_params *a = &dst->p, *b = &src->p;
    if (a->n_layers != b->n_layers || a->H != b->H || a->Hkv != b->Hkv || a->D != b->D || a->storage != b->storage ||
        a->policy != b->policy || dst->C != src->C || dst->cap != src->cap || dst->stream_T != src->stream_T ||
        dst->group != src->group)
        return la_fail(LA_EINVAL, "la_kv_copy: the caches differ in shape, storage, policy, budget or stream chunk; "
                       "create the destination with the source's params and chunk");
    const size_t es = la_kv_elt_size(a->storage), D = (size_t)a->D, cap = (size_t)src->cap, G = (size_t)src->n_groups;
    for (int l = 0; l < a->n_layers; l++) {
        const la_kv_layer *S = &src->layers[l];
        la_kv_layer *T = &dst->layers[l];
        const size_t n = (size_t)S->len;
        for (size_t h = 0; h < (size_t)a->Hkv; h++) {
            const size_t o = h * cap;
            memcpy((char *)T->k + o * D * es, (const char *)S->k + o * D * es, n * D * es);
            memcpy((char *)T->v + o * D * es, (const char *)S->v + o * D * es, n * D * es);
            if (S->k_scale) {
                memcpy(T->k_scale + o * G, S->k_scale + o * G, n * G * sizeof(float));
                memcpy(T->v_scale + o * G, S->v_scale + o * G, n * G * sizeof(float));
            }
            memcpy(T->pos + o, S->pos + o, n * sizeof *S->pos);
            memcpy(T->score + o, S->score + o, n * sizeof *S->score);
        }
        T->len = S->len;
        T->seen = S->seen;
    }
    /* exact streaming's cos/sin table is a pure function of (omega, rows), rebuilt on
     * demand; copying it keeps the destination's next call identical to the source's */
    dst->s_tab_n = src->s_tab_n;
    if (src->s_tab_n > 0 && src->s_cs && dst->s_cs) {
        memcpy(dst->s_cs, src->s_cs, (size_t)src->s_tab_n * D * sizeof(float));
        memcpy(dst->s_omega, src->s_omega, D * sizeof(double));
    }
    return LA_OK;
}
