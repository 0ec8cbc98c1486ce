/*
 * longattn/model.h -- the GPT model: config, forward / backward / evaluation, attention
 * diagnostics of a text, safetensors weights (layer model).
 */
#ifndef LONGATTN_MODEL_H
#define LONGATTN_MODEL_H

#include "attn.h"
#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* GPT model (SPEC 7)                                                       */
/* ======================================================================== */

/* Decoder-only transformer (SPEC 7), the baseline of the scale-invariant attention paper:
 *   x = wte[token]                                     (B, T, C)   no absolute positions
 *   per layer l:  a = RMSNorm(x; ln1_g)
 *                 q = a Wq^T (B,T,H,D)  k = a Wk^T, v = a Wv^T (B,T,Hkv,D)
 *                 q = RMSNorm_D(q; q_norm_g)  k = RMSNorm_D(k; k_norm_g)   (QK-norm, per head)
 *                 y = la_attn_forward(spec, q, k, v)   (B,H,T,D), logn s_h / ASEntmax beta,gamma
 *                 x = x + y Wo^T
 *                 x = x + Wproj relu(Wfc RMSNorm(x; ln2_g))^2       (ReLU^2 MLP)
 *   logits = RMSNorm(x; lnf_g) lm_head^T               (B, T, V)   lm_head is NOT tied to wte
 * RMSNorm: x / sqrt(mean(x^2) + 1e-6) * g (no bias, no mean subtraction). No linear
 * layer has a bias. C = d_model, D = d_model / n_head, F = d_ff.
 * Training windows start at position 0; evaluation may use any T (memory O(T)). */

/* Longest attention spec text a model config holds (including the NUL). */
#define LA_SPEC_TEXT_MAX 256

typedef struct {
    int n_layer;       /* transformer blocks, >= 1. default 4 */
    int n_head;        /* query heads H, >= 1, divides d_model. default 4 */
    int n_kv_head;     /* key/value heads Hkv, divides n_head (GQA); 0 -> n_head. default 0 */
    int d_model;       /* residual width C. default 128 */
    int d_ff;          /* MLP hidden width F; 0 -> 4 * d_model. default 0 */
    int vocab;         /* V: 256 for bytes, 50257 for GPT-2 shards. default 256 */
    int train_len;     /* training context L_train: initialises logn s_h = 1/log(L_train) and
                          is passed to the spec's train_len if the spec leaves it 0. default 128 */
    float init_std;    /* std of the normal init of matrices; output projections (Wo, Wproj)
                          are scaled by 1/sqrt(2*n_layer). default 0.02 */
    char spec[LA_SPEC_TEXT_MAX]; /* attention spec text (SPEC 6), parsed by la_model_new.
                          default "softmax+rope+causal" */
    float qk_gain;     /* initial value of the QK-norm gains (q_norm.g, k_norm.g). With QK-norm
                          a logit is at most qk_gain^2 * sqrt(D) (unit-RMS q and k, S = q.k/sqrt(D)):
                          5.7 at D = 32 and gain 1, too flat to put most of the attention on one key
                          of 128, which retrieval (passkey, induction) needs; larger values start
                          sharper (cf. Henry et al. 2020, QK-norm with a learned scale). Only the
                          initialisation: a checkpoint carries the learned gains. default 1 */
} la_model_config;

LA_API la_model_config la_model_config_default(void);

/* A GPT model: parameters, gradients, activation buffers (opaque). */
typedef struct la_model la_model;

/* Build a model with parameters drawn from la_rng seeded with `seed` (same seed, same
 * weights on every machine). Gains start at 1, logn s_h at 1/log(train_len).
 * Errors: LA_EINVAL (NULL, a size < 1, n_head not dividing d_model, n_kv_head not
 * dividing n_head, odd head size with a RoPE-family spec), LA_ESPEC (bad spec text,
 * message from la_spec_parse), LA_ENOMEM. *out is NULL on error. */
LA_API la_status la_model_new(const la_model_config *cfg, uint64_t seed, la_model **out);

/* la_model_new's checks of cfg, without building anything (a command line checks its
 * options before it makes folders or reads data). Same errors, except LA_ENOMEM. */
