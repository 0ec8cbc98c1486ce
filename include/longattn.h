/*
 * longattn.h -- the one public header of longattn.
 *
 * longattn is a C library for long-context attention: fused, tiled CPU attention
 * (forward and backward, O(T*D + S*D) memory) with the logit transforms,
 * normalisers, position encodings and visibility patterns of the papers listed in
 * shared/SPEC.md, plus a small GPT model, trainer, evaluation tasks and a KV cache.
 *
 * Conventions (SPEC section 1):
 *   - float32, row-major. q is (B, H, T, D); k, v are (B, Hkv, S, D) with H % Hkv == 0
 *     (grouped-query attention: query head h reads kv head h / (H / Hkv)); out is (B, H, T, D).
 *   - Key j sits at position j (0-based). Query i sits at position pos0 + i. By default
 *     pos0 = S - T ("bottom-right" alignment: the last query sees the last key), which is
 *     the decoding convention.
 *   - Distance t = p_q - p_k; causal attention allows t >= 0.
 *   - A query row with no visible key returns out = 0, the row statistic -INFINITY
 *     (LA_ROW_EMPTY) and exactly zero gradients.
 *
 * Every function that can fail returns la_status. On failure la_errmsg() returns a
 * thread-local message that names the problem and the fix. The library never prints
 * and never calls exit().
 *
 * Module prefixes: la_spec_* (spec strings), la_attn_* (kernels), la_rope_* and la_alibi_*
 * (positions), la_entmax_* / la_sparsemax_* (row normalisers), la_model_* (GPT),
 * la_train_* (trainer), la_kv_* (KV cache), la_npy_* (NumPy files).
 */
#ifndef LONGATTN_H
#define LONGATTN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* Status codes                                                             */
/* ======================================================================== */

typedef enum {
    LA_OK = 0,
    LA_EINVAL,        /* an argument has a bad value (NULL pointer, negative size, ...) */
    LA_ESHAPE,        /* tensor shapes do not agree with each other */
    LA_ESPEC,         /* an attention spec string could not be parsed */
    LA_ENOMEM,        /* an allocation failed */
    LA_EIO,           /* the operating system refused a file operation */
    LA_EFORMAT,       /* a file exists but its content is malformed */
    LA_EUNSUPPORTED,  /* a valid request this build does not support */
    LA_EINTERRUPTED,  /* the operation was interrupted (e.g. SIGINT); state was saved */
    LA_ENUMERIC       /* a numerical failure (non-finite loss, no convergence) */
} la_status;

/* Short stable name of a status code, e.g. "LA_ESHAPE". Never NULL. */
const char *la_status_name(la_status s);

/* Message of the last error raised on this thread ("" if none). Valid until the next
 * failing call on the same thread. */
const char *la_errmsg(void);

/* ======================================================================== */
/* Attention spec (SPEC sections 2-6)                                       */
/* ======================================================================== */

/* Normaliser (SPEC 5). */
typedef enum {
    LA_NORM_SOFTMAX = 0, /* online-softmax, flash-attention style */
    LA_NORM_ENTMAX,      /* alpha-entmax, alpha > 1 (Peters et al. 2019) */
    LA_NORM_SPARSEMAX,   /* alpha = 2 (Martins & Astudillo 2016) */
    LA_NORM_ASENTMAX     /* adaptive-scalable entmax (Vasylenko et al. 2025) */
} la_norm;

/* Position encoding (SPEC 3). */
typedef enum {
    LA_POS_NOPE = 0,
    LA_POS_ROPE,        /* half-split pairs, omega_k = theta^(-2k/D) */
    LA_POS_PROPE,       /* p-RoPE (Barbero et al. 2025) */
    LA_POS_NTK,         /* NTK-aware base theta * s^(D/(D-2)) */
    LA_POS_DYNAMIC_NTK, /* NTK applied only when context > train_len */
    LA_POS_YARN,        /* YaRN (Peng et al. 2023) */
    LA_POS_ALIBI,       /* additive bias -m_h * t (Press et al. 2022) */
    LA_POS_NAPE         /* first half of heads ALiBi, rest NoPE (Vasylenko et al. 2025) */
} la_pos;

