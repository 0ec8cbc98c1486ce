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

/* LA_API marks every public function: the library is compiled with -fvisibility=hidden,
 * so only declarations carrying LA_API are exported from liblongattn.so and stay global in
 * the pre-linked liblongattn.a (tests/test_exports.c checks both). */
#if defined(__GNUC__) || defined(__clang__)
#define LA_API __attribute__((visibility("default")))
#else
#define LA_API
#endif

/* Version of this header; la_version() returns the library's LA_VERSION_STRING, so a
 * program can check that it runs against the library it was compiled for. */
#define LA_VERSION_MAJOR 0
#define LA_VERSION_MINOR 1
#define LA_VERSION_PATCH 0
#define LA_VERSION_STR_(x) #x
#define LA_VERSION_XSTR_(x) LA_VERSION_STR_(x)
#define LA_VERSION_STRING                                                                      \
    LA_VERSION_XSTR_(LA_VERSION_MAJOR) "." LA_VERSION_XSTR_(LA_VERSION_MINOR) "."              \
    LA_VERSION_XSTR_(LA_VERSION_PATCH)

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
LA_API const char *la_status_name(la_status s);

/* Message of the last error raised on this thread ("" if none). Valid until the next
 * failing call on the same thread. */
LA_API const char *la_errmsg(void);

/* Version of the library binary, "MAJOR.MINOR.PATCH" (LA_VERSION_STRING when it was built).
 * Never NULL. */
LA_API const char *la_version(void);

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
LA_API la_spec la_spec_default(void);

/* Parse a spec string such as "softmax+sinv(tau=10)+prope(p=0.5)+causal" (SPEC 6).
 * Tokens are joined by '+', at most one per category (normaliser, position, transform,
 * pattern; global(g) combines with window(w)); missing categories take defaults.
 * Errors: LA_ESPEC with la_errmsg() naming the offending token and listing the valid
 * choices; LA_EINVAL if text or out is NULL. On error *out is untouched.
 * Token `name` or `name(args)`, args positional in documented order or key=value, e.g.
 * yarn(s, train, beta_fast=32, beta_slow=1, theta=10000); the full table is in README.md
 * ("Attention spec strings"). `logn` without s and train parses to s = 0, train = 0: the
 * kernel then needs la_attn_opts.logn_s or a train_len set by the caller (trainer). */
LA_API la_status la_spec_parse(const char *text, la_spec *out);

/* Check the parameters the chosen kinds use (alpha > 1, p in [0,1], theta > 1, s >= 1,
 * window >= 1, train where required, ...). Errors: LA_ESPEC naming the category, the
 * canonical spec and the rule; LA_EINVAL for NULL. logn with s = 0 and train = 0 is valid. */
LA_API la_status la_spec_validate(const la_spec *spec);

/* Canonical text form of spec into buf (always NUL-terminated when n > 0): categories in
 * the order normaliser+transform+position+pattern, transform `none` omitted, every
 * parameter named, doubles in the shortest text that reads back bit for bit.
 * la_spec_parse(la_spec_format(s)) == s for every s la_spec_parse produced. Returns the
 * length the full text needs, like snprintf (buf may be NULL when n == 0). */
LA_API int la_spec_format(const la_spec *spec, char *buf, size_t n);

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
LA_API la_workspace *la_workspace_new(void);
LA_API void la_workspace_free(la_workspace *ws);

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

LA_API la_attn_opts la_attn_default_opts(void);

/* Fused attention forward (SPEC 1-5), tiled with O(T*D + S*D) extra memory.
 *   q: (B, H, T, D)   k, v: (B, Hkv, S, D)   out: (B, H, T, D)
 *   row_stat: (B, H, T): softmax log-sum-exp of the transformed logits (natural log);
 *             entmax threshold tau; LA_ROW_EMPTY for rows with no visible key.
 * q and k are given before any rotation: RoPE-family encodings are applied inside.
 * opts may be NULL. Errors: LA_EINVAL (NULL tensor, bad spec), LA_ESHAPE (H % Hkv != 0,
 * a dimension < 1, odd D with a RoPE-family encoding), LA_ENOMEM. */
LA_API la_status la_attn_forward(const la_spec *spec, const la_shape *shape,
                          const float *q, const float *k, const float *v,
                          float *out, float *row_stat, const la_attn_opts *opts);

/* Backward of la_attn_forward. out and row_stat are the forward's outputs.
 *   dout: (B, H, T, D)  ->  dq: (B, H, T, D), dk, dv: (B, Hkv, S, D), all overwritten.
 * Learnable transform parameters get their gradients through opts (dlogn_s, das_*).
 * Errors as la_attn_forward. */
LA_API la_status la_attn_backward(const la_spec *spec, const la_shape *shape,
                           const float *q, const float *k, const float *v,
                           const float *out, const float *row_stat, const float *dout,
                           float *dq, float *dk, float *dv, const la_attn_opts *opts);

/* ======================================================================== */
/* Position encodings (SPEC 3)                                              */
/* ======================================================================== */

/* Rotation frequencies omega_k, k < D/2, for the spec's RoPE-family encoding at context
 * length ctx_len (used by dynamic-ntk). Pairs that do not rotate (p-RoPE's low
 * frequencies, NoPE/ALiBi) get 0. omega: (D/2) doubles. */
LA_API la_status la_rope_freqs(const la_spec *spec, int D, int64_t ctx_len, double *omega);

/* Rotate x (N, D) in place: row r by angle pos[r] * omega_k on the half-split pair
 * (x[k], x[k + D/2]). Angles in double, cos/sin rounded to float. inverse != 0 rotates by
 * the negative angle (the backward of the forward rotation). */
LA_API la_status la_rope_apply(const la_spec *spec, float *x, int N, int D, const int64_t *pos,
                        int64_t ctx_len, int inverse);

/* ALiBi slopes m_h for n_heads heads (Press et al.; SPEC 3). slopes: (n_heads). */
LA_API void la_alibi_slopes(int n_heads, float *slopes);

/* sinv coefficients for distance t >= 0 (SPEC 4): a_t^2 = 1 + 2 log1p(t/tau),
 * m_t = -2 log1p(t/tau). */
LA_API void la_sinv_coeffs(double t, double tau, double *a, double *m);

/* ======================================================================== */
/* Row normalisers: sparsemax / entmax (SPEC 5)  -- section owned by issue 3 */
/* ======================================================================== */

#define LA_ENTMAX_ALPHA_MAX 4.0 /* largest accepted entmax alpha, see below */
#define LA_ENTMAX_ALPHA_MIN 1.000001 /* smallest accepted entmax alpha (alpha - 1 >= 1e-6), see below */

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
 * softmax, which is its own normaliser --, alpha > LA_ENTMAX_ALPHA_MAX, NaN/+inf input),
 * LA_ENOMEM (scratch of 2n doubles).
 * alpha is bounded by LA_ENTMAX_ALPHA_MAX = 4 (every entry point, attention included): for
 * larger alpha, p_i = x^(1/(alpha-1)) is so flat that the threshold would need more than
 * float64 precision (measured over random rows of 256 entries: |sum p - 1| <= 1e-10 at
 * alpha = 4, 4e-5 at 6, 2e-3 at 8, 0.13 at 32). The paper's values are 1.5 and 2.
 * Near 1 the threshold is resolved to float64's 2^-53 only relative to 1, and p_i =
 * x^(1/(alpha-1)) multiplies that error by 1/(alpha-1): |sum p - 1| is about
 * 5.5e-17 / (alpha - 1) (measured as above: 6e-11 at alpha - 1 = 1e-6, 6e-7 at 1e-10, 6e-3
 * at 1e-14, and at 1e-16 the bracket of tau collapses). So alpha >= LA_ENTMAX_ALPHA_MIN =
 * 1 + 1e-6, where p agrees with softmax to 1e-7 anyway: use softmax below that.
 *
 * Backward (vector-Jacobian product, Peters et al. 2019 eq. 10): from the forward output p and
 * the upstream gradient dp = dL/dp (rows, n), with u_i = p_i^(2-alpha) on the support {p_i > 0}
 * and 0 elsewhere,
 *     dz = u * dp - (sum_i u_i dp_i / sum_i u_i) * u              (rows, n)
 * Entries off the support get exactly 0 even if dp_i is NaN or infinite. */

