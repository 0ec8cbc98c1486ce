/* attn_internal.h -- machinery shared by the attention kernels (softmax.c here, the
 * entmax kernels of issue 3): call context, per-row visibility, position tables, tile
 * loading, logit computation, tile products and the workspace. Not public.
 *
 * Conventions (SPEC 1-4, decided for this project; see the comments at each item):
 *   - Query i of batch b sits at absolute position qa = pos0 + i; key j at j.
 *   - With doc_ids, documents are maximal runs of equal ids; an id that reappears after a
 *     different id starts a new document. A query (0 <= qa < S required) sees only keys of
 *     its own run, and its position p = qa - start(doc) restarts at every document. Keys are
 *     at position j - start(doc(j)).
 *   - Distance t = qa - j (the same with or without documents, since both positions are
 *     shifted by the same document start).
 *   - Logit of a visible pair (SPEC 3-4):
 *         L = c_r * a_t * dot(R(q), R(k)) + m_t + slope_h * d_t
 *     c_r   = scale * head_s[h] * xrow[r]   (scale = m_yarn / sqrt(D), m_yarn = mscale^2 for
 *             YaRN and 1 otherwise, so YaRN's magnitude factor is applied exactly once;
 *             xrow = log(n_q) for logn, gamma*log(n_q) for critical, qwen factor, temp, or 1;
 *             head_s = s_h for logn, else 1)
 *     a_t, m_t: sinv coefficients (a = 1, m = 0 for other transforms)
 *     d_t = -|t|: ALiBi bias for heads with a slope (slope 0 otherwise). For causal patterns
 *             t >= 0; non-causal patterns (full, global) use the symmetric -m|t| of the
 *             ALiBi paper's encoder variant.
 *   - Masked pairs never reach an arithmetic operation with the key's values: logit
 *     buffers hold -INFINITY there, and products with K or V rows skip masked columns.
 */
#ifndef LA_ATTN_INTERNAL_H
#define LA_ATTN_INTERNAL_H

#include "core/internal.h"
#include "longattn/attn.h"

#include <math.h>

#include <stdint.h>

/* Tile sizes: BQ query rows x BK keys. */
#define LA_BQ 64
#define LA_BK 64

/* ---- workspace (workspace.c) ------------------------------------------------------ */

struct la_workspace {
    void *base;      /* 64-byte aligned arena */
    size_t cap;      /* bytes */
    /* RoPE cos/sin table of key positions 0..rope_n-1, kept across calls: a training loop
     * or benchmark with the same S, D and frequencies computes it once. */
    float *rope;         /* (rope_n, rope_D) */
    size_t rope_cap;     /* floats allocated */
    double *rope_omega;  /* (rope_D / 2) frequencies the table was built with */
    int rope_D;
    int64_t rope_n;      /* 0: no valid table */
    size_t grows;        /* how many times the arena or the table was (re)allocated (tests) */
    /* Second arena, for the float32 copies of reduced-precision inputs (attn_half.c): the
     * float32 kernel carves the first arena after the conversion, so they cannot share. */
    void *cvt_base;
    size_t cvt_cap;
};

/* One request of a carve: *dst receives a 64-byte aligned block of `bytes` bytes. */
typedef struct {
    void **dst;
    size_t bytes;
} la_ws_req;

/* Grow ws (never shrink) to hold every request, then hand out the blocks. Contents are
 * undefined. Errors: LA_ENOMEM. */
la_status la_ws_carve(la_workspace *ws, la_ws_req *reqs, int n);
/* The same on the conversion arena (cvt_base), independent of la_ws_carve's blocks. */
la_status la_ws_carve_cvt(la_workspace *ws, la_ws_req *reqs, int n);
/* Bytes currently held by ws (for benchmarks: the kernel's extra memory). */
size_t la_workspace_capacity(const la_workspace *ws);
/* The cos/sin table (n, D) of key positions 0..n-1 for frequencies omega (D/2), reused
 * from the previous call when n, D and omega are the same. */
