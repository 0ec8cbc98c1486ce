/* session.c -- one decoding session over a language model (issue 32): any la_lm (the GPT,
 * the GGUF Llama model) plus a KV cache of any element type (f32 / f16 / bf16 / int8) and
 * policy (full, window, sinks, h2o). Each step runs T new tokens through the model's own
 * blocks (la_lm_ops.forward), whose attention sub-layer calls back into this file through
 * the KV-cache hook (model/kv_hook.h): append the new tokens' un-rotated k, v to the
 * layer's cache (evicting by the policy), then attend over the kept tokens. Window and
 * sinks caches with a spec la_kv_stream_exact accepts go through la_kv_stream_attend: a
 * step of T tokens is then exactly T steps of one. The former GPT decoder and Llama
 * session (la_decoder_*, la_llama_session_*) are thin wrappers at the end. */
#include <stdlib.h>

#include "core/dist.h"
#include "infer/kv_internal.h"
#include "model/lm.h"
#include "model/posreg.h"
#include "longattn/infer.h"

struct la_session {
    la_lm *lm;
    la_kv_cache *c;
    la_model_kv_hook hook; /* ctx: this session */
    int max_step;
    int64_t pos;           /* tokens appended so far */
    int lost;              /* a failed step left the cache part-updated: steps refused until reset */
    const char *who;       /* the API's name in error messages */
};

la_status la_lm_kv_params(const la_lm *lm, la_kv_params *p) {
    if (!lm || !p) return la_fail(LA_EINVAL, "la_lm_kv_params: NULL argument");
    p->n_layers = lm->n_layers;
    p->H = lm->H;
    p->Hkv = lm->Hkv;
    p->D = lm->D;
    return LA_OK;
}

/* One kernel call per kv head over its rows in place, (len, D) contiguous at slot 0 of
 * the head, instead of la_kv_attend's gather of every head into one (Hkv, len, D) buffer
 * (a copy of the whole layer per step while the cache is not full): f32 rows, no H2O
 * scores, more than one kv head, and nothing that depends on a head's index among all H
 * heads other than the sink logits (offset per call): not ALiBi / NaPE, whose slopes the
 * kernel derives from the head index and the call's H, nor the GPT's per-head logn s_h or
 * ASEntmax beta / gamma (those go through la_kv_attend). The same call as la_kv_attend's
 * (pos0 = len - T), split by kv head: bitwise the same logits (checked on the GPT, every
 * policy and type, issue 32). */
static int per_head_ok(const la_kv_cache *c, const la_spec *spec, const la_attn_opts *op) {
    return c->p.storage == LA_KV_F32 && c->p.policy != LA_KV_H2O && c->p.Hkv > 1 && spec->pos != LA_POS_ALIBI &&
           spec->pos != LA_POS_NAPE && !op->logn_s && !op->as_beta && !op->as_gamma;
}

