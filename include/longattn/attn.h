/*
 * longattn/attn.h -- attention (layer attn): spec strings, fused kernels, position
 * encodings, sparsemax / entmax rows, the kernels' workspace, and the attention
 * statistics accumulator (la_diag) with the kernel-side diagnostics la_attn_diagnose.
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
 */
#ifndef LONGATTN_ATTN_H
#define LONGATTN_ATTN_H

#include <math.h> /* INFINITY (LA_ROW_EMPTY) */

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* Attention spec (SPEC sections 2-6)                                       */
/* ======================================================================== */

/* Normaliser (SPEC 5). */
typedef enum {
    LA_NORM_SOFTMAX = 0, /* online-softmax, flash-attention style */
    LA_NORM_ENTMAX,      /* alpha-entmax, alpha > 1 (Peters et al. 2019) */
    LA_NORM_SPARSEMAX,   /* alpha = 2 (Martins & Astudillo 2016) */
    LA_NORM_ASENTMAX,    /* adaptive-scalable entmax (Vasylenko et al. 2025) */
    LA_NORM_SIGMOID,     /* p = sigmoid(L + b), no row normalisation (Ramapuram et al. 2024) */
    LA_NORM_SIGMOID_LOGN /* p = sigmoid(L - ln n_q), n_q the row's visible keys (our variant) */
} la_norm;

/* Sink logit joining every softmax row's denominator (SPEC 10; gpt-oss): none, one learned
 * logit per head (la_attn_opts.sinks, gradient in la_attn_opts.dsinks), or one fixed value
 * for every head (0: "softmax plus one"). Only with LA_NORM_SOFTMAX. */
typedef enum {
    LA_SINK_NONE = 0,
    LA_SINK_LEARNED, /* "sink" */
    LA_SINK_FIXED    /* "sink(fixed=v)" */
} la_sink;

/* Position encoding (SPEC 3). */
typedef enum {
    LA_POS_NOPE = 0,
    LA_POS_ROPE,        /* half-split pairs, omega_k = theta^(-2k/D) */
    LA_POS_PROPE,       /* p-RoPE (Barbero et al. 2025) */
    LA_POS_NTK,         /* NTK-aware base theta * s^(D/(D-2)) */
    LA_POS_DYNAMIC_NTK, /* NTK applied only when context > train_len */
    LA_POS_YARN,        /* YaRN (Peng et al. 2023) */
    LA_POS_ALIBI,       /* additive bias -m_h * t (Press et al. 2022) */
    LA_POS_NAPE,        /* first half of heads ALiBi, rest NoPE (Vasylenko et al. 2025) */
    LA_POS_PI           /* position interpolation: every omega_k divided by s (Chen et al. 2023) */
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

    /* issue 31 (appended so that existing initialisers keep compiling) */
    la_sink sink;          /* sink logit of softmax rows, default LA_SINK_NONE */
    double sink_fixed;     /* LA_SINK_FIXED: the sink logit of every head, default 0 */
    double sig_b;          /* sigmoid bias b when sig_b_set */
    int sig_b_set;         /* sigmoid: 1 b given, 0 b = -ln(train_len) (Ramapuram et al.'s choice) */
} la_spec;

/* softmax + nope + none + causal with every parameter at its documented default. */
LA_API la_spec la_spec_default(void);

/* Parse a spec string such as "softmax+sinv(tau=10)+prope(p=0.5)+causal" (SPEC 6).
 * Tokens are joined by '+', at most one per category (normaliser, position, transform,
 * pattern; global(g) combines with window(w)); missing categories take defaults.
 * Errors: LA_ESPEC with la_errmsg() naming the offending token and listing the valid
 * choices; LA_EINVAL if text or out is NULL. On error *out is untouched.
 * Token `name` or `name(args)`, args positional in documented order or key=value, e.g.
 * yarn(s, train, beta_fast=32, beta_slow=1, theta=10000); the full table is in docs/spec-language.md
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
 * is then reused without allocating, so a training loop pays page faults once.
 * la_workspace_create: a new empty workspace in *out (LA_ENOMEM naming the size when the
 * allocation fails, LA_EINVAL for out NULL), like every other constructor of the API.
 * la_workspace_new: the same returning the pointer (NULL when out of memory); kept so that
 * existing callers compile. Release either with la_workspace_free. */
typedef struct la_workspace la_workspace;
LA_API la_status la_workspace_create(la_workspace **out);
LA_API la_workspace *la_workspace_new(void);
LA_API void la_workspace_free(la_workspace *ws);