/* Logit transform applied to the base score S (SPEC 4). */
typedef enum {
    LA_XF_NONE = 0,
    LA_XF_LOGN,      /* s_h * log(n_q) * S, s_h learnable per head (SSMax) */
    LA_XF_QWEN_LOGN, /* max(1, log(p+1)/log(L_train)) * S, inference only */
    LA_XF_SINV,      /* a_t * S + m_t (scale-invariant attention, Anson et al. 2025) */
    LA_XF_CRITICAL,  /* gamma * log(n_q) * S (Chen et al. 2025) */
    LA_XF_TEMP       /* constant multiplier */
} la_xform;

/* Visibility pattern (SPEC 2). */
typedef enum {
    LA_PAT_CAUSAL = 0, /* keys 0..p */
    LA_PAT_WINDOW,     /* keys p-w+1..p */
    LA_PAT_SINKS,      /* keys 0..n-1 and p-w+1..p (StreamingLLM) */
    LA_PAT_GLOBAL,     /* window(w) plus g global tokens (Longformer), see la_spec.global */
    LA_PAT_FULL        /* all keys, non-causal */
} la_pattern;

/* A whole attention configuration. Obtain one from la_spec_default() or
 * la_spec_parse(); fields not used by the chosen kinds keep their defaults. */
typedef struct {
    la_norm norm;
    double alpha;          /* entmax / asentmax alpha (> 1); 2 for sparsemax. default 1.5 */
    double as_delta;       /* asentmax delta, default 1 */
    double as_gamma_range; /* asentmax gamma_range, default 2 */

    la_pos pos;
    double theta;          /* RoPE base, default 10000 */
    double rope_p;         /* p-RoPE fraction p in [0,1], default 0.5 */
    double pos_scale;      /* s of ntk / dynamic-ntk / yarn, default 1 */
    int    train_len;      /* L_train of dynamic-ntk / yarn / qwen-logn / logn init, default 0 (unset) */
    double beta_fast;      /* yarn, default 32 */
    double beta_slow;      /* yarn, default 1 */

    la_xform xform;
    double logn_s;         /* logn initial s_h; 0 means 1/log(train_len) */
    double tau;            /* sinv tau, default 10 */
    double gamma;          /* critical gamma, default 1 */
    double temp;           /* temp multiplier, default 1 */

    la_pattern pattern;
    int window;            /* w of window / sinks / global */
    int sinks;             /* n of sinks */
    int global;            /* g of global */
} la_spec;

/* softmax + nope + none + causal with every parameter at its documented default. */
la_spec la_spec_default(void);

/* Parse a spec string such as "softmax+sinv(tau=10)+prope(p=0.5)+causal" (SPEC 6).
 * Tokens are joined by '+', at most one per category (normaliser, position, transform,
 * pattern; global(g) combines with window(w)); missing categories take defaults.
 * Errors: LA_ESPEC with la_errmsg() naming the offending token and listing the valid
 * choices; LA_EINVAL if text or out is NULL. On error *out is untouched. */
la_status la_spec_parse(const char *text, la_spec *out);

/* Check a spec's parameters for consistency (alpha > 1, window >= 1, ...). */
la_status la_spec_validate(const la_spec *spec);

/* Canonical text form of spec into buf (always NUL-terminated when n > 0).
 * la_spec_parse(la_spec_format(s)) == s. Returns the length the full text needs,
 * like snprintf. */
int la_spec_format(const la_spec *spec, char *buf, size_t n);

/* ======================================================================== */
/* Attention kernels                                                        */
/* ======================================================================== */

/* Query offset meaning "S - T" (bottom-right alignment). */
#define LA_POS0_AUTO INT64_MIN

/* Row statistic of a query row with no visible key. */
#define LA_ROW_EMPTY (-INFINITY)

typedef struct {
    int B, H, Hkv, T, S, D;
    int64_t pos0; /* position of query 0; LA_POS0_AUTO for S - T */
} la_shape;

/* Reusable scratch memory for the kernels (opaque). It grows to the largest request and
 * is then reused without allocating, so a training loop pays page faults once. */
typedef struct la_workspace la_workspace;
la_workspace *la_workspace_new(void);
void la_workspace_free(la_workspace *ws);

/* Optional inputs and outputs of an attention call. Start from la_attn_default_opts();
 * new fields are added at the end so existing callers keep compiling. */
