/* ring.c -- sequence-parallel exact attention over the process group (issue 30; ring.h).
 *
 * Each rank runs the one-process softmax kernel (softmax.c) on the full-length context of
 * the call, restricted by the tile scheduler's item selection (la_attn_ctx.qsel / ksel) to
 * the query tiles (forward, dq) and key tiles (dk, dv) of its zigzag chunks. The rows of
 * the other ranks arrive through P - 1 exchange steps per unit (a (batch, kv head) pair: its
 * K and V rows, plus for the backward the q, out, dout and lse rows of the pair's query
 * heads): at step s each rank sends its own rows to rank r+s and receives those of rank r-s
 * (la_dist_ring_start: MPI_Isend / MPI_Irecv, one message per run of rows, so the rows leave
 * from and arrive into the tensors themselves: no pack or unpack copy; a unit's rows are
 * complete, and read only, from the step that received them on, and the kernel never reads
 * a row in flight), and only the 64-row tiles the receiver reads (sp_needs: the key tiles
 * its query tiles see, and in the backward the query tiles that see its key tiles; under a
 * window most pairs of ranks exchange nothing). The rank computes
 * unit u while unit u+1 travels: its work on a unit is cut into pieces, and between pieces
 * it polls the ring (MPI_Testall) and posts the next step, so on a network with its own
 * DMA engine the transfer runs during the computation; time blocked waiting is counted
 * apart (la_sp_stats.t_wait).
 *
 * Why no merge of per-block partial results (the usual ring attention): the one-process
 * kernel's online softmax rescales its running (max, sum, output) once per 64-key tile,
 * in increasing key order; merging a block's partial (max, sum, output) into another's
 * rounds differently, and the (max, sum) of a rank's block depends on where the block
 * starts, hence on P. Running the kernel's own tile loop over the complete key range of a
 * row reproduces it bit for bit, whatever P (tests/test_ring.c, tests/mpi.sh), at the
 * cost of holding the full K/V on every rank.
 */
#include "attn/ring.h"

#include "attn/attn_internal.h"
#include "core/dist.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- layout ----------------------------------------------------------------------- */

/* Tiles [t[0], t[1]) and [t[2], t[3]) of nt held by rank r of P (chunks r and 2P-1-r). */
static void sp_tiles(int nt, int P, int r, int t[4]) {
    const int64_t c[2] = {r, 2 * (int64_t)P - 1 - r};
    for (int x = 0; x < 2; x++) {
        t[2 * x] = (int)(c[x] * nt / (2 * (int64_t)P));
        t[2 * x + 1] = (int)((c[x] + 1) * nt / (2 * (int64_t)P));
    }
}

void la_attn_sp_rows(int T, int P, int r, int rows[4]) {
    int nt = (T + LA_BQ - 1) / LA_BQ, t[4];
    sp_tiles(nt, P, r, t);
    for (int x = 0; x < 4; x++) rows[x] = (int64_t)t[x] * LA_BQ < T ? t[x] * LA_BQ : T;
}

static int own_tile(const int t[4], int kt) { return (kt >= t[0] && kt < t[1]) || (kt >= t[2] && kt < t[3]); }

static la_status sp_check(const la_spec *spec, const la_shape *s, const la_attn_opts *opts) {
    if (!spec || !s) return la_fail(LA_EINVAL, "sequence-parallel attention: spec and shape must not be NULL");
    if ((unsigned)spec->norm > LA_NORM_SIGMOID_LOGN)
        return la_fail(LA_EINVAL, "spec.norm = %d is not a valid la_norm", (int)spec->norm);
    if (s->T != s->S)
        return la_fail(LA_ESHAPE, "sequence-parallel attention splits one sequence's self-attention: T = %d "
                       "queries and S = %d keys must be equal", s->T, s->S);
    if (s->pos0 != LA_POS0_AUTO && s->pos0 != 0)
        return la_fail(LA_ESHAPE, "sequence-parallel attention: pos0 = %lld, but query i must sit at key i "
                       "(pos0 = 0) when one sequence is split over the ranks", (long long)s->pos0);
    if (opts && opts->key_mass)
        return la_fail(LA_EINVAL, "sequence-parallel attention does not compute key_mass (it sums over the "
                       "queries of every rank); compute it on one rank");
    return LA_OK;
}

static const la_ctx_extra sp_bwd_extra = {.rowbuf = 1, .rowgs = 1};

/* 1 for the entmax family (entmax_attn.c's context and kernels); softmax and sigmoid rows
 * (with or without a sink) share the tile context of attn_ctx.c, as in attn.c */