/* Optional inputs and outputs of an attention call. Start from la_attn_opts_default();
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

    /* issue 31: learned sink logits (spec "softmax+sink") */
    const float *sinks;     /* (H) sink logit sigma_h of each head; NULL: 0 for every head */
    float *dsinks;          /* (H) d loss / d sigma_h written by la_attn_backward (overwritten;
                               zeros unless the spec has a learned sink) */
} la_attn_opts;

LA_API la_attn_opts la_attn_opts_default(void);

/* Fused attention forward (SPEC 1-5, 10), tiled with O(T*D + S*D) extra memory.
 *   q: (B, H, T, D)   k, v: (B, Hkv, S, D)   out: (B, H, T, D)
 *   row_stat: (B, H, T): softmax log-sum-exp of the transformed logits (natural log; with
 *             a sink, the sink's e^sigma_h included); entmax threshold tau; sigmoid: the row's
 *             mass sum_j p_ij; LA_ROW_EMPTY for rows with no visible key.
 * softmax+sink (spec.sink, issue 31): p_ij = exp(L_ij - lse_i) with the per-head sink logit
 * sigma_h in the denominator only (opts->sinks, NULL: 0; or spec.sink_fixed), the sink
 * carrying no value; la_attn_backward writes d loss / d sigma_h into opts->dsinks.
 * sigmoid(b) / sigmoid-logn: p_ij = sigmoid(L_ij + b) (b = spec.sig_b, -ln(train_len) when
 * not set, or -ln(n_q) per row), no row normalisation (Ramapuram et al. 2024).
 * q and k are given before any rotation: RoPE-family encodings are applied inside.
 * opts may be NULL. Errors: LA_EINVAL (NULL tensor, bad spec), LA_ESHAPE (H % Hkv != 0,
 * a dimension < 1, odd D with a RoPE-family encoding), LA_ENOMEM. */
LA_API la_status la_attn_forward(const la_spec *spec, const la_shape *shape,
                                 const float *q, const float *k, const float *v,
                                 float *out, float *row_stat, const la_attn_opts *opts);

/* Backward of la_attn_forward. out and row_stat are the forward's outputs.
 *   dout: (B, H, T, D)  ->  dq: (B, H, T, D), dk, dv: (B, Hkv, S, D), all overwritten.
 * Learnable transform parameters get their gradients through opts (dlogn_s, dsinks, das_*).
 * Errors as la_attn_forward. */
LA_API la_status la_attn_backward(const la_spec *spec, const la_shape *shape,
                                  const float *q, const float *k, const float *v,
                                  const float *out, const float *row_stat, const float *dout,
                                  float *dq, float *dk, float *dv, const la_attn_opts *opts);

/* Reduced-precision inputs (issues 27, 29). q, k, v (and dout) are stored as dtype:
 * LA_DTYPE_F32 (float), LA_DTYPE_F16 (IEEE binary16) or LA_DTYPE_BF16 (bfloat16), the
 * half types as uint16_t bit patterns (numpy float16, torch.float16 / bfloat16); the products accumulate in float32, the
 * softmax / entmax statistics (row max, sum, log-sum-exp, threshold) are float32, and out,
 * row_stat, dq, dk, dv are float32 as in la_attn_forward / la_attn_backward, with the same
 * shapes, options and errors (every normaliser, pattern and encoding). Every f16 and bf16
 * value is exact in float32, so the result is bitwise la_attn_forward's (backward's) on the
 * inputs converted to float32: this build converts them once per call into a second arena
 * of the workspace (4 bytes per element of q, k, v, dout; grown once, reused like the rest)
 * and runs the float32 tile products. LA_DTYPE_F32 is exactly la_attn_forward. Errors
 * beyond la_attn_forward's: LA_EINVAL for LA_DTYPE_I8 or a value outside la_dtype. */
LA_API la_status la_attn_forward_typed(la_dtype dtype, const la_spec *spec, const la_shape *shape,
                                       const void *q, const void *k, const void *v,
                                       float *out, float *row_stat, const la_attn_opts *opts);
