/*
 * longattn.h -- the public C API of longattn (umbrella header: includes every module).
 *
 * longattn is a C library for long-context attention: fused, tiled CPU attention
 * (forward and backward, O(T*D + S*D) memory) with the logit transforms,
 * normalisers, position encodings and visibility patterns of the papers listed in
 * shared/SPEC.md, plus a small GPT model, trainer, evaluation tasks and a KV cache.
 *
 * Modules, one header each under longattn/, in layer order core -> io -> tokenizer -> attn
 * -> model -> train / infer -> experiments (a module header includes only the headers of
 * lower layers it needs); a program may include this header or only the modules it uses:
 *   longattn/core.h         la_status, la_status_name, la_errmsg, la_version, LA_API,
 *                           LA_DEPRECATED, LA_VERSION_*
 *   longattn/io.h           la_npy_*                    NumPy .npy files
 *   longattn/gguf.h         la_gguf_*, la_ggml_*, la_qmatvec   GGUF files, ggml tensor
 *                           types, quantized matrix-vector products (layer io)
 *   longattn/tokenizer.h    la_tokenizer_*, la_token_*  tokenizers from GGUF vocabularies
 *   longattn/attn.h         la_spec_*, la_attn_*, la_workspace_*, la_rope_*, la_alibi_*,
 *                           la_sinv_*, la_sparsemax_*, la_entmax15_*, la_entmax_bisect_*,
 *                           la_asentmax_*, la_diag_* (attention statistics accumulator)
 *   longattn/model.h        la_model_*                  the GPT
 *   longattn/train.h        la_data_*, la_train_*, la_trainer_*
 *   longattn/infer.h        la_kv_*, la_sample_*, la_decoder_*
 *   longattn/experiments.h  la_docs_*, la_eval_*, la_passkey_*, la_study_*, la_task_*,
 *                           la_synth_*, la_kv_eval_*, la_critical_*, la_diagnose_*,
 *                           la_diag_gaussian
 *   longattn/llama.h        la_llama_*, la_chat_*       pretrained Llama-family GGUF
 *                           models (model and infer layers: after infer.h)
 *
 * Naming rule (new API follows it; tests/test_exports.c checks the first point):
 *   - Every public function starts with la_ and its module prefix above and is declared
 *     LA_API (the library is built with hidden visibility: nothing else is exported);
 *     types are la_<name>, macros and enum constants LA_<NAME>.
 *   - Default constructor of a parameter struct: la_<type>_default(), named after the type
 *     without la_: la_attn_opts_default(), la_model_config_default(), la_kv_params_default(),
 *     la_spec_default(). Objects are made by a function that returns la_status and the
 *     object through its last argument (la_model_new(cfg, seed, &m), la_data_open(path,
 *     cfg, &d)) and released by la_<type>_free().
 *   - Getters: la_<obj>_<noun>(const la_<obj> *o, ...) returns the value
 *     (la_model_spec, la_kv_len, la_decoder_cache). They are la_<obj>_get_<noun>(o, ..., out)
 *     instead when the value is written through an out pointer (la_model_get_timing,
 *     la_model_get_tensor, la_diag_get_range_edges, la_task_get_vocab, la_gguf_get_u32) or
 *     when la_<obj>_<noun> is already a type name, since C shares one namespace between
 *     types and functions (la_model_get_config, la_kv_get_params); a setter is then
 *     la_<obj>_set_<noun> (la_data_get_state / la_data_set_state).
 *   - Callbacks take the user pointer FIRST: (void *user, args...) (la_trainer_progress_fn,
 *     la_study_progress_fn, la_token_loss_fn); the function registering one takes
 *     (..., fn, user).
 *   Old spellings (la_attn_default_opts, la_model_default_config, la_train_run with its
 *   user-last callback, la_model_tensor, la_task_vocab_of, la_tokenizer_vocab_init, ...)
 *   still compile: each module header ends with static inline aliases marked
 *   LA_DEPRECATED, whose warning names the replacement.
 *
 * Every function that can fail returns la_status. On failure la_errmsg() returns a
 * thread-local message that names the problem and the fix. The library never prints
 * and never calls exit().
 */
#ifndef LONGATTN_H
#define LONGATTN_H

/* kept for programs written against the single header, which included these */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "longattn/core.h"
#include "longattn/io.h"
#include "longattn/gguf.h"
#include "longattn/tokenizer.h"
#include "longattn/attn.h"
#include "longattn/model.h"
#include "longattn/train.h"
#include "longattn/infer.h"
#include "longattn/experiments.h"
#include "longattn/llama.h"
#include "longattn/longeval.h"

#endif /* LONGATTN_H */
