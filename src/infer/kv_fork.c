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
    int64_t ca[3], cb[3]; /* sinks, heavy, recent: sinks(2,6) and sinks(4,4) share a budget, not a policy */
    la_kv_policy_counts(a, &ca[0], &ca[1], &ca[2]);
    la_kv_policy_counts(b, &cb[0], &cb[1], &cb[2]);
    if (a->n_layers != b->n_layers || a->H != b->H || a->Hkv != b->Hkv || a->D != b->D || a->storage != b->storage ||
        a->policy != b->policy || memcmp(ca, cb, sizeof ca) || dst->cap != src->cap || dst->stream_T != src->stream_T ||
        dst->group != src->group)
        return la_fail(LA_EINVAL, "la_kv_copy: the caches differ in shape, storage, policy, its parameters or stream "
                       "chunk; create the destination with the source's params and chunk");
    const size_t D = (size_t)a->D, cap = (size_t)src->cap;
    for (int l = 0; l < a->n_layers; l++) {
        const la_kv_layer *S = &src->layers[l];
        la_kv_layer *T = &dst->layers[l];
        for (size_t h = 0; h < (size_t)a->Hkv; h++) la_kv_copy_slots(src, T, h * cap, S, h * cap, (size_t)S->len);
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