typedef struct {
    /* optional inputs */
    const int32_t *doc_ids; /* (B, S) document id per key position, or NULL. Query i has the
                               id of position pos0+i. Documents must be contiguous runs; no
                               query sees a key of another document, and positions,
                               distances and n_q restart at each document's first token. */
    const float *logn_s;    /* (H) per-head s_h of logn; NULL: spec->logn_s for every head */
    const float *as_beta;   /* (B, H, T) ASEntmax beta per head and query (required for asentmax) */
    const float *as_gamma;  /* (B, H, T) ASEntmax gamma per head and query (required for asentmax) */

    /* optional statistics written by la_attn_forward (NULL: not computed) */
    float *row_entropy;     /* (B, H, T) attention entropy of each query row, nats */
    float *key_mass;        /* (B, H, S) attention probability of each key summed over queries */
    float *row_support;     /* (B, H, T) number of keys with p > 0 (sparse normalisers) */

    /* gradients of learnable transform parameters written by la_attn_backward (NULL: skip) */
    float *dlogn_s;         /* (H) d loss / d s_h of logn (overwritten) */
    float *das_beta;        /* (B, H, T) d loss / d beta (overwritten) */
    float *das_gamma;       /* (B, H, T) d loss / d gamma (overwritten) */

    int n_threads;          /* OpenMP threads; 0: the OpenMP default */
    la_workspace *ws;       /* scratch to reuse; NULL: allocated and freed inside the call */
} la_attn_opts;

la_attn_opts la_attn_default_opts(void);

/* Fused attention forward (SPEC 1-5), tiled with O(T*D + S*D) extra memory.
 *   q: (B, H, T, D)   k, v: (B, Hkv, S, D)   out: (B, H, T, D)
 *   row_stat: (B, H, T): softmax log-sum-exp of the transformed logits (natural log);
 *             entmax threshold tau; LA_ROW_EMPTY for rows with no visible key.
 * q and k are given before any rotation: RoPE-family encodings are applied inside.
 * opts may be NULL. Errors: LA_EINVAL (NULL tensor, bad spec), LA_ESHAPE (H % Hkv != 0,
 * a dimension < 1, odd D with a RoPE-family encoding), LA_ENOMEM. */
la_status la_attn_forward(const la_spec *spec, const la_shape *shape,
                          const float *q, const float *k, const float *v,
                          float *out, float *row_stat, const la_attn_opts *opts);

/* Backward of la_attn_forward. out and row_stat are the forward's outputs.
 *   dout: (B, H, T, D)  ->  dq: (B, H, T, D), dk, dv: (B, Hkv, S, D), all overwritten.
 * Learnable transform parameters get their gradients through opts (dlogn_s, das_*).
 * Errors as la_attn_forward. */
la_status la_attn_backward(const la_spec *spec, const la_shape *shape,
                           const float *q, const float *k, const float *v,
                           const float *out, const float *row_stat, const float *dout,
                           float *dq, float *dk, float *dv, const la_attn_opts *opts);

/* ======================================================================== */
/* Position encodings (SPEC 3)                                              */
/* ======================================================================== */

/* Rotation frequencies omega_k, k < D/2, for the spec's RoPE-family encoding at context
 * length ctx_len (used by dynamic-ntk). Pairs that do not rotate (p-RoPE's low
 * frequencies, NoPE/ALiBi) get 0. omega: (D/2) doubles. */
la_status la_rope_freqs(const la_spec *spec, int D, int64_t ctx_len, double *omega);

/* Rotate x (N, D) in place: row r by angle pos[r] * omega_k on the half-split pair
 * (x[k], x[k + D/2]). Angles in double, cos/sin rounded to float. inverse != 0 rotates by
 * the negative angle (the backward of the forward rotation). */
la_status la_rope_apply(const la_spec *spec, float *x, int N, int D, const int64_t *pos,
                        int64_t ctx_len, int inverse);

/* ALiBi slopes m_h for n_heads heads (Press et al.; SPEC 3). slopes: (n_heads). */
void la_alibi_slopes(int n_heads, float *slopes);

/* sinv coefficients for distance t >= 0 (SPEC 4): a_t^2 = 1 + 2 log1p(t/tau),
 * m_t = -2 log1p(t/tau). */
void la_sinv_coeffs(double t, double tau, double *a, double *m);

/* ======================================================================== */
/* Row normalisers: sparsemax / entmax (SPEC 5)  -- section owned by issue 3 */
/* ======================================================================== */