static int sp_em(const la_spec *spec) {
    return spec->norm == LA_NORM_ENTMAX || spec->norm == LA_NORM_SPARSEMAX || spec->norm == LA_NORM_ASENTMAX;
}

/* The call context as la_attn_forward / la_attn_backward build it (softmax or entmax). */
static la_status sp_ctx(la_attn_ctx *c, const la_spec *spec, const la_shape *s, const float *q, const float *k,
                        const float *v, const la_attn_opts *opts, int backward, la_workspace **own) {
    if (sp_em(spec)) return la_entmax_ctx(c, spec, s, q, k, v, opts, backward, own);
    return la_attn_ctx_init(c, spec, s, q, k, v, opts, backward ? &sp_bwd_extra : NULL, own);
}

static la_status sp_fwd(const la_attn_ctx *c, float *out, float *row_stat) {
    if (sp_em(c->spec)) return la_entmax_ctx_forward(c, out, row_stat);
    return c->sigmoid ? la_sigmoid_forward(c, out, row_stat) : la_softmax_forward(c, out, row_stat);
}

static la_status sp_bwd(const la_attn_ctx *c, const float *out, const float *row_stat, const float *dout, float *dq,
                        float *dk, float *dv) {
    return sp_em(c->spec) ? la_entmax_ctx_backward(c, row_stat, dout, dq, dk, dv)
                          : la_softmax_backward(c, out, row_stat, dout, dq, dk, dv); /* sigmoid rows too */
}

/* d loss / d sink logit (opts->dsinks, H) once every row's out, dout and row_stat are at
 * hand: D_i of every row (la_row_delta, the kernel's own chain) and la_sink_backward's sum
 * in its fixed (batch, row) order, so every rank writes the one-process value; zero where
 * the spec has no learned sink (as attn.c). */
static void sp_dsinks(const la_attn_ctx *c, const float *out, const float *row_stat, const float *dout,
                      float *dsinks) {
    if (c->spec->sink != LA_SINK_LEARNED || sp_em(c->spec)) {
        memset(dsinks, 0, sizeof(float) * (size_t)c->H);
        return;
    }
    const long n = (long)c->B * c->H * c->T;
    for (long i = 0; i < n; i++) c->rowbuf[i] = la_row_delta(out + (size_t)i * c->D, dout + (size_t)i * c->D, c->D);
    la_sink_backward(c, row_stat, dsinks);
}

/* ---- the ring ------------------------------------------------------------------------ */

/* Rows of one tensor that travel: n_heads blocks of len rows (hstride bytes apart) of
 * rowbytes bytes each; the rank's rows of a block are its zigzag rows (in_tiles: its
 * tiles, one "row" per tile -- the backward's per-tile partial sums). */
typedef struct {
    char *base;
    int nh, len, in_tiles;
    size_t hstride, rowbytes;
    const uint8_t *need; /* NULL: every row travels; else need[q * nt + t] (nt: the slice's
                            64-row tiles): 1 when rank q reads tile t of another rank */
} sp_slice;

#define SP_MAXSL 6

typedef struct {
    int P, r;
    int nunit, u, s, busy;         /* unit and step in flight (s in 1..P-1) */
    int (*unit)(const void *arg, int u, sp_slice *sl); /* the slices of unit u; returns how many */
    const void *arg;
    la_dist_block *blk;            /* a step's send and receive blocks (2 x nblk) */
    int nblk;
    la_sp_stats *st;
} sp_ring;

static void slice_rows(const sp_slice *sl, int P, int q, int rw[4]) {
    if (sl->in_tiles) sp_tiles(sl->len, P, q, rw);
    else la_attn_sp_rows(sl->len, P, q, rw);
}

/* Rank o's rows of the n slices that rank q reads, as blocks of the arrays themselves (per
 * head of a slice: its two zigzag pieces, or without need the runs of needed 64-row tiles
 * inside them) -> blk; returns their number. The sender (o) and the receiver (q) cut the
 * same list. */
static int unit_blocks(const sp_slice *sl, int n, int P, int o, int q, la_dist_block *blk) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        int rw[4], nt = (sl[i].len + LA_BQ - 1) / LA_BQ;
        slice_rows(&sl[i], P, o, rw);
        for (int h = 0; h < sl[i].nh; h++) {
            char *base = sl[i].base + (size_t)h * sl[i].hstride;
            for (int x = 0; x < 4; x += 2) {
                if (!sl[i].need) {
                    blk[m++] = (la_dist_block){base + (size_t)rw[x] * sl[i].rowbytes,
                                               (size_t)(rw[x + 1] - rw[x]) * sl[i].rowbytes};
                    continue;
                }
                const uint8_t *nd = sl[i].need + (size_t)q * nt;
                for (int t = rw[x] / LA_BQ, te = (rw[x + 1] + LA_BQ - 1) / LA_BQ; t < te;) {
                    if (!nd[t]) { t++; continue; }
                    int t1 = t;
                    while (t1 < te && nd[t1]) t1++;
                    int r0 = t * LA_BQ, r1 = t1 * LA_BQ < rw[x + 1] ? t1 * LA_BQ : rw[x + 1];
                    blk[m++] = (la_dist_block){base + (size_t)r0 * sl[i].rowbytes,
                                               (size_t)(r1 - r0) * sl[i].rowbytes};
                    t = t1;
                }
            }
        }
    }
    return m;
}

