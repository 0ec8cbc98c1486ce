/* layers.h -- the GPT's layers as forward/backward pairs of plain functions (llm.c style).
 * Internal to src/model. N = B*T rows; every tensor row-major; shapes in the comments.
 * Backward functions ACCUMULATE into parameter gradients and, where noted, into input
 * gradients (so a residual branch adds to the stream's gradient). */
#ifndef LA_MODEL_LAYERS_H
#define LA_MODEL_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "longattn/model.h"
#include "model/kv_hook.h"

#define LA_RMS_EPS 1e-6f

/* Elementwise loops run in parallel only above this many elements (512 KiB of floats):
 * below it the cost of waking threads exceeds the work. (It was 2^20 until the trainer
 * profile, docs/benchmarks.md "Where the trainer's time goes", showed the norms, permutations and the
 * cross-entropy of the study's 2048 x 128 activations running on one thread of two.) */
#define LA_PAR_MIN ((size_t)1 << 17)

/* ---- matmul.c: cblas_sgemm wrappers, weights stored (out, in); *timer += seconds ----
 * Precision (issue 29): with buf == NULL the operands are the float32 arrays; with buf set
 * (bf16 mode) every operand of a product is first rounded to bf16 (nearest even) into buf
 * and the product runs in float32 sgemm on those copies. A product of two bf16 values is
 * exact in float32, so this is "bf16 products, float32 accumulation" emulated on a CPU
 * without bf16 dot products (slower than float32: the rounding passes come on top). */
typedef struct {
    double *timer;   /* seconds accumulated */
    float *buf;      /* NULL: float32 operands; else bf16-rounded operand copies */
    size_t cap;      /* floats in buf: >= la_mm_bf16_floats of every product */
} la_mm_ctx;
/* Rows [*r0, *r1) of N for thread t of nt when a product is split into row blocks, one
 * single-threaded sgemm per block. OpenBLAS computes the rows of a call in groups of its
 * kernel's unroll (24 for the Haswell/Zen sgemm kernel of Debian's 0.3.21, measured: a
 * split at a multiple of 8, 16, 32 or 64 changes the last rows' bits, at 24, 48 or 96 it
 * does not) and the rows of a call's last partial group with another code path. Block
 * bounds at multiples of LA_MM_ROW_ALIGN (a multiple of 8, 16, 24 and 32) put every row
 * in the same kind of group whatever nt is, so the product is bitwise the same for any
 * thread count. */
#define LA_MM_ROW_ALIGN 96
void la_mm_row_block(long N, int t, int nt, int *r0, int *r1);
/* Floats of buf one product of N rows, in -> out features needs in bf16 mode. */
size_t la_mm_bf16_floats(size_t N, size_t in, size_t out);
/* y (N, out) with row stride ldy (>= out) = x (N, in) W^T + beta y, float32 operands: the
 * row-block split of la_mm_forward (one single-threaded sgemm per block of la_mm_row_block
 * when OpenBLAS runs on one thread and the product is large), without timer or bf16 (the
 * GGUF model's prefill products, src/model/llama.c, use it on dequantized weight rows). */
void la_mm_sgemm_rows(float *y, int ldy, const float *x, const float *W, int N, int in, int out, float beta);
/* y (N, out) = x (N, in) W^T (+ y if accumulate) */
void la_mm_forward(const la_mm_ctx *mm, float *y, const float *x, const float *W, int N, int in,
                   int out, int accumulate);
/* dx (N, in) (+)= dy (N, out) W ;  dW (out, in) += dy^T x.  dx may be NULL; dW may be NULL
 * (then x is not read). */
void la_mm_backward(const la_mm_ctx *mm, float *dx, float *dW, const float *dy, const float *x,
                    const float *W, int N, int in, int out, int accumulate_dx);

/* Sequence parallelism (issue 30, la_model_set_seq_parallel): this rank's rows of a (B, T)
 * batch in the zigzag layout of attn/ring.h (rows [rows[0], rows[1]) and [rows[2], rows[3])
 * of every sequence). Row-wise work runs on these rows only. A product runs on them widened
 * to whole 24-row groups of the B*T rows (the last clamped to B*T) and merged where they
 * meet (la_sp_wide_range): its calls then start at multiples of 24, so every row is computed
 * by the same sgemm code path as in one call over all B*T rows (see la_mm_row_block); the
 * extra rows (other ranks') are computed from whatever they hold and must never be read
 * before they are gathered. */