/* (declarations added by the sparse-attention work) */

/* ======================================================================== */
/* NumPy .npy files                                                         */
/* ======================================================================== */

/* Read a little-endian float32 C-order .npy file. On success *data is malloc'ed (free()
 * it) and shape[0..*ndim) holds the dimensions (at most 8).
 * Errors: LA_EIO (cannot open), LA_EFORMAT (not .npy, not <f4, Fortran order, truncated). */
la_status la_npy_read_f32(const char *path, float **data, int *ndim, int64_t shape[8]);

/* Write float32 data as .npy atomically (temp file, fsync, rename). */
la_status la_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape);

/* ======================================================================== */
/* GPT model (SPEC 7)  -- section owned by the trainer work                 */
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
} la_model_config;

la_model_config la_model_default_config(void);

/* A GPT model: parameters, gradients, activation buffers (opaque). */
typedef struct la_model la_model;

/* Build a model with parameters drawn from la_rng seeded with `seed` (same seed, same
 * weights on every machine). Gains start at 1, logn s_h at 1/log(train_len).
 * Errors: LA_EINVAL (NULL, a size < 1, n_head not dividing d_model, n_kv_head not
 * dividing n_head, odd head size with a RoPE-family spec), LA_ESPEC (bad spec text,
 * message from la_spec_parse), LA_ENOMEM. *out is NULL on error. */
la_status la_model_new(const la_model_config *cfg, uint64_t seed, la_model **out);
void la_model_free(la_model *m);

/* The config the model was built with (spec text in canonical form). */
const la_model_config *la_model_get_config(const la_model *m);
/* The parsed attention spec the model runs. */
const la_spec *la_model_spec(const la_model *m);

/* Number of float parameters (= length of la_model_params and la_model_grads). */
size_t la_model_num_params(const la_model *m);
/* All parameters in one contiguous float array (writable: optimisers update it in place),
 * and the gradients in a second array of the same layout. */
float *la_model_params(la_model *m);
float *la_model_grads(la_model *m);

/* The parameters as named tensors, in storage order (used by checkpoints and Muon).
 * Names: "wte", "h.<l>.ln1.g", "h.<l>.attn.wq", "h.<l>.attn.wk", "h.<l>.attn.wv",
 * "h.<l>.attn.q_norm.g", "h.<l>.attn.k_norm.g", "h.<l>.attn.wo", "h.<l>.attn.logn_s" (logn
 * only), "h.<l>.attn.as_wb", "h.<l>.attn.as_bb", "h.<l>.attn.as_wg", "h.<l>.attn.as_bg"
 * (asentmax only), "h.<l>.ln2.g", "h.<l>.mlp.w_fc", "h.<l>.mlp.w_proj", "lnf.g", "lm_head". */
typedef enum {
    LA_PCLASS_EMBED = 0, /* wte, lm_head: AdamW even under Muon */
    LA_PCLASS_MATRIX,    /* 2-D hidden weights (wq, wk, wv, wo, w_fc, w_proj): Muon-eligible */
    LA_PCLASS_GAIN,      /* norm gains (no weight decay) */
    LA_PCLASS_SCALAR     /* logn s_h, ASEntmax coefficient weights and biases (no weight decay) */
} la_param_class;

typedef struct {
    const char *name;   /* see above; valid while the model lives */
    int ndim;           /* 1 or 2 */
    int64_t shape[2];   /* (rows, cols) for matrices: out_features x in_features */
    size_t offset;      /* index of the first float in la_model_params / la_model_grads */
    size_t numel;
    la_param_class pclass;
} la_tensor_info;

int la_model_num_tensors(const la_model *m);
/* Errors: LA_EINVAL if i is out of range. */
la_status la_model_tensor(const la_model *m, int i, la_tensor_info *info);

/* Training forward pass. Keeps every activation la_model_backward needs.
 *   tokens:  (B, T) int32 in [0, V)
 *   targets: (B, T) int32 next tokens; entries < 0 are ignored (no loss, no gradient).
 *            NULL: no loss is computed (logits only; backward is then an error).
 *   mean_loss:      mean cross-entropy (nats) over the counted targets (0 when none); may be NULL
 *   loss_per_token: (B, T) cross-entropy per position (0 where ignored), or NULL
 * Activation buffers grow when B*T grows and are reused otherwise (no per-step allocation).
 * Memory: O(n_layer * B * T * (C + F)) + B*T*V for the logits.
 * Errors: LA_EINVAL (NULL, B or T < 1, token out of range), LA_ENOMEM, attention errors. */