/* the most blocks of one rank in any unit (the block lists' size: with need masks, which a
 * call may set after this, a run per tile at most) */
static int ring_nblk(const sp_ring *g) {
    int cap = 0;
    for (int u = 0; u < g->nunit; u++) {
        sp_slice sl[SP_MAXSL];
        int n = g->unit(g->arg, u, sl), m = 0;
        for (int i = 0; i < n; i++) m += sl[i].nh * (sl[i].in_tiles ? 2 : (sl[i].len + LA_BQ - 1) / LA_BQ + 2);
        cap = m > cap ? m : cap;
    }
    return cap;
}

/* Step s of unit u: send this rank's rows that rank r+s reads to it, receive the rows of
 * rank r-s that this rank reads, both in place in the unit's arrays (each rank sends its
 * own rows straight to every other rank in P-1 steps; with need masks only what the
 * receiver's tiles see: under a window a rank's far ranks send it nothing). */
static la_status ring_post(sp_ring *g) {
    sp_slice sl[SP_MAXSL];
    int n = g->unit(g->arg, g->u, sl);
    int dst = (g->r + g->s) % g->P, src = ((g->r - g->s) % g->P + g->P) % g->P;
    la_dist_block *sb = g->blk, *rb = g->blk + g->nblk;
    int ns = unit_blocks(sl, n, g->P, g->r, dst, sb), nr = unit_blocks(sl, n, g->P, src, g->r, rb);
    for (int i = 0; i < ns; i++) g->st->bytes_sent += (double)sb[i].n;
    g->st->steps++;
    LA_TRY(la_dist_ring_start(g->s, sb, ns, rb, nr));
    g->busy = 1;
    return LA_OK;
}

/* the step in flight has completed (its rows are in place): move on, post the next step */
static la_status ring_done(sp_ring *g) {
    g->busy = 0;
    if (++g->s == g->P) g->s = 1, g->u++;
    return g->u < g->nunit ? ring_post(g) : LA_OK;
}

static la_status ring_begin(sp_ring *g) {
    g->u = g->P < 2 ? g->nunit : 0, g->s = 1, g->busy = 0; /* alone: nothing travels */
    return g->u < g->nunit ? ring_post(g) : LA_OK;
}

/* progress without blocking (between pieces of computation) */
static la_status ring_poll(sp_ring *g) {
    if (!g->busy) return LA_OK;
    double t0 = omp_get_wtime();
    int done = 0;
    la_status st = la_dist_ring_test(&done);
    if (st == LA_OK && done) st = ring_done(g);
    g->st->t_test += omp_get_wtime() - t0;
    return st;
}

/* block until units 0..u have arrived */
static la_status ring_need(sp_ring *g, int u) {
    while (g->busy && g->u <= u) {
        double t0 = omp_get_wtime();
        la_status st = la_dist_ring_wait();
        g->st->t_wait += omp_get_wtime() - t0;
        LA_TRY(st);
        t0 = omp_get_wtime();
        st = ring_done(g);
        g->st->t_test += omp_get_wtime() - t0;
        LA_TRY(st);
    }
    return LA_OK;
}

/* The block lists of a ring over g->unit (P > 1: 2 x ring_nblk; a placeholder when alone). */
static la_status ring_alloc(sp_ring *g, const char *what) {
    g->nblk = g->P > 1 ? ring_nblk(g) : 0;
    g->blk = la_malloc(sizeof(la_dist_block) * (size_t)(g->nblk ? 2 * g->nblk : 1));
    return g->blk ? LA_OK : la_fail(LA_ENOMEM, "%s: out of memory (%d ring blocks)", what, 2 * g->nblk);
}

/* ---- units -------------------------------------------------------------------------- */

typedef struct {
    const la_shape *s;
    float *q, *k, *v, *out, *row_stat, *dout;
    int bwd;
    const uint8_t *needk, *needq; /* NULL, or (B, P, nt): the key / query tiles each rank reads */
} sp_units;