LA_API la_status la_model_config_validate(const la_model_config *cfg);
LA_API void la_model_free(la_model *m);

/* The config the model was built with (spec text in canonical form). */
LA_API const la_model_config *la_model_get_config(const la_model *m);
/* The parsed attention spec the model runs. */
LA_API const la_spec *la_model_spec(const la_model *m);

/* Number of float parameters (= length of la_model_params and la_model_grads). */
LA_API size_t la_model_num_params(const la_model *m);
/* All parameters in one contiguous float array (writable: optimisers update it in place),
 * and the gradients in a second array of the same layout. */
LA_API float *la_model_params(la_model *m);
LA_API float *la_model_grads(la_model *m);

/* The parameters as named tensors, in storage order (used by checkpoints and Muon).
 * Names: "wte", "h.<l>.ln1.g", "h.<l>.attn.wq", "h.<l>.attn.wk", "h.<l>.attn.wv",
 * "h.<l>.attn.q_norm.g", "h.<l>.attn.k_norm.g", "h.<l>.attn.wo", "h.<l>.attn.logn_s" (logn
 * only), "h.<l>.attn.sinks" (H sink logits, softmax+sink only, initialised to 0), "h.<l>.attn.as_wb", "h.<l>.attn.as_bb", "h.<l>.attn.as_wg", "h.<l>.attn.as_bg"
 * (asentmax only), "h.<l>.ln2.g", "h.<l>.mlp.w_fc", "h.<l>.mlp.w_proj", "lnf.g", "lm_head". */
typedef enum {
    LA_PCLASS_EMBED = 0, /* wte, lm_head: AdamW even under Muon */
    LA_PCLASS_MATRIX,    /* 2-D hidden weights (wq, wk, wv, wo, w_fc, w_proj): Muon-eligible */
    LA_PCLASS_GAIN,      /* norm gains (no weight decay) */
    LA_PCLASS_SCALAR     /* logn s_h, sink logits, ASEntmax coefficient weights and biases (no weight decay) */
} la_param_class;

typedef struct {
    const char *name;   /* see above; valid while the model lives */
    int ndim;           /* 1 or 2 */
    int64_t shape[2];   /* (rows, cols) for matrices: out_features x in_features */
    size_t offset;      /* index of the first float in la_model_params / la_model_grads */
    size_t numel;
    la_param_class pclass;
} la_tensor_info;

LA_API int la_model_num_tensors(const la_model *m);
/* Errors: LA_EINVAL if i is out of range. */
LA_API la_status la_model_get_tensor(const la_model *m, int i, la_tensor_info *info);

/* Training forward pass. Keeps every activation la_model_backward needs.
 *   tokens:  (B, T) int32 in [0, V)
 *   targets: (B, T) int32 next tokens; entries < 0 are ignored (no loss, no gradient).
 *            NULL: no loss is computed (logits only; backward is then an error).
 *   mean_loss:      mean cross-entropy (nats) over the counted targets (0 when none); may be NULL
 *   loss_per_token: (B, T) cross-entropy per position (0 where ignored), or NULL
 * Activation buffers grow when B*T grows and are reused otherwise (no per-step allocation).
 * Memory: O(n_layer * B * T * (C + F)) + B*T*V for the logits.
 * Errors: LA_EINVAL (NULL, B or T < 1, token out of range), LA_ENOMEM, attention errors. */
LA_API la_status la_model_forward(la_model *m, const int32_t *tokens, const int32_t *targets,
                                  int B, int T, float *mean_loss, float *loss_per_token);

/* Backward of the last la_model_forward (gradient of its mean_loss), ACCUMULATED into
 * la_model_grads (call la_model_zero_grad first). Errors: LA_EINVAL if no training
 * forward with targets preceded it, or la_model_eval ran in between. */
LA_API la_status la_model_backward(la_model *m);

/* Set every gradient to 0. */
LA_API void la_model_zero_grad(la_model *m);

/* Logits (B, T, V) of the last la_model_forward; NULL before the first forward, after
 * la_model_eval (which does not keep them) and after la_model_backward (which turns them
 * into gradients in place). */
