/* llama_internal.h -- the Llama-family forward over a KV-cache hook (model layer; used by
 * src/infer/llama_session.c). Same hook type as the GPT's (model/kv_hook.h): the model
 * owns the block, the cache owner plugs into its attention sub-layer. */
#ifndef LA_MODEL_LLAMA_INTERNAL_H
#define LA_MODEL_LLAMA_INTERNAL_H

#include "model/kv_hook.h"

/* T new tokens (one sequence) through the embedding, every block (attention through
 * hook: qh (H, T, D), kh, vh (Hkv, T, D) un-rotated, att (H, T, D)) and the head: logits
 * (T, V) when all_rows, else the last row (1, V); logits may be NULL. Uses the model's
 * step buffers (one call at a time per model). Errors: LA_EINVAL (NULL, T < 1, token
 * outside the vocabulary), LA_ENOMEM, the hook's. */
la_status la_llama_forward_cached(la_llama *m, const int32_t *tokens, int T, const la_model_kv_hook *hook,
                                  float *logits, int all_rows);

/* Seconds spent in matrix products / attention since the model was opened. */
void la_llama_timing(const la_llama *m, double *mm_s, double *attn_s);

#endif