/* unit p = (b, kv head): its K and V rows; backward also q, out, dout, lse of its heads */
static int unit_slices(const void *arg, int p, sp_slice *sl) {
    const sp_units *a = arg;
    const la_shape *s = a->s;
    const size_t D = (size_t)s->D, T = (size_t)s->T, S = (size_t)s->S;
    const int group = s->H / s->Hkv, b = p / s->Hkv, hkv = p % s->Hkv;
    const size_t h0 = (size_t)b * s->H + (size_t)hkv * group;
    const int P = la_dist_size(), nt = (s->T + LA_BQ - 1) / LA_BQ;
    const uint8_t *nk = a->needk ? a->needk + (size_t)b * P * nt : NULL;
    const uint8_t *nq = a->needq ? a->needq + (size_t)b * P * nt : NULL;
    sl[0] = (sp_slice){(char *)(a->k + (size_t)p * S * D), 1, s->S, 0, S * D * 4, D * 4, nk};
    sl[1] = sl[0];
    sl[1].base = (char *)(a->v + (size_t)p * S * D);
    if (!a->bwd) return 2;
    sl[2] = (sp_slice){(char *)(a->q + h0 * T * D), group, s->T, 0, T * D * 4, D * 4, nq};
    sl[3] = sl[2];
    sl[3].base = (char *)(a->out + h0 * T * D);
    sl[4] = sl[2];
    sl[4].base = (char *)(a->dout + h0 * T * D);
    sl[5] = (sp_slice){(char *)(a->row_stat + h0 * T), group, s->T, 0, T * 4, 4, nq};
    return 6;
}

/* zero the rows of the n slices that are not rank r's */
static void zero_rows(const sp_slice *sl, int n, int P, int r) {
    for (int q = 0; q < P; q++)
        for (int i = 0; q != r && i < n; i++) {
            int rw[4];
            slice_rows(&sl[i], P, q, rw);
            for (int h = 0; h < sl[i].nh; h++)
                for (int x = 0; x < 4; x += 2)
                    if (rw[x + 1] > rw[x])
                        memset(sl[i].base + (size_t)h * sl[i].hstride + (size_t)rw[x] * sl[i].rowbytes, 0,
                               (size_t)(rw[x + 1] - rw[x]) * sl[i].rowbytes);
        }
}

/* zero the other ranks' rows of every unit (scratch on entry; finite for the context's
 * argument checks until they arrive) */
static void zero_others(const sp_ring *g) {
    for (int u = 0; u < g->nunit; u++) {
        sp_slice sl[SP_MAXSL];
        zero_rows(sl, g->unit(g->arg, u, sl), g->P, g->r);
    }
}

/* The tiles each rank reads of the others' (T = S, so query and key tiles coincide), from
 * the context's key-tile spans of every query tile (mask and documents): needk[(b P + q) nt
 * + kt] = 1 when a query tile of rank q sees key tile kt of batch b (its K, V rows: the
 * forward and the dq pass), needq[...+ qt] = 1 when query tile qt sees a key tile of rank q
 * (its q, out, dout, lse rows: the dk, dv pass); needq may be NULL. A rank's own tiles are
 * marked too and never travel. */
static la_status sp_needs(const la_attn_ctx *c, int P, uint8_t **needk, uint8_t **needq) {
    const int nt = c->nqt;
    size_t n = (size_t)c->B * P * nt;
    *needk = la_calloc(needq ? 2 * n : n, 1);
    int *owner = la_malloc(sizeof(int) * (size_t)nt);
    if (!*needk || !owner) {
        free(*needk), free(owner);
        *needk = NULL;
        return la_fail(LA_ENOMEM, "sequence-parallel attention: out of memory (tile needs)");
    }
    if (needq) *needq = *needk + n;
    for (int q = 0; q < P; q++) {
        int t[4];
        sp_tiles(nt, P, q, t);
        for (int x = 0; x < 4; x += 2)
            for (int i = t[x]; i < t[x + 1]; i++) owner[i] = q;
    }
    for (int b = 0; b < c->B; b++)
        for (int qt = 0; qt < nt; qt++) {
            const la_tilespan *sp = &c->qspan[(size_t)b * nt + qt];
            const int lo[2] = {sp->a0, sp->b0}, hi[2] = {sp->a1, sp->b1};
            uint8_t *nk = *needk + ((size_t)b * P + owner[qt]) * nt;
            for (int x = 0; x < 2; x++)
                for (int kt = lo[x]; kt < hi[x]; kt++) {
                    nk[kt] = 1;
                    if (needq) (*needq)[((size_t)b * P + owner[kt]) * nt + qt] = 1;
                }
        }
    free(owner);
    return LA_OK;
}

