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
/* Length-generalisation study (SPEC 8): documents, evaluation loss, passkey, */
/* study files and runs  -- section owned by the study work                  */
/* ======================================================================== */

/* ---- documents (src/tasks/docs.c) ---- */

/* A set of documents as token ids, kept apart so that evaluation windows never cross a
 * document boundary. */
typedef struct {
    int32_t *tokens;   /* (n_tokens) every document, concatenated */
    int64_t *offset;   /* (n_docs + 1) document d is tokens[offset[d] .. offset[d+1]) */
    int64_t n_tokens;
    int n_docs;
    int vocab;         /* 256 for text read as bytes, 50257 for GPT-2 token shards */
    int is_bytes;      /* 1: tokens are bytes, so losses are bits per byte */
} la_docs;

/* Load every document under dir. If dir holds llm.c token shards (*.bin: 256 int32
 * header with magic 20240520, version 1 and the token count, then uint16 GPT-2 ids) they
 * are read in name order and split into documents at each <|endoftext|> (id 50256, which
 * starts every document in llm.c shards). Otherwise each regular, non-hidden file is one
 * byte-level document, in name order. Errors: LA_EINVAL (NULL), LA_EIO (cannot open or
 * read), LA_EFORMAT (bad shard header, truncated shard, no documents). On error *out is
 * zeroed. */
la_status la_docs_load(const char *dir, la_docs *out);
void la_docs_free(la_docs *docs);
/* Length in tokens of the longest document (0 if none). */
int64_t la_docs_longest(const la_docs *docs);

/* ---- validation loss at a context length (src/tasks/eval_loss.c) ---- */

/* Per-position next-token loss of one window, supplied by the caller (the study binds it
 * to the GPT model; tests bind it to reference models). inputs, targets: (T) token ids;
 * writes loss: (T) in nats, loss[t] = -ln p(targets[t] | inputs[0..t]). */
typedef la_status (*la_token_loss_fn)(void *ctx, const int32_t *inputs, const int32_t *targets,
                                      int T, float *loss);

/* Choose n evaluation windows of T+1 tokens (T inputs, T shifted targets), each inside
 * one document with at least T+1 tokens: the eligible documents are shuffled with seed and
 * used in turn, each window at a seeded uniform offset. Same (docs, T, n, seed), same
 * windows. start: (n) offsets into docs->tokens. Errors: LA_EINVAL (T < 1, n < 1, NULL),
 * LA_ESHAPE when no document is long enough (the message gives the longest). */
la_status la_eval_windows(const la_docs *docs, int T, int n, uint64_t seed, int64_t *start);

/* Validation loss at context length T on the windows of la_eval_windows(docs, T, n, seed),
 * evaluated one window at a time (B = 1, so memory is whatever fn needs for one length-T
 * window). Results in bits per token (bits per byte for byte documents):
 *   *loss: mean over all n*T target tokens;
 *   bucket_loss: (ceil(T / bucket)) or NULL, the mean over target positions
 *   [b*bucket, (b+1)*bucket) of every window; bucket_tokens: (same) or NULL, their counts.
 * The token-weighted mean of bucket_loss is *loss. Sums are in double.
 * Errors: as la_eval_windows, LA_EINVAL (bucket < 1), LA_ENUMERIC (a non-finite loss),
 * or whatever fn returns. */
la_status la_eval_loss(la_token_loss_fn fn, void *ctx, const la_docs *docs, int T, int n,
                       uint64_t seed, int bucket, double *loss, double *bucket_loss,
                       int64_t *bucket_tokens);

/* ---- passkey retrieval (src/tasks/passkey.c) ---- */

/* Byte-level passkey task (Mohtashami & Jaggi 2023, the format RULER's NIAH reuses): a
 * haystack of real text with the needle
 *   " The pass key is KKKKK. Remember it. KKKKK is the pass key. "
 * inserted at a depth fraction, followed by
 *   "\nWhat is the pass key? The pass key is " and the five answer digits KKKKK. */
#define LA_PASSKEY_DIGITS 5

typedef struct {
    int key;          /* the pass key, 10000 .. 99999 */
    int needle_pos;   /* index of the needle's first byte in the example */
    int needle_len;   /* bytes of the needle text (with its two spaces) */
    int answer_pos;   /* index of the first answer digit: T + 1 - LA_PASSKEY_DIGITS */
    double depth;     /* realised depth: haystack bytes before the needle / haystack bytes */
} la_passkey;

