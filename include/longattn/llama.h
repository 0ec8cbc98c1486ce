/*
 * longattn/llama.h -- pretrained Llama-family models from GGUF files (SPEC 9): the model
 * (model layer, src/model/llama.c) and a decoding session over the KV cache (infer layer,
 * src/infer/session.c). Included by longattn.h.
 *
 * Architectures: "llama" (Llama 2/3, Mistral, SmolLM, TinyLlama) and "qwen2" (q/k/v
 * biases). Per layer, x (T, C):
 *     n = RMSNorm(x) * attn_norm;  q = Wq n (+bq), k = Wk n (+bk), v = Wv n (+bv)
 *     x = x + Wo attn(q, k, v)            (GQA, RoPE and scale 1/sqrt(D) inside the kernel)
 *     n = RMSNorm(x) * ffn_norm;   x = x + Wdown (silu(Wgate n) * (Wup n))
 * then RMSNorm * output_norm and logits = output n (token_embd n when the file has no
 * output.weight: tied embeddings). RMSNorm x / sqrt(mean(x^2) + eps), eps from the file.
 *
 * Weights stay in the file's types in the read-only map. Matrix products of few rows
 * (decode) read the quantized blocks directly (la_qmatvec); products of many rows
 * (prefill) dequantize each weight matrix to float32 just before its sgemm into a scratch
 * buffer reused for every matrix (one layer's largest matrix, the output matrix in row
 * chunks), or use float32 copies made at load when la_llama_params.keep_f32 is set.
 * The q and k rows of "llama" files were permuted by ggml's converter for ggml's
 * adjacent-pair RoPE; they are put back at load (per head, row 2i+j -> j*D/2+i), so the
 * library's half-split RoPE (SPEC 3) applies to both architectures.
 */
#ifndef LONGATTN_LLAMA_H
#define LONGATTN_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "attn.h"
#include "gguf.h"
#include "infer.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Architectures la_llama_open accepts (general.architecture). */
#define LA_LLAMA_ARCHS "llama, qwen2"

/* Hyperparameters, from the file's metadata (<arch>.*). */
typedef struct {
    char arch[16];        /* "llama" or "qwen2" */
    int n_layer;          /* <arch>.block_count */
    int n_embd;           /* <arch>.embedding_length (C) */
    int n_ff;             /* <arch>.feed_forward_length */
    int n_head;           /* <arch>.attention.head_count (H) */
    int n_head_kv;        /* <arch>.attention.head_count_kv (default n_head) */
    int head_dim;         /* <arch>.attention.key_length, default n_embd / n_head (D) */
    int n_vocab;          /* rows of token_embd.weight */
    int64_t n_ctx_train;  /* <arch>.context_length */
    int rope_dim;         /* <arch>.rope.dimension_count (default head_dim; must equal it) */
    double rope_base;     /* <arch>.rope.freq_base (default 10000) */
    float rms_eps;        /* <arch>.attention.layer_norm_rms_epsilon */
    int qkv_bias;         /* q/k/v biases present (qwen2) */
    int tied_output;      /* no output.weight: logits use token_embd */
    int qk_permuted;      /* q/k rows were un-permuted at load ("llama") */
    int attn_sinks;       /* per-head sink logits blk.N.attn_sinks present (gpt-oss layout): the
                             spec becomes softmax+sink (issue 31) */
} la_llama_config;

typedef struct {
    int keep_f32;  /* dequantize every weight matrix to float32 at load for prefill
                      (faster prefill, ~4 bytes per parameter more memory); default 0 */
    int gemm_min;  /* products with at least this many rows go through sgemm, fewer
                      through la_qmatvec; default 4 */
    int x_q8;      /* those fewer-row products (decode) quantize x to 8 bits per 32
                      values (la_qmatvec_q8x, as llama.cpp does): faster, less exact;
                      default 0 (issue 27; appended so existing initialisers compile) */
} la_llama_params;

LA_API la_llama_params la_llama_params_default(void);

typedef struct la_llama la_llama; /* opaque */