static la_status attend_per_head(la_kv_cache *c, int layer, const la_spec *spec, const float *qh, int T, float *att,
                                 const la_attn_opts *op) {
    const la_kv_layer *L = &c->layers[layer];
    const int G = c->p.H / c->p.Hkv, D = c->p.D;
    la_attn_opts o = *op;
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

/* the model's attention sub-layer of block `layer` -> the cache */
static la_status cache_append_attend(void *ctx, int layer, const la_spec *spec, const float *qh, const float *kh,
                                     const float *vh, int T, float *att, const la_attn_opts *op) {
    la_session *s = ctx;
    la_kv_cache *c = s->c;
    struct la_posreg *pr = la_lm_posreg(s->lm);
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
    if (per_head_ok(c, spec, op)) return attend_per_head(c, layer, spec, qh, T, att, op);
    la_attn_opts o = *op;
    o.ws = NULL; /* the cache's own workspace */
    return la_kv_attend(c, layer, spec, qh, T, att, NULL, &o);
}

/* stream: room for exact chunked streaming of max_step tokens under window / sinks
 * (kv_stream.c); 0: every step appends and attends over the cache as evicted before it */
static la_status session_new(const char *who, la_lm *lm, const la_kv_params *policy, int max_step, int stream,
                             la_session **out) {
    if (!out) return la_fail(LA_EINVAL, "%s_new: out is NULL", who);
    *out = NULL;
    if (!lm || !policy) return la_fail(LA_EINVAL, "%s_new: NULL model or policy", who);
    la_kv_params p = *policy;
    LA_TRY(la_lm_kv_params(lm, &p));
    LA_TRY(la_kv_params_validate(&p));
    if (max_step < 1 || max_step > la_kv_max_chunk(&p))
        return la_fail(LA_EINVAL, "%s_new: max_step = %d must be in [1, %lld] (the policy's largest append)", who,
                       max_step, (long long)la_kv_max_chunk(&p));
    la_session *s = la_calloc(1, sizeof *s);
    if (!s) return la_fail(LA_ENOMEM, "%s_new: out of memory", who);
    la_status st = la_kv_new_stream(&p, stream ? max_step : 1, &s->c);
    if (st != LA_OK) {
        free(s);
        return st;
    }
    s->lm = lm;
    s->hook = (la_model_kv_hook){cache_append_attend, s};
    s->max_step = max_step;
    s->who = who;
    *out = s;
    return LA_OK;
}

la_status la_session_new(la_lm *lm, const la_kv_params *policy, int max_step, la_session **out) {
    return session_new("la_session", lm, policy, max_step, 1, out);
}

void la_session_free(la_session *s) {
    if (!s) return;
    la_kv_free(s->c);
    free(s);
}

void la_session_reset(la_session *s) {
    if (!s) return;
    la_kv_reset(s->c);
    s->pos = 0;
    s->lost = 0;
}

la_kv_cache *la_session_cache(la_session *s) { return s ? s->c : NULL; }
la_lm *la_session_lm(const la_session *s) { return s ? s->lm : NULL; }
int la_session_max_step(const la_session *s) { return s ? s->max_step : 0; }
int64_t la_session_pos(const la_session *s) { return s ? s->pos : -1; }

la_status la_session_copy(la_session *dst, const la_session *src) {
    if (!dst || !src) return la_fail(LA_EINVAL, "la_session_copy: NULL session");
    if (dst->lm != src->lm || dst->max_step != src->max_step)
        return la_fail(LA_EINVAL, "la_session_copy: the sessions differ in model or max_step");
    if (src->lost) return la_fail(LA_EINVAL, "la_session_copy: the source session lost its state in a failed step; "
                                  "la_session_reset it first");
    LA_TRY(la_kv_copy(dst->c, src->c));
    dst->pos = src->pos;
    dst->lost = 0;
    return LA_OK;
}

la_status la_session_step(la_session *s, const int32_t *tokens, int T, float *logits, int all_rows) {
    if (!s || !tokens) return la_fail(LA_EINVAL, "la_session_step: NULL session or tokens");
    if (T < 1 || T > s->max_step)
        return la_fail(LA_EINVAL, "%s_step: T = %d tokens, must be in [1, %d] (the session's max_step)", s->who, T,
                       s->max_step);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= s->lm->vocab)
            return la_fail(LA_EINVAL, "%s_step: token %d at index %d is outside the vocabulary [0, %d)", s->who,
                           tokens[t], t, s->lm->vocab);
    const la_kv_params *p = la_kv_get_params(s->c);
    if (p->policy == LA_KV_FULL && s->pos + T > p->max_tokens)
        return la_fail(LA_EINVAL, "the KV cache is full: it holds %lld tokens and %d more do not fit in its %lld; use a "
                       "larger cache (max_tokens) or an evicting policy (window, sinks, h2o)",
                       (long long)s->pos, T, (long long)p->max_tokens);
    if (s->lost)
        return la_fail(LA_EINVAL, "%s_step: an earlier step failed after evicting from the cache, whose state it could "
                       "not restore; la_session_reset the session (start the stream again)", s->who);
    /* the forward appends layer by layer, so a failure (an f16 overflow in layer l, a kernel
     * error) leaves the layers before it holding the new tokens. Unless one of them evicted
     * (or h2o scored the old rows), cutting every layer back to its length and count before
     * the step restores the cache exactly; else the session is refused until reset */
    la_kv_layer *L = s->c->layers;
    const int64_t len0 = L[0].len, seen0 = L[0].seen;
    la_status st = s->lm->ops->forward(s->lm->model, tokens, T, &s->hook, logits, all_rows);
    if (st == LA_OK) {
        s->pos += T;
        return LA_OK;
    }
    const int exact = len0 + T <= s->c->C && (p->policy != LA_KV_H2O || len0 == 0);
    for (int l = 0; l < p->n_layers; l++) {
        if (L[l].seen == seen0) continue; /* not reached: untouched */
        if (!exact) s->lost = 1;
        L[l].len = len0;
        L[l].seen = seen0;
    }
    return st;
}