/* Smallest T for which an example fits (needle + question + answer, no haystack). */
int la_passkey_min_len(void);

/* Build one example of T+1 byte tokens: the model reads tokens[0..T) and is scored on
 * predicting tokens[answer_pos .. T] (the digits). The haystack is a contiguous stretch of
 * hay (byte documents, joined by '\n' when one is too short), starting at a seeded offset;
 * the needle goes after floor(depth * haystack bytes), moved back to the previous
 * whitespace when one is within 16 bytes, so words stay whole. The key is drawn from seed
 * and redrawn until its digits occur nowhere in the haystack, so the answer is present
 * only in the needle and at the end. Errors: LA_EINVAL (NULL, depth outside [0,1], hay not
 * byte-level or empty), LA_ESHAPE (T < la_passkey_min_len()). */
la_status la_passkey_make(const la_docs *hay, int T, double depth, uint64_t seed,
                          int32_t *tokens, la_passkey *info);

/* Exact-match score of greedy decoding: pred (T) holds the model's argmax next token at
 * each input position of the example tokens (T+1) built by la_passkey_make (e.g. the
 * argmax output of la_model_eval). Returns 1 iff pred[answer_pos-1+i] equals the digit
 * tokens[answer_pos+i] for every i < LA_PASSKEY_DIGITS -- teacher-forced argmax right at
 * every digit is exactly greedy decoding reproducing the whole key; 0 otherwise (one wrong
 * digit scores 0: no partial credit). */
int la_passkey_exact(const int32_t *pred, const int32_t *tokens, const la_passkey *info);

/* ---- study files (src/study/study_file.c) ---- */

#define LA_STUDY_MAX_SPECS 16
#define LA_STUDY_MAX_LENS 12
#define LA_STUDY_MAX_DEPTHS 16

/* One length-generalisation study: a JSON file (format in README, "The main job").
 * Every variant in specs is trained with the same data, data order, seed and model size,
 * then evaluated at every eval length and on the passkey grid. */
typedef struct {
    char name[128];            /* "name", for titles; default: the file's base name */
    char data[1024];           /* "data": folder with train/ and val/ (text files or llm.c shards) */
    int n_layer, d_model, n_head, n_kv_head; /* "model": {...} */
    int steps, batch, seq_len; /* "steps", "batch", "seq_len" (= L, the training length) */
    double lr;                 /* "lr": peak learning rate */
    int warmup;                /* "warmup": linear warm-up steps, default steps/10 */
    uint64_t seed;             /* "seed": weights, data order and evaluation windows */
    int eval_lens[LA_STUDY_MAX_LENS]; /* "eval_lens": strictly increasing, default L, 4L, 16L */
    int n_eval_lens;
    int eval_windows;          /* "eval_windows": windows per eval length, default 8 */
    int val_every;             /* "val_every": steps between validation losses during training, default steps/4 */
    /* "passkey": {...}; trials = 0 switches the task off */
    int pk_steps;              /* "finetune_steps" at length L, default steps/4 */
    double pk_lr;              /* "finetune_lr", default lr/3 */
    int pk_lens[LA_STUDY_MAX_LENS]; /* "lens": strictly increasing, default eval_lens */
    int n_pk_lens;
    double pk_depths[LA_STUDY_MAX_DEPTHS]; /* "depths" in [0,1], default 0, .25, .5, .75, 1 */
    int n_pk_depths;
    int pk_trials;             /* "trials" per length x depth, default 10 */
    char specs[LA_STUDY_MAX_SPECS][256]; /* "specs": attention spec strings (SPEC 6) */
    int n_specs;
} la_study;

/* Parse study-file text. where names the source in messages (a file name). Every key is
 * checked: an unknown key, a wrong type, a value out of range, lengths that do not
 * increase or a spec that la_spec_parse rejects gives LA_EFORMAT (LA_ESPEC for the spec)
 * with a message "<where>: key \"k\": problem; fix". Missing keys take the defaults above;
 * "data", "steps", "batch", "seq_len", "lr" and "specs" are required. */
la_status la_study_parse(const char *text, const char *where, la_study *out);
/* Read and parse a study file. Errors: LA_EIO, then as la_study_parse. */
la_status la_study_load(const char *path, la_study *out);

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_H */