/* ---- item selection ---------------------------------------------------------------- */

/* Query items of pair p (all pairs when p < 0) of this rank's tiles, piece k of npiece
 * (the rank's tiles cut into npiece runs) -> qsel (B * H * nqt). */
static void select_q(const la_attn_ctx *c, const int t[4], int p, int k, int npiece, uint8_t *qsel) {
    memset(qsel, 0, (size_t)c->B * c->H * c->nqt);
    int nown = t[1] - t[0] + t[3] - t[2];
    int lo = (int)((int64_t)k * nown / npiece), hi = (int)((int64_t)(k + 1) * nown / npiece);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++) {
            if (p >= 0 && b * c->Hkv + h / c->group != p) continue;
            for (int x = lo; x < hi; x++) {
                int qt = x < t[1] - t[0] ? t[0] + x : t[2] + x - (t[1] - t[0]);
                qsel[((size_t)b * c->H + h) * c->nqt + qt] = 1;
            }
        }
}

/* kv items of pair p (all when p < 0) of this rank's key tiles -> ksel (B * Hkv * nkt) */
static void select_k(const la_attn_ctx *c, const int t[4], int p, uint8_t *ksel) {
    for (int pr = 0; pr < c->B * c->Hkv; pr++)
        for (int kt = 0; kt < c->nkt; kt++)
            ksel[(size_t)pr * c->nkt + kt] = (p < 0 || pr == p) && own_tile(t, kt);
}

/* Own rows of row_stat finite or LA_ROW_EMPTY (la_attn_forward's last check). */
static la_status check_own_stat(const la_shape *s, const float *row_stat, int P, int r) {
    int rw[4];
    la_attn_sp_rows(s->T, P, r, rw);
    for (size_t bh = 0; bh < (size_t)s->B * s->H; bh++)
        for (int x = 0; x < 4; x += 2)
            for (int i = rw[x]; i < rw[x + 1]; i++) {
                float v = row_stat[bh * s->T + i];
                if (isnan(v) || v == INFINITY)
                    return la_fail(LA_ENUMERIC, "attention: row statistic of [b=%zu, h=%zu, i=%d] is %g: the "
                                   "logits of this row are not representable in float32; scale q and k down",
                                   bh / s->H, bh % s->H, i, (double)v);
            }
    return LA_OK;
}

/* ---- one rank's computation on complete inputs (tests) ------------------------------ */

static la_shape sp_shape(const la_shape *s) {
    la_shape x = *s;
    x.pos0 = 0;
    return x;
}

la_status la_attn_sp_forward_rank(const la_spec *spec, const la_shape *shape, const float *q, const float *k,
                                  const float *v, float *out, float *row_stat, const la_attn_opts *opts,
                                  int P, int r) {
    LA_TRY(sp_check(spec, shape, opts));
    if (P < 1 || r < 0 || r >= P) return la_fail(LA_EINVAL, "sequence-parallel attention: rank %d of %d", r, P);
    la_shape s = sp_shape(shape);
    la_attn_ctx c;
    la_workspace *own = NULL;
    uint8_t *qsel = NULL;
    la_status st = sp_ctx(&c, spec, &s, q, k, v, opts, 0, &own);
    if (st == LA_OK && !(qsel = la_malloc((size_t)s.B * s.H * c.nqt)))
        st = la_fail(LA_ENOMEM, "sequence-parallel attention: out of memory");
    if (st == LA_OK) {
        int t[4];
        sp_tiles(c.nqt, P, r, t);
        select_q(&c, t, -1, 0, 1, qsel);
        c.qsel = qsel;
        st = sp_fwd(&c, out, row_stat);
    }
    if (st == LA_OK) st = check_own_stat(&s, row_stat, P, r);
    free(qsel);
    la_workspace_free(own);
    return st;
}