/* Open path (GGUF), read the hyperparameters and find every tensor. p may be NULL
 * (defaults). Errors: LA_EIO / LA_EFORMAT (file: from la_gguf_open), LA_EUNSUPPORTED
 * (architecture not in LA_LLAMA_ARCHS -- the message lists them --, a tensor type not
 * supported, rope.dimension_count != head_dim), LA_EFORMAT (a missing metadata key or
 * tensor, named; a tensor whose shape disagrees with the hyperparameters), LA_ENOMEM. */
LA_API la_status la_llama_open(const char *path, const la_llama_params *p, la_llama **out);
LA_API void la_llama_free(la_llama *m);

LA_API const la_llama_config *la_llama_get_config(const la_llama *m);
LA_API const la_gguf *la_llama_gguf(const la_llama *m);

/* Bytes the model holds: the tensor data of the file (mapped; pages are read on use),
 * the un-permuted q/k copies, float32 copies (keep_f32) and the prefill scratch. */
LA_API size_t la_llama_weight_bytes(const la_llama *m);

/* Attention spec for this model from text (NULL or "": the default
 * softmax+rope(theta=<file base>)+causal). Any spec la_spec_parse accepts; when the text
 * names no position encoding, rope is used; when a RoPE-family encoding (rope, prope, ntk,
 * dynamic-ntk, yarn) does not give theta, theta is the file's rope.freq_base (not
 * la_spec_parse's 10000). A train left 0 (sigmoid's b = -ln(train), logn's s = 1/log(train))
 * is the file's trained context, n_ctx_train. Errors: those of la_spec_parse /
 * la_spec_validate; LA_ESPEC for asentmax (its per-query scales come from a trained
 * projection that a GGUF file does not hold), a non-softmax spec on a model with attention
 * sinks, or a default train when n_ctx_train < 2. */
LA_API la_status la_llama_spec_parse(const la_llama *m, const char *text, la_spec *out);
/* The spec la_llama_forward uses (initially the default above); train filled in and checked
 * as la_llama_spec_parse does. Errors: LA_EINVAL, those of la_llama_spec_parse; on error the
 * model keeps its spec. */
LA_API la_status la_llama_set_spec(la_llama *m, const la_spec *spec);
LA_API const la_spec *la_llama_spec(const la_llama *m);

/* Tokenizer from the file's tokenizer.ggml.* metadata (la_tokenizer_from_gguf). */
LA_API la_status la_llama_tokenizer(const la_llama *m, la_tokenizer **out);

/* The model as a language model (longattn/model.h): what la_session_new, la_generate and
 * la_perplexity take. Belongs to m (no free). NULL for NULL. */
LA_API la_lm *la_llama_lm(la_llama *m);

/* Forward of T tokens (one sequence, positions 0..T-1) with attention over the T tokens
 * themselves (no cache): logits (T, V) when all_rows, else the last row (1, V).
 * Runs in chunks of max_chunk tokens (<= 0: 512) over an internal KV buffer of T tokens,
 * so memory is O(T) (no T x T buffer). Errors: LA_EINVAL (NULL, T < 1, token outside the
 * vocabulary), LA_ENOMEM, the kernel's. */
LA_API la_status la_llama_forward(la_llama *m, const int32_t *tokens, int64_t T, int max_chunk,
                                  float *logits, int all_rows);

/* Sequence-parallel prefill (issue 30): one sequence of T tokens (positions 0..T-1, no cache)
 * split over the ranks of mpirun, which all call this with the same tokens (collective;
 * one process: the whole sequence). Each rank runs every per-token operation (norms,
 * products, the MLP) on its zigzag share of the rows (2 pieces of whole 64-token tiles;
 * docs/mpi.md) and each layer's attention through the ring (la_attn_sp_forward: the model's
 * spec with its GQA and RoPE at the tokens' absolute positions; every rank ends up holding
 * every key and value, float32). Results, complete on every rank: logits (T, V) when not
 * NULL; nll (T) when not NULL: nll[p] = -log softmax(logits[p])[tokens[p+1]] in double
 * (nll[T-1] = 0). Bitwise the same for any number of ranks (products are cut at multiples
 * of 24 rows, OpenBLAS's row groups; with OpenBLAS on one thread, as longattn runs it). Refused (LA_EUNSUPPORTED): position-regime methods
 * (la_llama_set_posreg); learned sinks (blk.N.attn_sinks) go through the ring. Errors agreed by every rank; LA_EINVAL,
 * LA_ENOMEM, the kernel's. */
