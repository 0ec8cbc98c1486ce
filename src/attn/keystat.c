/* keystat.c -- per-key statistics of a finished forward, shared by every normaliser:
 * key_mass[b, h, j] = sum_i p_ij. One head item (b, h, key tile) of the scheduler per
 * task: the key tile is rotated and transposed once, then every query tile that sees it
 * (increasing qt) recomputes its logits and, from the forward's row statistic, its
 * probabilities (the normaliser's callback), and adds the column sums in row order. The
 * sum of each key is formed by one task in a fixed order, so it is bitwise the same for
 * any thread count, and no T x S buffer is needed. */
#include "attn/attn_internal.h"
#include "longattn/attn.h"

#include <assert.h>
#include <omp.h>
#include <string.h>

typedef struct {
    float *Qt;  /* (BQ, D)  rotated query tile */
    float *Kr;  /* (BK, D)  rotated key tile */
    float *Kt;  /* (D, BK)  rotated key tile, transposed */
    float *Sb;  /* (BQ, BK) raw dots */
    float *Lb;  /* (BQ, BK) logits */
    float *Pb;  /* (BQ, BK) probabilities */
    float *Wb;  /* (BQ, BK) scratch of the probability callback */
    float *cr, *stat, *colsum; /* (BQ), (BQ), (BK) */
} ks_scratch;

static size_t ks_layout(int D, char *base, ks_scratch *s) {
    size_t off = 0;
    LA_SCRATCH_TAKE(base, off, s->Qt, float, (size_t)LA_BQ * D);
    LA_SCRATCH_TAKE(base, off, s->Kr, float, (size_t)LA_BK * D);
    LA_SCRATCH_TAKE(base, off, s->Kt, float, (size_t)D * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->Sb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->Lb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->Pb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->Wb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(base, off, s->cr, float, LA_BQ);
    LA_SCRATCH_TAKE(base, off, s->stat, float, LA_BQ);
    LA_SCRATCH_TAKE(base, off, s->colsum, float, LA_BK);
    return off;
}

typedef struct {
    const la_attn_ctx *c;
    const float *row_stat;
    la_tile_probs_fn probs;
    const void *arg;
    ks_scratch s;
} ks_task;

static void key_mass_item(void *arg, la_item it) {
    ks_task *k = arg;
    const la_attn_ctx *c = k->c;
    const ks_scratch *s = &k->s;
    const int D = c->D, T = c->T, S = c->S, b = it.b, h = it.h, kt = it.tile;
    const int j0 = kt * LA_BK, nc = S - j0 < LA_BK ? S - j0 : LA_BK;
    const float *Kr = la_load_k(c, b, h / c->group, j0, nc, s->Kr);
    la_transpose(Kr, nc, D, D, s->Kt, LA_BK);
    for (int x = 0; x < nc; x++) s->colsum[x] = 0.0f;
    la_qiter qi;
    la_qtile q;
    la_qiter_init(&qi, c, b, kt);
    while (la_qiter_next(&qi, &q)) {
        la_row_factors(c, h, q.rows, q.nr, s->cr);
        la_load_q(c, b, h, q.i0, q.nr, s->Qt);
        for (int r = 0; r < q.nr; r++) s->stat[r] = k->row_stat[((size_t)b * c->H + h) * T + q.i0 + r];
        la_mm(q.nr, nc, D, s->Qt, (size_t)D, 1, s->Kt, LA_BK, s->Sb, LA_BK, 0);
        la_tile_logits(c, h, q.rows, q.i0, q.nr, j0, nc, q.cls, s->cr, s->Sb, s->Lb, LA_BK);
        k->probs(k->arg, q.rows, s->Lb, q.nr, nc, s->stat, s->Pb, s->Wb);
        for (int r = 0; r < q.nr; r++) {
            const float *P = s->Pb + (size_t)r * LA_BK;
            float *cs = s->colsum;
            for (int x = 0; x < nc; x++) cs[x] += P[x];
        }
    }
    memcpy(c->opts->key_mass + ((size_t)b * c->H + h) * S + j0, s->colsum, sizeof(float) * (size_t)nc);
}

void la_key_mass_for(const la_attn_ctx *c, const float *row_stat, la_tile_probs_fn probs,
                     const void *arg) {
    ks_task k = {c, row_stat, probs, arg, {0}};
    assert(ks_layout(c->D, NULL, NULL) <= c->scratch_bytes); /* a subset of the softmax scratch */
    ks_layout(c->D, la_ctx_scratch(c, omp_get_thread_num()), &k.s);
    la_sched_for(c, LA_ITEMS_KH, 0, la_sched_nh(c), key_mass_item, &k);
}
