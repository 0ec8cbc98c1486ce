/* entmax_internal.h -- row-level entmax helpers shared by the row transforms (entmax.c) and
 * the fused sparse attention (entmax_attn.c). Not public. */
#ifndef LA_ENTMAX_INTERNAL_H
#define LA_ENTMAX_INTERNAL_H

#include "longattn/attn.h"

/* Which exact algorithm a row uses. */
enum { LA_ENTMAX_BISECT = 0, LA_ENTMAX_SPARSEMAX = 1, LA_ENTMAX_15 = 2 };

/* LA_OK for a finite alpha > 1, else LA_EINVAL with a message naming fn and saying that
 * softmax is its own normaliser. */
la_status la_entmax_check_alpha(double alpha, const char *fn);

/* Shifted threshold t of c (n) = (alpha-1)(z - max z), -inf for masked entries, nfin >= 1
 * finite entries: sum_i [c_i - t]_+^(1/(alpha-1)) = 1, t in [-1, -nfin^(1-alpha)]. */
double la_entmax_tau_bisect(const double *c, int n, int nfin, double alpha);

/* Exact shifted threshold for alpha = 2 (kind LA_ENTMAX_SPARSEMAX) or 1.5 (LA_ENTMAX_15) of
 * c (n) as above (at least one finite entry); sorts the finite entries into s (n), which may
 * be c (c is then destroyed). */
double la_entmax_tau_sorted(int kind, const double *c, int n, double *s);


/* ---- fused attention (entmax_attn.c) ----
 * Full entry points behind la_attn_forward / la_attn_backward for LA_NORM_ENTMAX,
 * LA_NORM_SPARSEMAX and LA_NORM_ASENTMAX: same arguments, errors and outputs (row_stat = tau).
 * They build their own call context with la_attn_ctx_init. */
la_status la_entmax_attn_forward(const la_spec *spec, const la_shape *shape, const float *q,
                                 const float *k, const float *v, float *out, float *row_stat,
                                 const la_attn_opts *opts);
la_status la_entmax_attn_backward(const la_spec *spec, const la_shape *shape, const float *q,
                                  const float *k, const float *v, const float *out,
                                  const float *row_stat, const float *dout, float *dq, float *dk,
                                  float *dv, const la_attn_opts *opts);
/* Per-thread budget of the logits strip (default 8 MiB); above it every pass recomputes the
 * logits. For tests of the recompute path; not thread-safe against concurrent calls. */
void la_entmax_attn_set_strip_budget(size_t bytes);

#endif