/* sparsemax (alpha = 2; Martins & Astudillo 2016, Algorithm 1): exact, sort-based, O(n log n).
 *   z: (rows, n) -> p: (rows, n), tau: (rows) or NULL (tau = z_i - p_i on the support). */
LA_API la_status la_sparsemax_forward_f64(const double *z, int64_t rows, int n, double *p, double *tau);
LA_API la_status la_sparsemax_forward_f32(const float *z, int64_t rows, int n, float *p, double *tau);
/* dz: (rows, n) from p, dp: (rows, n); u = 1 on the support (Martins & Astudillo 2016 eq. 14). */
LA_API la_status la_sparsemax_backward_f64(const double *p, const double *dp, int64_t rows, int n,
                                    double *dz);
LA_API la_status la_sparsemax_backward_f32(const float *p, const float *dp, int64_t rows, int n,
                                    float *dz);

/* 1.5-entmax (Peters et al. 2019, Algorithm 2): exact, sort-based, O(n log n); tau is the
 * closed-form root of the quadratic sum_{i in S} (z_i/2 - tau)^2 = 1 on the support S. */
LA_API la_status la_entmax15_forward_f64(const double *z, int64_t rows, int n, double *p, double *tau);
LA_API la_status la_entmax15_forward_f32(const float *z, int64_t rows, int n, float *p, double *tau);
/* dz: (rows, n); u = sqrt(p). */
LA_API la_status la_entmax15_backward_f64(const double *p, const double *dp, int64_t rows, int n,
                                   double *dz);
LA_API la_status la_entmax15_backward_f32(const float *p, const float *dp, int64_t rows, int n,
                                   float *dz);

/* alpha-entmax for any alpha > 1 (Peters et al. 2019 sec. 3.2; Blondel et al. 2019): root
 * find on the shifted threshold in the bracket [max - 1, max - n^(1-alpha)] (units of
 * (alpha-1) z), Newton steps guarded by bisection (as AdaSplash does), to float64 precision;
 * for alpha = 2 and 1.5 tau is then re-solved in closed form on the support found, so that
 * exact inputs give exact thresholds. O(n) per iteration, < 200 iterations. */
LA_API la_status la_entmax_bisect_forward_f64(const double *z, int64_t rows, int n, double alpha,
                                       double *p, double *tau);
LA_API la_status la_entmax_bisect_forward_f32(const float *z, int64_t rows, int n, double alpha,
                                       float *p, double *tau);
/* dz: (rows, n) as above. dalpha: (rows) or NULL, d L / d alpha of each row with z fixed
 * (sum it over rows for a shared alpha), Correia et al. 2019 (Adaptively Sparse
 * Transformers) Proposition 1: with S = {p_i > 0}, ut_i = u_i / sum_j u_j, h = sum_S p log p,
 *     dp_i/dalpha = (p_i - ut_i) / (alpha-1)^2 - (p_i log p_i - ut_i h) / (alpha-1),
 *     dalpha = sum_i dp_i * dp_i/dalpha. */
LA_API la_status la_entmax_bisect_backward_f64(const double *p, const double *dp, int64_t rows, int n,
                                        double alpha, double *dz, double *dalpha);
LA_API la_status la_entmax_bisect_backward_f32(const float *p, const float *dp, int64_t rows, int n,
                                        double alpha, float *dz, double *dalpha);

/* Fused sparse attention: la_attn_forward / la_attn_backward with spec->norm set to
 * LA_NORM_ENTMAX (alpha = spec->alpha > 1), LA_NORM_SPARSEMAX (alpha = 2) or LA_NORM_ASENTMAX
 * ("entmax(alpha=1.5)", "sparsemax", "asentmax(alpha=1.5,delta=1,gamma_range=2)" in spec
 * strings). row_stat is tau in units of (alpha-1) * logit (p = [(alpha-1) L - tau]_+^(1/(alpha-1))),
 * LA_ROW_EMPTY for rows without a visible key. opts->row_support receives the support size of
 * each row (number of keys with p > 0); the fraction of exact zeros of a row is
 * 1 - row_support / n_q, n_q its number of visible keys. opts->row_entropy gets -sum p log p.
 * ASEntmax needs opts->as_beta and opts->as_gamma (B, H, T) (from la_asentmax_params_forward):
 * the query of head h, token i is scaled by spec->as_delta + beta (log n)^gamma, n = p + 2 with
 * p its document-relative position (n = 2 for p < 0), before RoPE; with nape only the NoPE heads
 * (h >= H/2) are scaled. la_attn_backward then writes opts->das_beta and opts->das_gamma
 * (B, H, T) when non-NULL. Extra errors: LA_EINVAL for alpha <= 1 or missing as_beta/as_gamma. */

/* ASEntmax scale parameters (Vasylenko et al. 2025, eq. 9-10), per head and token:
 *   beta[b,h,t]  = softplus(sum_c w_beta[h,c] x[b,t,c] + b_beta[h])
 *   gamma[b,h,t] = gamma_range * tanh(sum_c w_gamma[h,c] x[b,t,c] + b_gamma[h])
 * x: (B, T, C) layer input; w_beta, w_gamma: (H, C); b_beta, b_gamma: (H) or NULL (zero);
 * beta, gamma: (B, H, T), the layout of la_attn_opts.as_beta / as_gamma.
 * Errors: LA_EINVAL (NULL array, non-finite gamma_range), LA_ESHAPE (a size < 1). */
LA_API la_status la_asentmax_params_forward(const float *x, int B, int T, int C, int H,
                                     const float *w_beta, const float *b_beta,
                                     const float *w_gamma, const float *b_gamma,
                                     double gamma_range, float *beta, float *gamma);
/* Backward of la_asentmax_params_forward from its outputs beta, gamma and their gradients
 * dbeta, dgamma (B, H, T). ACCUMULATES (+=, llm.c style) into dx (B, T, C), dw_beta, dw_gamma
 * (H, C), db_beta, db_gamma (H); any of these may be NULL to skip it. Uses
 * d softplus(a)/da = 1 - exp(-beta) and d gamma/da = gamma_range - gamma^2/gamma_range. */
LA_API la_status la_asentmax_params_backward(const float *x, int B, int T, int C, int H,
                                      const float *w_beta, const float *w_gamma,
                                      double gamma_range, const float *beta, const float *gamma,
                                      const float *dbeta, const float *dgamma, float *dx,
                                      float *dw_beta, float *db_beta, float *dw_gamma,
                                      float *db_gamma);

/* ======================================================================== */
/* NumPy .npy files                                                         */
/* ======================================================================== */

/* Read a little-endian float32 C-order .npy file (format versions 1.0, 2.0, 3.0). On
 * success *data is malloc'ed (free() it; non-NULL even for 0 elements) and
 * shape[0..*ndim) holds the dimensions (at most 8; ndim 0 is a scalar). On error the
 * outputs are untouched. Errors: LA_EIO (cannot open, not a regular file), LA_EFORMAT (bad
 * magic, dtype other than '<f4' -- the message names it and says x.astype(np.float32) --,
 * Fortran order, header over 1 MiB or malformed, truncated data or stray bytes), LA_ENOMEM. */
