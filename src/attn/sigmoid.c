/* sigmoid.c -- sigmoid attention forward and the learned sink's gradient (issue 31, SPEC 10).
 *
 * Sigmoid attention (Ramapuram et al. 2024, "Theory, Analysis, and Best Practices for Sigmoid
 * Self-Attention", apple/ml-sigmoid-attention): every visible pair gets
 *     p_ij = sigmoid(L_ij + b),      o_i = sum_j p_ij v_j,
 * with no row normalisation; L is the logit of attn_internal.h (every position encoding,
 * transform and pattern). b is one fixed scalar: given (sigmoid(b=...)) or -ln(train), the
 * authors' choice, kept when evaluating longer; sigmoid-logn is our per-row variant
 * b_i = -ln(n_i), n_i the row's visible keys. The forward is one pass per query tile with no
 * running statistic (each tile's P V adds straight into the output). The backward is the
 * softmax one (softmax.c) with P = sigmoid(L + b) and dS = dP o P (1 - P) (d sigmoid(x)/dx =
 * sigmoid(x)(1 - sigmoid(x))), so the two share tiles, scheduler and thread invariance.
 *
 * row_stat of a sigmoid row: its total mass sum_j p_ij (what a normaliser would divide by; the
 * backward does not read it), LA_ROW_EMPTY without visible keys. row_entropy: the entropy of
 * the row's mass renormalised, log M - (sum p log p) / M, so that it compares with softmax
 * rows; row_support: visible keys (every p is > 0).
 *
 * The learned sink (gpt-oss; SPEC 10) lives in softmax.c's forward (one more denominator
 * term e^(sigma_h - m), no value); its gradient is here: the sink is a key whose value is 0,
 * so with P_i,sink = exp(sigma_h - lse_i) (lse including the sink) the softmax backward's
 * dS = P (dP - D_i) gives, since dP_sink = dO_i . 0 = 0,
 *     d sigma_h = sum_{b, i} P_i,sink (0 - D_i) = -sum_{b, i} exp(sigma_h - lse_i) D_i,
 *     D_i = dO_i . o_i,
 * the form of flash-linear-attention's sink backward (PR #831) and of gpt-oss's reference
 * (the sink as an extra logit column that is dropped after the softmax; autograd then gives
 * the same sum). dq, dk and dv need nothing new: P and D_i already include the sink.
 */
#include "attn/attn_internal.h"
#include "longattn/attn.h"

#include <omp.h>
#include <string.h>

void la_sigmoid_probs(const void *arg, const la_rowvis *rows, const float *L, int nr, int nc,
                      const float *stat, float *P, float *W) {
    (void)stat, (void)W;
    const la_attn_ctx *c = arg;
    for (int r = 0; r < nr; r++) {
        const float *l = L + (size_t)r * LA_BK;
        float *p = P + (size_t)r * LA_BK;
        la_sigmoid_row(l, la_sigmoid_bias(c, &rows[r]), p, nc);
    }
}

typedef struct {
    float *Qt;     /* (BQ, D)   rotated query tile */
    float *Lb;     /* (BQ, BK)  raw dots, then logits (in place) */
    float *Pb;     /* (BQ, BK)  probabilities */
    float *acc;    /* (BQ, D)   output accumulator */
    float *cr;     /* (BQ)      row factors */
    double *mass;  /* (BQ)      sum_j p */
    double *plogp; /* (BQ)      sum_j p log p (row_entropy) */
} sg_scratch;

/* The forward's scratch, carved from the thread's softmax scratch (a subset of its size:
 * la_softmax_scratch_bytes holds 4 BQ x D and 4 BQ x BK tiles and 4 BQ doubles). */