la_status la_model_forward(la_model *m, const int32_t *tokens, const int32_t *targets,
                           int B, int T, float *mean_loss, float *loss_per_token);

/* Backward of the last la_model_forward (gradient of its mean_loss), ACCUMULATED into
 * la_model_grads (call la_model_zero_grad first). Errors: LA_EINVAL if no training
 * forward with targets preceded it, or la_model_eval ran in between. */
la_status la_model_backward(la_model *m);

/* Set every gradient to 0. */
void la_model_zero_grad(la_model *m);

/* Logits (B, T, V) of the last la_model_forward; NULL before the first forward, after
 * la_model_eval (which does not keep them) and after la_model_backward (which turns them
 * into gradients in place). */
const float *la_model_logits(const la_model *m);

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
la_status la_model_eval(la_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                        float *mean_loss, float *loss_per_token, int32_t *argmax,
                        float *last_logits);

/* Hand back every activation buffer (they are reallocated on the next forward). */
void la_model_release_buffers(la_model *m);

/* Time spent inside la_attn_forward/backward and in cblas_sgemm since the model was built
 * or the counters were reset (seconds, wall clock). For `longattn bench train`. */
typedef struct { double attn_s, matmul_s, total_s; } la_model_timing;
void la_model_get_timing(const la_model *m, la_model_timing *t);
void la_model_reset_timing(la_model *m);

/* Weights as safetensors (little-endian u64 header length, JSON header with dtype "F32",
 * shape, data_offsets per tensor named as la_model_tensor; "__metadata__" holds the
 * config as strings: format "longattn-gpt-1", n_layer, n_head, n_kv_head, d_model, d_ff,
 * vocab, train_len, spec). Written atomically. Errors: LA_EIO. */
la_status la_model_save(const la_model *m, const char *path);

/* Build a model from a safetensors file written by la_model_save (config and spec from
 * its metadata). Errors: LA_EIO (missing file), LA_EFORMAT (not safetensors, truncated,
 * wrong dtype/shape/offsets, missing tensor or metadata; the message says which),
 * LA_ESPEC (bad spec in metadata), LA_ENOMEM. */
la_status la_model_load(const char *path, la_model **out);

/* ======================================================================== */
/* Training data: byte text and llm.c token shards                          */
/* ======================================================================== */

/* Token source split into train and validation documents (opaque).
 * Text: a file or a directory of files (regular files, not recursive, sorted by name,
 * hidden files skipped), read as bytes, vocab 256, one document per file. Every document is
 * assigned to validation with probability val_fraction (la_rng seeded with split_seed);
 * if that leaves a split empty and there is more than one document, the last document by
 * name moves across; a single document is cut at byte (1 - val_fraction) * size.
 * Shards: files ending ".bin" (a file, or every .bin in a directory), llm.c format: 256
 * int32 header (magic 20240520, version 1, token count N), then N uint16 tokens; the file
 * must be exactly 1024 + 2N bytes. Documents start at each end-of-text id (eot) and are
 * split like text documents; files whose name contains "_val_" are validation and then
 * no train document moves to validation. Vocab is 50257 unless set.
 * The train split is the concatenation of its documents, sampled by window. */
typedef struct la_data la_data;

typedef enum { LA_SPLIT_TRAIN = 0, LA_SPLIT_VAL = 1 } la_split;

typedef struct {
    double val_fraction;  /* share of documents held out, in [0, 1). default 0.1 */
    uint64_t split_seed;  /* seed of the document split. default 1234 */
    int eot;              /* shard end-of-text id. default 50256 */
    int vocab;            /* 0: 256 for text, 50257 for shards */
} la_data_config;

la_data_config la_data_default_config(void);

/* Open a text file/directory or shard file/directory (the kind is chosen by the ".bin"
 * suffix; a directory must hold only one kind). Errors: LA_EIO (missing/unreadable),
 * LA_EFORMAT (wrong magic/version, size not 1024 + 2N, truncated, token >= vocab, empty
 * file set; the message names the file and the fix), LA_ENOMEM. */