LA_API const float *la_model_logits(const la_model *m);

/* Evaluation (no-grad) forward for long contexts: keeps one layer's activations at a
 * time and computes the LM head in chunks of rows, so memory is
 * O(B * T * (C + F + H)) + O(chunk * V), independent of n_layer and never B*T*V.
 * B = 1, T = 65536 bytes with C = 128, F = 512 needs about 0.5 GB.
 *   tokens, targets, mean_loss, loss_per_token: as la_model_forward (targets may be NULL)
 *   argmax:      (B, T) int32 greedy prediction of the next token at each position, or NULL
 *                (greedy decoding of an answer = teacher-forced argmax at its positions)
 *   last_logits: (B, V) logits of position T-1 of each sequence, or NULL
 * Results equal la_model_forward's up to float rounding. Invalidates la_model_backward.
 * Errors: as la_model_forward. */
LA_API la_status la_model_eval(la_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                               float *mean_loss, float *loss_per_token, int32_t *argmax,
                               float *last_logits);

/* Attention diagnostics of one text (SPEC 8): the no-grad forward of la_model_eval on
 * tokens (T, one sequence, B = 1) and, after every layer's attention, that layer's
 * attention probabilities (recomputed tile by tile from the layer's q, k after QK-norm and
 * the kernel's row statistics, la_attn_diagnose) streamed into diag[l * n_head + h].
 *   diag: (n_layer * n_head) accumulators (la_diag_new, attn.h) with max_dist >= T - 1; rows are
 *         added to what they hold. No LM head is computed.
 * Memory as la_model_eval (O(T * (C + F + H)), no T x T buffer); time about twice that of
 * la_model_eval (the attention is computed, then recomputed for the probabilities).
 * Invalidates la_model_backward.
 * Errors: those of la_model_eval (LA_EINVAL bad tokens), LA_EINVAL (diag NULL, an
 * accumulator NULL or with max_dist < T - 1), those of la_attn_diagnose. */
LA_API la_status la_model_diagnose(la_model *m, const int32_t *tokens, int T, la_diag **diag);

/* la_model_diagnose restricted to sel's rows (token positions, la_diag_rows in attn.h): only
 * those rows go into the accumulators, and sel->mass (n_layer, n_head, n_rows, n_spans)
 * receives each chosen row's attention mass on each key span [k0, k1) of token positions,
 * per layer and head. sel NULL is la_model_diagnose. Errors: those of la_model_diagnose and
 * of la_attn_diagnose_rows's selection checks (against T). */
LA_API la_status la_model_diagnose_rows(la_model *m, const int32_t *tokens, int T, const la_diag_rows *sel,
                                        la_diag **diag);

/* Threads for the attention kernels of this model (la_attn_opts.n_threads); 0 (the default)
 * means the OpenMP default. Calls with under ~2M multiply-adds always use one thread.
 * la_trainer_new applies la_train_config.n_threads when it is > 0. */
LA_API void la_model_set_threads(la_model *m, int n_threads);
/* Sequence parallelism (issue 30; off by default): with on != 0, la_model_forward (with
 * targets) and la_model_backward run as one call of every rank of the current MPI process
 * group (the trainer's sequence group of "seq_parallel" ranks), which all pass the same
 * tokens: each rank computes its zigzag share of every sequence's rows (src/attn/ring.h),
 * the attention goes through the ring, and each weight gradient is computed from every
 * rank's rows as one process computes it; loss and gradients are then bitwise one
 * process's, on every rank (with OpenBLAS on one thread, as longattn runs it). T must hold 2 x ranks 64-token tiles; ASEntmax and learned sinks
 * are refused (LA_EINVAL, agreed by every rank). One rank, or la_model_eval: no effect. */