/* the sequence-parallel prefill's keys and values -> the cache, as they are */
static la_status keep_append(void *ctx, int layer, const float *kh, const float *vh, int T) {
    return la_kv_append(((la_session *)ctx)->c, layer, kh, vh, T);
}

la_status la_session_prefill_sp(la_session *s, const int32_t *tokens, int T, float *last, double *nll) {
    la_status st = LA_OK;
    const la_kv_params *p = s ? la_kv_get_params(s->c) : NULL;
    if (!s || !tokens) st = la_fail(LA_EINVAL, "la_session_prefill_sp: NULL session or tokens");
    else if (!s->lm->ops->prefill_sp)
        st = la_fail(LA_EUNSUPPORTED, "la_session_prefill_sp: the %s model has no sequence-parallel prefill (the "
                     "Llama model has); step it with la_session_step", s->lm->ops->family);
    else if (s->pos != 0)
        st = la_fail(LA_EINVAL, "la_session_prefill_sp: the session holds %lld tokens; it fills an empty one (call "
                     "la_session_reset first)", (long long)s->pos);
    else if (p->policy != LA_KV_FULL)
        st = la_fail(LA_EINVAL, "la_session_prefill_sp: needs the full KV policy (the prefill keeps every token; "
                     "window / sinks / h2o evict while streaming)");
    else if (T > p->max_tokens)
        st = la_fail(LA_EINVAL, "la_session_prefill_sp: %d tokens do not fit in the cache's max_tokens = %lld", T,
                     (long long)p->max_tokens);
    LA_TRY(la_dist_agree(st));
    la_model_kv_keep keep = {keep_append, s};
    st = s->lm->ops->prefill_sp(s->lm->model, tokens, T, &keep, last, nll);
    if (st == LA_OK) s->pos = T;
    else la_session_reset(s); /* no half-filled cache */
    return st;
}

/* ---- the former sessions, kept as thin wrappers (no public signature changed) ---- */

la_status la_kv_params_for_model(const la_model *m, la_kv_params *p) {
    if (!m || !p) return la_fail(LA_EINVAL, "la_kv_params_for_model: NULL argument");
    return la_lm_kv_params(la_model_lm((la_model *)m), p); /* reads the handle only */
}

/* the GPT decoder never streamed: a step of T > 1 tokens under window / sinks sees the
 * cache as evicted before it, as before issue 32 (kv-eval --chunk relies on it) */
la_status la_decoder_new(la_model *m, const la_kv_params *policy, int max_step, la_decoder **out) {
    return session_new("la_decoder", la_model_lm(m), policy, max_step, 0, out);
}
void la_decoder_free(la_decoder *d) { la_session_free(d); }
void la_decoder_reset(la_decoder *d) { la_session_reset(d); }
la_kv_cache *la_decoder_cache(la_decoder *d) { return la_session_cache(d); }
int la_decoder_max_step(const la_decoder *d) { return la_session_max_step(d); }
la_status la_decoder_step(la_decoder *d, const int32_t *tokens, int T, float *logits, int all_rows) {
    return la_session_step(d, tokens, T, logits, all_rows);
}

la_dtype la_llama_default_kv_type(void) { return LA_DTYPE_F16; } /* docs/kv-cache.md: SmolLM2 at 4k */

la_status la_llama_kv_params(const la_llama *m, la_kv_params *p) {
    if (!m || !p) return la_fail(LA_EINVAL, "la_llama_kv_params: NULL argument");
    return la_lm_kv_params(la_llama_lm((la_llama *)m), p); /* reads the handle only */
}

la_status la_llama_session_new(la_llama *m, const la_kv_params *policy, int max_step, la_llama_session **out) {
    return session_new("la_llama_session", la_llama_lm(m), policy, max_step, 1, out);
}
void la_llama_session_free(la_llama_session *s) { la_session_free(s); }
void la_llama_session_reset(la_llama_session *s) { la_session_reset(s); }
la_kv_cache *la_llama_session_cache(la_llama_session *s) { return la_session_cache(s); }
int64_t la_llama_session_pos(const la_llama_session *s) { return la_session_pos(s); }
la_status la_llama_session_copy(la_llama_session *dst, const la_llama_session *src) {
    return la_session_copy(dst, src);
}
la_status la_llama_session_step(la_llama_session *s, const int32_t *tokens, int T, float *logits, int all_rows) {
    return la_session_step(s, tokens, T, logits, all_rows);
}