la_status la_data_open(const char *path, const la_data_config *cfg, la_data **out);
void la_data_free(la_data *d);

int la_data_vocab(const la_data *d);
/* Total tokens / number of documents of a split. */
int64_t la_data_num_tokens(const la_data *d, la_split split);
int la_data_num_docs(const la_data *d, la_split split);
/* Length of document i of a split (tokens). -1 if out of range. */
int64_t la_data_doc_len(const la_data *d, la_split split, int i);
/* Copy n tokens of document `doc` starting at `offset` into out (n int32).
 * Errors: LA_EINVAL (bad doc, offset + n beyond the document). */
la_status la_data_read(const la_data *d, la_split split, int doc, int64_t offset, int64_t n,
                       int32_t *out);

/* Resumable sampling state (it goes into checkpoints). */
typedef struct {
    uint64_t rng[4];     /* xoshiro256** state of the window sampler */
    uint64_t n_windows;  /* windows drawn so far */
} la_data_state;

/* Seed the train sampler (state becomes a function of seed only). */
void la_data_seed(la_data *d, uint64_t seed);
void la_data_get_state(const la_data *d, la_data_state *st);
void la_data_set_state(la_data *d, const la_data_state *st);

/* Draw B windows of T+1 consecutive tokens from the train split, each start uniform over
 * every position where a full window fits (so every full window is reachable; nothing is
 * read past the declared count). out: (B, T+1) int32; inputs are out[b][0..T), targets
 * out[b][1..T]. Errors: LA_EINVAL (B, T < 1, out NULL), LA_ESHAPE (train split shorter
 * than T+1 tokens: the message gives both numbers). */
la_status la_data_sample(la_data *d, int B, int T, int32_t *out);

/* Deterministic validation windows: the validation split's concatenation cut into
 * consecutive non-overlapping windows of T+1 tokens; batch `index` holds windows
 * index*B .. index*B+B-1 (wrapping around). out: (B, T+1). Errors as la_data_sample. */
la_status la_data_val_batch(const la_data *d, int index, int B, int T, int32_t *out);

/* ======================================================================== */
/* Trainer: AdamW / Muon, schedule, checkpoints, training loop             */
/* ======================================================================== */

typedef enum {
    LA_OPT_ADAMW = 0, /* AdamW (Loshchilov & Hutter 2019) on every tensor */
    LA_OPT_MUON       /* Muon (K. Jordan 2024): momentum orthogonalised by 5 quintic
                         Newton-Schulz steps (a, b, c) = (3.4445, -4.7750, 2.0315) on
                         LA_PCLASS_MATRIX tensors, AdamW on the rest */
} la_optimizer;

typedef struct {
    int steps;            /* optimizer steps in total (schedule length). default 400 */
    int B, T;             /* micro-batch size and sequence length. default 16, 128 */
    int grad_accum;       /* micro-batches per step (gradients averaged). default 1 */
    double lr;            /* AdamW peak learning rate. default 3e-3 */
    double min_lr;        /* cosine floor. default lr / 10 */
    int warmup;           /* linear warm-up steps (from lr/warmup). default 20 */
    double beta1, beta2, eps;  /* AdamW, default 0.9, 0.95, 1e-8 */
    double weight_decay;  /* decoupled, on EMBED and MATRIX tensors only. default 0.1 */
    double clip;          /* global gradient-norm clip; 0 disables. default 1.0 */
    la_optimizer optimizer; /* default LA_OPT_ADAMW */
    double muon_lr;       /* Muon peak lr (same schedule shape). default 0.02 */
    double muon_momentum; /* Nesterov momentum of Muon. default 0.95 */
    uint64_t seed;        /* data sampler seed. default 1 */
    int eval_every;       /* la_train_run: validation every N steps (and at the end); 0: never */
    int eval_batches;     /* validation batches of B x T per evaluation. default 8 */
    int ckpt_every;       /* la_train_run: checkpoint every N steps (and at the end); 0: end only */
    char ckpt_path[1024]; /* la_train_run: checkpoint path ("" = none), see la_trainer_save */
    char csv_path[1024];  /* la_train_run: CSV log ("" = none): step,lr,loss,val_loss,grad_norm,tokens_per_s,elapsed_s */
    int n_threads;        /* attention threads; 0: OpenMP default */
} la_train_config;