typedef struct {
    int P, r, B, T;
    int rows[4];
} la_sp_part;
/* The shortest sequence P ranks share: 2P tiles of 64 rows (the last may be partial). */
#define LA_SP_MIN_T(P) (64 * (2 * (P) - 1) + 1)
/* Range i of [0, 2B): returns its length (0: empty), *n0 its first row of the B*T. */
int la_sp_range(const la_sp_part *p, int i, int *n0);
/* Every rank's rows of n arrays x[i] (heads[i], T, width[i]) (la_attn_sp_gather each). */
la_status la_sp_gather_all(int n, float *const *x, const int *heads, int T, const int *width);
/* The next widened range of this rank's rows for a product, from range *i on (start with
 * *i = 0): its length (0: no more) and *n0 its first row. */
int la_sp_wide_range(const la_sp_part *p, int *i, int *n0);
/* la_mm_forward on this rank's (widened) rows of y (B*T, out), x (B*T, in) */
void la_mm_forward_rows(const la_sp_part *p, const la_mm_ctx *mm, float *y, const float *x, const float *W,
                        int in, int out, int accumulate);
/* dx = dy W (+ dx) on this rank's (widened) rows (la_mm_backward without dW) */
void la_mm_dx_rows(const la_sp_part *p, const la_mm_ctx *mm, float *dx, const float *dy, const float *W, int in,
                   int out, int accumulate);

/* ---- rmsnorm.c: y = x / sqrt(mean(x^2) + eps) * g over the last dimension C ---- */
/* x, y: (N, C); g: (C); rstd: (N) saved for backward */
void la_rmsnorm_forward(float *y, float *rstd, const float *x, const float *g, int N, int C);
/* dx (N, C) += d/dx ; dg (C) += d/dg.  dy: (N, C) */
void la_rmsnorm_backward(float *dx, float *dg, const float *dy, const float *x, const float *rstd,
                      const float *g, int N, int C);

/* ---- mlp.c: ReLU^2 MLP  out = relu(x Wfc^T)^2 Wproj^T ---- */
/* x: (N, C)  h_pre, h_act: (N, F)  y: (N, C), ADDED to (residual) */
void la_mlp_forward(const la_mm_ctx *mm, float *y, float *h_pre, float *h_act, const float *x,
                 const float *w_fc, const float *w_proj, int N, int C, int F);
/* dy: (N, C) -> dx (N, C) overwritten; dw_fc, dw_proj accumulated. dh: (N, F) scratch */
void la_mlp_backward(const la_mm_ctx *mm, float *dx, float *dw_fc, float *dw_proj, float *dh,
                  const float *dy, const float *x, const float *h_pre, const float *h_act,
                  const float *w_fc, const float *w_proj, int N, int C, int F);
/* dh (n) *= d relu(h_pre)^2 / d h_pre: the activation's backward (F2) alone */
void la_mlp_act_backward(float *dh, const float *h_pre, size_t n);

/* ---- qknorm.c: per-head RMSNorm over D with a shared gain, fused with the
 * (B, T, H, D) -> (B, H, T, D) permutation the attention kernel wants ---- */
/* x: (B, T, H, D)  ->  y: (B, H, T, D), rstd: (B, T, H) */
void la_qknorm_forward(float *y, float *rstd, const float *x, const float *g, int B, int T, int H,
                    int D);
/* dy: (B, H, T, D) -> dx: (B, T, H, D) overwritten; dg (D) accumulated */
void la_qknorm_backward(float *dx, float *dg, const float *dy, const float *x, const float *rstd,
                     const float *g, int B, int T, int H, int D);
/* plain permutations (B, T, H, D) <-> (B, H, T, D) */
void la_permute_bthd_to_bhtd(float *y, const float *x, int B, int T, int H, int D);
void la_permute_bhtd_to_bthd(float *y, const float *x, int B, int T, int H, int D);

/* ---- attention.c: the attention sublayer (projections, QK-norm, fused attention, output
 * projection) ---- */