la_status la_ws_rope_table(la_workspace *ws, const double *omega, int D, int64_t n, int nthreads,
                           const float **tab);

/* ---- positions (posenc.c) --------------------------------------------------------- */

/* 1 if the encoding rotates q/k (rope, prope, ntk, dynamic-ntk, yarn). */
int la_pos_rotates(la_pos pos);
/* YaRN magnitude factor on the logits: mscale^2 with mscale = 0.1 ln s + 1 for s > 1
 * (1 for s <= 1, as in the YaRN reference code); 1 for every other encoding. */
double la_yarn_logit_factor(const la_spec *spec);
/* cos/sin of pos * omega_k for positions base .. base+n-1, in double then rounded:
 * cs: (n, D) with cos in [0, D/2) and sin in [D/2, D) of each row. */
void la_rope_table(const double *omega, int D, int64_t base, int n, float *cs, int nthreads);
/* Rotate row x (D) by the table row cs (D): (x[k], x[k+D/2]) -> (x c - y s, x s + y c)
 * for the first nrot pairs (pairs with omega = 0 are copied: p-RoPE's NoPE channels);
 * inverse rotates by the negative angle. src may equal dst. */
static inline void la_rope_row(const float *src, float *dst,
                               const float *restrict cs, int D, int nrot, int inverse) {
    const int half = D / 2;
    const float *co = cs, *si = cs + half;
    const float sg = inverse ? -1.0f : 1.0f;
    for (int k = 0; k < nrot; k++) {
        float x = src[k], y = src[k + half], sn = sg * si[k];
        dst[k] = x * co[k] - y * sn;
        dst[k + half] = x * sn + y * co[k];
    }
    if (src != dst)
        for (int k = nrot; k < half; k++) {
            dst[k] = src[k];
            dst[k + half] = src[k + half];
        }
}

/* ---- visibility (mask.c) ---------------------------------------------------------- */

/* Keys visible to one query row: the disjoint half-open ranges [lo0, hi0) and [lo1, hi1)
 * of absolute key indices, with lo0 <= hi0 <= lo1 <= hi1 (either may be empty). */
typedef struct {
    int32_t lo0, hi0, lo1, hi1;
    int32_t nq;      /* number of visible keys (hi0 - lo0 + hi1 - lo1) */
    int32_t dstart;  /* first key of the row's document (0 without doc_ids) */
    int64_t p;       /* query position within its document (pos0 + i without doc_ids) */
    float xrow;      /* transform row factor without scale and head_s (see above) */
} la_rowvis;

/* Document runs of doc_ids (S) -> dstart, dend (S): first key and one past the last key
 * of each key's run. */
void la_doc_runs(const int32_t *doc_ids, int S, int32_t *dstart, int32_t *dend);
/* Visibility of query i; dstart/dend (S) of its batch, or NULL without docs (then the
 * caller guarantees nothing about pos0 + i; with docs 0 <= pos0 + i < S is required). */
void la_row_visibility(const la_spec *spec, int S, int64_t pos0, int i,
                       const int32_t *dstart, const int32_t *dend, la_rowvis *rv);
/* Key-tile span of a set of rows: the tiles [a0,a1) and [b0,b1) (tile indices of size
 * LA_BK) hold every visible key of the rows; a1 <= b0 (merged when they overlap). */
typedef struct { int32_t a0, a1, b0, b1; } la_tilespan;
void la_rows_tilespan(const la_rowvis *rows, int nr, la_tilespan *sp);
/* Classify the key tile [j0, j0+nc) against the rows: 0 no row sees any key, 1 every row
 * sees every key, 2 partial. */
int la_tile_class(const la_rowvis *rows, int nr, int j0, int nc);
/* Visible columns of one row inside a tile [j0, j0+nc): up to two ranges [c0,c1) local
 * to the tile; returns how many (0..2). */