la_train_config la_train_default_config(void);

/* Learning-rate multiplier in [min_lr/lr, 1] at a step (0-based): linear warm-up over
 * `warmup` steps, then cosine decay to min_lr at `steps`. */
double la_train_lr_factor(const la_train_config *cfg, int step);

typedef struct la_trainer la_trainer;

/* Trainer for model m drawing from data (data may be NULL: then only
 * la_trainer_step_batch works). Both must outlive the trainer; the trainer seeds the
 * data sampler with cfg->seed. Errors: LA_EINVAL (bad config value, named), LA_ENOMEM. */
la_status la_trainer_new(la_model *m, la_data *data, const la_train_config *cfg,
                         la_trainer **out);
void la_trainer_free(la_trainer *tr);

typedef struct {
    int step;          /* steps done after this one */
    float loss;        /* mean training loss of the step (over its micro-batches) */
    float grad_norm;   /* global gradient norm before clipping */
    double lr;         /* AdamW learning rate used */
    double seconds;    /* wall time of the step */
} la_step_info;

/* One optimizer step on grad_accum batches of B x T drawn from the train split.
 * Errors: LA_EINVAL (no data), LA_ENUMERIC (non-finite loss: parameters untouched), others
 * from the model. info may be NULL. */
la_status la_trainer_step(la_trainer *tr, la_step_info *info);

/* One optimizer step on a caller-provided batch (e.g. passkey fine-tuning):
 * tokens, targets (B, T) as la_model_forward (targets < 0 ignored). Uses and advances the
 * same schedule and step counter. */
la_status la_trainer_step_batch(la_trainer *tr, const int32_t *tokens, const int32_t *targets,
                                int B, int T, la_step_info *info);

/* Mean validation loss (nats/token) over cfg.eval_batches deterministic validation
 * batches (la_data_val_batch) of B x T, via la_model_eval. Errors: LA_EINVAL (no data or
 * empty validation split). */
la_status la_trainer_eval(la_trainer *tr, float *val_loss);

/* Steps done so far. */
int la_trainer_step_count(const la_trainer *tr);

/* Checkpoint: weights to `path` (la_model_save) and optimiser moments, Muon momenta,
 * step, data sampler state and train config to `path`.state (also safetensors: tensors
 * "adam.m", "adam.v", "muon.mom"; metadata as strings). Both written atomically; each
 * records a hash of the weights so a mismatched pair is detected. Errors: LA_EIO. */
la_status la_trainer_save(const la_trainer *tr, const char *path);

/* Restore a checkpoint into an existing trainer (whose model was built with the same
 * config, e.g. by la_model_load(path)): weights, moments, step, data state. Training
 * then continues bit-identically to an uninterrupted run. Errors: LA_EIO (missing file),
 * LA_EFORMAT (corrupt, truncated, weights/state mismatch, model config or optimizer
 * different from the trainer's: the message names the field). Nothing is changed on error. */
la_status la_trainer_load(la_trainer *tr, const char *path);

/* The train config stored in checkpoint `path`'s state file (to resume with the same
 * settings). Errors: LA_EIO, LA_EFORMAT. */
la_status la_trainer_read_config(const char *path, la_train_config *cfg);

/* Progress report of la_train_run, once per step. val_loss is NAN unless an evaluation
 * ran at this step. Return nonzero to stop: la_train_run then saves a checkpoint (if
 * ckpt_path is set) and returns LA_EINTERRUPTED. */
typedef struct {
    int step, steps;
    float loss, val_loss, grad_norm;
    double lr, tokens_per_s, elapsed_s, eta_s;
} la_train_progress;
typedef int (*la_train_progress_fn)(const la_train_progress *p, void *user);

/* Run tr until cfg.steps (continuing from its step count, so a resumed trainer finishes
 * the same schedule), evaluating, logging CSV (appending when resuming) and
 * checkpointing as configured. progress may be NULL. Errors: from the steps,
 * LA_EINTERRUPTED (progress asked to stop; checkpoint saved), LA_EIO (log/checkpoint). */
la_status la_train_run(la_trainer *tr, la_train_progress_fn progress, void *user);

/* ======================================================================== */
/* KV cache  -- section owned by the inference work                         */
/* ======================================================================== */

/* (declarations added by the inference work) */

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_H */
