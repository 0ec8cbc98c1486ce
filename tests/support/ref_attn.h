/* ref_attn.h -- naive double-precision attention reference for the tests (SPEC 1-4).
 *
 * Written independently of src/attn (no shared code or tables): every row's logits are
 * materialised in double, RoPE angles, ALiBi slopes (Press et al.'s recursive rule), sinv
 * coefficients and the YaRN ramp are computed here from the formulas. Softmax and the entmax family.
 *
 * Semantics (decided by the lead; the kernel follows the same):
 *   score  S = (R(q) . R(k)) / sqrt(D) * m_yarn   (m_yarn = mscale^2, mscale = 0.1 ln s + 1,
 *          yarn only)
 *   logit  L = xform(S) - m_h |t|   with xform: none S; logn s_h log(n_q) S;
 *          qwen-logn max(1, log(p+1)/log(train)) S; sinv a_t S + m_t (t clamped at 0);
 *          critical gamma log(n_q) S; temp x S. ALiBi: every head with the slopes for H
 *          heads; nape: heads h < H/2 with the slopes for H/2 heads, the rest none.
 *          |t| = t on causal patterns; non-causal ones (full, global) see future keys and
 *          use the symmetric bias -m|t| (ALiBi's encoder variant).
 *   n_q = number of visible keys of the row. Query i sits at qa = pos0 + i.
 *   doc_ids (B, S): documents are maximal runs of equal ids; query i belongs to the run
 *          holding index qa (0 <= qa < S required); positions, distances and n_q count from
 *          the run's first index; keys of other runs are invisible.
 *   patterns on in-document positions p (query) and kp (key): causal kp <= p; full all;
 *          window p-w+1 <= kp <= p; sinks (kp < n and kp <= p) or window; global(g)+window(w)
 *          kp < g or window, and a global query (0 <= p < g) sees every key of its document
 *          (a query at a negative position is not global: it sees the g global keys).
 *   dynamic-ntk: the context length n is S (the number of keys) unless given.
 *   row with no visible key: out 0, lse -inf, entropy 0, zero gradients.
 *   entmax / sparsemax / asentmax normalisers (issue 3): p_j = [(alpha-1) L_j - tau]_+^(1/(alpha-1))
 *          with tau found by plain bisection in double (200 halvings, then p renormalised);
 *          the lse output holds tau; backward dL = u (dP - sum u dP / sum u), u = p^(2-alpha)
 *          on the support.
 */
#ifndef LA_REF_ATTN_H
#define LA_REF_ATTN_H

#include <stdint.h>

#include "longattn.h"

typedef struct {
    const int32_t *doc_ids; /* (B, S) or NULL */
    const double *logn_s;   /* (H) per-head s_h of logn, or NULL: spec->logn_s (0: 1/log(train)) */
    int64_t ctx_len;        /* context length n of dynamic-ntk; 0 means S (the number of keys) */
    /* entmax family (added for issue 3): asentmax scales the query of head h, token i by
     * s = delta + beta (log n)^gamma, n = max(p + 2, 2), p its in-document position (only the
     * NoPE heads h >= H/2 under nape); */
    const double *as_beta;  /* (B, H, T) asentmax beta (required for asentmax) */
    const double *as_gamma; /* (B, H, T) asentmax gamma (required for asentmax) */
    double *das_beta;       /* (B, H, T) written by ref_attn_backward for asentmax, or NULL */
    double *das_gamma;      /* (B, H, T) written by ref_attn_backward for asentmax, or NULL */
    double *row_support;    /* (B, H, T) written by ref_attn_forward: keys with p > 0, or NULL */
    /* issue 31: softmax+sink: sigma_h (learned: sinks, NULL = 0; fixed: spec->sink_fixed) joins
     * the denominator, p_ij = exp(L_ij - lse_i), lse_i = log(sum_j e^L_ij + e^sigma_h), the entropy
     * counts the sink's -p log p; backward writes d sigma_h = sum_i p_i,sink (0 - sum_j p_ij dP_ij)
     * into dsinks (learned only). sigmoid / sigmoid-logn: p_ij = 1/(1 + e^-(L_ij + b)), b = sig_b,
     * -ln(train) or -ln(n_q); lse holds sum_j p_ij; entropy that of p / sum p; dL = dP p (1 - p). */
    const double *sinks;    /* (H) or NULL */
    double *dsinks;         /* (H) written by ref_attn_backward, or NULL */
} ref_attn_opts;

/* Forward. q (B,H,T,D), k, v (B,Hkv,S,D) -> out (B,H,T,D), lse (B,H,T); entropy (B,H,T)
 * and key_mass (B,H,S) may be NULL. Returns 0, or -1 for an argument the reference cannot
 * handle (message in ref_attn_error()). */
int ref_attn_forward(const la_spec *spec, const la_shape *shape, const double *q, const double *k,
                     const double *v, const ref_attn_opts *o, double *out, double *lse, double *entropy,
                     double *key_mass);

/* Analytic backward of ref_attn_forward for loss gradient dout (B,H,T,D): dq (B,H,T,D),
 * dk, dv (B,Hkv,S,D) overwritten; dlogn_s (H) overwritten when non-NULL (logn only, else 0). */
int ref_attn_backward(const la_spec *spec, const la_shape *shape, const double *q, const double *k,
                      const double *v, const ref_attn_opts *o, const double *dout, double *dq, double *dk,
                      double *dv, double *dlogn_s);

const char *ref_attn_error(void);

/* Building blocks, exposed for direct tests. */
void ref_alibi_slopes(int n, double *m);                     /* Press et al. get_slopes(n) */
void ref_sinv(double t, double tau, double *a, double *m);    /* SPEC 4 closed form via alpha, beta */
void ref_rope_omega(const la_spec *spec, int D, int64_t ctx_len, double *omega); /* (D/2), 0 = no rotation */
double ref_yarn_mscale2(const la_spec *spec);                /* m_yarn, 1 unless yarn */

#endif