LA_API la_status la_attn_backward_typed(la_dtype dtype, const la_spec *spec, const la_shape *shape,
                                        const void *q, const void *k, const void *v,
                                        const float *out, const float *row_stat, const void *dout,
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
/* Row normalisers: sparsemax / entmax (SPEC 5)                             */
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
/* Attention statistics accumulator and kernel diagnostics (SPEC 8)         */
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
LA_API la_status la_diag_get_range_edges(const la_diag *d, int r, int64_t *lo, int64_t *hi);

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

/* Sink mass (issue 31): slot's current row gave probability p_sink in [0, 1] to its sink
 * logit (softmax+sink: exp(sigma_h - lse)); span is the largest key distance the row sees
 * (its query position under causal patterns, 0..max_dist). At la_diag_row_end the value joins
 * the range holding span. Errors: LA_EINVAL (slot or span out of range, p_sink outside [0, 1]). */
LA_API la_status la_diag_add_sink(la_diag *d, int slot, int64_t span, double p_sink);
/* Rows with a sink folded into range r (by span), their mean sink mass and its standard error
 * (NAN without rows). Any output may be NULL. Errors: LA_EINVAL (r out of range, NULL d). */
LA_API la_status la_diag_get_sink(const la_diag *d, int r, int64_t *rows, double *mass, double *mass_se);

/* Attention diagnostics of a finished attention call, without a T x S buffer: recomputes
 * the probabilities of every query row tile by tile (LA_BQ x LA_BK = 64 x 64 tiles, the
 * kernel's own tile loading, RoPE rotation, logit transform, ALiBi bias, visibility pattern,
 * documents and GQA head mapping) and streams them into one accumulator per (b, h):
 *     softmax:              p = exp(L - lse)                  (SPEC 5; log p = L - lse)
 *     entmax / sparsemax /  p = [(alpha-1) L - tau]_+^(1/(alpha-1))  (SPEC 5; alpha = 2 for
 *     asentmax                 sparsemax; asentmax scales q as la_attn_forward does)
 * with row_stat = lse or tau as written by la_attn_forward for the same arguments (issue 31:
 *     softmax+sink:         p = exp(L - lse), lse including the sink, so a row's key masses
 *                           sum to 1 - p_sink; p_sink = exp(sigma_h - lse) goes to
 *                           la_diag_add_sink with the row's largest distance as span;
 *     sigmoid, sigmoid-logn: p = sigmoid(L + b), b as in the forward; rows do not sum to 1).
 * Key j of
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

/* A row filter for the diagnostics (la_attn_diagnose_rows, la_model_diagnose_rows): only
 * the chosen query rows are streamed into the accumulators, and for each chosen row the
 * attention mass on chosen key spans is reported, e.g. the mass that the rows predicting a
 * passkey's answer put on the needle. */
typedef struct {
    const int *rows;       /* (n_rows) query row indices i in [0, T), strictly increasing */
    int n_rows;            /* >= 1 */
    const int64_t *spans;  /* (n_spans, 2) key spans [k0, k1) of key indices j (the same j as
                              k's S axis; a model's token positions): 0 <= k0 < k1 <= S */
    int n_spans;           /* >= 0 */
    double *mass;          /* out (B, H, n_rows, n_spans) (a model: (n_layer, n_head, n_rows,
                              n_spans)): sum of the row's probabilities over the visible keys of
                              the span, written (not accumulated); 0 for a row that sees no key
                              of the span or no key at all. May be NULL only when n_spans = 0. */
} la_diag_rows;

/* la_attn_diagnose restricted to sel's rows (of every batch b), plus the span masses of
 * those rows into sel->mass: mass[((b*H + h)*n_rows + r)*n_spans + s] = sum of p over the
 * visible keys j of row sel->rows[r] with spans[2s] <= j < spans[2s+1]. Rows not chosen add
 * nothing to diag. sel NULL is la_attn_diagnose. Work: only the query tiles that hold a
 * chosen row (no T x S buffer, no allocation that grows with the rows or spans).
 * Errors: those of la_attn_diagnose, LA_EINVAL naming the problem for n_rows < 1, rows NULL,
 * a row outside [0, T), rows not strictly increasing, n_spans < 0, spans or mass NULL with
 * n_spans > 0, an empty span (k0 >= k1) or one outside [0, S). */
LA_API la_status la_attn_diagnose_rows(const la_spec *spec, const la_shape *shape, const float *q,
                                       const float *k, const float *row_stat, const la_attn_opts *opts,
                                       const la_diag_rows *sel, la_diag **diag);

/* ---- deprecated names: kept so existing programs compile (with a warning naming
 * the replacement); see the naming rule in longattn.h ---- */

LA_DEPRECATED("use la_attn_opts_default") static inline la_attn_opts la_attn_default_opts(void) {
    return la_attn_opts_default();
}
LA_DEPRECATED("use la_diag_get_range_edges") static inline la_status la_diag_range_edges(const la_diag *d, int r, int64_t *lo, int64_t *hi) {
    return la_diag_get_range_edges(d, r, lo, hi);
}

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_ATTN_H */