la_status la_attn_sp_backward_rank(const la_spec *spec, const la_shape *shape, const float *q, const float *k,
                                   const float *v, const float *out, const float *row_stat, const float *dout,
                                   float *dq, float *dk, float *dv, double *part, const la_attn_opts *opts,
                                   int P, int r) {
    LA_TRY(sp_check(spec, shape, opts));
    if (P < 1 || r < 0 || r >= P) return la_fail(LA_EINVAL, "sequence-parallel attention: rank %d of %d", r, P);
    la_shape s = sp_shape(shape);
    la_attn_opts o = opts ? *opts : la_attn_opts_default();
    float dl[4096];
    if (o.dlogn_s) {
        if (s.H > 4096) return la_fail(LA_EINVAL, "sequence-parallel attention: more than 4096 heads");
        o.dlogn_s = dl; /* the per-tile parts are the result here */
    }
    la_attn_ctx c;
    la_workspace *own = NULL;
    uint8_t *sel = NULL;
    la_status st = sp_ctx(&c, spec, &s, q, k, v, &o, 1, &own);
    size_t nq = (size_t)s.B * s.H * c.nqt, nk = (size_t)s.B * s.Hkv * c.nkt;
    if (st == LA_OK && !(sel = la_malloc(nq + nk))) st = la_fail(LA_ENOMEM, "sequence-parallel attention: out of memory");
    if (st == LA_OK) {
        int t[4];
        sp_tiles(c.nqt, P, r, t);
        c.qsel = sel, c.ksel = sel + nq;
        memset(c.part, 0, sizeof(double) * nq);
        if (!sp_em(spec)) {
            select_q(&c, t, -1, 0, 1, sel);
            select_k(&c, t, -1, sel + nq);
            st = sp_bwd(&c, out, row_stat, dout, dq, dk, dv);
        } else {
            /* entmax: the dk, dv pass reads delta of every query row, which the dq pass of
             * the rows' own rank writes (la_attn_sp_backward exchanges it); alone here, this
             * rank computes every row's delta (and dq), then its key tiles */
            memset(sel, 1, nq);
            memset(sel + nq, 0, nk);
            st = sp_bwd(&c, out, row_stat, dout, dq, dk, dv);
            if (st == LA_OK) {
                memset(sel, 0, nq);
                select_k(&c, t, -1, sel + nq);
                st = sp_bwd(&c, out, row_stat, dout, dq, dk, dv);
            }
            if (st == LA_OK && spec->norm == LA_NORM_ASENTMAX) la_entmax_ctx_as_map(&c, q, dq);
        }
        if (st == LA_OK && part) memcpy(part, c.part, sizeof(double) * nq);
        if (st == LA_OK && o.dsinks) sp_dsinks(&c, out, row_stat, dout, o.dsinks); /* complete inputs here */
    }
    free(sel);
    la_workspace_free(own);
    return st;
}

/* ---- collective calls --------------------------------------------------------------- */

static la_status sp_ring_init(sp_ring *g, const sp_units *u, int nunit, la_sp_stats *st) {
    *g = (sp_ring){.P = la_dist_size(), .r = la_dist_rank(), .nunit = nunit, .unit = unit_slices, .arg = u, .st = st};
    return ring_alloc(g, "sequence-parallel attention");
}

/* the slices of a one-unit ring (gathers) */
typedef struct {
    const sp_slice *sl;
    int n;
} sp_fixed;

static int fixed_slices(const void *arg, int u, sp_slice *sl) {
    (void)u;
    const sp_fixed *f = arg;
    memcpy(sl, f->sl, sizeof *sl * (size_t)f->n);
    return f->n;
}

/* Collective, blocking: every rank's rows of the slices to every rank. */
static la_status gather_slices(const sp_slice *sl, int n, la_sp_stats *S) {
    sp_fixed f = {sl, n};
    sp_ring g = {.P = la_dist_size(), .r = la_dist_rank(), .nunit = 1, .unit = fixed_slices, .arg = &f, .st = S};
    la_status st = la_dist_agree(ring_alloc(&g, "sequence-parallel gather"));
    if (st == LA_OK) {
        double t0 = omp_get_wtime();
        st = ring_begin(&g);
        if (st == LA_OK) st = ring_need(&g, 0);
        S->t_total += omp_get_wtime() - t0;
        st = la_dist_agree(st);
    }
    free(g.blk);
    return st;
}

la_status la_attn_sp_gather(float *x, int n_heads, int T, int D, la_sp_stats *stats) {
    la_sp_stats dummy;
    la_sp_stats *S = stats ? stats : &dummy;
    memset(S, 0, sizeof *S);
    sp_slice sl = {(char *)x, n_heads, T, 0, (size_t)T * D * sizeof(float), (size_t)D * sizeof(float), NULL};
    return gather_slices(&sl, 1, S);
}