LA_API la_status la_npy_read_f32(const char *path, float **data, int *ndim, int64_t shape[8]);

/* Write float32 data (ndim 0..8 dimensions, shape >= 0) as a version 1.0 .npy file
 * atomically (temp file, fsync, rename); byte-identical to np.save of the same array.
 * Errors: LA_EINVAL (bad shape, NULL data with elements), LA_EIO. */
LA_API la_status la_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape);

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
    float qk_gain;     /* initial value of the QK-norm gains (q_norm.g, k_norm.g). With QK-norm
                          a logit is at most qk_gain^2 * sqrt(D) (unit-RMS q and k, S = q.k/sqrt(D)):
                          5.7 at D = 32 and gain 1, too flat to put most of the attention on one key
                          of 128, which retrieval (passkey, induction) needs; larger values start
                          sharper (cf. Henry et al. 2020, QK-norm with a learned scale). Only the
                          initialisation: a checkpoint carries the learned gains. default 1 */
} la_model_config;

LA_API la_model_config la_model_default_config(void);

/* A GPT model: parameters, gradients, activation buffers (opaque). */
typedef struct la_model la_model;

/* Build a model with parameters drawn from la_rng seeded with `seed` (same seed, same
 * weights on every machine). Gains start at 1, logn s_h at 1/log(train_len).
 * Errors: LA_EINVAL (NULL, a size < 1, n_head not dividing d_model, n_kv_head not
 * dividing n_head, odd head size with a RoPE-family spec), LA_ESPEC (bad spec text,
 * message from la_spec_parse), LA_ENOMEM. *out is NULL on error. */
LA_API la_status la_model_new(const la_model_config *cfg, uint64_t seed, la_model **out);
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

LA_API int la_model_num_tensors(const la_model *m);
/* Errors: LA_EINVAL if i is out of range. */
LA_API la_status la_model_tensor(const la_model *m, int i, la_tensor_info *info);

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
 *   diag: (n_layer * n_head) accumulators (la_diag_new) with max_dist >= T - 1; rows are
 *         added to what they hold. No LM head is computed.
 * Memory as la_model_eval (O(T * (C + F + H)), no T x T buffer); time about twice that of
 * la_model_eval (the attention is computed, then recomputed for the probabilities).
 * Invalidates la_model_backward.
 * Errors: those of la_model_eval (LA_EINVAL bad tokens), LA_EINVAL (diag NULL, an
 * accumulator NULL or with max_dist < T - 1), those of la_attn_diagnose. */
typedef struct la_diag la_diag; /* attention diagnostics accumulator (declared below) */
LA_API la_status la_model_diagnose(la_model *m, const int32_t *tokens, int T, la_diag **diag);

/* Threads for the attention kernels of this model (la_attn_opts.n_threads); 0 (the default)
 * means the OpenMP default. Calls with under ~2M multiply-adds always use one thread.
 * la_trainer_new applies la_train_config.n_threads when it is > 0. */
LA_API void la_model_set_threads(la_model *m, int n_threads);

/* Hand back every activation buffer (they are reallocated on the next forward). */
LA_API void la_model_release_buffers(la_model *m);

/* Time spent inside la_attn_forward/backward and in cblas_sgemm since the model was built
 * or the counters were reset (seconds, wall clock). For `longattn bench train`. */
typedef struct { double attn_s, matmul_s, total_s; } la_model_timing;
LA_API void la_model_get_timing(const la_model *m, la_model_timing *t);
LA_API void la_model_reset_timing(la_model *m);

/* Weights as safetensors (little-endian u64 header length, JSON header with dtype "F32",
 * shape, data_offsets per tensor named as la_model_tensor; "__metadata__" holds the
 * config as strings: format "longattn-gpt-1", n_layer, n_head, n_kv_head, d_model, d_ff,
 * vocab, train_len, spec). Written atomically. Errors: LA_EIO. */
LA_API la_status la_model_save(const la_model *m, const char *path);

/* Build a model from a safetensors file written by la_model_save (config and spec from
 * its metadata). Errors: LA_EIO (missing file), LA_EFORMAT (not safetensors, truncated,
 * wrong dtype/shape/offsets, missing tensor or metadata; the message says which),
 * LA_ESPEC (bad spec in metadata), LA_ENOMEM. */
LA_API la_status la_model_load(const char *path, la_model **out);

/* ======================================================================== */
/* Training data: byte text and llm.c token shards                          */
/* ======================================================================== */

/* Token source split into train and validation documents (opaque).
 * Text: a file or a directory of files (regular files, not recursive, sorted by name,
 * hidden files skipped), read as bytes, vocab 256, one document per file. A directory with a
 * train/ subfolder (the study corpus layout) is read as train/ plus, if present, val/: the
 * val/ documents are then the validation split and val_fraction is not used. Every document is
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

LA_API la_data_config la_data_default_config(void);

/* Open a text file/directory or shard file/directory (the kind is chosen by the ".bin"
 * suffix; a directory must hold only one kind). Errors: LA_EIO (missing/unreadable),
 * LA_EFORMAT (wrong magic/version, size not 1024 + 2N, truncated, token >= vocab, empty
 * file set; the message names the file and the fix), LA_ENOMEM. */
LA_API la_status la_data_open(const char *path, const la_data_config *cfg, la_data **out);
LA_API void la_data_free(la_data *d);

LA_API int la_data_vocab(const la_data *d);
/* Total tokens / number of documents of a split. */
LA_API int64_t la_data_num_tokens(const la_data *d, la_split split);
LA_API int la_data_num_docs(const la_data *d, la_split split);
/* Length of document i of a split (tokens). -1 if out of range. */
LA_API int64_t la_data_doc_len(const la_data *d, la_split split, int i);
/* Copy n tokens of document `doc` starting at `offset` into out (n int32).
 * Errors: LA_EINVAL (bad doc, offset + n beyond the document). */
LA_API la_status la_data_read(const la_data *d, la_split split, int doc, int64_t offset, int64_t n,
                       int32_t *out);

/* Resumable sampling state (it goes into checkpoints). */
typedef struct {
    uint64_t rng[4];     /* xoshiro256** state of the window sampler */
    uint64_t n_windows;  /* windows drawn so far */
} la_data_state;

/* Seed the train sampler (state becomes a function of seed only). */
LA_API void la_data_seed(la_data *d, uint64_t seed);
LA_API void la_data_get_state(const la_data *d, la_data_state *st);
LA_API void la_data_set_state(la_data *d, const la_data_state *st);

/* Draw B windows of T+1 consecutive tokens from the train split, each start uniform over
 * every position where a full window fits (so every full window is reachable; nothing is
 * read past the declared count). out: (B, T+1) int32; inputs are out[b][0..T), targets
 * out[b][1..T]. Errors: LA_EINVAL (B, T < 1, out NULL), LA_ESHAPE (train split shorter
 * than T+1 tokens: the message gives both numbers). */
LA_API la_status la_data_sample(la_data *d, int B, int T, int32_t *out);

/* Deterministic validation windows: the validation split's concatenation cut into
 * consecutive non-overlapping windows of T+1 tokens; batch `index` holds windows
 * index*B .. index*B+B-1 (wrapping around). out: (B, T+1). Errors as la_data_sample. */
LA_API la_status la_data_val_batch(const la_data *d, int index, int B, int T, int32_t *out);

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
    int n_threads;        /* attention threads of the model (la_model_set_threads); 0: leave as is */
} la_train_config;

