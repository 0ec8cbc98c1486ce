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

/* Row transforms mapping scores z (rows, n) to probabilities p (rows, n), row-major, each row
 * independent. Convention (SPEC 5, Peters et al. 2019 eq. 2):
 *     p_i = [(alpha-1) z_i - tau]_+ ^ (1/(alpha-1)),   tau such that sum_i p_i = 1,
 * tau in the same (unshifted) units as (alpha-1) z (the fixture's tau_convention).
 *   - Entries exactly on the threshold ((alpha-1) z_i == tau) are outside the support
 *     (p_i = 0 and no gradient flows through them).
 *   - -INFINITY entries are masked: p_i = 0, dz_i = 0, and they do not count in n.
 *   - A row with no finite entry returns p = 0, tau = LA_ROW_EMPTY and zero gradients
 *     (the limit is undefined; this is our documented choice, the reference package returns
 *     NaN or raises).
 *   - NaN or +INFINITY in z is LA_EINVAL (naming the row and column).
 * The maximum of each row is subtracted before any arithmetic, so rows with offsets of 1e6
 * keep full float64 precision. The float32 variants read and write float but compute in
 * double (SPEC 1: reductions that decide a threshold may use double); their error is that of
 * rounding the inputs to float. tau (rows) is double in both variants: pass NULL to skip it.
 * Errors: LA_EINVAL (NULL z/p, rows < 0, n < 1, alpha <= 1 or not finite -- alpha = 1 is
 * softmax, which is its own normaliser --, NaN/+inf input), LA_ENOMEM (scratch of 2n doubles).
 *
 * Backward (vector-Jacobian product, Peters et al. 2019 eq. 10): from the forward output p and
 * the upstream gradient dp = dL/dp (rows, n), with u_i = p_i^(2-alpha) on the support {p_i > 0}
 * and 0 elsewhere,
 *     dz = u * dp - (sum_i u_i dp_i / sum_i u_i) * u              (rows, n)
 * Entries off the support get exactly 0 even if dp_i is NaN or infinite. */

/* sparsemax (alpha = 2; Martins & Astudillo 2016, Algorithm 1): exact, sort-based, O(n log n).
 *   z: (rows, n) -> p: (rows, n), tau: (rows) or NULL (tau = z_i - p_i on the support). */
la_status la_sparsemax_forward_f64(const double *z, int64_t rows, int n, double *p, double *tau);
la_status la_sparsemax_forward_f32(const float *z, int64_t rows, int n, float *p, double *tau);
/* dz: (rows, n) from p, dp: (rows, n); u = 1 on the support (Martins & Astudillo 2016 eq. 14). */
la_status la_sparsemax_backward_f64(const double *p, const double *dp, int64_t rows, int n,
                                    double *dz);
la_status la_sparsemax_backward_f32(const float *p, const float *dp, int64_t rows, int n,
                                    float *dz);

/* 1.5-entmax (Peters et al. 2019, Algorithm 2): exact, sort-based, O(n log n); tau is the
 * closed-form root of the quadratic sum_{i in S} (z_i/2 - tau)^2 = 1 on the support S. */
la_status la_entmax15_forward_f64(const double *z, int64_t rows, int n, double *p, double *tau);
la_status la_entmax15_forward_f32(const float *z, int64_t rows, int n, float *p, double *tau);
/* dz: (rows, n); u = sqrt(p). */
la_status la_entmax15_backward_f64(const double *p, const double *dp, int64_t rows, int n,
                                   double *dz);
la_status la_entmax15_backward_f32(const float *p, const float *dp, int64_t rows, int n,
                                   float *dz);

/* alpha-entmax for any alpha > 1 (Peters et al. 2019 sec. 3.2; Blondel et al. 2019): root
 * find on the shifted threshold in the bracket [max - 1, max - n^(1-alpha)] (units of
 * (alpha-1) z), Newton steps guarded by bisection (as AdaSplash does), to float64 precision;
 * for alpha = 2 and 1.5 tau is then re-solved in closed form on the support found, so that
 * exact inputs give exact thresholds. O(n) per iteration, < 200 iterations. */
la_status la_entmax_bisect_forward_f64(const double *z, int64_t rows, int n, double alpha,
                                       double *p, double *tau);
la_status la_entmax_bisect_forward_f32(const float *z, int64_t rows, int n, double alpha,
                                       float *p, double *tau);
/* dz: (rows, n) as above. dalpha: (rows) or NULL, d L / d alpha of each row with z fixed
 * (sum it over rows for a shared alpha), Correia et al. 2019 (Adaptively Sparse
 * Transformers) Proposition 1: with S = {p_i > 0}, ut_i = u_i / sum_j u_j, h = sum_S p log p,
 *     dp_i/dalpha = (p_i - ut_i) / (alpha-1)^2 - (p_i log p_i - ut_i h) / (alpha-1),
 *     dalpha = sum_i dp_i * dp_i/dalpha. */
la_status la_entmax_bisect_backward_f64(const double *p, const double *dp, int64_t rows, int n,
                                        double alpha, double *dz, double *dalpha);
la_status la_entmax_bisect_backward_f32(const float *p, const float *dp, int64_t rows, int n,
                                        double alpha, float *dz, double *dalpha);

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

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_H */