LA_API la_status la_llama_prefill_sp(la_llama *m, const int32_t *tokens, int T, float *logits, double *nll);

/* ---- decoding session (infer layer: la_session over la_llama_lm, src/infer/session.c) ---- */

/* la_llama_session is a la_session (longattn/infer.h) over la_llama_lm(m); the functions
 * below are the la_session_* ones under their former names. */
typedef struct la_session la_llama_session;

/* Fill the shape fields of p (n_layers, H, Hkv, D) from the model. */
LA_API la_status la_llama_kv_params(const la_llama *m, la_kv_params *p);

/* Session over m (which must outlive it) with the policy fields of *policy (for full,
 * policy->max_tokens is the longest stream). max_step: the most tokens one step may
 * take, in [1, la_kv_max_chunk]. Errors: LA_EINVAL (NULL, bad policy, bad max_step),
 * LA_ENOMEM. */
LA_API la_status la_llama_session_new(la_llama *m, const la_kv_params *policy, int max_step,
                                      la_llama_session **out);
LA_API void la_llama_session_free(la_llama_session *s);
LA_API void la_llama_session_reset(la_llama_session *s); /* new stream: empties the cache */
LA_API la_kv_cache *la_llama_session_cache(la_llama_session *s);
/* Position-regime extension methods (issue #28, src/model/posreg.c): "selfextend(G,W)",
 * "rerope(W)", "leaky-rerope(W,k)", "dca(C)" / "dca(chunk,local)" replace the attention's
 * single RoPE position map by two or three regimes per query row (the model's RoPE base;
 * the model's spec should be plain RoPE). NULL, "" or "none": off. Needs a full float32
 * cache in a session (la_llama_session_step fails otherwise). Errors: LA_ESPEC (named). */
LA_API la_status la_llama_set_posreg(la_llama *m, const char *text);
/* 1 if text names one of those methods (syntax of the name only). */
LA_API int la_llama_is_posreg(const char *text);

/* Make dst continue exactly where src stands (cache state and position): both sessions of
 * the same model, policy and max_step. A fork of a shared prefix (src/infer/kv_fork.c).
 * Errors: LA_EINVAL (NULL, different model, max_step or cache shape). */
LA_API la_status la_llama_session_copy(la_llama_session *dst, const la_llama_session *src);
/* Tokens appended so far (the stream position of the next token). */
LA_API int64_t la_llama_session_pos(const la_llama_session *s);

/* Run tokens (T) through the model, appending to the cache. logits: (T, V) if all_rows,
 * else (1, V) for the last token only; may be NULL. Errors: LA_EINVAL (NULL, T outside
 * [1, max_step], token outside the vocabulary, a full cache out of room: the message
 * says how many tokens it holds), others from the kernel. */
LA_API la_status la_llama_session_step(la_llama_session *s, const int32_t *tokens, int T,
                                       float *logits, int all_rows);

/* ---- chat templates ---- */

/* Template families recognised from tokenizer.chat_template (no Jinja engine). */
typedef enum {
    LA_CHAT_CHATML = 1, /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen) */
    LA_CHAT_LLAMA2,     /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] */
    LA_CHAT_LLAMA3      /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
} la_chat_family;

/* Family of a template text. Errors: LA_EINVAL (NULL template: the file has none),
 * LA_EUNSUPPORTED (not one of the families: the message quotes its start and names the
 * recognised ones). */
LA_API la_status la_chat_family_of(const char *chat_template, la_chat_family *out);

/* The prompt text for one user message (and an optional system message; NULL: the
 * template's own default system message if it writes one, else none), ending with the
 * assistant header, for the tokenizer with LA_TOK_PARSE_SPECIAL. *out malloc'ed
 * (free() it). stop: the text of the end-of-turn token ("<|im_end|>", "</s>" or
 * "<|eot_id|>"), a static string. Errors: those of la_chat_family_of, LA_ENOMEM. */
LA_API la_status la_chat_apply(const char *chat_template, const char *system, const char *user,
                               char **out, const char **stop);

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_LLAMA_H */