typedef struct {  /* one block's attention weights, or their gradients (NULL where absent) */
    float *wq, *wk, *wv;          // (H*D, C), (Hkv*D, C), (Hkv*D, C)
    float *q_norm_g, *k_norm_g;   // (D), (D)
    float *wo;                    // (C, H*D)
    float *logn_s;                // (H) logn only
    float *sinks;                 // (H) learned sink logits (softmax+sink) only
    float *as_wb, *as_bb, *as_wg, *as_bg;  // (H, C), (H), (H, C), (H) asentmax only
} attn_weights;

typedef struct {  /* activations kept for the backward pass */
    float *q_raw, *k_raw, *v_raw; // (B, T, H, D), (B, T, Hkv, D) x2 projections
    float *q_rstd, *k_rstd;       // (B, T, H), (B, T, Hkv)
    float *qh, *kh, *vh;          // (B, H, T, D), (B, Hkv, T, D) x2 kernel inputs
    float *att, *row_stat;        // (B, H, T, D), (B, H, T) kernel outputs
    float *y;                     // (B, T, H, D) = (N, H*D)
    float *as_beta, *as_gamma;    // (B, H, T) asentmax only
} attn_acts;

typedef struct {  /* backward scratch, shared by the blocks */
    float *dy, *datt, *dqh, *dkh, *dvh, *dq_raw, *dk_raw, *dv_raw;  // shapes as above
    float *dbeta, *dgamma;        // (B, H, T) asentmax only
    float *dlogn;                 // (H)
    float *dsinks;                // (H)
} attn_scratch;

typedef struct {
    const la_spec *spec;
    int B, T, C, H, Hkv, D;
    la_workspace *ws;             // kernel scratch reused across calls
    int n_threads;                // kernel threads, 0: OpenMP default
    const la_mm_ctx *mm;          // matrix products: timer and precision (bf16 when mm->buf);
                                  // bf16 also rounds the kernel's q, k, v and dO (training only)
    double *t_attn;               // timer (seconds, accumulated)
    const la_model_kv_hook *kv;   // NULL: attend over the T tokens; else over kv's cache (B = 1)
    int layer;                    // block index, passed to kv
    const la_sp_part *sp;         // NULL; else sequence parallelism: this rank's rows only,
                                  // the attention through the ring (attn/ring.h)
} attn_dims;

/* x (N, C) normalised block input -> out (N, C) += attention(x) Wo^T. With d->kv the
 * attention goes through the hook (a->row_stat is then not written). */
la_status la_attn_layer_forward(const attn_dims *d, const attn_weights *w, attn_acts *a,
                             const float *x, float *out);
/* dout (N, C) -> dx (N, C) OVERWRITTEN; gradients g accumulated. With d->sp: dout complete
 * (every rank's rows), dx this rank's rows; the activations' other rows are gathered. */
la_status la_attn_layer_backward(const attn_dims *d, const attn_weights *w, attn_weights *g,
                              const attn_acts *a, attn_scratch *sc, const float *x,
                              const float *dout, float *dx);

/* Attention diagnostics of the last la_attn_layer_forward with activations a (same d, w):
 * probabilities from a->qh, a->kh and a->row_stat into diag (B*H), la_attn_diagnose_rows
 * (sel NULL: every row; else sel->mass receives this layer's (B, H, n_rows, n_spans)). */
la_status la_attn_layer_diagnose(const attn_dims *d, const attn_weights *w, const attn_acts *a,
                              const la_diag_rows *sel, la_diag **diag);

/* ---- embed.c: token embedding and the cross-entropy head ---- */
/* x (N, C) = wte[tokens] ; tokens checked by the caller */
void la_embed_forward(float *x, const int32_t *tokens, const float *wte, int N, int C);
/* dwte[tokens[n]] += dx[n] */
void la_embed_backward(float *dwte, const float *dx, const int32_t *tokens, int N, int C);
/* logits (N, V) -> lse (N); loss (N) = lse - logit[target] (0 where target < 0).
 * Returns the number of counted targets; *sum_loss their loss sum (double). */
int64_t la_xent_forward(float *loss, float *lse, const float *logits, const int32_t *targets, int N,
                     int V, double *sum_loss);
/* dlogits (N, V) overwritten in place of logits: scale * (softmax - onehot), 0 rows where
 * target < 0 */
void la_xent_backward(float *logits_to_dlogits, const float *lse, const int32_t *targets, int N,
                   int V, float scale);

#endif