static sg_scratch sg_layout(const la_attn_ctx *c, int tid) {
    char *p = la_ctx_scratch(c, tid);
    size_t off = 0;
    size_t D = (size_t)c->D;
    sg_scratch s;
    LA_SCRATCH_TAKE(p, off, s.Qt, float, LA_BQ * D);
    LA_SCRATCH_TAKE(p, off, s.Lb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(p, off, s.Pb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(p, off, s.acc, float, LA_BQ * D);
    LA_SCRATCH_TAKE(p, off, s.cr, float, LA_BQ);
    LA_SCRATCH_TAKE(p, off, s.mass, double, LA_BQ);
    LA_SCRATCH_TAKE(p, off, s.plogp, double, LA_BQ);
    return s;
}

typedef struct {
    const la_attn_ctx *c;
    sg_scratch s;
    float *out, *row_stat;
    int p0;            /* first (b, kv head) pair of the chunk */
    size_t stride;     /* floats between pairs in c->prep */
} sg_arg;

static void sg_fwd_item(void *arg, la_item it) {
    sg_arg *a = arg;
    const la_attn_ctx *c = a->c;
    const sg_scratch *s = &a->s;
    const int D = c->D, T = c->T, S = c->S, b = it.b, h = it.h, qt = it.tile;
    const int i0 = qt * LA_BQ, nr = T - i0 < LA_BQ ? T - i0 : LA_BQ;
    const int hkv = h / c->group;
    const la_rowvis *rows = c->rows + (size_t)b * T + i0;
    const float *vbase = c->v + ((size_t)b * c->Hkv + hkv) * (size_t)S * D;
    const float *ktiles = c->prep + (size_t)(b * c->Hkv + hkv - a->p0) * a->stride;
    const int want_ent = c->opts->row_entropy != NULL;

    la_row_factors(c, h, rows, nr, s->cr);
    la_load_q(c, b, h, i0, nr, s->Qt);
    memset(s->acc, 0, sizeof(float) * (size_t)nr * D);
    for (int r = 0; r < nr; r++) s->mass[r] = s->plogp[r] = 0.0;
    la_kiter ki;
    la_ktile t;
    la_kiter_init(&ki, c, b, qt);
    while (la_kiter_next(&ki, &t)) {
        la_mm(nr, t.nc, D, s->Qt, (size_t)D, 1, ktiles + (size_t)t.kt * D * LA_BK, LA_BK, s->Lb, LA_BK, 0);
        la_tile_logits(c, h, rows, i0, nr, t.j0, t.nc, t.cls, s->cr, s->Lb, s->Lb, LA_BK);
        la_sigmoid_probs(c, rows, s->Lb, nr, t.nc, NULL, s->Pb, NULL);
        for (int r = 0; r < nr; r++) {
            const float *P = s->Pb + (size_t)r * LA_BK, *L = s->Lb + (size_t)r * LA_BK;
            s->mass[r] += la_row_sum(P, t.nc);
            if (want_ent) { /* log p = -log(1 + e^-x), x = L + b, in the stable form */
                const float bb = la_sigmoid_bias(c, &rows[r]);
                double e = 0.0;
                for (int x = 0; x < t.nc; x++) {
                    if (L[x] == -INFINITY || P[x] == 0.0f) continue;
                    float z = L[x] + bb;
                    float lp = z >= 0.0f ? -log1pf(expf(-z)) : z - log1pf(expf(z));
                    e += (double)P[x] * lp;
                }
                s->plogp[r] += e;
            }
        }
        const float *V = vbase + (size_t)t.j0 * D;
        if (t.cls == 1)
            la_mm(nr, D, t.nc, s->Pb, LA_BK, 1, V, D, s->acc, D, 1);
        else
            la_mm_rows(rows, nr, t.j0, t.nc, D, s->Pb, LA_BK, V, D, s->acc, D);
    }
    size_t rowbase = ((size_t)b * c->H + h) * T + i0;
    for (int r = 0; r < nr; r++) {
        size_t ri = rowbase + r;
        memcpy(a->out + ri * D, s->acc + (size_t)r * D, sizeof(float) * (size_t)D);
        double M = s->mass[r];
        a->row_stat[ri] = rows[r].nq == 0 ? LA_ROW_EMPTY : (float)M;
        if (c->opts->row_entropy)
            c->opts->row_entropy[ri] = rows[r].nq == 0 || !(M > 0.0) ? 0.0f : (float)(log(M) - s->plogp[r] / M);
        if (c->opts->row_support) c->opts->row_support[ri] = (float)rows[r].nq;
    }
}

la_status la_sigmoid_forward(const la_attn_ctx *c, float *out, float *row_stat) {
#pragma omp parallel num_threads(c->nthreads)
    {
        sg_arg a = {.c = c, .s = sg_layout(c, omp_get_thread_num()), .out = out, .row_stat = row_stat,
                    .stride = la_prep_stride(c, 0)};
        for (int ch = 0; ch < la_sched_nchunks(c); ch++) {
            int i0, i1;
            la_sched_chunk(c, ch, &i0, &i1);
            a.p0 = ch * c->prep_pairs;
            la_prep_pairs_for(c, a.p0, (i1 - i0) / (c->group * c->nqt), 0);
            la_sched_for(c, LA_ITEMS_Q, i0, i1, sg_fwd_item, &a);
        }
        if (c->opts->key_mass) la_key_mass_for(c, row_stat, la_sigmoid_probs, c);
    }
    /* a row's mass is a sum of at most S values in [0, 1]: finite, the row_stat check holds */
    return LA_OK;
}

void la_sink_backward(const la_attn_ctx *c, const float *row_stat, float *dsinks) {
    const float *delta = c->rowbuf; /* D_i = dO_i . o_i of every row, from la_softmax_backward */
    for (int h = 0; h < c->H; h++) {
        double acc = 0.0;
        for (int b = 0; b < c->B; b++) { /* batch, then row: a fixed order */
            size_t base = ((size_t)b * c->H + h) * c->T;
            for (int i = 0; i < c->T; i++) {
                float lse = row_stat[base + i];
                if (lse == LA_ROW_EMPTY) continue; /* only the sink: o = 0, D_i = 0 */
                acc += exp((double)c->sink[h] - lse) * delta[base + i];
            }
        }
        dsinks[h] = (float)-acc;
    }
}
