/* decode.c -- incremental decoding of the GPT (SPEC 7) through a KV cache: each call runs
 * T new tokens through every block, appending their (pre-RoPE, QK-normed) k and v to the
 * layer's cache and attending over the kept tokens with la_kv_attend. The block math is
 * the model's own layer functions (model/layers.h) in the order of gpt.c's block_forward
 * (F1-F13), so that with the full policy the logits equal la_model_forward's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/kv_internal.h"
#include "model/layers.h"

typedef struct {
    const float *ln1_g, *wq, *wk, *wv, *qn_g, *kn_g, *wo, *logn_s, *as_wb, *as_bb, *as_wg, *as_bg,
        *ln2_g, *w_fc, *w_proj;
} dec_layer;

struct la_decoder {
    la_model *m;
    la_kv_cache *c;
    la_spec spec;
    int L, H, K, C, D, F, V, max_step;
    const float *wte, *lnf_g, *lm_head;
    dec_layer *ly;       /* (L) */
    float *block;        /* one allocation for the buffers below */
    float *x, *a, *q_raw, *k_raw, *v_raw, *rstd, *qh, *kh, *vh, *att, *y, *h, *beta,
        *gamma;      /* x, a: (S, C); q_raw, y: (S, H*D); k_raw, v_raw: (S, K*D);
                        rstd: (S*H); qh, att: (H, S, D); kh, vh: (K, S, D); h: (S, F);
                        beta, gamma: (H, S); S = max_step */
    double timer;
};

static const float *tensor_by_name(la_model *m, const char *name, size_t numel) {
    la_tensor_info ti;
    for (int i = 0; i < la_model_num_tensors(m); i++)
        if (la_model_tensor(m, i, &ti) == LA_OK && !strcmp(ti.name, name))
            return ti.numel == numel ? la_model_params(m) + ti.offset : NULL;
    return NULL;
}