LA_API void la_model_set_seq_parallel(la_model *m, int on);
/* Precision of the model's matrix products and attention inputs (issue 29): LA_DTYPE_F32
 * (default) or LA_DTYPE_BF16. bf16: every operand of a forward and backward matrix product
 * (activations, weights, output gradients) is rounded to bf16 (nearest even) and the
 * products accumulate in float32; the fused attention reads bf16-rounded q, k, v and dO
 * (bitwise la_attn_forward_typed / la_attn_backward_typed with LA_DTYPE_BF16) and keeps
 * float32 statistics. Parameters, gradients, embeddings, norms, softmax / entmax thresholds
 * and the loss stay float32 (the optimiser updates float32 master weights). Generation
 * through a KV cache (la_model_forward_cached) keeps float32 attention inputs. This build
 * has one bf16 path on every CPU: operands rounded in float32 arrays and Debian OpenBLAS's
 * float32 sgemm (exact: a product of two bf16 values is exact in float32), slower than
 * float32 (la_cpu_features says whether the CPU has AVX512-BF16; no native bf16 GEMM is
 * used even then). Not saved with the model. Errors: LA_EINVAL (NULL, another type),
 * LA_ENOMEM (the operand copies: about the largest product's operands). */
LA_API la_status la_model_set_precision(la_model *m, la_dtype precision);
LA_API la_dtype la_model_get_precision(const la_model *m);

/* Hand back every activation buffer (they are reallocated on the next forward). */
LA_API void la_model_release_buffers(la_model *m);

/* Time spent inside la_attn_forward/backward and in cblas_sgemm since the model was built
 * or the counters were reset (seconds, wall clock). For `longattn bench train`. */
typedef struct { double attn_s, matmul_s, total_s; } la_model_timing;
LA_API void la_model_get_timing(const la_model *m, la_model_timing *t);
LA_API void la_model_reset_timing(la_model *m);

/* Weights as safetensors (little-endian u64 header length, JSON header with dtype "F32",
 * shape, data_offsets per tensor named as la_model_get_tensor; "__metadata__" holds the
 * config as strings: format "longattn-gpt-1", n_layer, n_head, n_kv_head, d_model, d_ff,
 * vocab, train_len, spec). Written atomically. Errors: LA_EIO. */
LA_API la_status la_model_save(const la_model *m, const char *path);

/* Build a model from a safetensors file written by la_model_save (config and spec from
 * its metadata). Errors: LA_EIO (missing file), LA_EFORMAT (not safetensors, truncated,
 * wrong dtype/shape/offsets, missing tensor or metadata; the message says which),
 * LA_ESPEC (bad spec in metadata), LA_ENOMEM. */
LA_API la_status la_model_load(const char *path, la_model **out);

/* ---- one language-model interface (issue 32) ---- */

/* A language model seen through the interface the decoding session (la_session_new,
 * longattn/infer.h), la_generate and la_perplexity use, whatever its family: the
 * byte-level GPT (la_model_lm) and the GGUF Llama-family model (la_llama_lm,
 * longattn/llama.h). Opaque; it belongs to its model (no free, valid while the model
 * lives). Inside: the vocabulary, the context length, the KV cache's shape and the
 * model's block forward over new tokens with the KV-cache hook (src/model/lm.h). */
typedef struct la_lm la_lm;

/* The GPT as a la_lm (NULL for NULL). */
LA_API la_lm *la_model_lm(la_model *m);
/* Vocabulary size V (0 for NULL). */
LA_API int la_lm_vocab(const la_lm *lm);
/* Trained context length: the GPT's train_len, a GGUF file's context_length (0 for NULL). */
LA_API int64_t la_lm_context(const la_lm *lm);
/* The attention spec the model's blocks run (NULL for NULL). */
LA_API const la_spec *la_lm_spec(const la_lm *lm);
/* "gpt" or "llama" (NULL for NULL). */
LA_API const char *la_lm_family(const la_lm *lm);

/* ---- deprecated names: kept so existing programs compile (with a warning naming
 * the replacement); see the naming rule in longattn.h ---- */

LA_DEPRECATED("use la_model_config_default") static inline la_model_config la_model_default_config(void) {
    return la_model_config_default();
}
LA_DEPRECATED("use la_model_get_tensor") static inline la_status la_model_tensor(const la_model *m, int i, la_tensor_info *info) {
    return la_model_get_tensor(m, i, info);
}

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_MODEL_H */
