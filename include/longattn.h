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

/* A per-layer, per-kv-head cache of keys and values for incremental decoding, with
 * eviction policies (window, StreamingLLM sinks, H2O heavy hitters) and optional int8
 * storage. Survey: shared/seeds/003 (H2O, StreamingLLM, quantised KV cache).
 *
 * Keys are stored BEFORE any rotary encoding (pre-RoPE). la_kv_attend() hands the kept
 * keys to la_attn_forward() in slot order, and the kernel rotates key slot j by position
 * j and the query by its slot position; so re-indexing after an eviction is exact by
 * construction (no key is ever re-rotated, nothing accumulates rounding).
 *
 * Positions seen by the kernel, per policy:
 *   full            slot j = original position j (nothing is ever evicted; the cache is
 *                   exactly the prefix of the stream). Query i of a T-row call sits at
 *                   position len - T + i (LA_POS0_AUTO).
 *   window/sinks/h2o  re-indexed within the cache (StreamingLLM, Xiao et al. 2024, sec. 3.2):
 *                   the kept keys, in stream order, sit at positions 0..len-1 and the new
 *                   query at len - T + i, i.e. the current token is at position "number of
 *                   cached tokens before it". Distances (RoPE, ALiBi, sinv) and n_q (logn)
 *                   are therefore measured in cache slots. The spec's own visibility
 *                   pattern (window(w), sinks(n,w), ...) also applies to slot positions.
 * Budgets (tokens per layer and kv head; the cache never holds more, at any time):
 *   full            max_tokens (appending past it is LA_EINVAL)
 *   window(w)       w: the last w tokens, the current one included
 *   sinks(n, w)     n + w: the first n tokens of the stream plus the last w
 *   h2o(heavy, recent, sinks=0)  sinks + heavy + recent: the first `sinks` tokens, the last
 *                   `recent` tokens and, per kv head, the `heavy` older tokens with the largest
 *                   cumulative attention mass (H2O, Zhang et al. 2023: score = sum over
 *                   past queries of their attention probability, summed over the query heads
 *                   of a GQA group, from la_attn_opts.key_mass). Ties keep the newer token.
 * Eviction happens inside la_kv_append, BEFORE the new tokens are written, so that after
 * the append the length is at most the budget. Sink tokens and the newest `recent`
 * (window: w) tokens are never evicted; in particular the newest token always survives.
 * int8 storage (combinable with every policy): symmetric absmax quantisation per group of
 * `group` consecutive channels of one token's k (or v) row: scale = max|x| / 127,
 * q = round(x / scale) in [-127, 127], x' = scale * q, so |x - x'| <= scale / 2 (half a
 * step). An all-zero group gets scale 1 (exact zeros); a constant group c gets |c|/127
 * (q = +-127, exact up to float rounding). group = 0 means one scale per token row (D). */

typedef struct la_kv_cache la_kv_cache; /* opaque */

typedef enum {
    LA_KV_FULL = 0, /* keep everything up to max_tokens */
    LA_KV_WINDOW,   /* window(w) */
    LA_KV_SINKS,    /* sinks(n, w), StreamingLLM */
    LA_KV_H2O       /* h2o(heavy, recent, sinks) */
} la_kv_policy;

typedef enum {
    LA_KV_F32 = 0,  /* float32 rows */
    LA_KV_INT8      /* int8 rows + one float32 scale per group */
} la_kv_storage;

typedef struct {
    int n_layers;        /* >= 1, default 1 */
    int H;               /* query heads of la_kv_attend calls, default 1 (H % Hkv == 0) */
    int Hkv;             /* kv heads per layer, default 1 */
    int D;               /* head dimension, default 64 */
    la_kv_policy policy; /* default LA_KV_FULL */
    int64_t max_tokens;  /* capacity of the full policy, default 4096 */
    int window;          /* w of window(w) and sinks(n, w) */
    int sinks;           /* n of sinks(n, w); sinks of h2o (default 0) */
    int heavy;           /* h2o heavy-hitter slots */
    int recent;          /* h2o recent window */
    la_kv_storage storage; /* default LA_KV_F32 */
    int group;           /* int8 group size along D (must divide D); 0 = one scale per row */
} la_kv_params;

/* n_layers = H = Hkv = 1, D = 64, full policy with max_tokens = 4096, f32 storage. */
la_kv_params la_kv_default_params(void);

/* Set the policy fields of *p from text such as "full", "window(256)", "window(w=256)",
 * "sinks(4,252)", "sinks(n=4,w=252)", "h2o(64,64)", "h2o(heavy=64,recent=64,sinks=4)",
 * optionally joined with "+int8" or "+int8(group=32)" (e.g. "sinks(4,252)+int8").
 * Shape fields (n_layers, H, Hkv, D, max_tokens) are left untouched.
 * Errors: LA_ESPEC naming the bad token and listing the valid forms; LA_EINVAL on NULL.
 * On error *p is untouched. */
la_status la_kv_policy_parse(const char *text, la_kv_params *p);

/* Canonical text of the policy (parseable by la_kv_policy_parse), snprintf-style. */
int la_kv_policy_format(const la_kv_params *p, char *buf, size_t n);

/* Check params: sizes >= 1, H % Hkv == 0, window/recent >= 1, sinks/heavy >= 0,
 * group divides D, ... Errors: LA_EINVAL with the offending field and the fix. */
la_status la_kv_params_validate(const la_kv_params *p);

/* Tokens per layer and kv head the policy may hold (see Budgets above). */
int64_t la_kv_budget(const la_kv_params *p);

/* Largest number of new tokens one la_kv_append may add: full: max_tokens; window: w;
 * sinks: w; h2o: recent (a larger chunk would have to evict part of itself). */
