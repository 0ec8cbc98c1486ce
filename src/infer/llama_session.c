/* llama_session.c -- decoding a Llama-family model (src/model/llama.c) through the KV
 * cache: the model's own block forward, its attention sub-layer plugged into the cache
 * through the KV-cache hook (model/kv_hook.h): append the new tokens' un-rotated k, v to
 * the layer's cache (evicting by the policy), then la_kv_attend over the kept tokens.
 * Window and sinks caches with a spec la_kv_stream_exact accepts go through
 * la_kv_stream_attend instead: a step of T tokens is then exactly T steps of one. */
#include <stdlib.h>

#include "infer/kv_internal.h"
#include "model/kv_hook.h"
#include "model/posreg.h"

struct la_llama_session {
    la_llama *m;
    la_kv_cache *c;
    int max_step;
    int64_t pos;
};

la_dtype la_llama_default_kv_type(void) { return LA_DTYPE_F16; } /* docs/kv-cache.md: SmolLM2 at 4k */

la_status la_llama_kv_params(const la_llama *m, la_kv_params *p) {
    if (!m || !p) return la_fail(LA_EINVAL, "la_llama_kv_params: NULL argument");
    const la_llama_config *c = la_llama_get_config(m);
    p->n_layers = c->n_layer;
    p->H = c->n_head;
    p->Hkv = c->n_head_kv;
    p->D = c->head_dim;
    return LA_OK;
}

la_status la_llama_session_new(la_llama *m, const la_kv_params *policy, int max_step, la_llama_session **out) {
    if (!out) return la_fail(LA_EINVAL, "la_llama_session_new: out is NULL");
    *out = NULL;
    if (!m || !policy) return la_fail(LA_EINVAL, "la_llama_session_new: NULL model or policy");
    la_kv_params p = *policy;
    LA_TRY(la_llama_kv_params(m, &p));
    LA_TRY(la_kv_params_validate(&p));
    if (max_step < 1 || max_step > la_kv_max_chunk(&p))
        return la_fail(LA_EINVAL, "la_llama_session_new: max_step = %d must be in [1, %lld] (the policy's largest append)",
                       max_step, (long long)la_kv_max_chunk(&p));
    la_llama_session *s = la_calloc(1, sizeof *s);
    if (!s) return la_fail(LA_ENOMEM, "la_llama_session_new: out of memory");
    /* window / sinks: room for exact chunked streaming of max_step tokens (kv_stream.c) */
    la_status st = la_kv_new_stream(&p, max_step, &s->c);
    if (st != LA_OK) {
        free(s);
        return st;
    }
    s->m = m;
    s->max_step = max_step;
    *out = s;
    return LA_OK;
}

void la_llama_session_free(la_llama_session *s) {
    if (!s) return;
    la_kv_free(s->c);
    free(s);
}

void la_llama_session_reset(la_llama_session *s) {
    if (!s) return;
    la_kv_reset(s->c);
    s->pos = 0;
}

la_kv_cache *la_llama_session_cache(la_llama_session *s) { return s ? s->c : NULL; }

la_status la_llama_session_copy(la_llama_session *dst, const la_llama_session *src) {
    if (!dst || !src) return la_fail(LA_EINVAL, "la_llama_session_copy: NULL session");
    if (dst->m != src->m || dst->max_step != src->max_step)
        return la_fail(LA_EINVAL, "la_llama_session_copy: the sessions differ in model or max_step");
    LA_TRY(la_kv_copy(dst->c, src->c));
    dst->pos = src->pos;
    return LA_OK;
}
int64_t la_llama_session_pos(const la_llama_session *s) { return s ? s->pos : -1; }

