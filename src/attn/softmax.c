/* softmax.c -- fused, tiled softmax attention forward and backward (SPEC 5, softmax).
 *
 * Forward: one streaming pass per (batch, head, query tile) with an online maximum
 * (flash-attention style); the running maximum starts at -inf but is only ever used
 * through an explicit "no key seen yet" branch. Statistics: log-sum-exp per row, entropy
 * (online, as log(l) - sum p (L - m) / l with rescaling), support = visible keys, and
 * key mass by a second pass over (batch, head, key tile) once the lse is known (keystat.c).
 *
 * Backward (flash-attention-2, Dao 2023, Alg. 2): D_i = rowsum(dout o out),
 * dL = P o (dP - D_i) with P = exp(L - lse) and dP = dout V^T, then through
 * L = c_r a_t dot + m_t + slope d_t: d dot = dL c_r a_t, and d s_h = sum dL scale log(n_q) dot
 * for logn. Two paths with bitwise the same results: the fused one (bwd_pair_task, issue
 * 20) forms S, P, dP and dS once per visible tile pair for dq, dk and dv, one (b, kv head)
 * pair per work item; the two-pass one accumulates dq per (b, h, query tile), then dk, dv
 * per (b, hkv, key tile), each recomputing P (used when there are too few pairs to keep
 * the threads busy). Either way no two threads ever write the same output and no reduction
 * order depends on the thread count: results are bitwise identical for any n_threads. The
 * work items, their order and the visible tiles of each come from the tile scheduler
 * (sched.c).
 * Rotated-frame gradients are rotated back by the inverse RoPE rotation at the end.
 *
 * Memory: per thread a few BQ x D and BQ x BK tiles; no T x S buffer anywhere.
 *
 * Issue 31 (SPEC 10) shares these kernels: softmax+sink adds the sink as one last online
 * step of each row in fwd_task (so lse includes it and the backward needs nothing new for
 * dq, dk, dv); sigmoid rows take P = sigmoid(L + b) in tile_probs and dS = dP P (1 - P) in
 * tile_dscores. Their forward and the sink's gradient are in sigmoid.c.
 *
 * Profile build (-DLA_PROFILE, docs/benchmarks.md "Where the backward's time goes"): every phase of the
 * tile loops adds its time-stamp-counter ticks to la_softmax_prof[thread][phase]; the
 * default build compiles the laps away.
 */
#include "attn/attn_internal.h"
#include "longattn/attn.h"

#include <math.h>
#include <omp.h>
#include <string.h>

/* the profiled phases, in the order of la_softmax_prof_names */
enum {
    SP_F_SCORES, SP_F_SOFTMAX, SP_F_PV, SP_F_OTHER,
    SP_Q_SCORES, SP_Q_EXP, SP_Q_DP, SP_Q_DS, SP_Q_DQ, SP_Q_OTHER,
    SP_K_TRANS, SP_K_SCORES, SP_K_EXP, SP_K_DV, SP_K_DP, SP_K_DS, SP_K_DK, SP_K_DQ, SP_K_OTHER,
    SP_PREP_F, SP_PREP_B, SP_FWD_REGION, SP_DQ_REGION, SP_DKV_REGION, SP_N
};
#ifdef LA_PROFILE
#include <x86intrin.h>
const char *const la_softmax_prof_names[SP_N + 1] = {
    "fwd: S = QK^T + logits", "fwd: online softmax (max, exp, rescale)", "fwd: O += P V", "fwd: other",
    "dq: S = QK^T + logits", "dq: P = exp(L - lse)", "dq: dP = dO V^T", "dq: dS = P (dP - D)", "dq: dQ += dS K",
    "dq: other (load q, D_i, unrotate)", "dkv: load + transpose K, V", "dkv: S = QK^T + logits",
    "dkv: P = exp(L - lse)", "dkv: dV += P^T dO", "dkv: dP = dO V^T", "dkv: dS = P (dP - D)",
    "dkv: dK += dS^T Q", "fused: dQ += dS K", "dkv: other (load q, D_i, unrotate)", "fwd: prepare K tiles", "bwd: prepare K, V tiles; D_i",
    "fwd: whole item loop", "dq: whole item loop", "dkv (or fused): whole item loop", NULL};
unsigned long long la_softmax_prof[64][SP_N];
static __thread unsigned long long prof_last;
#define PROF_START() (prof_last = __rdtsc())
#define PROF_LAP(ph)                                                             \
    do {                                                                         \
        unsigned long long now_ = __rdtsc();                                     \
        la_softmax_prof[omp_get_thread_num() & 63][ph] += now_ - prof_last;      \
        prof_last = now_;                                                        \
    } while (0)
