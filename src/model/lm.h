/* lm.h -- one language-model interface (issue 32; layer model): what a decoding session
 * (src/infer/session.c) needs from a model, whatever its family. ggml-style: the public
 * handle la_lm is opaque (include/longattn/model.h); here is its small vtable. Each model
 * embeds one la_lm and hands it out (la_model_lm, src/model/gpt.c; la_llama_lm,
 * src/model/llama.c): no allocation, it lives as long as the model. */
#ifndef LA_MODEL_LM_H
#define LA_MODEL_LM_H

#include <stdint.h>

#include "longattn/model.h"
#include "model/kv_hook.h"

struct la_posreg;

typedef struct {
    const char *family; /* "gpt", "llama" */
    /* T new tokens (one sequence, checked against the vocabulary by the caller) through the
     * embedding, every block (attention through hook) and the head: logits (T, V) when
     * all_rows, else the last row (1, V); logits may be NULL (la_model_forward_cached,
     * la_llama_forward_cached) */
    la_status (*forward)(void *model, const int32_t *tokens, int T, const la_model_kv_hook *hook, float *logits,
                         int all_rows);
    const la_spec *(*spec)(const void *model);
    /* the model's position-regime method (src/model/posreg.c) or NULL; NULL function: none */
    struct la_posreg *(*posreg)(const void *model);
    /* sequence-parallel prefill (issue 30; collective under mpirun) of T tokens at positions
     * 0..T-1 that hands every layer's keys and values to keep (la_llama_prefill_sp_keep);
     * NULL function: the family has none */
    la_status (*prefill_sp)(void *model, const int32_t *tokens, int T, const la_model_kv_keep *keep, float *last,
                            double *nll);
} la_lm_ops;

struct la_lm {
    const la_lm_ops *ops;
    void *model;
    int vocab;            /* V */
    int64_t n_ctx;        /* trained context length */
    int n_layers, H, Hkv, D; /* the KV cache's shape: blocks, query heads, kv heads, head size */
};

/* The model's position-regime method or NULL. */
static inline struct la_posreg *la_lm_posreg(const la_lm *lm) {
    return lm->ops->posreg ? lm->ops->posreg(lm->model) : NULL;
}

#endif