int la_row_cols(const la_rowvis *rv, int j0, int nc, int c[4]);

/* ---- call context (attn_ctx.c) -------------------------------------------------------- */

typedef struct {
    const la_spec *spec;
    int B, H, Hkv, T, S, D, group; /* group = H / Hkv */
    int64_t pos0;                  /* resolved (LA_POS0_AUTO -> S - T) */
    const float *q, *k, *v;        /* (B,H,T,D), (B,Hkv,S,D), (B,Hkv,S,D) */
    const la_attn_opts *opts;      /* never NULL (defaults substituted) */
    int nthreads;

    float scale;                   /* m_yarn / sqrt(D) */
    int rotate;                    /* RoPE family: q, k rotated through the tables */
    int nrot;                      /* pairs k < nrot rotate (omega_k != 0), the rest do not */
    const float *kcs;              /* (S, D) cos|sin at key positions 0..S-1 (rotate) */
    const float *qcs;              /* (T, D) table rows for query i (rotate, no docs, out of
                                      [0,S)); NULL: queries use kcs at their position */
    const int32_t *dstart, *dend;  /* (B, S) document run of each key; NULL without docs */
    const la_rowvis *rows;         /* (B, T) visibility of every query row */
    const la_tilespan *qspan;      /* (B, nqt) key-tile span of each query tile */
    int nqt, nkt;                  /* number of query / key tiles */

    int has_t;                     /* any distance term (sinv or alibi) */
    int has_sinv;                  /* sinv transform (t_a, t_m not trivial) */
    const float *t_a, *t_m, *t_d;  /* (T+S-1) indexed by (j - i) + T - 1: a_t, m_t, -|t| */
    const float *slope;            /* (H) ALiBi slope per head, 0 for heads without */
    const float *head_s;           /* (H) s_h for logn, 1 otherwise */

    double *part;                  /* (B, H, nqt) per-query-tile partial sums (d logn_s),
                                      reduced by la_sum_parts in a fixed order */
    float *rowbuf;                 /* (B, H, T) per-row scratch (extra->rowbuf), else NULL */
    double *rowgs;                 /* (B, H, T) per-row sums for d logn_s (extra->rowgs, logn
                                      with opts->dlogn_s), else NULL */
    float *qbuf;                   /* (B, H, T, D) query scratch (extra->qbuf), else NULL */
    int32_t *qorder;               /* (B*H*nqt) query items in run order (sched.c) */
    int32_t *korder;               /* (B*Hkv*nkt) kv key items in run order (sched.c) */
    float *prep;                   /* prepared tiles of prep_pairs (b, hkv) pairs at a time:
                                      per pair nkt x (D, BK) rotated K^T tiles, then (with
                                      V) nkt x (D, BK) V^T tiles (la_prep_pairs) */
    int prep_pairs;                /* how many (b, hkv) pairs (with V tiles) fit in prep */
    char *thread_scratch;          /* nthreads x scratch_bytes */
    size_t scratch_bytes;
    /* Item selection (sequence parallelism, ring.c; NULL = every item): la_sched_for runs
     * only the query items with qsel[id] != 0 (id = (b * H + h) * nqt + qt) and the kv
     * items with ksel[id] != 0 (id = (b * Hkv + hkv) * nkt + kt); the softmax backward
     * then takes the two-pass path. Set by the caller after la_attn_ctx_init. */
    const uint8_t *qsel, *ksel;

    /* issue 31 (sigmoid.c) */
    int sigmoid;                   /* 0 softmax rows; 1 p = sigmoid(L + sig_b); 2 per-row
                                      b = -ln(n_q) (sigmoid-logn) */
    float sig_b;                   /* sigmoid bias (sigmoid == 1) */
    const float *sink;             /* (H) sink logit of each head (softmax+sink), else NULL */
} la_attn_ctx;