LA_API la_train_config la_train_default_config(void);

/* Learning-rate multiplier in [min_lr/lr, 1] at a step (0-based): linear warm-up over
 * `warmup` steps, then cosine decay to min_lr at `steps`. */
LA_API double la_train_lr_factor(const la_train_config *cfg, int step);

typedef struct la_trainer la_trainer;

/* Trainer for model m drawing from data (data may be NULL: then only
 * la_trainer_step_batch works). Both must outlive the trainer; the trainer seeds the
 * data sampler with cfg->seed. Errors: LA_EINVAL (bad config value, named), LA_ENOMEM. */
LA_API la_status la_trainer_new(la_model *m, la_data *data, const la_train_config *cfg,
                         la_trainer **out);
LA_API void la_trainer_free(la_trainer *tr);

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
LA_API la_status la_trainer_step(la_trainer *tr, la_step_info *info);

/* One optimizer step on a caller-provided batch (e.g. passkey fine-tuning):
 * tokens, targets (B, T) as la_model_forward (targets < 0 ignored). Uses and advances the
 * same schedule and step counter. */
LA_API la_status la_trainer_step_batch(la_trainer *tr, const int32_t *tokens, const int32_t *targets,
                                int B, int T, la_step_info *info);

/* Mean validation loss (nats/token) over cfg.eval_batches deterministic validation
 * batches (la_data_val_batch) of B x T, via la_model_eval. Errors: LA_EINVAL (no data or
 * empty validation split). */
LA_API la_status la_trainer_eval(la_trainer *tr, float *val_loss);

/* Steps done so far. */
LA_API int la_trainer_step_count(const la_trainer *tr);

/* Checkpoint: weights to `path` (la_model_save) and optimiser moments, Muon momenta,
 * step, data sampler state and train config to `path`.state (also safetensors: tensors
 * "adam.m", "adam.v", "muon.mom"; metadata as strings). Both written atomically; each
 * records a hash of the weights so a mismatched pair is detected. Errors: LA_EIO. */
LA_API la_status la_trainer_save(const la_trainer *tr, const char *path);

/* Restore a checkpoint into an existing trainer (whose model was built with the same
 * config, e.g. by la_model_load(path)): weights, moments, step, data state. Training
 * then continues bit-identically to an uninterrupted run. Errors: LA_EIO (missing file),
 * LA_EFORMAT (corrupt, truncated, weights/state mismatch, model config or optimizer
 * different from the trainer's: the message names the field). Nothing is changed on error. */
LA_API la_status la_trainer_load(la_trainer *tr, const char *path);

/* The train config stored in checkpoint `path`'s state file (to resume with the same
 * settings). Errors: LA_EIO, LA_EFORMAT. */
LA_API la_status la_trainer_read_config(const char *path, la_train_config *cfg);

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
LA_API la_status la_train_run(la_trainer *tr, la_train_progress_fn progress, void *user);

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
LA_API la_kv_params la_kv_default_params(void);

/* Set the policy fields of *p from text such as "full", "window(256)", "window(w=256)",
 * "sinks(4,252)", "sinks(n=4,w=252)", "h2o(64,64)", "h2o(heavy=64,recent=64,sinks=4)",
 * optionally joined with "+int8" or "+int8(group=32)" (e.g. "sinks(4,252)+int8").
 * Shape fields (n_layers, H, Hkv, D, max_tokens) are left untouched.
 * Errors: LA_ESPEC naming the bad token and listing the valid forms; LA_EINVAL on NULL.
 * On error *p is untouched. */
LA_API la_status la_kv_policy_parse(const char *text, la_kv_params *p);

/* Canonical text of the policy (parseable by la_kv_policy_parse), snprintf-style. */
LA_API int la_kv_policy_format(const la_kv_params *p, char *buf, size_t n);

/* Check params: sizes >= 1, H % Hkv == 0, window/recent >= 1, sinks/heavy >= 0,
 * group divides D, ... Errors: LA_EINVAL with the offending field and the fix. */
LA_API la_status la_kv_params_validate(const la_kv_params *p);

/* Tokens per layer and kv head the policy may hold (see Budgets above). */
LA_API int64_t la_kv_budget(const la_kv_params *p);

/* Largest number of new tokens one la_kv_append may add: full: max_tokens; window: w;
 * sinks: w; h2o: recent (a larger chunk would have to evict part of itself). */
LA_API int64_t la_kv_max_chunk(const la_kv_params *p);

/* Bytes of k/v storage (rows and int8 scales) one cached token takes, all layers and kv
 * heads together: f32: 2 * n_layers * Hkv * D * 4; int8: 2 * n_layers * Hkv * (D + 4*D/g). */
LA_API double la_kv_bytes_per_token(const la_kv_params *p);

/* Allocate a cache holding budget tokens per layer and kv head: all storage and scratch
 * (dequantisation and gather buffers, H2O scores) is allocated here once; append and
 * attend never allocate (the kernel workspace the cache owns grows to the largest
 * request, then is reused). Errors: LA_EINVAL (bad params), LA_ENOMEM. */
LA_API la_status la_kv_new(const la_kv_params *p, la_kv_cache **out);
LA_API void la_kv_free(la_kv_cache *c);

/* Empty every layer (keeps the allocation). */
LA_API void la_kv_reset(la_kv_cache *c);

/* The params the cache was created with. */
LA_API const la_kv_params *la_kv_get_params(const la_kv_cache *c);

/* Number of tokens held by layer (the same for every kv head), and the number of tokens
 * ever appended to it (the stream position of the next token). -1 for a bad layer. */
LA_API int64_t la_kv_len(const la_kv_cache *c, int layer);
LA_API int64_t la_kv_seen(const la_kv_cache *c, int layer);

/* Bytes of k/v storage the cache holds allocated (budget * la_kv_bytes_per_token);
 * constant over the cache's life. */
LA_API size_t la_kv_bytes(const la_kv_cache *c);

/* Append T new tokens to layer: k, v: (Hkv, T, D) PRE-RoPE (un-rotated) keys and values.
 * First evicts by the policy so that len + T <= budget, then writes (quantising for
 * int8). New tokens start with H2O score 0. Errors: LA_EINVAL (NULL, bad layer,
 * T < 1 or T > la_kv_max_chunk, full cache out of room -- use a larger max_tokens or an
 * evicting policy). */
LA_API la_status la_kv_append(la_kv_cache *c, int layer, const float *k, const float *v, int T);

/* Copy out layer's kept tokens, dequantised: k, v: (Hkv, len, D) pre-RoPE, and
 * orig_pos: (Hkv, len) their original stream positions. Any output may be NULL. */
LA_API la_status la_kv_read(const la_kv_cache *c, int layer, float *k, float *v, int64_t *orig_pos);

/* H2O scores of layer: (Hkv, len) cumulative attention mass of each kept token. */
LA_API la_status la_kv_scores(const la_kv_cache *c, int layer, float *scores);

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
LA_API la_status la_kv_attend(la_kv_cache *c, int layer, const la_spec *spec, const float *q, int T,
                       float *out, float *row_stat, const la_attn_opts *opts);

/* The "rotate by the exact position delta on shift" path for callers that keep
 * POST-RoPE keys: rotate x (N, D) in place by angle delta * omega_k on every rotary pair
 * (la_rope_apply with pos = delta for every row; p-RoPE's unrotated pairs and
 * non-RoPE encodings are left unchanged). Because rotations compose, shifting by a then b
 * equals shifting by a + b (up to float rounding of cos/sin). A cache that evicts
 * tokens would shift each kept key by (new slot - old slot). ctx_len as la_rope_apply.
 * Errors: those of la_rope_apply; LA_ENOMEM. */
