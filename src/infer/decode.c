/* decode.c -- incremental decoding of the GPT (SPEC 7) through a KV cache: each call runs
 * T new tokens through the model's own blocks (la_model_forward_cached, src/model), whose
 * attention sub-layer calls back into this file to append the tokens' (pre-RoPE,
 * QK-normed) k and v to the layer's cache and attend over the kept tokens with
 * la_kv_attend. With the full policy the logits equal la_model_forward's. */
#include <stdlib.h>

#include "infer/kv_internal.h"
#include "model/kv_hook.h"

struct la_decoder {
    la_model *m;
    la_kv_cache *c;
    la_model_kv_hook hook; /* ctx: this decoder */
    int V, max_step;
};

/* the model's attention sub-layer of block `layer` -> the cache */
static la_status cache_append_attend(void *ctx, int layer, const la_spec *spec, const float *qh,
                                     const float *kh, const float *vh, int T, float *att,
                                     const la_attn_opts *op) {
    la_decoder *d = ctx;
    LA_TRY(la_kv_append(d->c, layer, kh, vh, T));
    return la_kv_attend(d->c, layer, spec, qh, T, att, NULL, op);
}

void la_decoder_free(la_decoder *d) {
    if (!d) return;
    la_kv_free(d->c);
    free(d);
}

la_status la_kv_params_for_model(const la_model *m, la_kv_params *p) {
    if (!m || !p) return la_fail(LA_EINVAL, "la_kv_params_for_model: NULL argument");
    const la_model_config *cfg = la_model_get_config(m);
    p->n_layers = cfg->n_layer;
    p->H = cfg->n_head;
    p->Hkv = cfg->n_kv_head > 0 ? cfg->n_kv_head : cfg->n_head;
    p->D = cfg->d_model / cfg->n_head;
    return LA_OK;
}

la_status la_decoder_new(la_model *m, const la_kv_params *policy, int max_step, la_decoder **out) {
    if (!out) return la_fail(LA_EINVAL, "la_decoder_new: out is NULL");
    *out = NULL;
    if (!m || !policy) return la_fail(LA_EINVAL, "la_decoder_new: NULL model or policy");
    la_kv_params p = *policy;
    LA_TRY(la_kv_params_for_model(m, &p));
    LA_TRY(la_kv_params_validate(&p));
    if (max_step < 1 || max_step > la_kv_max_chunk(&p))
        return la_fail(LA_EINVAL, "la_decoder_new: max_step = %d must be in [1, %lld] (the policy's largest append)",
                       max_step, (long long)la_kv_max_chunk(&p));
    la_decoder *d = la_calloc(1, sizeof *d);
    if (!d) return la_fail(LA_ENOMEM, "la_decoder_new: out of memory");
    d->m = m;
    d->V = la_model_get_config(m)->vocab;
    d->max_step = max_step;
    d->hook.append_attend = cache_append_attend;
    d->hook.ctx = d;
    la_status st = la_kv_new(&p, &d->c);
    if (st != LA_OK) {
        free(d);
        return st;
    }
    *out = d;
    return LA_OK;
}

void la_decoder_reset(la_decoder *d) {
    if (d) la_kv_reset(d->c);
}

la_kv_cache *la_decoder_cache(la_decoder *d) { return d ? d->c : NULL; }

int la_decoder_max_step(const la_decoder *d) { return d ? d->max_step : 0; }

la_status la_decoder_step(la_decoder *d, const int32_t *tokens, int T, float *logits, int all_rows) {
    if (!d || !tokens) return la_fail(LA_EINVAL, "la_decoder_step: NULL decoder or tokens");
    if (T < 1 || T > d->max_step)
        return la_fail(LA_EINVAL, "la_decoder_step: T = %d tokens, must be in [1, %d] (max_step of la_decoder_new)", T,
                       d->max_step);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= d->V)
            return la_fail(LA_EINVAL, "la_decoder_step: token %d at index %d is outside the vocabulary [0, %d)",
                           tokens[t], t, d->V);
    return la_model_forward_cached(d->m, tokens, T, &d->hook, logits, all_rows);
}
