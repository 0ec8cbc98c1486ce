/* attn.c -- the public entry points of the attention kernels: la_attn_forward and
 * la_attn_backward check what only they see (the output pointers, the row statistics they
 * return) and dispatch on the normaliser through one table. The shared tile context the
 * kernels build on is attn_ctx.c; the kernels are softmax.c (softmax, and the sigmoid
 * backward), sigmoid.c and entmax_attn.c (the entmax family). */
#include "attn/attn_internal.h"
#include "attn/entmax_internal.h"
#include "longattn/attn.h"

#include <math.h>
#include <string.h>

la_attn_opts la_attn_opts_default(void) {
    la_attn_opts o;
    memset(&o, 0, sizeof o);
    return o;
}

static la_status check_row_stat(const la_shape *s, const float *row_stat) {
    size_t n = (size_t)s->B * s->H * s->T;
    for (size_t i = 0; i < n; i++)
        if (isnan(row_stat[i]) || row_stat[i] == INFINITY)
            return la_fail(LA_ENUMERIC, "attention: row statistic of [b=%zu, h=%zu, i=%zu] is %g: the "
                           "logits of this row are not representable in float32; scale q and k down",
                           i / ((size_t)s->H * s->T), i / s->T % s->H, i % s->T, (double)row_stat[i]);
    return LA_OK;
}

/* ---- one pair of entry functions per normaliser ---- */
typedef la_status (*fwd_fn)(const la_spec *spec, const la_shape *shape, const float *q, const float *k,
                            const float *v, float *out, float *row_stat, const la_attn_opts *opts);
typedef la_status (*bwd_fn)(const la_spec *spec, const la_shape *shape, const float *q, const float *k,
                            const float *v, const float *out, const float *row_stat, const float *dout,
                            float *dq, float *dk, float *dv, const la_attn_opts *opts);

/* softmax and sigmoid: the tiled kernels on a context built here */
static la_status tiled_forward(const la_spec *spec, const la_shape *shape, const float *q, const float *k,
                               const float *v, float *out, float *row_stat, const la_attn_opts *opts) {
    la_attn_ctx c;
    la_workspace *own = NULL;
    la_status st = la_attn_ctx_init(&c, spec, shape, q, k, v, opts, NULL, &own);
    if (st == LA_OK) st = c.sigmoid ? la_sigmoid_forward(&c, out, row_stat) : la_softmax_forward(&c, out, row_stat);
    la_workspace_free(own);
    return st;
}

static la_status tiled_backward(const la_spec *spec, const la_shape *shape, const float *q, const float *k,
                                const float *v, const float *out, const float *row_stat, const float *dout,
                                float *dq, float *dk, float *dv, const la_attn_opts *opts) {
    la_attn_ctx c;
    la_workspace *own = NULL;
    /* c.rowbuf: D_i = rowsum(dout o out) per row, computed once; c.rowgs: the fused
     * backward's per-row sums for d logn_s (softmax.c) */
    static const la_ctx_extra bwd_extra = {.rowbuf = 1, .rowgs = 1};
    la_status st = la_attn_ctx_init(&c, spec, shape, q, k, v, opts, &bwd_extra, &own);
    /* sigmoid rows share the softmax backward (only P and dS differ: softmax.c) */
    if (st == LA_OK) st = la_softmax_backward(&c, out, row_stat, dout, dq, dk, dv);
    if (st == LA_OK && c.opts->dsinks) {
        if (spec->sink == LA_SINK_LEARNED) la_sink_backward(&c, row_stat, c.opts->dsinks);
        else memset(c.opts->dsinks, 0, sizeof(float) * (size_t)c.H);
    }
    la_workspace_free(own);
    return st;
}

/* the entmax family (issue 3): the fused kernels of entmax_attn.c build their own context;
 * learned sinks are softmax-only, so their gradient is zero */
static la_status entmax_backward(const la_spec *spec, const la_shape *shape, const float *q, const float *k,
                                 const float *v, const float *out, const float *row_stat, const float *dout,
                                 float *dq, float *dk, float *dv, const la_attn_opts *opts) {
    la_status st = la_entmax_attn_backward(spec, shape, q, k, v, out, row_stat, dout, dq, dk, dv, opts);
    if (st == LA_OK && opts && opts->dsinks) memset(opts->dsinks, 0, sizeof(float) * (size_t)shape->H);
    return st;
}

static const struct {
    fwd_fn forward;
    bwd_fn backward;
} NORM_OPS[] = {
    [LA_NORM_SOFTMAX] = {tiled_forward, tiled_backward},
    [LA_NORM_ENTMAX] = {la_entmax_attn_forward, entmax_backward},
    [LA_NORM_SPARSEMAX] = {la_entmax_attn_forward, entmax_backward},
    [LA_NORM_ASENTMAX] = {la_entmax_attn_forward, entmax_backward},
    [LA_NORM_SIGMOID] = {tiled_forward, tiled_backward},
    [LA_NORM_SIGMOID_LOGN] = {tiled_forward, tiled_backward},
};
#define N_NORMS ((unsigned)(sizeof NORM_OPS / sizeof NORM_OPS[0]))

/* The table row of spec's normaliser; a NULL spec goes to the tiled path, whose context
 * reports it. LA_EINVAL for a value outside la_norm. */
static la_status norm_ops(const la_spec *spec, unsigned *row) {
    *row = spec ? (unsigned)spec->norm : LA_NORM_SOFTMAX;
    if (*row >= N_NORMS) return la_fail(LA_EINVAL, "spec.norm = %d is not a valid la_norm", (int)spec->norm);
    return LA_OK;
}

la_status la_attn_forward(const la_spec *spec, const la_shape *shape,
                          const float *q, const float *k, const float *v,
                          float *out, float *row_stat, const la_attn_opts *opts) {
    if (!out || !row_stat) return la_fail(LA_EINVAL, "la_attn_forward: out and row_stat must not be NULL");
    unsigned n;
    LA_TRY(norm_ops(spec, &n));
    la_status st = NORM_OPS[n].forward(spec, shape, q, k, v, out, row_stat, opts);
    if (st == LA_OK) st = check_row_stat(shape, row_stat);
    return st;
}

la_status la_attn_backward(const la_spec *spec, const la_shape *shape,
                           const float *q, const float *k, const float *v,
                           const float *out, const float *row_stat, const float *dout,
                           float *dq, float *dk, float *dv, const la_attn_opts *opts) {
    if (!out || !row_stat || !dout || !dq || !dk || !dv)
        return la_fail(LA_EINVAL, "la_attn_backward: out, row_stat, dout, dq, dk and dv must not be NULL");
    unsigned n;
    LA_TRY(norm_ops(spec, &n));
    return NORM_OPS[n].backward(spec, shape, q, k, v, out, row_stat, dout, dq, dk, dv, opts);
}