LA_API la_status la_kv_rope_shift(const la_spec *spec, float *x, int N, int D, int64_t delta,
                           int64_t ctx_len);

/* ---- next-token sampling (src/infer/sample.c) ---- */

/* temperature 0 = greedy (argmax, lowest id on ties); top_k 0 = off; top_p 1 = off. */
typedef struct {
    double temperature; /* >= 0, default 1 */
    int top_k;          /* keep the k most likely tokens (Fan et al. 2018); 0 = all */
    double top_p;       /* nucleus (Holtzman et al. 2020): the smallest set of most likely
                           tokens whose probability reaches top_p, in (0, 1]; default 1 */
} la_sample_params;

LA_API la_sample_params la_sample_default_params(void);

/* Bytes of scratch la_sample_token needs for a vocabulary of V. */
LA_API size_t la_sample_scratch_bytes(int V);

/* Draw the next token from logits (V) with p ~ softmax(logits / temperature) restricted
 * to top-k, then to the top-p nucleus, renormalised; u in [0, 1) is the uniform random
 * number that picks it (inverse CDF over tokens sorted by decreasing logit), so the same u
 * gives the same token. scratch: la_sample_scratch_bytes(V) bytes (may be NULL when
 * temperature is 0). Errors: LA_EINVAL (NULL, temperature < 0, top_k < 0, top_p outside
 * (0, 1], u outside [0, 1)), LA_ESHAPE (V < 1), LA_ENUMERIC (a NaN or +inf logit, or all
 * -inf). */
LA_API la_status la_sample_token(const float *logits, int V, const la_sample_params *sp, double u,
                          void *scratch, int32_t *token);

/* ---- incremental decoding of the GPT through a KV cache (src/infer/decode.c) ---- */

/* A model plus a KV cache plus the buffers of one decoding step (opaque). Each
 * la_decoder_step runs T new tokens through every block exactly as la_model_forward does
 * (same layer functions, SPEC 7), except that attention is la_kv_attend over the cache:
 * the tokens' QK-normed, un-rotated k and v are appended to each layer's cache (evicting by
 * the policy) and the queries attend over the kept tokens. With the full policy the logits
 * of a token equal those of one la_model_forward over the whole prefix (tests/test_decode.c).
 * With evicting policies the kept tokens are re-indexed (StreamingLLM positions). */
typedef struct la_decoder la_decoder;

/* Fill the shape fields of p (n_layers, H, Hkv, D) from the model's config. */
LA_API la_status la_kv_params_for_model(const la_model *m, la_kv_params *p);

/* Decoder for m (which must outlive it) with the policy fields of *policy (shape fields
 * are taken from the model; for full, policy->max_tokens is the longest stream).
 * max_step: the most tokens one la_decoder_step may take, in [1, la_kv_max_chunk].
 * Errors: LA_EINVAL (NULL, bad policy, bad max_step), LA_EFORMAT (model lacks a tensor),
 * LA_ENOMEM. */
LA_API la_status la_decoder_new(la_model *m, const la_kv_params *policy, int max_step, la_decoder **out);
LA_API void la_decoder_free(la_decoder *d);
/* Start a new stream (empties the cache). */
LA_API void la_decoder_reset(la_decoder *d);
LA_API la_kv_cache *la_decoder_cache(la_decoder *d);
LA_API int la_decoder_max_step(const la_decoder *d);

/* Run tokens (T) through the model, appending to the cache. logits: (T, V) if all_rows,
 * else (1, V) for the last token only; may be NULL. Errors: LA_EINVAL (NULL, T outside
 * [1, max_step], token outside the vocabulary, a full cache out of room), others from the
 * kernel. */
LA_API la_status la_decoder_step(la_decoder *d, const int32_t *tokens, int T, float *logits, int all_rows);

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
LA_API la_status la_docs_load(const char *dir, la_docs *out);
LA_API void la_docs_free(la_docs *docs);
/* Length in tokens of the longest document (0 if none). */
LA_API int64_t la_docs_longest(const la_docs *docs);

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
LA_API la_status la_eval_windows(const la_docs *docs, int T, int n, uint64_t seed, int64_t *start);

/* Validation loss at context length T, one window at a time (B = 1, so memory is whatever
 * fn needs for one length-T window). The text evaluated is n spans of span+1 tokens
 * (la_eval_windows(docs, span, n, seed)); each span is cut into floor(span/T) windows of T
 * inputs placed back to back, each evaluated from position 0. With span = the longest
 * evaluation length (and lengths dividing it), every length scores exactly the same target
 * tokens, so differences between lengths come from context length alone. span = 0 means T.
 * Results in bits per token (bits per byte for byte documents):
 *   *loss: mean over every scored target token;
 *   bucket_loss: (ceil(T / bucket)) or NULL, the mean over target positions
 *   [b*bucket, (b+1)*bucket) of every window; bucket_tokens: (same) or NULL, their counts.
 * The token-weighted mean of bucket_loss is *loss. Sums are in double.
 * Errors: as la_eval_windows (for span), LA_EINVAL (bucket < 1, T < 1, span < T),
 * LA_ENUMERIC (a non-finite loss), or whatever fn returns. */
LA_API la_status la_eval_loss(la_token_loss_fn fn, void *ctx, const la_docs *docs, int T, int span, int n,
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
LA_API int la_passkey_min_len(void);

/* Build one example of T+1 byte tokens: the model reads tokens[0..T) and is scored on
 * predicting tokens[answer_pos .. T] (the digits). The haystack is a contiguous stretch of
 * hay (byte documents, joined by '\n' when one is too short), starting at a seeded offset;
 * the needle goes after floor(depth * haystack bytes), moved back to the previous
 * whitespace when one is within 16 bytes, so words stay whole. The key is drawn from seed
 * and redrawn until its digits occur nowhere in the haystack, so the answer is present
 * only in the needle and at the end. Errors: LA_EINVAL (NULL, depth outside [0,1], hay not
 * byte-level or empty), LA_ESHAPE (T < la_passkey_min_len()). */
LA_API la_status la_passkey_make(const la_docs *hay, int T, double depth, uint64_t seed,
                          int32_t *tokens, la_passkey *info);

/* Exact-match score of greedy decoding: pred (T) holds the model's argmax next token at
 * each input position of the example tokens (T+1) built by la_passkey_make (e.g. the
 * argmax output of la_model_eval). Returns 1 iff pred[answer_pos-1+i] equals the digit
 * tokens[answer_pos+i] for every i < LA_PASSKEY_DIGITS -- teacher-forced argmax right at
 * every digit is exactly greedy decoding reproducing the whole key; 0 otherwise (one wrong
 * digit scores 0: no partial credit). */
LA_API int la_passkey_exact(const int32_t *pred, const int32_t *tokens, const la_passkey *info);

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
    double qk_gain;            /* "model": {"qk_gain"}: initial QK-norm gain (la_model_config.qk_gain), default 1 */
    double pk_mix;             /* "passkey": {"pretrain_mix"}: fraction of every pre-training batch
                                  that is passkey examples at L (loss on every byte), default 0 */
} la_study;

/* Parse study-file text. where names the source in messages (a file name). Every key is
 * checked: an unknown key, a wrong type, a value out of range, lengths that do not
 * increase or a spec that la_spec_parse rejects gives LA_EFORMAT (LA_ESPEC for the spec)
 * with a message "<where>: key \"k\": problem; fix". Missing keys take the defaults above;
 * "data", "steps", "batch", "seq_len", "lr" and "specs" are required. */
