/*
 * longattn.h -- the public C API of longattn (umbrella header: includes every module).
 *
 * longattn is a C library for long-context attention: fused, tiled CPU attention
 * (forward and backward, O(T*D + S*D) memory) with the logit transforms,
 * normalisers, position encodings and visibility patterns of the papers listed in
 * shared/SPEC.md, plus a small GPT model, trainer, evaluation tasks and a KV cache.
 *
 * Modules, one header each under longattn/, in layer order (a module header includes only
 * the headers of lower layers it needs); a program may include this header or only the
 * modules it uses:
 *   longattn/core.h         la_status, la_status_name, la_errmsg, la_version, LA_API,
 *                           LA_VERSION_*
 *   longattn/io.h           la_npy_*                    NumPy .npy files
 *   longattn/gguf.h         la_gguf_*, la_ggml_*, la_qmatvec   GGUF files, ggml tensor
 *                           types, quantized matrix-vector products
 *   longattn/tokenizer.h    la_tokenizer_*, la_token_*  tokenizers from GGUF vocabularies
 *   longattn/attn.h         la_spec_*, la_attn_*, la_workspace_*, la_rope_*, la_alibi_*,
 *                           la_sinv_*, la_sparsemax_*, la_entmax15_*, la_entmax_bisect_*,
 *                           la_asentmax_*, la_diag_* (attention statistics accumulator)
 *   longattn/model.h        la_model_*                  the GPT
 *   longattn/train.h        la_data_*, la_train_*, la_trainer_*
 *   longattn/infer.h        la_kv_*, la_sample_*, la_decoder_*
 *   longattn/experiments.h  la_docs_*, la_eval_*, la_passkey_*, la_study_*, la_task_*,
 *                           la_critical_*, la_diag_gaussian
 *
 * Naming rule: every public symbol starts with la_ followed by its module prefix above;
 * every public function is declared LA_API (the library is built with hidden visibility,
 * tests/test_exports.c checks both); macros and enum constants start with LA_.
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

#endif /* LONGATTN_H */