static la_status cache_append_attend(void *ctx, int layer, const la_spec *spec, const float *qh, const float *kh,
                                     const float *vh, int T, float *att, const la_attn_opts *op) {
    la_llama_session *s = ctx;
    la_kv_cache *c = s->c;
    struct la_posreg *pr = la_llama_posreg(s->m);
    if (pr) { /* SelfExtend / ReRoPE / DCA over the whole f32 cache (src/model/posreg.c) */
        if (c->p.policy != LA_KV_FULL || c->p.storage != LA_KV_F32)
            return la_fail(LA_EUNSUPPORTED, "selfextend / rerope / dca need a full float32 KV cache (no eviction: "
                           "their positions are those of the whole stream; no int8)");
        LA_TRY(la_kv_append(c, layer, kh, vh, T));
        const la_kv_layer *L = &c->layers[layer];
        const int G = c->p.H / c->p.Hkv, D = c->p.D;
        for (int h = 0; h < c->p.Hkv; h++) {
            const size_t kv_off = (size_t)h * (size_t)c->cap * D, q_off = (size_t)h * G * T * D;
            LA_TRY(la_posreg_attend(pr, G, T, (int)L->len, D, qh + q_off, (const float *)L->k + kv_off,
                                    (const float *)L->v + kv_off, att + q_off, op->n_threads));
        }
        return LA_OK;
    }
    /* a single row over a reduced-precision cache: append and the decode kernel (la_kv_attend),
     * exactly what streaming one token does */
    const int decode = T == 1 && c->p.storage != LA_KV_F32 && la_kv_decode_ok(c, spec, op);
    if (!decode && c->stream_T > 1 && la_kv_stream_exact(spec, &c->p))
        return la_kv_stream_attend(c, layer, spec, qh, kh, vh, T, att, op);
    LA_TRY(la_kv_append(c, layer, kh, vh, T));
    la_attn_opts o = *op;
    o.ws = NULL; /* the cache's own workspace */
    if (c->p.storage != LA_KV_F32 || c->p.policy == LA_KV_H2O || c->p.Hkv == 1)
        return la_kv_attend(c, layer, spec, qh, T, att, NULL, &o);
    /* f32 rows without H2O scores: one kernel call per kv head over its rows in place, (len,
     * D) contiguous at slot 0 of the head, instead of la_kv_attend's gather of every head
     * into one (Hkv, len, D) buffer (a copy of the whole layer per step while the cache is
     * not full). Same call as la_kv_attend's (pos0 = len - T), split by kv head. */
    const la_kv_layer *L = &c->layers[layer];
    const int G = c->p.H / c->p.Hkv, D = c->p.D;
    o.ws = c->ws;
    for (int h = 0; h < c->p.Hkv; h++) {
        la_shape sh = {.B = 1, .H = G, .Hkv = 1, .T = T, .S = (int)L->len, .D = D, .pos0 = LA_POS0_AUTO};
        const size_t kv_off = (size_t)h * (size_t)c->cap * D, q_off = (size_t)h * G * T * D;
        if (op->sinks) o.sinks = op->sinks + (size_t)h * G; /* per-head sink logits of this call's heads */
        LA_TRY(la_attn_forward(spec, &sh, qh + q_off, (const float *)L->k + kv_off, (const float *)L->v + kv_off,
                               att + q_off, c->stat, &o));
    }
    return LA_OK;
}

la_status la_llama_session_step(la_llama_session *s, const int32_t *tokens, int T, float *logits, int all_rows) {
    if (!s || !tokens) return la_fail(LA_EINVAL, "la_llama_session_step: NULL session or tokens");
    if (T < 1 || T > s->max_step)
        return la_fail(LA_EINVAL, "la_llama_session_step: T = %d must be in [1, %d] (the session's max_step)", T,
                       s->max_step);
    const la_kv_params *p = la_kv_get_params(s->c);
    if (p->policy == LA_KV_FULL && s->pos + T > p->max_tokens)
        return la_fail(LA_EINVAL, "the KV cache is full: it holds %lld tokens and %d more do not fit in its %lld; use a "
                       "larger cache (max_tokens) or an evicting policy (window, sinks, h2o)",
                       (long long)s->pos, T, (long long)p->max_tokens);
    la_model_kv_hook hook = {cache_append_attend, s};
    LA_TRY(la_llama_forward_cached(s->m, tokens, T, &hook, logits, all_rows));
    s->pos += T;
    return LA_OK;
}