LA_API la_status la_study_parse(const char *text, const char *where, la_study *out);
/* Read and parse a study file. Errors: LA_EIO, then as la_study_parse. */
LA_API la_status la_study_load(const char *path, la_study *out);

/* ---- running a study (src/study/study_run.c) ---- */

/* Progress of la_study_run, reported at every step and phase change. */
typedef struct {
    int spec_index, n_specs; /* variant being worked on (0-based) */
    const char *spec;        /* its spec text */
    const char *phase;       /* "train", "eval", "finetune", "passkey" or "write" */
    int done, total;         /* steps / windows / examples done in this phase */
    double loss;             /* latest training loss in bits per token, NAN if none */
    double val_loss;         /* latest validation loss at L in bits per token, NAN if none */
    double elapsed_s;        /* wall time since the study started */
    double eta_s;            /* estimated seconds left for the whole study, NAN until known;
                                from a flop count of every remaining phase and the measured rate */
} la_study_progress;
typedef void (*la_study_progress_fn)(void *user, const la_study_progress *p);

typedef struct {
    int n_threads;                 /* attention threads; 0: OpenMP default */
    la_study_progress_fn progress; /* NULL: silent */
    void *user;
    const char *gnuplot;           /* gnuplot program; NULL: "gnuplot"; "": no plots */
    const char *data;              /* non-NULL: use this data folder instead of the file's "data" */
} la_study_opts;

LA_API la_study_opts la_study_default_opts(void);

/* What a finished study reports besides its files. */
typedef struct {
    double wall_s;       /* wall time of the whole study */
    int plots_ok;        /* 1 if every PNG was written */
    char warning[512];   /* non-fatal problems (e.g. gnuplot missing), "" if none */
} la_study_summary;

/* Run a study: for each spec, build the GPT of the study's size (same seed), train it for
 * `steps` optimizer steps on B x L windows of <data>/train (the same windows in the same
 * order for every spec), evaluate the validation loss on <data>/val at every eval length
 * (la_eval_loss, buckets of L positions), then fine-tune on passkey examples of length L
 * (haystacks from the training documents, loss on the answer digits only) and score exact
 * match over passkey lens x depths x trials (haystacks from the validation documents).
 * Writes into out_dir (created if needed), atomically, after every variant:
 *   results.csv  spec,eval_len,loss_bpb,windows,tokens,pos_0,pos_L,... (bucket losses)
 *   passkey.csv  spec,length,depth,trials,correct,passkey_acc
 *   training.csv spec,step,train_loss_bpb,val_loss_bpb,elapsed_s
 *   results.json every number above plus the study's settings
 *   results.md   the summary table (markdown)
 * and at the end PNG plots made by gnuplot from a generated script (plots.gp):
 *   loss_vs_length.png, loss_by_position.png, passkey_<i>.png (one heatmap per spec).
 * Losses are bits per byte for text data (bits per token for shards). summary may be NULL.
 * Errors: LA_EINVAL (NULL), LA_EIO (data or output folder), LA_ESHAPE (a validation
 * document shorter than the longest eval length: checked before any training), errors of
 * the model and trainer; files of finished variants stay written. */
LA_API la_status la_study_run(const la_study *study, const char *out_dir, const la_study_opts *opts,
                       la_study_summary *summary);

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
 *                          n_queries x (QSEP key); target n_queries x (QSEP value)
 *                          (mq_layout LA_MQ_PAPER, the default). With LA_MQ_INLINE the
 *                          source is the region alone and the target n_queries x
 *                          (QSEP key value): each query key sits right before its value, as in
 *                          Zoology's MQAR (Arora et al. 2023), and the query keys are given
 *                          (teacher-forced), not predicted: la_task_batch scores only the
 *                          QSEPs, the values and EOS. LA_MQ_ECHO keeps the paper's source
 *                          and makes the target n_queries x (QSEP key value), every token
 *                          scored: the model first copies the query key from the source,
 *                          then looks up its value (a recall "chain of thought" that
 *                          supervises each of the two hops on its own).
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

/* Where MQMTAR puts its queries (see above). */
typedef enum {
    LA_MQ_PAPER = 0,  /* queries at the end of the source, values in the target (the paper) */
    LA_MQ_INLINE = 1, /* QSEP key value per query in the target; keys given, not scored */
    LA_MQ_ECHO = 2    /* queries as in the paper; the target repeats each query key before
                         its value (QSEP key value), all scored */
} la_mq_layout;