static la_status sp_forward(const la_spec *spec, const la_shape *shape, float *q, float *k, float *v, float *out,
                            float *row_stat, const la_attn_opts *opts, int all_kv, la_sp_stats *stats) {
    la_sp_stats dummy;
    la_sp_stats *S = stats ? stats : &dummy;
    memset(S, 0, sizeof *S);
    double t0 = omp_get_wtime(), c0 = cpu_now();
    la_status st = sp_check(spec, shape, opts);
    if (st == LA_OK && (!q || !k || !v || !out || !row_stat))
        st = la_fail(LA_EINVAL, "sequence-parallel attention: q, k, v, out and row_stat must not be NULL");
    if ((st = la_dist_agree(st)) != LA_OK) return st;
    la_shape s = sp_shape(shape);
    sp_units un = {.s = &s, .q = q, .k = k, .v = v};
    sp_ring g;
    la_attn_ctx c;
    la_workspace *own = NULL;
    uint8_t *qsel = NULL;
    int P = la_dist_size(), r = la_dist_rank(), t[4];
    st = sp_ring_init(&g, &un, s.B * s.Hkv, S);
    if (st == LA_OK) {
        /* the other ranks' rows of q (never read: no item of theirs runs) and of k, v (until
         * they arrive) are zero, so that the context's finiteness checks see this rank's rows */
        zero_others(&g);
        sp_slice qs = {(char *)q, s.B * s.H, s.T, 0, (size_t)s.T * s.D * 4, (size_t)s.D * 4, NULL};
        zero_rows(&qs, 1, P, r);
        st = sp_ctx(&c, spec, &s, q, k, v, opts, 0, &own);
    }
    if (st == LA_OK && !(qsel = la_malloc((size_t)s.B * s.H * c.nqt)))
        st = la_fail(LA_ENOMEM, "sequence-parallel attention: out of memory");
    uint8_t *needk = NULL;
    if (st == LA_OK && !all_kv && P > 1) st = sp_needs(&c, P, &needk, NULL);
    un.needk = needk;
    if ((st = la_dist_agree(st)) == LA_OK) {
        sp_tiles(c.nqt, P, r, t);
        c.qsel = qsel;
        /* pieces per unit: enough boundaries to post every ring step of the next unit */
        int nown = t[1] - t[0] + t[3] - t[2], npiece = P < nown ? P : (nown > 0 ? nown : 1);
        st = ring_begin(&g);
        for (int p = 0; st == LA_OK && p < g.nunit; p++) {
            st = ring_need(&g, p);
            for (int x = 0; st == LA_OK && x < npiece; x++) {
                select_q(&c, t, p, x, npiece, qsel);
                double tc = omp_get_wtime();
                st = sp_fwd(&c, out, row_stat);
                S->t_compute += omp_get_wtime() - tc;
                if (st == LA_OK) st = ring_poll(&g);
            }
        }
        if (st == LA_OK) st = ring_need(&g, g.nunit);
        if (st == LA_OK) st = check_own_stat(&s, row_stat, P, r);
        st = la_dist_agree(st);
    }
    free(qsel);
    free(needk);
    free(g.blk);
    la_workspace_free(own);
    S->t_total = omp_get_wtime() - t0;
    S->cpu_total = cpu_now() - c0;
    return st;
}

la_status la_attn_sp_forward(const la_spec *spec, const la_shape *shape, float *q, float *k, float *v,
                             float *out, float *row_stat, const la_attn_opts *opts, la_sp_stats *stats) {
    return sp_forward(spec, shape, q, k, v, out, row_stat, opts, 0, stats);
}

la_status la_attn_sp_forward_all_kv(const la_spec *spec, const la_shape *shape, float *q, float *k, float *v,
                                    float *out, float *row_stat, const la_attn_opts *opts, la_sp_stats *stats) {
    return sp_forward(spec, shape, q, k, v, out, row_stat, opts, 1, stats);
}