/* What a kernel path needs from the workspace beyond the softmax kernels' own. */
typedef struct {
    size_t thread_bytes; /* per-thread scratch bytes beyond la_softmax_scratch_bytes */
    int rowbuf;          /* carve c->rowbuf: (B, H, T) floats */
    int rowgs;           /* carve c->rowgs: (B, H, T) doubles when logn's dlogn_s is wanted */
    int qbuf;            /* carve c->qbuf: (B, H, T, D) floats */
} la_ctx_extra;

/* Validate arguments and build every table for a call, including the work-item orders of
 * the tile scheduler; carves the workspace (opts->ws or *own_ws, which the caller frees with
 * la_workspace_free). extra may be NULL. Nothing else is allocated: a second call with the
 * same shapes on the same workspace does not grow it. */
la_status la_attn_ctx_init(la_attn_ctx *ctx, const la_spec *spec, const la_shape *shape,
                           const float *q, const float *k, const float *v,
                           const la_attn_opts *opts, const la_ctx_extra *extra,
                           la_workspace **own_ws);

/* ASEntmax: scale the context's queries (Vasylenko et al. 2025 eq. 8, entmax_attn.c) into
 * c->qbuf (context built with la_ctx_extra.qbuf and opts.as_beta / as_gamma set) and point
 * c->q at them. Errors: LA_ENUMERIC (a scaled query is not finite). */
la_status la_asentmax_ctx_scale(la_attn_ctx *c);

/* Prepare rotated, transposed K tiles (and transposed V tiles when with_v) of the pairs
 * p0 .. p0+n-1 (pair = b * Hkv + hkv) into c->prep, in parallel over tiles. Returns the
 * stride in floats between pairs; tile kt of pair p starts at
 * prep + (p - p0) * stride + kt * D * BK (K) and + nkt * D * BK more (V). Used so that a K
 * tile is rotated and transposed once per call instead of once per query tile. */
size_t la_prep_pairs(const la_attn_ctx *c, int p0, int n, int with_v);
/* The same as a worksharing loop inside an existing parallel region (every thread of the
 * team must call it; ends with the loop's barrier). */
void la_prep_pairs_for(const la_attn_ctx *c, int p0, int n, int with_v);
size_t la_prep_stride(const la_attn_ctx *c, int with_v);

/* Scratch of thread tid (scratch_bytes bytes, 64-byte aligned). */
static inline void *la_ctx_scratch(const la_attn_ctx *c, int tid) {
    return c->thread_scratch + (size_t)tid * c->scratch_bytes;
}

/* Carves the next array of count elements of type from a thread's scratch: ptr = base + off
 * (only when base is not NULL: with base NULL the layout just measures its size), then off
 * moves on by the array's bytes rounded up to 64 (every array starts on a cache line). */
#define LA_SCRATCH_TAKE(base, off, ptr, type, count)                     \
    do {                                                                 \
        if (base) (ptr) = (type *)(void *)((base) + (off));              \
        (off) += (sizeof(type) * (size_t)(count) + 63) & ~(size_t)63;    \
    } while (0)

/* Rotated (RoPE family) query rows i0..i0+nr-1 of (b,h) into dst (nr, D); unrotated copy
 * otherwise. */
void la_load_q(const la_attn_ctx *c, int b, int h, int i0, int nr, float *dst);
/* Rotated key rows j0..j0+nc-1 of (b,hkv) into dst (nc, D); returns dst, or the pointer
 * into k itself when nothing rotates. */
const float *la_load_k(const la_attn_ctx *c, int b, int hkv, int j0, int nc, float *dst);
/* Inverse-rotate gradient rows (n, D) in place: query rows i0.. (is_q) or key rows j0.. */
void la_unrotate_q(const la_attn_ctx *c, int b, int i0, int nr, float *x);
void la_unrotate_k(const la_attn_ctx *c, int b, int j0, int nc, float *x);