int64_t la_kv_max_chunk(const la_kv_params *p);

/* Bytes of k/v storage (rows and int8 scales) one cached token takes, all layers and kv
 * heads together: f32: 2 * n_layers * Hkv * D * 4; int8: 2 * n_layers * Hkv * (D + 4*D/g). */
double la_kv_bytes_per_token(const la_kv_params *p);

/* Allocate a cache holding budget tokens per layer and kv head: all storage and scratch
 * (dequantisation and gather buffers, H2O scores) is allocated here once; append and
 * attend never allocate (the kernel workspace the cache owns grows to the largest
 * request, then is reused). Errors: LA_EINVAL (bad params), LA_ENOMEM. */
la_status la_kv_new(const la_kv_params *p, la_kv_cache **out);
void la_kv_free(la_kv_cache *c);

/* Empty every layer (keeps the allocation). */
void la_kv_reset(la_kv_cache *c);

/* The params the cache was created with. */
const la_kv_params *la_kv_get_params(const la_kv_cache *c);

/* Number of tokens held by layer (the same for every kv head), and the number of tokens
 * ever appended to it (the stream position of the next token). -1 for a bad layer. */
int64_t la_kv_len(const la_kv_cache *c, int layer);
int64_t la_kv_seen(const la_kv_cache *c, int layer);

/* Bytes of k/v storage the cache holds allocated (budget * la_kv_bytes_per_token);
 * constant over the cache's life. */
size_t la_kv_bytes(const la_kv_cache *c);

/* Append T new tokens to layer: k, v: (Hkv, T, D) PRE-RoPE (un-rotated) keys and values.
 * First evicts by the policy so that len + T <= budget, then writes (quantising for
 * int8). New tokens start with H2O score 0. Errors: LA_EINVAL (NULL, bad layer,
 * T < 1 or T > la_kv_max_chunk, full cache out of room -- use a larger max_tokens or an
 * evicting policy). */
la_status la_kv_append(la_kv_cache *c, int layer, const float *k, const float *v, int T);

/* Copy out layer's kept tokens, dequantised: k, v: (Hkv, len, D) pre-RoPE, and
 * orig_pos: (Hkv, len) their original stream positions. Any output may be NULL. */
la_status la_kv_read(const la_kv_cache *c, int layer, float *k, float *v, int64_t *orig_pos);

/* H2O scores of layer: (Hkv, len) cumulative attention mass of each kept token. */
la_status la_kv_scores(const la_kv_cache *c, int layer, float *scores);

/* Attention of T new query rows over layer's kept keys (the last T of which must be the
 * rows just appended for these queries): one la_attn_forward call with
 *   q: (1, H, T, D) un-rotated   k, v: (1, Hkv, len, D)   pos0 = len - T
 *   out: (1, H, T, D)   row_stat: (1, H, T) or NULL.
 * int8 rows are dequantised into a buffer reused across calls. Under h2o, the kernel's
 * key_mass (summed over the query heads of each kv head) is added to the scores.
 * opts may be NULL or carry logn_s, as_beta / as_gamma (1, H, T), n_threads, ws and the
 * optional statistics (row_entropy (1,H,T), key_mass (1,H,len)); doc_ids must be NULL.
 * Errors: LA_EINVAL (NULL, bad layer, T > len, doc_ids given), LA_ESHAPE (T < 1),
 * and those of la_attn_forward. */
la_status la_kv_attend(la_kv_cache *c, int layer, const la_spec *spec, const float *q, int T,
                       float *out, float *row_stat, const la_attn_opts *opts);

/* The "rotate by the exact position delta on shift" path for callers that keep
 * POST-RoPE keys: rotate x (N, D) in place by angle delta * omega_k on every rotary pair
 * (la_rope_apply with pos = delta for every row; p-RoPE's unrotated pairs and
 * non-RoPE encodings are left unchanged). Because rotations compose, shifting by a then b
 * equals shifting by a + b (up to float rounding of cos/sin). A cache that evicts
 * tokens would shift each kept key by (new slot - old slot). ctx_len as la_rope_apply.
 * Errors: those of la_rope_apply; LA_ENOMEM. */
la_status la_kv_rope_shift(const la_spec *spec, float *x, int N, int D, int64_t delta,
                           int64_t ctx_len);

/* ---- next-token sampling (src/infer/sample.c) ---- */

/* temperature 0 = greedy (argmax, lowest id on ties); top_k 0 = off; top_p 1 = off. */
typedef struct {
    double temperature; /* >= 0, default 1 */
    int top_k;          /* keep the k most likely tokens (Fan et al. 2018); 0 = all */
    double top_p;       /* nucleus (Holtzman et al. 2020): the smallest set of most likely
                           tokens whose probability reaches top_p, in (0, 1]; default 1 */
} la_sample_params;

la_sample_params la_sample_default_params(void);

/* Bytes of scratch la_sample_token needs for a vocabulary of V. */
size_t la_sample_scratch_bytes(int V);

/* Draw the next token from logits (V) with p ~ softmax(logits / temperature) restricted
 * to top-k, then to the top-p nucleus, renormalised; u in [0, 1) is the uniform random
 * number that picks it (inverse CDF over tokens sorted by decreasing logit), so the same u
 * gives the same token. scratch: la_sample_scratch_bytes(V) bytes (may be NULL when
 * temperature is 0). Errors: LA_EINVAL (NULL, temperature < 0, top_k < 0, top_p outside
 * (0, 1], u outside [0, 1)), LA_ESHAPE (V < 1), LA_ENUMERIC (a NaN or +inf logit, or all
 * -inf). */
la_status la_sample_token(const float *logits, int V, const la_sample_params *sp, double u,
                          void *scratch, int32_t *token);

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_H */