la_status la_attn_sp_backward(const la_spec *spec, const la_shape *shape, float *q, float *k, float *v,
                              float *out, float *row_stat, float *dout, float *dq, float *dk, float *dv,
                              const la_attn_opts *opts, la_sp_stats *stats) {
    la_sp_stats dummy;
    la_sp_stats *S = stats ? stats : &dummy;
    memset(S, 0, sizeof *S);
    double t0 = omp_get_wtime(), c0 = cpu_now();
    la_status st = sp_check(spec, shape, opts);
    if (st == LA_OK && (!q || !k || !v || !out || !row_stat || !dout || !dq || !dk || !dv))
        st = la_fail(LA_EINVAL, "sequence-parallel attention: every tensor of the backward must be given");
    if ((st = la_dist_agree(st)) != LA_OK) return st;
    la_shape s = sp_shape(shape);
    sp_units un = {.s = &s, .q = q, .k = k, .v = v, .out = out, .row_stat = row_stat, .dout = dout, .bwd = 1};
    sp_ring g;
    la_attn_ctx c;
    la_workspace *own = NULL;
    uint8_t *sel = NULL;
    int P = la_dist_size(), r = la_dist_rank(), t[4];
    const int em = sp_em(spec);
    size_t nq = 0, nk = 0;
    uint8_t *needk = NULL, *needq = NULL;
    st = sp_ring_init(&g, &un, s.B * s.Hkv, S);
    if (st == LA_OK) zero_others(&g);
    if (em) {
        /* entmax: the context (ASEntmax scales every query row into it) is built once every
         * row has arrived, so the ring runs first, without overlap */
        if ((st = la_dist_agree(st)) != LA_OK) goto out;
        st = ring_begin(&g);
        if (st == LA_OK) st = ring_need(&g, g.nunit);
        if ((st = la_dist_agree(st)) != LA_OK) goto out;
    }
    if (st == LA_OK) st = sp_ctx(&c, spec, &s, q, k, v, opts, 1, &own);
    if (st == LA_OK) {
        nq = (size_t)s.B * s.H * c.nqt, nk = (size_t)s.B * s.Hkv * c.nkt;
        if (!(sel = la_malloc(nq + nk))) st = la_fail(LA_ENOMEM, "sequence-parallel attention: out of memory");
    }
    /* softmax and sigmoid rows: only the tiles a rank reads travel (d sinks reads every row) */
    if (st == LA_OK && !em && P > 1 && !(opts && opts->dsinks)) st = sp_needs(&c, P, &needk, &needq);
    un.needk = needk, un.needq = needq;
    if ((st = la_dist_agree(st)) != LA_OK) goto out;
    sp_tiles(c.nqt, P, r, t);
    c.qsel = sel, c.ksel = sel + nq;
    memset(c.part, 0, sizeof(double) * nq);
    memset(sel, 0, nq + nk);
    if (!em) {
        st = ring_begin(&g);
        for (int p = 0; st == LA_OK && p < g.nunit; p++) {
            st = ring_need(&g, p);
            /* two pieces: dq of the pair's own query tiles, then dk, dv of its own key tiles */
            for (int x = 0; st == LA_OK && x < 2; x++) {
                if (x == 0) {
                    select_q(&c, t, p, 0, 1, sel);
                    memset(sel + nq, 0, nk);
                } else {
                    memset(sel, 0, nq);
                    select_k(&c, t, p, sel + nq);
                }
                double tc = omp_get_wtime();
                st = sp_bwd(&c, out, row_stat, dout, dq, dk, dv);
                S->t_compute += omp_get_wtime() - tc;
                if (st == LA_OK) st = ring_poll(&g);
            }
        }
        if (st == LA_OK) st = ring_need(&g, g.nunit);
    } else {
        /* dq (and delta) of the own query tiles; every rank's delta rows to every rank; dk, dv
         * of the own key tiles (they read the delta of every query row) */
        select_q(&c, t, -1, 0, 1, sel);
        double tc = omp_get_wtime();
        st = sp_bwd(&c, out, row_stat, dout, dq, dk, dv);
        S->t_compute += omp_get_wtime() - tc;
        if ((st = la_dist_agree(st)) == LA_OK) {
            sp_slice ds = {(char *)c.rowbuf, s.B * s.H, s.T, 0, (size_t)s.T * sizeof(float), sizeof(float), NULL};
            st = gather_slices(&ds, 1, S);
        }
        if (st == LA_OK) {
            memset(sel, 0, nq);
            select_k(&c, t, -1, sel + nq);
            tc = omp_get_wtime();
            st = sp_bwd(&c, out, row_stat, dout, dq, dk, dv);
            S->t_compute += omp_get_wtime() - tc;
        }
        if (st == LA_OK && spec->norm == LA_NORM_ASENTMAX) la_entmax_ctx_as_map(&c, q, dq);
    }
    if ((st = la_dist_agree(st)) != LA_OK) goto out;
    /* d logn_s: every rank's per-query-tile partial sums, added in the one-process order
     * (softmax without logn: zero, written by the kernel) */
    if (opts && opts->dlogn_s && (em || spec->xform == LA_XF_LOGN)) {
        if (P > 1) {
            sp_slice ps = {(char *)c.part, s.B * s.H, c.nqt, 1, (size_t)c.nqt * sizeof(double), sizeof(double), NULL};
            st = gather_slices(&ps, 1, S);
        }
        if (st == LA_OK) la_sum_parts(&c, opts->dlogn_s);
    }
    /* d sink logits: every rank now holds every row's out, dout and row_stat */
    if (st == LA_OK && opts && opts->dsinks) sp_dsinks(&c, out, row_stat, dout, opts->dsinks);
out:
    free(sel);
    free(needk); /* needq lies in the same block */
    free(g.blk);
    la_workspace_free(own);
    S->t_total = omp_get_wtime() - t0;
    S->cpu_total = cpu_now() - c0;
    return st;
}