/* Row multipliers c_r = scale * head_s[h] * xrow of rows (nr) into cr. */
void la_row_factors(const la_attn_ctx *c, int h, const la_rowvis *rows, int nr, float *cr);
/* Logits of a tile from raw dots sdot (nr, ld) into L (nr, ld) (may alias): visible
 * entries get c_r*a_t*dot + m_t + slope*d_t, masked entries -INFINITY. cls from
 * la_tile_class. */
void la_tile_logits(const la_attn_ctx *c, int h, const la_rowvis *rows, int i0, int nr,
                    int j0, int nc, int cls, const float *cr, const float *sdot,
                    float *L, int ld);

/* ---- tile scheduler (sched.c) ------------------------------------------------------
 * The one scheduler of every kernel path (softmax and entmax, forward and backward, the
 * statistics). Work items:
 *   query items  (b, h, query tile)   id = (b * H + h) * nqt + qt: forward rows, dq, delta,
 *                                     row statistics, per-tile partial sums (c->part);
 *   kv items     (b, kv head, key tile) id = (b * Hkv + hkv) * nkt + kt: dk, dv over the
 *                                     group's query heads in a fixed order;
 *   head items   (b, h, key tile): per-head key statistics (key_mass), enumerated as
 *                                     (kv item, g) with h = hkv * group + g;
 *   pair items   (b, kv head)         id = b * Hkv + hkv: the fused softmax backward (dq of
 *                                     the group's heads, dk, dv of the pair), in id order.
 * Every item writes only its own outputs (and partial sums, reduced afterwards in a fixed
 * order), so no result depends on which thread ran an item or on the thread count. Items
 * are handed out one at a time, (b, kv head) pair by pair and costliest first within a
 * pair (cost = visible key tiles of a query tile, query tiles seeing a key tile), which
 * balances causal and windowed patterns, keeps a pair's K/V tiles in cache and keeps
 * threads busy on a loaded machine. Query items are grouped in chunks of c->prep_pairs
 * (b, kv head) pairs so that the prepared K/V tiles of a chunk (la_prep_pairs) serve them. */

typedef struct {
    int b, h, tile; /* h: query head (query, head items) or kv head (kv items) */
    int g;          /* head items: index in the kv group (h = hkv * group + g); else 0 */
} la_item;

/* Build c->qorder / c->korder (called by la_attn_ctx_init once rows and spans exist);
 * kcost: (B * (nkt + 1)) and cnt: (max(nqt, nkt) + 2) int32 scratch from the workspace. */
void la_sched_build(la_attn_ctx *c, int32_t *kcost, int32_t *cnt);
/* Query items of prep chunk ch (pairs ch * prep_pairs ...): run-order positions [*i0, *i1). */
int la_sched_nchunks(const la_attn_ctx *c);
void la_sched_chunk(const la_attn_ctx *c, int ch, int *i0, int *i1);
/* Item at run-order position pos of the query / kv / head list. */
la_item la_sched_qitem(const la_attn_ctx *c, int pos);
la_item la_sched_kitem(const la_attn_ctx *c, int pos);
la_item la_sched_hitem(const la_attn_ctx *c, int pos);
la_item la_sched_pitem(const la_attn_ctx *c, int pos);
static inline int la_sched_nq(const la_attn_ctx *c) { return c->B * c->H * c->nqt; }
static inline int la_sched_nk(const la_attn_ctx *c) { return c->B * c->Hkv * c->nkt; }
static inline int la_sched_nh(const la_attn_ctx *c) { return c->B * c->H * c->nkt; }
static inline int la_sched_np(const la_attn_ctx *c) { return c->B * c->Hkv; }

/* 1 when a query-item range [i0, i1) holds a selected item (always, without c->qsel):
 * the kernels skip preparing the K/V tiles of a chunk with nothing to run. */
int la_sched_any_q(const la_attn_ctx *c, int i0, int i1);
typedef void (*la_item_fn)(void *arg, la_item it);
typedef enum { LA_ITEMS_Q, LA_ITEMS_KV, LA_ITEMS_KH, LA_ITEMS_PAIR } la_item_kind;
/* Worksharing loop over run-order positions [i0, i1) of a list, inside a parallel region:
 * every thread of the team calls it with its own arg (per-thread scratch); ends with the
 * loop's barrier. */
