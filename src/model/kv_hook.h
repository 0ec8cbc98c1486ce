/* kv_hook.h -- the models' block forward over a KV cache (layer model; the interface
 * src/infer uses, through la_lm: model/lm.h). The model owns the transformer block; the
 * cache owner (the decoding session, src/infer/session.c) plugs into the attention
 * sub-layer through this hook instead of re-implementing it. */
#ifndef LA_MODEL_KV_HOOK_H
#define LA_MODEL_KV_HOOK_H

#include <stdint.h>

#include "longattn/llama.h" /* la_llama */
#include "longattn/model.h"

/* What the attention sub-layer of block `layer` calls, for one sequence (B = 1) of T new
 * tokens, in place of attending over those T tokens alone: append their keys and values
 * kh, vh (Hkv, T, D) (after QK-norm, positions not applied: the kernel applies them) to
 * the cache, then att (H, T, D) = attention of the queries qh (H, T, D) over everything the
 * cache keeps, under spec with op (the model's logn s_h and ASEntmax beta/gamma, n_threads;
 * op->ws NULL: the hook's own workspace). */
typedef struct {
    la_status (*append_attend)(void *ctx, int layer, const la_spec *spec, const float *qh,
                               const float *kh, const float *vh, int T, float *att,
                               const la_attn_opts *op);
    void *ctx;
} la_model_kv_hook;

/* What a sequence-parallel prefill (issue 30) hands the cache owner after each layer's
 * ring, instead of attending through it: the keys and values kh, vh (Hkv, T, D) of the
 * whole sequence (every rank's rows; positions not applied), to append as they are. */
typedef struct {
    la_status (*append)(void *ctx, int layer, const float *kh, const float *vh, int T);
    void *ctx;
} la_model_kv_keep;

/* T new tokens (one sequence) through the embedding, every block (the same block forward
 * as la_model_forward / la_model_eval, attention through hook) and the head: logits
 * (T, V) when all_rows, else only the last row (1, V); logits may be NULL. Uses the
 * model's evaluation buffers (one call at a time per model; la_model_eval in between is
 * fine: a step keeps no state outside the hook's cache). Errors: LA_EINVAL (NULL model,
 * hook or tokens, T < 1, token outside the vocabulary), LA_ENOMEM, the hook's. */
la_status la_model_forward_cached(la_model *m, const int32_t *tokens, int T,
                                  const la_model_kv_hook *hook, float *logits, int all_rows);

/* The same for a Llama-family model read from GGUF (src/model/llama.c; its la_lm forward): T new tokens (one sequence) through the embedding, every
 * block (attention through hook: qh (H, T, D), kh, vh (Hkv, T, D) un-rotated, att
 * (H, T, D)) and the head: logits (T, V) when all_rows, else the last row (1, V); logits
 * may be NULL. Uses the model's step buffers (one call at a time per model). Errors:
 * LA_EINVAL (NULL, T < 1, token outside the vocabulary), LA_ENOMEM, the hook's. */
la_status la_llama_forward_cached(la_llama *m, const int32_t *tokens, int T, const la_model_kv_hook *hook,
                                  float *logits, int all_rows);

/* la_llama_prefill_sp (include/longattn/llama.h) that also hands each layer's keys and
 * values to keep (NULL: none) and writes the last row's logits (V) into last (NULL: not
 * wanted) on every rank; logits (T, V) and nll as there, each may be NULL. Collective. */
la_status la_llama_prefill_sp_keep(la_llama *m, const int32_t *tokens, int T, float *logits, float *last,
                                   double *nll, const la_model_kv_keep *keep);

/* The model's position-regime method (src/model/posreg.c) or NULL. */
struct la_posreg *la_llama_posreg(const la_llama *m);

/* Seconds spent in matrix products / attention since the Llama model was opened. */
void la_llama_timing(const la_llama *m, double *mm_s, double *attn_s);

#endif