typedef struct {
    la_task task;
    int n_symbols;     /* copy/reverse/sort: token range; mqmtar: key/value alphabet size */
    int min_len;       /* training content length range, inclusive (default 32 .. 64) */
    int max_len;
    int k_len, v_len;  /* mqmtar tokens per key / value (default 2, 2) */
    double kv_frac;    /* mqmtar share of the region given to pairs, (0, 1] (default 0.8) */
    int n_queries;     /* mqmtar queries per example (default 4) */
    double write_prob; /* flipflop probability of a middle WRITE, (0, 1) (default 0.1) */
    la_mq_layout mq_layout; /* mqmtar query placement (default LA_MQ_PAPER) */
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
LA_API la_task_params la_task_default_params(la_task task);

/* "mqmtar", "copy", "reverse", "sort", "flipflop" (also "flip-flop").
 * Errors: LA_EINVAL naming the bad name and the valid ones. */
LA_API la_status la_task_from_name(const char *name, la_task *out);
LA_API const char *la_task_name(la_task task); /* "?" for an unknown value */

/* Check params (ranges above; mqmtar: min_len must hold >= n_queries pairs).
 * Errors: LA_EINVAL naming the field and its valid range. */
LA_API la_status la_task_validate(const la_task_params *p);

LA_API la_status la_task_vocab_of(const la_task_params *p, la_task_vocab *v);

/* Tokens of an example at content length L (every example at L has exactly this many).
 * Errors: LA_EINVAL (bad params, L < 4 or L too large for int). */
LA_API la_status la_task_tokens_at(const la_task_params *p, int content_len, int *n_tokens);

/* Generate example `index` of stream `seed` into tokens[0 .. cap). content_len 0 draws L
 * uniformly from [min_len, max_len]; > 0 uses that L (evaluation). ex may be NULL.
 * Errors: LA_EINVAL (bad params/L, NULL tokens), LA_ESHAPE (cap too small). */
LA_API la_status la_task_sample(const la_task_params *p, int content_len, uint64_t seed,
                         uint64_t index, int32_t *tokens, int cap, la_task_example *ex);

/* Pack examples first_index .. first_index+B-1 of stream `seed` for next-token training,
 * in the convention of la_model_forward / la_trainer_step_batch:
 *   inputs:  (B, T) row b holds example tokens[0 .. n-2], right-padded with PAD;
 *   targets: (B, T) tokens[1 .. n-1] where the loss applies -- the positions predicting a
 *            target token or EOS (t >= sep) -- and -1 elsewhere (source, the SEP
 *            prediction, padding): the loss is on the target only (LA_MQ_INLINE: also -1
 *            where the next token is a given query key);
 *   ex:      (B) example layouts, or NULL.
 * T must be >= the longest example's n_tokens - 1 (la_task_tokens_at(max L) - 1).
 * content_len as in la_task_sample. Errors: LA_EINVAL, LA_ESHAPE (T too small). */
LA_API la_status la_task_batch(const la_task_params *p, int content_len, uint64_t seed,
                        uint64_t first_index, int B, int T, int32_t *inputs,
                        int32_t *targets, la_task_example *ex);

/* Exact match of one packed row: 1 if pred[t] == targets[t] at every t with
 * targets[t] >= 0, else 0. pred, targets: (T). With teacher forcing this equals greedy
 * decoding exact match: if every forced prediction is right, greedy decoding feeds back
 * exactly the forced inputs; at the first wrong forced prediction greedy decoding emits
 * that wrong token. */
LA_API int la_task_exact_match(const int32_t *pred, const int32_t *targets, int T);

/* Exact-match accuracy of model m on examples 0 .. n-1 of stream `seed` of task p at
 * content length L (> 0): one no-grad pass (la_model_eval) per batch of examples,
 * greedy answers read as the teacher-forced argmax at the target and EOS positions
 * (la_task_exact_match), batched so that batch x tokens <= max_batch_tokens (at least one
 * example per batch). *n_correct gets the number of exactly right answers.
 * Errors: LA_EINVAL (bad params/L/n, model vocabulary smaller than the task's),
 * LA_ENOMEM, model errors. */
LA_API la_status la_task_eval(la_model *m, const la_task_params *p, int content_len, int n,
                       uint64_t seed, int64_t max_batch_tokens, int *n_correct);

/* ======================================================================== */
/* Critical-scaling simulation (SPEC 8)  -- section owned by the bench work */
/* ======================================================================== */

/* The model of Chen, Lin, Polyanskiy & Rigollet, "Critical attention scaling in
 * long-context transformers" (arXiv 2025; seeds/001): tokens on the unit sphere,
 * K = Q = V = I, one self-attention step with scores beta <x_i, x_j> (self included)
 * and beta = gamma * log n, outputs normalised back to the sphere:
 *     y_i = sum_j softmax_j(beta <x_i, x_j>) x_j,   y_i <- y_i / |y_i|.
 * For tokens with pairwise inner product rho the phase transition is at
 * gamma = 1 / (1 - rho): below it the tokens collapse to one direction, above it attention
 * is the identity. All arrays are double, row-major. */

/* One attention step. x: (n, d) unit rows; y: (n, d) output rows (unit; a zero row stays
 * zero). Streams over blocks of query rows (BLAS dgemm), memory O(n*d + 256*n), no n x n
 * buffer. Errors: LA_EINVAL (NULL, n or d < 1, beta not finite, x == y), LA_ENOMEM. */
LA_API la_status la_critical_attend(const double *x, int n, int d, double beta, double *y);

/* Mean over the n(n-1)/2 pairs i < j of the angle acos(<x_i, x_j>) (radians, inner
 * products clamped to [-1, 1]) and of the inner product <x_i, x_j>. x: (n, d), n >= 2.
 * Either output may be NULL. Errors: LA_EINVAL, LA_ENOMEM. */
LA_API la_status la_critical_pair_stats(const double *x, int n, int d, double *mean_angle,
                                 double *mean_ip);

/* The paper's Gaussian model (its eq. 3.1): x_i = sqrt(rho) z_0 + sqrt(1-rho) z_i with
 * z_0, z_i i.i.d. standard Gaussian in R^d (la_rng seeded with seed), each row then
 * normalised to the unit sphere. x: (n, d). rho in [0, 1]. Errors: LA_EINVAL. */
LA_API la_status la_critical_gaussian_tokens(int n, int d, double rho, uint64_t seed, double *x);

/* The equal-angle (regular simplex) configuration of the theorem's Assumption 1, built
 * exactly: x_i = sqrt(rho) e_0 + sqrt(1-rho) e_{i+1}, so |x_i| = 1 and <x_i, x_j> = rho
 * (i != j) up to rounding. x: (n, n+1), i.e. d = n + 1. rho in [0, 1).
 * Errors: LA_EINVAL. */
LA_API la_status la_critical_simplex_tokens(int n, double rho, double *x);

/* Inner product <y_i, y_j> (i != j) after one step on the equal-angle configuration of n
 * tokens, in closed form: by symmetry every token puts weight w_s = 1/(1+u) on itself and
 * w_o = u/(1+u) spread evenly on the m = n-1 others, u = m exp(beta (rho - 1)), so
 * y_i ~ w_s x_i + w_o o_i with o_i the mean of the other tokens, whose inner products are
 * exact functions of rho and m (derivation in src/tasks/critical.c). O(1) work, any
 * n >= 2 (n is a double so that n = 1e12 works). beta = gamma * log n.
 * Errors: LA_EINVAL (n < 2, rho outside [0, 1), gamma not finite or < 0). */
LA_API la_status la_critical_simplex_ip(double n, double rho, double gamma, double *ip);

/* The theorem's n -> infinity limit of la_critical_simplex_ip (Chen et al. Thm 2.1 with
 * the simplex assumption): 1 for gamma < 1/(1-rho) (collapse), 4 rho / (1 + 3 rho) at
 * gamma = 1/(1-rho) (|gamma (1-rho) - 1| <= 1e-12), rho above (identity). */
LA_API double la_critical_simplex_limit(double rho, double gamma);

/* One grid cell of the Gaussian-model simulation. Angles in radians. */
typedef struct {
    double rho, gamma;
    double gamma_crit;     /* 1 / (1 - rho) */
    double beta;           /* gamma * log n */
    double angle_before, angle_after; /* mean pairwise angles, averaged over draws */
    double angle_ratio;    /* angle_after / angle_before (the paper's lambda) */
    double ip_before, ip_after;       /* mean pairwise inner products */
    double simplex_ip;     /* la_critical_simplex_ip at the same n, rho, gamma */
} la_critical_cell;

typedef struct {
    int n, d;           /* tokens and dimension. default 1024, 256 */
    int draws;          /* independent token sets per rho, averaged. default 1 */
    uint64_t seed;      /* default 1 */
    int n_threads;      /* unused by the BLAS path; reserved. default 0 */
} la_critical_params;

LA_API la_critical_params la_critical_default_params(void);

/* Run the grid: for each rho (n_rho values in [0, 1)) draw `draws` Gaussian token sets
 * and for each gamma (n_gamma values >= 0) attend once with beta = gamma log n.
 * cells: (n_rho, n_gamma) row-major. Cost O(n_rho * draws * n_gamma * n^2 * d).
 * Errors: LA_EINVAL (bad params or grid value, named), LA_ENOMEM. */
LA_API la_status la_critical_grid(const la_critical_params *p, const double *rhos, int n_rho,
                           const double *gammas, int n_gamma, la_critical_cell *cells);

/* ======================================================================== */
/* Attention diagnostics (SPEC 8)  -- section owned by the bench work       */
/* ======================================================================== */

/* Total attention mass and attention entropy per distance range, the two properties of
 * scale-invariant attention (Anson et al. 2025, arXiv 2505.17083, Defs 3.1 and 3.3):
 * ranges [t, t*delta) of key distance t = p_q - p_k. Range edges: 0, 1, then
 * e_{k+1} = max(e_k + 1, ceil(e_k * delta)), i.e. [0,1) [1,10) [10,100) ... for delta 10,
 * the last range ending past max_dist.
 * For one query row with probabilities p_t the accumulator computes, per range r,
 *     M_r = sum_{t in r} p_t,
 *     H_r = -sum_{t in r} (p_t / M_r) log(p_t / M_r) = log M_r - (sum p_t log p_t) / M_r
 * (the entropy of the attention renormalised within the range, nats; undefined and not
 * counted when M_r = 0), and averages both over the rows that had at least one key in the
 * range (an early query that cannot reach a far range does not dilute its average). Probabilities arrive streamed over
 * key tiles (a kernel recomputes p = exp(L - lse) tile by tile), never as a T x S buffer;
 * several rows may be in flight at once, one per slot. */
typedef struct la_diag la_diag;

/* Accumulator for distances 0 .. max_dist (0 <= max_dist <= 2^50) with ratio delta (> 1) and n_slots (>= 1)
 * rows in flight. Errors: LA_EINVAL naming the bad argument, LA_ENOMEM. */
LA_API la_status la_diag_new(int64_t max_dist, double delta, int n_slots, la_diag **out);
LA_API void la_diag_free(la_diag *d);

/* Number of ranges and the edges [lo, hi) of range r (hi may exceed max_dist + 1). */
LA_API int la_diag_num_ranges(const la_diag *d);
LA_API la_status la_diag_range_edges(const la_diag *d, int r, int64_t *lo, int64_t *hi);

/* Add n probabilities of one row (slot) for keys at distances t0, t0 + dt, ...,
 * t0 + (n-1) dt, dt = +1 or -1 (a key tile read forward has decreasing distance).
 * prob: (n) floats in [0, 1] (1 + 1e-5 is tolerated as float rounding). Errors: LA_EINVAL (slot out of range, dt not +-1, a distance
 * outside [0, max_dist], a probability that is NaN or outside [0, 1]); nothing is added
 * on error. */
LA_API la_status la_diag_add(la_diag *d, int slot, int64_t t0, int dt, const float *prob, int n);

/* la_diag_add with log p given: logp (n) holds log prob[i] (read only where prob[i] > 0;
 * partial sums of <= 16 terms are formed in float, relative rounding ~1e-7),
 * for kernels that know it without a log call (softmax: log p = L - lse). Errors: as
 * la_diag_add, and LA_EINVAL for logp NULL with n > 0. */
LA_API la_status la_diag_add_logp(la_diag *d, int slot, int64_t t0, int dt, const float *prob,
                           const float *logp, int n);

/* Fold the row held in slot into the per-range averages and clear the slot.
 * Errors: LA_EINVAL (slot out of range). */
LA_API la_status la_diag_row_end(la_diag *d, int slot);

typedef struct {
    int64_t lo, hi;       /* the range [lo, hi) */
    int64_t rows;         /* rows folded in that had keys in the range */
    double keys;          /* mean keys per such row */
    double mass;          /* mean M_r over rows */
    double mass_se;       /* its standard error (0 with one row) */
    int64_t entropy_rows; /* rows with M_r > 0 */
    double entropy;       /* mean H_r over those rows, nats */
    double entropy_se;
} la_diag_result;

/* Results of range r. Errors: LA_EINVAL (r out of range, NULL). */
LA_API la_status la_diag_get(const la_diag *d, int r, la_diag_result *out);

/* Summary over the complete ranges (hi - 1 <= max_dist) with lo >= lo_min that have
 * entropy rows: mass_ratio = max M_r / min M_r, entropy_slope = least-squares slope of
 * H_r against log(lo) (nats per e-fold of t; uniform attention gives 1, the
 * scale-invariance property wants < 1). n_used: ranges used (< 2: both outputs NaN).
 * Errors: LA_EINVAL (NULL). */
LA_API la_status la_diag_summary(const la_diag *d, int64_t lo_min, double *mass_ratio,
                          double *entropy_slope, int *n_used);

/* max_dist and delta the accumulator was created with (-1 / NaN for NULL). */
LA_API int64_t la_diag_max_dist(const la_diag *d);
LA_API double la_diag_delta(const la_diag *d);
/* Forget every folded row and every row in flight (keeps the ranges). */
LA_API void la_diag_reset(la_diag *d);
/* dst += src: the folded rows of src join dst's averages (rows in flight are not moved).
 * Merging partial accumulators in a fixed order gives results independent of how the rows
 * were split. Errors: LA_EINVAL (NULL, different range edges). */
LA_API la_status la_diag_merge(la_diag *dst, const la_diag *src);

/* Attention diagnostics of a finished attention call, without a T x S buffer: recomputes
 * the probabilities of every query row tile by tile (LA_BQ x LA_BK = 64 x 64 tiles, the
 * kernel's own tile loading, RoPE rotation, logit transform, ALiBi bias, visibility pattern,
 * documents and GQA head mapping) and streams them into one accumulator per (b, h):
 *     softmax:              p = exp(L - lse)                  (SPEC 5; log p = L - lse)
 *     entmax / sparsemax /  p = [(alpha-1) L - tau]_+^(1/(alpha-1))  (SPEC 5; alpha = 2 for
 *     asentmax                 sparsemax; asentmax scales q as la_attn_forward does)
 * with row_stat = lse or tau as written by la_attn_forward for the same arguments. Key j of
 * query i sits at distance t = pos0 + i - j (documents: the same, both positions shift);
 * for non-causal patterns (full, global) a key after the query counts at distance |t| (the
 * symmetric convention the kernel uses for ALiBi). Rows with no visible key (row_stat
 * LA_ROW_EMPTY) are skipped. Probabilities are float as in the kernel (an entry whose
 * float value underflows to 0 counts as a key of its range with p = 0), and mass per row
 * sums to 1 up to the float rounding of the row statistic (~1e-6 relative); values above 1
 * by rounding are clamped to 1.
 *   spec, shape, q (B,H,T,D), k (B,Hkv,S,D), opts: exactly as given to la_attn_forward
 *     (opts may be NULL; doc_ids, logn_s, as_beta/as_gamma, n_threads and ws are read,
 *     the statistics outputs are ignored);
 *   row_stat (B,H,T): its row statistic;
 *   diag (B*H): accumulator of (b, h) at diag[b*H + h], each with max_dist >= the largest
 *     distance any row sees (S - 1 covers every causal case); rows are added (call
 *     la_diag_reset first to start afresh).
 * Work: O(visible pairs * D), parallel over query-tile chunks of each (b, h) (a fixed
 * split, merged in order: results do not depend on the thread count).
 * Errors: those of la_attn_forward's argument checks (LA_EINVAL, LA_ESHAPE), LA_EINVAL
 * (row_stat or diag NULL, a diag too short for the distances, a non-finite row statistic
 * that is not LA_ROW_EMPTY), LA_ENOMEM. */
LA_API la_status la_attn_diagnose(const la_spec *spec, const la_shape *shape, const float *q,
                           const float *k, const float *row_stat, const la_attn_opts *opts,
                           la_diag **diag);

/* The scale-invariance check under the paper's Gaussian model (Anson et al. sec. 3):
 * one query at position N sees keys at distances t = 0..N whose base logits S_t are
 * i.i.d. N(0, 1) (la_rng seeded with seed); the spec's transform gives L_t (SPEC 4):
 * none / temp: temp*S; sinv: a_t S + m_t; logn: s log(N+1) S (s = logn_s, or
 * 1/log(train_len)); qwen-logn: max(1, log(N+1)/log(train_len)) S; critical:
 * gamma log(N+1) S. Each of `draws` rows is normalised by softmax (log-sum-exp over its
 * N+1 keys, O(N) memory, no N x N buffer) and streamed into d, slot 0, in key tiles.
 * The spec must be softmax with the causal pattern; position encodings do not enter the
 * model. Errors: LA_EINVAL (NULL, N < 1, draws < 1, d's max_dist < N, logn without s or
 * train), LA_EUNSUPPORTED (other normaliser or pattern, alibi/nape), LA_ENOMEM. */
LA_API la_status la_diag_gaussian(const la_spec *spec, int64_t N, int draws, uint64_t seed, la_diag *d);

/* GGUF model files, tensor types, quantized matrix-vector products */
#include "longattn/gguf.h"

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_H */

/* tokenizers from GGUF vocabulary data */
#include "longattn/tokenizer.h"