void la_sched_for(const la_attn_ctx *c, la_item_kind kind, int i0, int i1, la_item_fn fn,
                  void *arg);

/* Visible key tiles of one query tile, increasing kt, fully masked tiles skipped (class
 * from la_tile_class, mask.c). */
typedef struct {
    const la_rowvis *rows; /* the query tile's rows */
    int nr, S, pass, kt, end;
    la_tilespan sp;
} la_kiter;
typedef struct { int kt, j0, nc, cls; } la_ktile;
void la_kiter_init(la_kiter *it, const la_attn_ctx *c, int b, int qt);
int la_kiter_next(la_kiter *it, la_ktile *t);

/* Query tiles that see key tile kt of batch b, increasing qt, fully masked ones skipped. */
typedef struct {
    const la_attn_ctx *c;
    int b, kt, qt;
} la_qiter;
typedef struct { int qt, i0, nr, cls; const la_rowvis *rows; } la_qtile;
void la_qiter_init(la_qiter *it, const la_attn_ctx *c, int b, int kt);
int la_qiter_next(la_qiter *it, la_qtile *t);

/* Class of the tile pair (query tile qt, key tile kt) of batch b as the iterators see it:
 * 0 when the iterators skip it (outside the query tile's key span or fully masked), else
 * la_tile_class's 1 (all visible) or 2 (partial). */
int la_sched_tile_cls(const la_attn_ctx *c, int b, int qt, int kt);

/* out[h] = sum over b, then query tile, of c->part[(b, h, qt)] (a fixed order), as float. */
void la_sum_parts(const la_attn_ctx *c, float *out);

/* ---- key statistics (keystat.c) ---------------------------------------------------
 * key_mass[b, h, j] = sum_i p_ij over head items (b, h, key tile), query tiles in
 * increasing order, p recomputed from the logits and the row statistic of the forward. */
/* P (nr, LA_BK) of a tile from its logits L (nr, LA_BK) and row statistics stat (nr);
 * W is (LA_BQ, LA_BK) scratch. */
typedef void (*la_tile_probs_fn)(const void *arg, const la_rowvis *rows, const float *L,
                                 int nr, int nc, const float *stat, float *P, float *W);
/* Worksharing over the head items inside a parallel region (every thread calls it; thread
 * scratch of la_ctx_scratch is used, so the caller must be done with its own). */
void la_key_mass_for(const la_attn_ctx *c, const float *row_stat, la_tile_probs_fn probs,
                     const void *arg);

/* ---- tile products (tile.c) and row helpers (tile_rows.c) ------------------------- */

/* Tile product, the one shape every pass uses:
 *     C[i][0:N] (+)= sum_k A(i, k) * B[k][0:N]      i < M, k < K
 * with A(i, k) = A[i*sai + k*sak] (so A may be read transposed), B (K, ldb) row-major,
 * C (M, ldc). acc = 0 overwrites C, 1 accumulates. Register-blocked kernels chosen at run
 * time (la_cpu(): AVX-512, else AVX2 + FMA), plain loops otherwise and under LA_PORTABLE=1
 * (la_mm_generic); every kernel computes each element by the same chain of fused
 * multiply-adds over k in increasing order, so all give bitwise the same C. */
void la_mm(int M, int N, int K, const float *A, size_t sai, size_t sak, const float *B,
           int ldb, float *C, int ldc, int acc);
void la_mm_generic(int M, int N, int K, const float *A, size_t sai, size_t sak,
                   const float *B, int ldb, float *C, int ldc, int acc);
/* Row-range accumulate for partial tiles: for every row r (M rows, visibility rows[r] in
 * the key tile [j0, j0+n)), C[r] += sum over the row's visible columns c of
 * P[r][c] * X[c][0:D]. Masked (possibly non-finite) X rows are never read. */