void la_decoder_free(la_decoder *d) {
    if (!d) return;
    la_kv_free(d->c);
    free(d->ly);
    free(d->block);
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
    const la_model_config *cfg = la_model_get_config(m);
    la_decoder *d = la_calloc(1, sizeof *d);
    if (!d) return la_fail(LA_ENOMEM, "la_decoder_new: out of memory");
    d->m = m;
    d->spec = *la_model_spec(m);
    d->L = cfg->n_layer, d->H = p.H, d->K = p.Hkv, d->C = cfg->d_model, d->D = p.D;
    d->F = cfg->d_ff > 0 ? cfg->d_ff : 4 * cfg->d_model;
    d->V = cfg->vocab;
    d->max_step = max_step;
    la_status st = la_kv_new(&p, &d->c);
    if (st != LA_OK) {
        free(d);
        return st;
    }
    const size_t C = (size_t)d->C, H = (size_t)d->H, K = (size_t)d->K, D = (size_t)d->D, F = (size_t)d->F;
    const size_t V = (size_t)d->V;
    d->ly = la_calloc((size_t)d->L, sizeof *d->ly);
    if (!d->ly) {
        la_decoder_free(d);
        return la_fail(LA_ENOMEM, "la_decoder_new: out of memory");
    }
    d->wte = tensor_by_name(m, "wte", V * C);
    d->lnf_g = tensor_by_name(m, "lnf.g", C);
    d->lm_head = tensor_by_name(m, "lm_head", V * C);
    int ok = d->ly && d->wte && d->lnf_g && d->lm_head;
    const int logn = d->spec.xform == LA_XF_LOGN, asent = d->spec.norm == LA_NORM_ASENTMAX;
    for (int l = 0; ok && l < d->L; l++) {
        char nm[64];
        dec_layer *y = &d->ly[l];
#define GET(field, suffix, numel)                                 \
    do {                                                          \
        snprintf(nm, sizeof nm, "h.%d.%s", l, suffix);            \
        y->field = tensor_by_name(m, nm, numel);                  \
        ok = ok && y->field;                                      \
    } while (0)
        GET(ln1_g, "ln1.g", C);
        GET(wq, "attn.wq", H * D * C);
        GET(wk, "attn.wk", K * D * C);
        GET(wv, "attn.wv", K * D * C);
        GET(qn_g, "attn.q_norm.g", D);
        GET(kn_g, "attn.k_norm.g", D);
        GET(wo, "attn.wo", C * H * D);
        if (logn) GET(logn_s, "attn.logn_s", H);
        if (asent) {
            GET(as_wb, "attn.as_wb", H * C);
            GET(as_bb, "attn.as_bb", H);
            GET(as_wg, "attn.as_wg", H * C);
            GET(as_bg, "attn.as_bg", H);
        }
        GET(ln2_g, "ln2.g", C);
        GET(w_fc, "mlp.w_fc", F * C);
        GET(w_proj, "mlp.w_proj", C * F);
#undef GET
    }
    if (!ok) {
        la_decoder_free(d);
        return la_fail(LA_EFORMAT, "la_decoder_new: the model lacks a tensor the decoder needs (or has a wrong size); "
                                   "is it a longattn GPT built by la_model_new / la_model_load?");
    }
    const size_t S = (size_t)max_step;
    enum { NBUF = 14 };
    size_t sizes[NBUF] = {S * C, S * C, S * H * D, S * K * D, S * K * D, S * H, H * S * D, K * S * D,
                          K * S * D, H * S * D, S * H * D, S * F, S * H, S * H};
    size_t total = 0;
    for (int i = 0; i < NBUF; i++) total += sizes[i];
    d->block = la_malloc(total * sizeof(float));
    if (!d->block) {
        la_decoder_free(d);
        return la_fail(LA_ENOMEM, "la_decoder_new: out of memory for %zu floats of buffers", total);
    }
    float **slots[NBUF] = {&d->x, &d->a, &d->q_raw, &d->k_raw, &d->v_raw, &d->rstd, &d->qh,
                           &d->kh, &d->vh, &d->att, &d->y, &d->h, &d->beta, &d->gamma};
    float *p0 = d->block;
    for (int i = 0; i < NBUF; i++) {
        *slots[i] = p0;
        p0 += sizes[i];
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
    const int C = d->C, H = d->H, K = d->K, D = d->D, F = d->F, N = T;
    double *tm = &d->timer;
    la_embed_forward(d->x, tokens, d->wte, N, C);
    for (int l = 0; l < d->L; l++) {
        const dec_layer *y = &d->ly[l];
        la_rmsnorm_forward(d->a, d->rstd, d->x, y->ln1_g, N, C);      // F1
        la_mm_forward(tm, d->q_raw, d->a, y->wq, N, C, H * D, 0);       // F2
        la_mm_forward(tm, d->k_raw, d->a, y->wk, N, C, K * D, 0);       // F3
        la_mm_forward(tm, d->v_raw, d->a, y->wv, N, C, K * D, 0);       // F4
        la_attn_opts op = la_attn_default_opts();
        if (y->as_wb) {                                              // F5
            LA_TRY(la_asentmax_params_forward(d->a, 1, T, C, H, y->as_wb, y->as_bb, y->as_wg, y->as_bg,
                                              d->spec.as_gamma_range, d->beta, d->gamma));
            op.as_beta = d->beta;
            op.as_gamma = d->gamma;
        }
        if (y->logn_s) op.logn_s = y->logn_s;
        la_qknorm_forward(d->qh, d->rstd, d->q_raw, y->qn_g, 1, T, H, D); // F6
        la_qknorm_forward(d->kh, d->rstd, d->k_raw, y->kn_g, 1, T, K, D); // F7
        la_permute_bthd_to_bhtd(d->vh, d->v_raw, 1, T, K, D);            // F8
        LA_TRY(la_kv_append(d->c, l, d->kh, d->vh, T));
        LA_TRY(la_kv_attend(d->c, l, &d->spec, d->qh, T, d->att, NULL, &op)); // F9 over the cache
        la_permute_bhtd_to_bthd(d->y, d->att, 1, T, H, D);               // F10
        la_mm_forward(tm, d->x, d->y, y->wo, N, H * D, C, 1);            // F11: x += y Wo^T
        la_rmsnorm_forward(d->a, d->rstd, d->x, y->ln2_g, N, C);         // F12
        la_mlp_forward(tm, d->x, d->h, d->h, d->a, y->w_fc, y->w_proj, N, C, F); // F13 (h_act aliases h_pre)
    }
    if (logits) {
        const int r0 = all_rows ? 0 : T - 1, rows = T - r0;
        la_rmsnorm_forward(d->a, d->rstd, d->x + (size_t)r0 * C, d->lnf_g, rows, C);
        la_mm_forward(tm, logits, d->a, d->lm_head, rows, C, d->V, 0);
    }
    return LA_OK;
}