/* a whole loop, timed apart from the laps inside it */
#define PROF_REGION(var) unsigned long long var = __rdtsc()
#define PROF_REGION_END(var, ph) (la_softmax_prof[omp_get_thread_num() & 63][ph] += __rdtsc() - (var))
#else
#define PROF_START() ((void)0)
#define PROF_LAP(ph) ((void)0)
#define PROF_REGION(var) ((void)0)
#define PROF_REGION_END(var, ph) ((void)0)
#endif

typedef struct {
    float *Qt;   /* (BQ, D)   rotated query tile */
    float *Kr;   /* NB x (BK, D)   rotated key tile(s) */
    float *Kt;   /* NB x (D, BK)   rotated key tile(s), transposed */
    float *Vt;   /* NB x (D, BK)   value tile(s), transposed (backward: dP = dO V^T) */
    float *Sb;   /* (BQ, BK)  raw dots q.k */
    float *Lb;   /* (BQ, BK)  logits */
    float *Pb;   /* (BQ, BK)  probabilities */
    float *dPb;  /* (BQ, BK)  dP, then dL, then d dot */
    float *acc;  /* (BQ, D)   output / dq accumulator */
    float *dka;  /* NB x (BK, D)   dk accumulator(s) */
    float *dva;  /* NB x (BK, D)   dv accumulator(s) */
    float *cr, *lse, *Di; /* (BQ) */
    double *m, *l, *s2, *gs;       /* (BQ) */
} scratch;

#define NB LA_SOFTMAX_NB