void la_mm_rows(const la_rowvis *rows, int M, int j0, int n, int D, const float *P, int ldp,
                const float *X, int ldx, float *C, int ldc);
/* Sparse versions for rows with few nonzero entries (entmax), bitwise equal to the dense
 * products above (the same fused multiply-add chains, zero terms left out):
 *   la_nz_cols:       the x < n with p[x] != 0 into idx, increasing; returns how many;
 *   la_spmm_row:      c[0:D] += sum over idx (in order) of p[x] * X[x][0:D]  (row of P X);
 *   la_spscatter_row: C[x][0:D] += p[x] * x[0:D] for x in idx  (one row of P^T x). */
int la_nz_cols(const float *p, int n, int32_t *idx);
/* The x < n with l[x] > thr (so never NaN) into idx, increasing; returns how many. */
int la_gt_cols(const float *l, int n, float thr, int32_t *idx);
/* C[ri[t]][xi[t]] = sum_k A[ri[t]][k] * B[xi[t]][k] for t < n: the entries of A B^T that la_mm
 * with B transposed would compute (the same chain over k), for listed entries only. */
void la_dot_entries(int n, const int32_t *ri, const int32_t *xi, const float *A, int lda,
                    const float *B, int ldb, int K, float *C, int ldc);
void la_spmm_row(const float *p, const int32_t *idx, int nnz, const float *X, int ldx, float *c, int D);
void la_spscatter_row(const float *p, const int32_t *idx, int nnz, const float *x, float *C, int ldc, int D);
/* Transpose src (n, D, lds) into dst (D, ldd), zero-filling columns n..ldd-1. */
void la_transpose(const float *src, int n, int D, int lds, float *dst, int ldd);

/* Row reductions in a fixed order (deterministic; the same bits on AVX-512 and AVX2 + FMA,
 * see tile_rows.c): max, sum, and sum over entries with
 * L != -inf of P (L - mx) (entropy numerator). */
float la_row_max(const float *x, int n);
float la_row_sum(const float *x, int n);
float la_row_plogit(const float *P, const float *L, float mx, int n);
/* sum over entries with L != -inf of a * b (non-finite values at masked entries ignored). */
float la_row_dot_live(const float *a, const float *b, const float *L, int n);

/* exp(x) for x <= ~88 in float, vectorisable, exact 0 below -87.3 (and for -inf). */
float la_exp_sub(const float *x, float mx, float *y, int n); /* returns sum of y */
/* p = sigmoid(l + b) of a row (sigmoid attention), exactly 0 where l = -inf and where
 * l + b < -104; the exp of la_exp_sub (vector paths), libm's expf (generic). */
void la_sigmoid_row(const float *l, float b, float *p, int n);
/* The portable loops of the helpers above (tile_rows.c): what LA_PORTABLE=1 and a CPU
 * without AVX2 + FMA run; the tests compare both paths. */
void la_transpose_generic(const float *src, int n, int D, int lds, float *dst, int ldd);
float la_row_max_generic(const float *x, int n);
float la_row_sum_generic(const float *x, int n);
float la_row_plogit_generic(const float *P, const float *L, float mx, int n);
float la_row_dot_live_generic(const float *a, const float *b, const float *L, int n);
float la_exp_sub_generic(const float *x, float mx, float *y, int n);
void la_sigmoid_row_generic(const float *l, float b, float *p, int n);

/* ---- sigmoid attention and sinks (sigmoid.c, issue 31) ---------------------------- */
/* Bias of row rv under sigmoid attention: c->sig_b, or -ln(n_q) for sigmoid-logn. */
static inline float la_sigmoid_bias(const la_attn_ctx *c, const la_rowvis *rv) {
    return c->sigmoid == 2 ? -logf((float)(rv->nq > 0 ? rv->nq : 1)) : c->sig_b;
}
/* P = sigmoid(L + b) of a tile (nr, nc), ld LA_BK; exactly 0 at masked (-inf) entries.
 * arg: the context (la_tile_probs_fn shape; stat and W unused). */
