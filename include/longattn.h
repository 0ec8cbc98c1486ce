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

/* (declarations added by the trainer work) */

/* ======================================================================== */
/* KV cache  -- section owned by the inference work                         */
/* ======================================================================== */

/* (declarations added by the inference work) */

/* ======================================================================== */
/* Synthetic tasks (SPEC 8)  -- section owned by the synth work             */
/* ======================================================================== */

/* Length-generalisation tasks of Vasylenko et al. 2025 (ASEntmax, arXiv 2506.16640),
 * in the format of its public data generator: one example is the token sequence
 *     BOS source SEP target EOS
 * and the loss (and exact match) covers the positions that predict target and EOS.
 * Every task has its own vocabulary: content tokens 0 .. n_content-1, then the special
 * tokens PAD = n_content, BOS = n_content+1, EOS = n_content+2, SEP = n_content+3
 * (the paper's tokenizer order pad, bos, eos, [mask,] sep; there is no mask token).
 *
 * "Content length" L is the task's sequence-length knob (the paper's seq_len): training
 * draws L uniformly from [min_len, max_len] (32-64 as in the paper); evaluation fixes
 * L = m * max_len for m = 1, 2, 4, ... Source and target sizes at length L:
 *   copy / reverse / sort  source L random tokens in [0, n_symbols); target the source,
 *                          reversed, or sorted ascending (L tokens).
 *   mqmtar                 source: a key-value region of exactly L tokens, then
 *                          n_queries x (QSEP key); target n_queries x (QSEP value).
 *                          Content ids: SPACE 0, KVSEP 1, QSEP 2, alphabet 3 .. 3+n_symbols-1.
 *                          A key is k_len alphabet tokens, a value v_len. The region holds
 *                          n_kv = min(floor(L*kv_frac/(k_len+v_len+2)), n_symbols^k_len,
 *                          n_symbols^v_len) pairs "key KVSEP value" with distinct keys and
 *                          distinct values, each at a random offset inside its own block of
 *                          ~L/n_kv tokens padded by SPACE (always >= 1 SPACE after a value);
 *                          queries pick keys of the region uniformly with replacement.
 *   flipflop               P = L/2 (command, bit) pairs: commands WRITE 2 (the first),
 *                          WRITE with probability write_prob or IGNORE 3 (the middle ones),
 *                          READ 4 (the last); bits 0/1. Source: the 2P-1 tokens of the pairs
 *                          without the READ's bit; target: the bit of the last WRITE (1 token).
 * Generation is deterministic: example `index` of stream `seed` is the same on every
 * machine and independent of which other examples are drawn. */
typedef enum {
    LA_TASK_MQMTAR = 0, /* multi-query multi-token associative recall */
    LA_TASK_COPY,
    LA_TASK_REVERSE,
    LA_TASK_SORT,
    LA_TASK_FLIPFLOP,
    LA_TASK_COUNT_      /* number of tasks (not a task) */
} la_task;

typedef struct {
    la_task task;
    int n_symbols;     /* copy/reverse/sort: token range; mqmtar: key/value alphabet size */
    int min_len;       /* training content length range, inclusive (default 32 .. 64) */
    int max_len;
    int k_len, v_len;  /* mqmtar tokens per key / value (default 2, 2) */
    double kv_frac;    /* mqmtar share of the region given to pairs, (0, 1] (default 0.8) */
    int n_queries;     /* mqmtar queries per example (default 4) */
    double write_prob; /* flipflop probability of a middle WRITE, (0, 1) (default 0.1) */
} la_task_params;

/* Token ids of a task's vocabulary; vocab_size = n_content + 4. */
typedef struct {
    int n_content, pad, bos, eos, sep, vocab_size;
} la_task_vocab;

/* Where the parts of one generated example sit in its token buffer. */
typedef struct {
    int n_tokens;   /* total tokens: 1 + src_len + 1 + tgt_len + 1 */
    int content_len;/* the L it was generated at */
    int src_start;  /* = 1 (after BOS) */
    int src_len;
    int sep;        /* index of SEP = 1 + src_len */
    int tgt_start;  /* = sep + 1 */
    int tgt_len;
    int eos;        /* index of EOS = tgt_start + tgt_len = n_tokens - 1 */
} la_task_example;

/* Defaults for a task (n_symbols 16: copy/reverse/sort token range 16; mqmtar alphabet
 * 16, i.e. 256 possible keys of 2 tokens). */
la_task_params la_task_default_params(la_task task);

/* "mqmtar", "copy", "reverse", "sort", "flipflop" (also "flip-flop").
 * Errors: LA_EINVAL naming the bad name and the valid ones. */
la_status la_task_from_name(const char *name, la_task *out);
const char *la_task_name(la_task task); /* "?" for an unknown value */

/* Check params (ranges above; mqmtar: min_len must hold >= n_queries pairs).
 * Errors: LA_EINVAL naming the field and its valid range. */
la_status la_task_validate(const la_task_params *p);

la_status la_task_vocab_of(const la_task_params *p, la_task_vocab *v);

/* Tokens of an example at content length L (every example at L has exactly this many).
 * Errors: LA_EINVAL (bad params, L < 4 or L too large for int). */
la_status la_task_tokens_at(const la_task_params *p, int content_len, int *n_tokens);

/* Generate example `index` of stream `seed` into tokens[0 .. cap). content_len 0 draws L
 * uniformly from [min_len, max_len]; > 0 uses that L (evaluation). ex may be NULL.
 * Errors: LA_EINVAL (bad params/L, NULL tokens), LA_ESHAPE (cap too small). */
la_status la_task_sample(const la_task_params *p, int content_len, uint64_t seed,
                         uint64_t index, int32_t *tokens, int cap, la_task_example *ex);

/* Pack examples first_index .. first_index+B-1 of stream `seed` for next-token training:
 *   inputs, targets: (B, T) token ids; row b holds example tokens[0 .. n-2] as inputs and
 *                    tokens[1 .. n-1] as targets, right-padded with PAD;
 *   mask:            (B, T) 1 where the target is a target token or EOS, 0 elsewhere
 *                    (source, SEP prediction, padding);
 *   ex:              (B) example layouts, or NULL.
 * T must be >= the longest example's n_tokens - 1 (la_task_tokens_at(max L) - 1).
 * content_len as in la_task_sample. Errors: LA_EINVAL, LA_ESHAPE (T too small). */
la_status la_task_batch(const la_task_params *p, int content_len, uint64_t seed,
                        uint64_t first_index, int B, int T, int32_t *inputs,
                        int32_t *targets, float *mask, la_task_example *ex);

/* Exact match of one packed row: 1 if pred[t] == targets[t] at every t with mask 1, else 0.
 * pred, targets, mask: (T). With teacher forcing this equals greedy decoding exact match:
 * if every forced prediction is right, greedy decoding feeds back exactly the forced
 * inputs; at the first wrong forced prediction greedy decoding emits that wrong token. */
int la_task_exact_match(const int32_t *pred, const int32_t *targets, const float *mask, int T);

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_H */