static scratch get_scratch(const la_attn_ctx *c, int tid) {
    char *p = la_ctx_scratch(c, tid);
    size_t off = 0;
    size_t D = (size_t)c->D;
    scratch s;
    LA_SCRATCH_TAKE(p, off, s.Qt, float, LA_BQ * D);
    LA_SCRATCH_TAKE(p, off, s.Kr, float, NB * LA_BK * D);
    LA_SCRATCH_TAKE(p, off, s.Kt, float, NB * D * LA_BK);
    LA_SCRATCH_TAKE(p, off, s.Vt, float, NB * D * LA_BK);
    LA_SCRATCH_TAKE(p, off, s.Sb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(p, off, s.Lb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(p, off, s.Pb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(p, off, s.dPb, float, LA_BQ * LA_BK);
    LA_SCRATCH_TAKE(p, off, s.acc, float, LA_BQ * D);
    LA_SCRATCH_TAKE(p, off, s.dka, float, NB * LA_BK * D);
    LA_SCRATCH_TAKE(p, off, s.dva, float, NB * LA_BK * D);
    LA_SCRATCH_TAKE(p, off, s.cr, float, LA_BQ);
    LA_SCRATCH_TAKE(p, off, s.lse, float, LA_BQ);
    LA_SCRATCH_TAKE(p, off, s.Di, float, LA_BQ);
    LA_SCRATCH_TAKE(p, off, s.m, double, LA_BQ);
    LA_SCRATCH_TAKE(p, off, s.l, double, LA_BQ);
    LA_SCRATCH_TAKE(p, off, s.s2, double, LA_BQ);
    LA_SCRATCH_TAKE(p, off, s.gs, double, LA_BQ);
    return s;
}

/* Raw dots and logits of query tile (b,h,i0,nr) (rows Q, (nr, D)) against key tile
 * j0..j0+nc (Kt ready). */
static void tile_scores(const la_attn_ctx *c, const scratch *s, const float *Q, const float *Kt, int h,
                        const la_rowvis *rows, int i0, int nr, int j0, int nc, int cls) {
    la_mm(nr, nc, c->D, Q, (size_t)c->D, 1, Kt, LA_BK, s->Sb, LA_BK, 0);
    la_tile_logits(c, h, rows, i0, nr, j0, nc, cls, s->cr, s->Sb, s->Lb, LA_BK);
}

/* ---- forward ---------------------------------------------------------------------- */

static void fwd_task(const la_attn_ctx *c, const scratch *s, int b, int h, int qt, float *out,
                     float *row_stat, const float *ktiles) {
    const int D = c->D, T = c->T, S = c->S;
    const int i0 = qt * LA_BQ, nr = T - i0 < LA_BQ ? T - i0 : LA_BQ;
    const int hkv = h / c->group;
    const la_rowvis *rows = c->rows + (size_t)b * T + i0;
    const float *vbase = c->v + ((size_t)b * c->Hkv + hkv) * (size_t)S * D;
    int want_ent = c->opts->row_entropy != NULL;

    PROF_START();
    la_row_factors(c, h, rows, nr, s->cr);
    la_load_q(c, b, h, i0, nr, s->Qt);
    memset(s->acc, 0, sizeof(float) * (size_t)nr * D);
    for (int r = 0; r < nr; r++) {
        s->m[r] = -INFINITY; /* only read behind the l == 0 ("nothing seen yet") branch */
        s->l[r] = 0.0;
        s->s2[r] = 0.0;
    }
    la_kiter ki;
    la_ktile t;
    la_kiter_init(&ki, c, b, qt);
    PROF_LAP(SP_F_OTHER);
    while (la_kiter_next(&ki, &t)) { /* fully masked tiles are skipped: they cost nothing */
        const int kt = t.kt, j0 = t.j0, nc = t.nc, cls = t.cls;
        tile_scores(c, s, s->Qt, ktiles + (size_t)kt * D * LA_BK, h, rows, i0, nr, j0, nc, cls);
        PROF_LAP(SP_F_SCORES);
        for (int r = 0; r < nr; r++) {
            const float *L = s->Lb + (size_t)r * LA_BK;
            float *P = s->Pb + (size_t)r * LA_BK;
            float tmax = la_row_max(L, nc);
            if (tmax == -INFINITY) { /* no visible key of this row in the tile */
                memset(P, 0, sizeof(float) * (size_t)nc);
                continue;
            }
            double mold = s->m[r];
            int seen = s->l[r] > 0.0;
            double mnew = seen && mold > tmax ? mold : tmax;
            float rs = la_exp_sub(L, (float)mnew, P, nc); /* P and its row sum */
            double e = want_ent ? la_row_plogit(P, L, (float)mnew, nc) : 0.0;
            if (seen) {
                double alpha = exp(mold - mnew);
                s->s2[r] = alpha * (s->s2[r] + (mold - mnew) * s->l[r]) + e;
                s->l[r] = alpha * s->l[r] + rs;
                if (alpha != 1.0) {
                    float af = (float)alpha;
                    float *a = s->acc + (size_t)r * D;
                    for (int d = 0; d < D; d++) a[d] *= af;
                }
            } else {
                s->s2[r] = e;
                s->l[r] = rs;
            }
            s->m[r] = mnew;
        }
        PROF_LAP(SP_F_SOFTMAX);
        const float *V = vbase + (size_t)j0 * D;
        if (cls == 1)
            la_mm(nr, D, nc, s->Pb, LA_BK, 1, V, D, s->acc, D, 1);
        else
            la_mm_rows(rows, nr, j0, nc, D, s->Pb, LA_BK, V, D, s->acc, D);
        PROF_LAP(SP_F_PV);
    }
    size_t rowbase = ((size_t)b * c->H + h) * T + i0;
    for (int r = 0; r < nr; r++) {
        float *o = out + (rowbase + r) * D;
        const float *a = s->acc + (size_t)r * D;
        double l = s->l[r];
        if (rows[r].nq == 0 || !(l > 0.0)) {
            memset(o, 0, sizeof(float) * (size_t)D);
            row_stat[rowbase + r] = LA_ROW_EMPTY;
            if (c->opts->row_entropy) c->opts->row_entropy[rowbase + r] = 0.0f;
        } else {
            double s2 = s->s2[r], m = s->m[r], inv_d = 1.0 / l;
            if (c->sink) { /* SPEC 10: the sink joins the denominator (no value), one more
                            * online step with the rescaling above: m' = max(m, sigma) */
                double sg = c->sink[h], mn = sg > m ? sg : m, al = exp(m - mn), es = exp(sg - mn);
                s2 = al * (s2 + (m - mn) * l) + es * (sg - mn);
                l = al * l + es;
                inv_d = al / l;
                m = mn;
            }
            float inv = (float)inv_d;
            for (int d = 0; d < D; d++) o[d] = a[d] * inv;
            row_stat[rowbase + r] = (float)(m + log(l));
            if (c->opts->row_entropy)
                c->opts->row_entropy[rowbase + r] = (float)(log(l) - s2 / l);
        }
        if (c->opts->row_support) c->opts->row_support[rowbase + r] = (float)rows[r].nq;
    }
    PROF_LAP(SP_F_OTHER);
}

/* P = exp(L - lse) of a tile (rows with no visible key have lse = -inf and all-masked L);
 * the probability callback of the key statistics (keystat.c) too. */
static void softmax_probs(const void *arg, const la_rowvis *rows, const float *L, int nr, int nc,
                          const float *lse, float *P, float *W) {
    (void)arg, (void)W;
    for (int r = 0; r < nr; r++) {
        float *p = P + (size_t)r * LA_BK;
        if (rows[r].nq == 0) {
            memset(p, 0, sizeof(float) * (size_t)nc);
            continue;
        }
        la_exp_sub(L + (size_t)r * LA_BK, lse[r], p, nc);
    }
}

static void tile_probs(const la_attn_ctx *c, const scratch *s, const la_rowvis *rows, int nr, int nc) {
    if (c->sigmoid) la_sigmoid_probs(c, rows, s->Lb, nr, nc, NULL, s->Pb, NULL); /* issue 31 */
    else softmax_probs(NULL, rows, s->Lb, nr, nc, s->lse, s->Pb, NULL);
}

typedef struct {
    const la_attn_ctx *c;
    scratch s;
    float *out, *row_stat;
    const float *dout, *crow_stat; /* backward */
    const float *delta;            /* (B, H, T) D_i = rowsum(dout o out), rowgrad_delta */
    float *dq, *dk, *dv;
    double *part;
    int p0;        /* first (b, kv head) pair of the prepared chunk */
    size_t stride; /* floats between pairs in c->prep */
} sm_arg;

static const float *chunk_tiles(const sm_arg *a, la_item it) {
    int pr = it.b * a->c->Hkv + it.h / a->c->group;
    return a->c->prep + (size_t)(pr - a->p0) * a->stride;
}

/* fn over the query items chunk by chunk, each chunk's (b, kv head) pairs prepared first
 * (K^T tiles; with bwd V^T too; a->p0 the chunk's first pair); chunks with nothing selected
 * (ring.c) are skipped. The profile build adds the preparation to phase ph_prep and the item
 * loop to ph_loop. */
static void chunk_items(const la_attn_ctx *c, sm_arg *a, int bwd, la_item_fn fn, int ph_prep,
                        int ph_loop) {
    for (int ch = 0; ch < la_sched_nchunks(c); ch++) {
        int i0, i1;
        la_sched_chunk(c, ch, &i0, &i1);
        if (!la_sched_any_q(c, i0, i1)) continue; /* nothing selected (ring.c) */
        a->p0 = ch * c->prep_pairs;
        PROF_START();
        la_prep_pairs_for(c, a->p0, (i1 - i0) / (c->group * c->nqt), bwd);
        PROF_LAP(ph_prep);
        PROF_REGION(r0);
        la_sched_for(c, LA_ITEMS_Q, i0, i1, fn, a);
        PROF_REGION_END(r0, ph_loop);
    }
}

static void fwd_item(void *arg, la_item it) {
    sm_arg *a = arg;
    fwd_task(a->c, &a->s, it.b, it.h, it.tile, a->out, a->row_stat, chunk_tiles(a, it));
}

la_status la_softmax_forward(const la_attn_ctx *c, float *out, float *row_stat) {
    /* one parallel region for the whole call (fewer fork/joins and barriers) */
#pragma omp parallel num_threads(c->nthreads)
    {
        sm_arg a = {.c = c, .s = get_scratch(c, omp_get_thread_num()), .out = out,
                    .row_stat = row_stat, .stride = la_prep_stride(c, 0)};
        chunk_items(c, &a, 0, fwd_item, SP_PREP_F, SP_FWD_REGION);
        if (c->opts->key_mass) la_key_mass_for(c, row_stat, softmax_probs, NULL);
    }
    return LA_OK;
}

/* ---- backward --------------------------------------------------------------------- */

/* D_i = rowsum(dout o out) of every row (B, H, T) into delta, once per call: the dK/dV
 * pass visits each query tile once per key tile, and recomputing D_i there read `out` again
 * each time (about 7 % of forward+backward at T = 4096, docs/benchmarks.md profile). Each D_i is the
 * same fused multiply-add chain as the tile product that forms dP = dO V^T, so that a row
 * with one visible key (out = v, P = 1) gets dP - D_i = 0 exactly. */
static void rowgrad_delta(const la_attn_ctx *c, const float *out, const float *dout, float *delta) {
    const int D = c->D;
    const long n = (long)c->B * c->H * c->T;
#pragma omp for schedule(static)
    for (long i = 0; i < n; i++) delta[i] = la_row_delta(out + (size_t)i * D, dout + (size_t)i * D, D);
}

/* Load lse and D_i (from rowgrad_delta) of a query tile; returns its dO rows. */
static const float *load_rowgrad(const la_attn_ctx *c, const scratch *s, int b, int h, int i0,
                                 int nr, const float *delta, const float *row_stat,
                                 const float *dout) {
    size_t rowbase = ((size_t)b * c->H + h) * c->T + i0;
    memcpy(s->Di, delta + rowbase, sizeof(float) * (size_t)nr);
    memcpy(s->lse, row_stat + rowbase, sizeof(float) * (size_t)nr);
    return dout + rowbase * c->D;
}

/* dP = dO V^T, then dL = P o (dP - D_i) on visible entries (0 on masked ones, by selection)
 * and d dot = dL c_r a_t into dPb. Accumulates sum_j dL dot per row into gs (nr) unless NULL. */
static void tile_dscores(const la_attn_ctx *c, const scratch *s, const float *Vt, const float *dO,
                         const la_rowvis *rows, int i0, int nr, int j0, int nc, double *gs, int ph_dp,
                         int ph_ds) {
    (void)ph_dp, (void)ph_ds;
    la_mm(nr, nc, c->D, dO, (size_t)c->D, 1, Vt, LA_BK, s->dPb, LA_BK, 0);
    PROF_LAP(ph_dp);
    for (int r = 0; r < nr; r++) {
        const float *P = s->Pb + (size_t)r * LA_BK, *L = s->Lb + (size_t)r * LA_BK;
        const float *sd = s->Sb + (size_t)r * LA_BK;
        float *g = s->dPb + (size_t)r * LA_BK;
        float di = s->Di[r], f = s->cr[r];
        if (c->sigmoid) /* sigmoid rows (SPEC 10): dS = dP o P (1 - P), no D_i */
            for (int x = 0; x < nc; x++) g[x] = L[x] == -INFINITY ? 0.0f : g[x] * (P[x] * (1.0f - P[x]));
        else
            for (int x = 0; x < nc; x++) /* dS = P o (dP - D), exactly 0 on masked entries */
                g[x] = L[x] == -INFINITY ? 0.0f : P[x] * (g[x] - di);
        float gsum = gs ? la_row_dot_live(g, sd, L, nc) : 0.0f;
        if (c->has_t) { /* L = c a dot + ...  ->  d dot = dL c a */
            const float *ta = c->t_a + (size_t)(j0 - (i0 + r) + c->T - 1);
            for (int x = 0; x < nc; x++) g[x] *= f * ta[x];
        } else {
            for (int x = 0; x < nc; x++) g[x] *= f;
        }
        if (gs) gs[r] += gsum;
    }
    PROF_LAP(ph_ds);
}

static void dq_task(const la_attn_ctx *c, const scratch *s, int b, int h, int qt,
                    const float *delta, const float *row_stat, const float *dout, float *dq,
                    double *part, const float *ktiles) {
    const int D = c->D, T = c->T;
    const int i0 = qt * LA_BQ, nr = T - i0 < LA_BQ ? T - i0 : LA_BQ;
    const int hkv = h / c->group;
    const la_rowvis *rows = c->rows + (size_t)b * T + i0;
    int want_gs = part != NULL;

    PROF_START();
    la_row_factors(c, h, rows, nr, s->cr);
    la_load_q(c, b, h, i0, nr, s->Qt);
    const float *dO = load_rowgrad(c, s, b, h, i0, nr, delta, row_stat, dout);
    memset(s->acc, 0, sizeof(float) * (size_t)nr * D);
    for (int r = 0; r < nr; r++) s->gs[r] = 0.0;
    la_kiter ki;
    la_ktile t;
    la_kiter_init(&ki, c, b, qt);
    PROF_LAP(SP_Q_OTHER);
    while (la_kiter_next(&ki, &t)) {
        const int kt = t.kt, j0 = t.j0, nc = t.nc, cls = t.cls;
        const float *Kr = la_load_k(c, b, hkv, j0, nc, s->Kr);
        const float *Kt = ktiles + (size_t)kt * D * LA_BK;
        PROF_LAP(SP_Q_OTHER);
        tile_scores(c, s, s->Qt, Kt, h, rows, i0, nr, j0, nc, cls);
        PROF_LAP(SP_Q_SCORES);
        tile_probs(c, s, rows, nr, nc);
        PROF_LAP(SP_Q_EXP);
        tile_dscores(c, s, Kt + (size_t)c->nkt * D * LA_BK, dO, rows, i0, nr, j0, nc,
                     want_gs ? s->gs : NULL, SP_Q_DP, SP_Q_DS);
        /* dq_rot += d dot . K_rot (masked K rows skipped in partial tiles) */
        if (cls == 1)
            la_mm(nr, D, nc, s->dPb, LA_BK, 1, Kr, D, s->acc, D, 1);
        else
            la_mm_rows(rows, nr, j0, nc, D, s->dPb, LA_BK, Kr, D, s->acc, D);
        PROF_LAP(SP_Q_DQ);
    }
    la_unrotate_q(c, b, i0, nr, s->acc);
    size_t rowbase = ((size_t)b * c->H + h) * T + i0;
    memcpy(dq + rowbase * D, s->acc, sizeof(float) * (size_t)nr * D);
    if (part) { /* d s_h of this tile: sum_r scale log(n_q) sum_j dL dot (d c_r / d s_h) */
        double acc = 0.0;
        for (int r = 0; r < nr; r++) acc += s->gs[r] * c->scale * rows[r].xrow;
        *part = acc;
    }
    PROF_LAP(SP_Q_OTHER);
}

static void dkv_task(const la_attn_ctx *c, const scratch *s, int b, int hkv, int kt,
                     const float *delta, const float *row_stat, const float *dout, float *dk,
                     float *dv) {
    const int D = c->D, S = c->S;
    const int j0 = kt * LA_BK, nc = S - j0 < LA_BK ? S - j0 : LA_BK;
    const float *vtile = c->v + (((size_t)b * c->Hkv + hkv) * S + j0) * D;
    PROF_START();
    const float *Kr = la_load_k(c, b, hkv, j0, nc, s->Kr);
    la_transpose(Kr, nc, D, D, s->Kt, LA_BK);
    la_transpose(vtile, nc, D, D, s->Vt, LA_BK);
    memset(s->dka, 0, sizeof(float) * (size_t)nc * D);
    memset(s->dva, 0, sizeof(float) * (size_t)nc * D);
    PROF_LAP(SP_K_TRANS);
    for (int g = 0; g < c->group; g++) { /* GQA: the group's query heads in a fixed order */
        int h = hkv * c->group + g;
        la_qiter qi;
        la_qtile t;
        la_qiter_init(&qi, c, b, kt);
        while (la_qiter_next(&qi, &t)) {
            const int i0 = t.i0, nr = t.nr;
            const la_rowvis *rows = t.rows;
            la_row_factors(c, h, rows, nr, s->cr);
            la_load_q(c, b, h, i0, nr, s->Qt);
            const float *dO = load_rowgrad(c, s, b, h, i0, nr, delta, row_stat, dout);
            PROF_LAP(SP_K_OTHER);
            tile_scores(c, s, s->Qt, s->Kt, h, rows, i0, nr, j0, nc, t.cls);
            PROF_LAP(SP_K_SCORES);
            tile_probs(c, s, rows, nr, nc);
            PROF_LAP(SP_K_EXP);
            /* dv += P^T dO */
            la_mm(nc, D, nr, s->Pb, 1, LA_BK, dO, D, s->dva, D, 1);
            PROF_LAP(SP_K_DV);
            tile_dscores(c, s, s->Vt, dO, rows, i0, nr, j0, nc, NULL, SP_K_DP, SP_K_DS);
            /* dk_rot += (d dot)^T Q_rot */
            la_mm(nc, D, nr, s->dPb, 1, LA_BK, s->Qt, D, s->dka, D, 1);
            PROF_LAP(SP_K_DK);
        }
    }
    la_unrotate_k(c, b, j0, nc, s->dka);
    size_t kbase = (((size_t)b * c->Hkv + hkv) * S + j0) * D;
    memcpy(dk + kbase, s->dka, sizeof(float) * (size_t)nc * D);
    memcpy(dv + kbase, s->dva, sizeof(float) * (size_t)nc * D);
    PROF_LAP(SP_K_OTHER);
}

/* Fused backward of one (b, kv head) pair: every visible (key tile, query tile) product is
 * formed once and feeds dV, dK and dQ. Blocks of NB key tiles outermost (K, V transposed
 * once per tile; dK, dV accumulated in per-thread tiles), then the group's query heads,
 * then query tiles, then the block's key tiles, all increasing: dK, dV of a key tile add
 * their (g, query tile) terms in the order dkv_task adds them, and dQ of a query tile
 * (accumulated in place in dq, which only this pair writes) adds its key tiles' terms in
 * increasing kt, the order dq_task adds them. So
 * the fused path computes bitwise the same dq, dk, dv as the two passes, for any thread
 * count; it is only chosen when the pairs keep every thread busy (la_softmax_backward). */
static void bwd_pair_task(const la_attn_ctx *c, const scratch *s, int b, int hkv,
                          const float *delta, const float *row_stat, const float *dout, float *dq,
                          float *dk, float *dv, double *part) {
    const int D = c->D, S = c->S, T = c->T;
    PROF_START();
    for (int g = 0; g < c->group; g++) { /* dq rows of the group's heads: (T, D) each */
        size_t bh = (size_t)b * c->H + hkv * c->group + g;
        memset(dq + bh * T * D, 0, sizeof(float) * (size_t)T * D);
        if (part) memset(c->rowgs + bh * T, 0, sizeof(double) * (size_t)T);
    }
    PROF_LAP(SP_K_OTHER);
    const size_t kd = (size_t)LA_BK * D; /* floats per key-tile buffer */
    for (int kb = 0; kb < c->nkt; kb += NB) {
        const int nb = c->nkt - kb < NB ? c->nkt - kb : NB;
        const float *Kr[NB];
        for (int u = 0; u < nb; u++) {
            const int j0 = (kb + u) * LA_BK, nc = S - j0 < LA_BK ? S - j0 : LA_BK;
            const float *vtile = c->v + (((size_t)b * c->Hkv + hkv) * S + j0) * D;
            Kr[u] = la_load_k(c, b, hkv, j0, nc, s->Kr + u * kd);
            la_transpose(Kr[u], nc, D, D, s->Kt + u * kd, LA_BK);
            la_transpose(vtile, nc, D, D, s->Vt + u * kd, LA_BK);
            memset(s->dka + u * kd, 0, sizeof(float) * (size_t)nc * D);
            memset(s->dva + u * kd, 0, sizeof(float) * (size_t)nc * D);
        }
        PROF_LAP(SP_K_TRANS);
        for (int g = 0; g < c->group; g++) {
            int h = hkv * c->group + g;
            float *dqh = dq + ((size_t)b * c->H + h) * T * D;
            for (int qt = 0; qt < c->nqt; qt++) {
                int cls[NB], any = 0;
                for (int u = 0; u < nb; u++) any |= cls[u] = la_sched_tile_cls(c, b, qt, kb + u);
                if (!any) continue;
                const int i0 = qt * LA_BQ, nr = T - i0 < LA_BQ ? T - i0 : LA_BQ;
                const la_rowvis *rows = c->rows + (size_t)b * T + i0;
                la_row_factors(c, h, rows, nr, s->cr);
                /* the query rows themselves when nothing rotates (no copy per tile pair) */
                const float *Q = c->q + (((size_t)b * c->H + h) * T + i0) * D;
                if (c->rotate) {
                    la_load_q(c, b, h, i0, nr, s->Qt);
                    Q = s->Qt;
                }
                const float *dO = load_rowgrad(c, s, b, h, i0, nr, delta, row_stat, dout);
                double *gs = part ? c->rowgs + ((size_t)b * c->H + h) * T + i0 : NULL;
                float *dqt = dqh + (size_t)i0 * D;
                PROF_LAP(SP_K_OTHER);
                for (int u = 0; u < nb; u++) { /* the block's key tiles, increasing */
                    if (!cls[u]) continue;
                    const int j0 = (kb + u) * LA_BK, nc = S - j0 < LA_BK ? S - j0 : LA_BK;
                    tile_scores(c, s, Q, s->Kt + u * kd, h, rows, i0, nr, j0, nc, cls[u]);
                    PROF_LAP(SP_K_SCORES);
                    tile_probs(c, s, rows, nr, nc);
                    PROF_LAP(SP_K_EXP);
                    /* dv += P^T dO */
                    la_mm(nc, D, nr, s->Pb, 1, LA_BK, dO, D, s->dva + u * kd, D, 1);
                    PROF_LAP(SP_K_DV);
                    tile_dscores(c, s, s->Vt + u * kd, dO, rows, i0, nr, j0, nc, gs, SP_K_DP, SP_K_DS);
                    /* dk_rot += (d dot)^T Q_rot */
                    la_mm(nc, D, nr, s->dPb, 1, LA_BK, Q, D, s->dka + u * kd, D, 1);
                    PROF_LAP(SP_K_DK);
                    /* dq_rot += d dot . K_rot (masked K rows skipped in partial tiles) */
                    if (cls[u] == 1)
                        la_mm(nr, D, nc, s->dPb, LA_BK, 1, Kr[u], D, dqt, D, 1);
                    else
                        la_mm_rows(rows, nr, j0, nc, D, s->dPb, LA_BK, Kr[u], D, dqt, D);
                    PROF_LAP(SP_K_DQ);
                }
            }
        }
        for (int u = 0; u < nb; u++) {
            const int j0 = (kb + u) * LA_BK, nc = S - j0 < LA_BK ? S - j0 : LA_BK;
            la_unrotate_k(c, b, j0, nc, s->dka + u * kd);
            size_t kbase = (((size_t)b * c->Hkv + hkv) * S + j0) * D;
            memcpy(dk + kbase, s->dka + u * kd, sizeof(float) * (size_t)nc * D);
            memcpy(dv + kbase, s->dva + u * kd, sizeof(float) * (size_t)nc * D);
        }
        PROF_LAP(SP_K_OTHER);
    }
    for (int g = 0; g < c->group; g++) {
        size_t bh = (size_t)b * c->H + hkv * c->group + g;
        la_unrotate_q(c, b, 0, T, dq + bh * T * D);
        if (part) /* d s_h per query tile, summed as dq_task sums it */
            for (int qt = 0; qt < c->nqt; qt++) {
                const int i0 = qt * LA_BQ, nr = T - i0 < LA_BQ ? T - i0 : LA_BQ;
                const la_rowvis *rows = c->rows + (size_t)b * T + i0;
                const double *gs = c->rowgs + bh * T + i0;
                double acc = 0.0;
                for (int r = 0; r < nr; r++) acc += gs[r] * c->scale * rows[r].xrow;
                part[bh * c->nqt + qt] = acc;
            }
    }
    PROF_LAP(SP_K_OTHER);
}

static void dq_item(void *arg, la_item it) {
    sm_arg *a = arg;
    const la_attn_ctx *c = a->c;
    double *part = a->part ? a->part + ((size_t)it.b * c->H + it.h) * c->nqt + it.tile : NULL;
    dq_task(c, &a->s, it.b, it.h, it.tile, a->delta, a->crow_stat, a->dout, a->dq, part,
            chunk_tiles(a, it));
}

static void dkv_item(void *arg, la_item it) {
    sm_arg *a = arg;
    dkv_task(a->c, &a->s, it.b, it.h, it.tile, a->delta, a->crow_stat, a->dout, a->dk, a->dv);
}

static void pair_item(void *arg, la_item it) {
    sm_arg *a = arg;
    bwd_pair_task(a->c, &a->s, it.b, it.h, a->delta, a->crow_stat, a->dout, a->dq, a->dk, a->dv,
                  a->part);
}

/* Use the fused backward? Its items are the (b, kv head) pairs, so with few pairs per thread
 * the last round leaves threads idle: fused when ceil(pairs / threads) rounds of fused work
 * (about 0.8 of the two passes' work per pair, docs/benchmarks.md "Where the backward's time goes") beat
 * the two passes' evenly spread work, i.e. 4 * threads * ceil(pairs / threads) <= 5 * pairs.
 * Results are bitwise the same either way (bwd_pair_task), so this may look at the thread
 * count. */
int la_softmax_bwd_fused = -1; /* tests: 1 forces the fused path, 0 the two passes, -1 auto */

static int use_fused(const la_attn_ctx *c) {
    if (c->qsel || c->ksel) return 0; /* selected items (ring.c): the two passes */
    if (la_softmax_bwd_fused >= 0) return la_softmax_bwd_fused;
    long pairs = (long)c->B * c->Hkv, nt = c->nthreads;
    return 4 * nt * ((pairs + nt - 1) / nt) <= 5 * pairs;
}

la_status la_softmax_backward(const la_attn_ctx *c, const float *out, const float *row_stat,
                              const float *dout, float *dq, float *dk, float *dv) {
    float *dlogn = c->opts->dlogn_s;
    double *part = dlogn && c->spec->xform == LA_XF_LOGN ? c->part : NULL;
    const int fused = use_fused(c);
#pragma omp parallel num_threads(c->nthreads)
    {
        sm_arg a = {.c = c, .s = get_scratch(c, omp_get_thread_num()), .dout = dout, .delta = c->rowbuf,
                    .crow_stat = row_stat, .dq = dq, .dk = dk, .dv = dv, .part = part,
                    .stride = la_prep_stride(c, 1)};
        PROF_START();
        rowgrad_delta(c, out, dout, c->rowbuf); /* ends with a barrier: every D_i is ready */
        PROF_LAP(SP_PREP_B);
        if (fused) {
            PROF_REGION(r2);
            la_sched_for(c, LA_ITEMS_PAIR, 0, la_sched_np(c), pair_item, &a);
            PROF_REGION_END(r2, SP_DKV_REGION);
        } else {
            chunk_items(c, &a, 1, dq_item, SP_PREP_B, SP_DQ_REGION);
            PROF_REGION(r1);
            la_sched_for(c, LA_ITEMS_KV, 0, la_sched_nk(c), dkv_item, &a);
            PROF_REGION_END(r1, SP_DKV_REGION);
        }
    }
    if (dlogn) {
        if (part) la_sum_parts(c, dlogn);
        else memset(dlogn, 0, sizeof(float) * (size_t)c->H);
    }
    return LA_OK;
}