void la_sigmoid_probs(const void *arg, const la_rowvis *rows, const float *L, int nr, int nc,
                      const float *stat, float *P, float *W);
/* Forward of sigmoid attention: out = sum_j sigmoid(L_ij + b) v_j, row_stat = the row's
 * mass sum_j p_ij (LA_ROW_EMPTY without visible keys). */
la_status la_sigmoid_forward(const la_attn_ctx *c, float *out, float *row_stat);
/* D_i = dO_i . o_i of one row of D: the fused multiply-add chain of the backward's dP tile
 * product (la_softmax_backward; ring.c for the sink gradient, the same bits). */
static inline float la_row_delta(const float *o, const float *g, int D) {
    float acc = 0.0f;
    for (int d = 0; d < D; d++) acc = fmaf(g[d], o[d], acc);
    return acc;
}

/* d loss / d sink logit of each head into dsinks (H), after la_softmax_backward (c->rowbuf
 * holds D_i): dsigma_h = -sum_{b, i} exp(sigma_h - lse_i) D_i, summed in a fixed order. */
void la_sink_backward(const la_attn_ctx *c, const float *row_stat, float *dsinks);

/* ---- softmax kernels (softmax.c) -------------------------------------------------- */
la_status la_softmax_forward(const la_attn_ctx *c, float *out, float *row_stat);
la_status la_softmax_backward(const la_attn_ctx *c, const float *out, const float *row_stat,
                              const float *dout, float *dq, float *dk, float *dv);
/* Backward path switch for tests: 1 forces the fused one-pass backward, 0 the two passes
 * (dQ, then dK/dV), -1 (default) chooses by the number of (b, kv head) pairs per thread.
 * Both give bitwise the same gradients. */
extern int la_softmax_bwd_fused;
/* Entmax-family switch for tests (entmax_attn.c): 1 (default) sparse products over the
 * nonzero p and the pair-item backward when the pairs keep the threads busy, 2 the pair
 * backward with prepared K/V tiles always, 3 the pair backward without them always, 0 the
 * dense tile products and two-pass backward. Bitwise the same. */
extern int la_entmax_sparse;
/* Key tiles per sweep of the fused softmax backward over the query tiles: each query
 * tile's Q, dO and dq rows are read once per block of LA_SOFTMAX_NB key tiles instead of
 * once per key tile (softmax.c). */
#define LA_SOFTMAX_NB 4
/* Per-thread scratch the softmax kernels need for head dimension D: every context gets it
 * (attn_ctx.c; the other kernels' extra goes in la_ctx_extra.thread_bytes). */
size_t la_softmax_scratch_bytes(int D);

/* ---- entmax family on a context (entmax_attn.c) ---------------------------------- */
/* Sequence parallelism (ring.c): the call context of an entmax-family call (as the entry
 * entry points la_entmax_attn_forward / _backward build it) and the passes on it, which
 * run the items the caller selected (c->qsel, c->ksel). The backward's dq pass writes
 * delta (c->rowbuf) of its query rows, which the dk, dv pass reads for every query row;
 * for ASEntmax dq stays in the scaled frame until la_entmax_ctx_as_map (q: unscaled). */
la_status la_entmax_ctx(la_attn_ctx *c, const la_spec *spec, const la_shape *shape, const float *q,
                        const float *k, const float *v, const la_attn_opts *opts, int backward,
                        la_workspace **own);
la_status la_entmax_ctx_forward(const la_attn_ctx *c, float *out, float *row_stat);
la_status la_entmax_ctx_backward(const la_attn_ctx *c, const float *row_stat, const float *dout, float *dq,
                                 float *dk, float *dv);
void la_entmax_ctx_as_map(const la_attn_ctx *c, const float *q, float *dq);

#endif
