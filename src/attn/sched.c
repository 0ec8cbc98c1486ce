/* sched.c -- the tile scheduler of every attention kernel path (see attn_internal.h):
 * work-item lists in run order, the worksharing loop over them, and the iterators over
 * the visible tiles of one item.
 *
 * Run order: (b, kv head) pair by pair, and within a pair costliest items first (counting
 * sort, stable, so equal costs keep id order): the items of a pair share their K and V
 * tiles, which then stay in cache (ordering all items by cost alone interleaves the pairs
 * and was ~4 % slower on one thread), and each pair ends with its cheapest items, which
 * evens out the threads' finishing times. The order only affects speed: every item writes its own outputs and partial sums, and
 * those are reduced in id order afterwards, so results are bitwise identical for any
 * thread count. Items are claimed one at a time (OpenMP dynamic schedule) rather than
 * split statically: a static split would be just as deterministic but leaves threads idle
 * when one of them shares its core with another process. */
#include "attn/attn_internal.h"

#include <string.h>

static inline int qcost(const la_attn_ctx *c, int b, int qt) {
    const la_tilespan *sp = &c->qspan[(size_t)b * c->nqt + qt];
    return (sp->a1 - sp->a0) + (sp->b1 - sp->b0);
}

/* Stable counting sort of ids [lo, hi) by descending cost (0..maxc) into order[lo..hi). */
static void sort_range(int32_t *order, int lo, int hi, int maxc, int32_t *cnt,
                       const la_attn_ctx *c, int is_q, const int32_t *kcost) {
    memset(cnt, 0, sizeof(int32_t) * (size_t)(maxc + 2));
    int per = is_q ? c->H * c->nqt : c->Hkv * c->nkt; /* ids per batch */
    int nt = is_q ? c->nqt : c->nkt;
#define COST(id) (is_q ? qcost(c, (id) / per, (id) % nt) : kcost[(size_t)((id) / per) * (c->nkt + 1) + (id) % nt])
    for (int id = lo; id < hi; id++) cnt[maxc - COST(id) + 1]++;
    for (int x = 1; x <= maxc + 1; x++) cnt[x] += cnt[x - 1];
    for (int id = lo; id < hi; id++) order[lo + cnt[maxc - COST(id)]++] = id;
#undef COST
}

void la_sched_build(la_attn_ctx *c, int32_t *kcost, int32_t *cnt) {
    /* query tiles seeing each key tile: difference array over the spans */
    for (int b = 0; b < c->B; b++) {
        int32_t *kc = kcost + (size_t)b * (c->nkt + 1);
        memset(kc, 0, sizeof(int32_t) * (size_t)(c->nkt + 1));
        for (int qt = 0; qt < c->nqt; qt++) {
            const la_tilespan *sp = &c->qspan[(size_t)b * c->nqt + qt];
            kc[sp->a0]++, kc[sp->a1]--;
            kc[sp->b0]++, kc[sp->b1]--;
        }
        for (int kt = 1; kt <= c->nkt; kt++) kc[kt] += kc[kt - 1];
    }
    /* per (b, kv head) pair: the pair's items stay together (they share K and V tiles, which
     * then stay in cache), costliest first within the pair */
    const int qper = c->group * c->nqt;
    for (int p = 0; p < c->B * c->Hkv; p++) {
        sort_range(c->qorder, p * qper, (p + 1) * qper, c->nkt, cnt, c, 1, NULL);
        sort_range(c->korder, p * c->nkt, (p + 1) * c->nkt, c->nqt, cnt, c, 0, kcost);
    }
}

int la_sched_nchunks(const la_attn_ctx *c) {
    int npairs = c->B * c->Hkv;
    return (npairs + c->prep_pairs - 1) / c->prep_pairs;
}

void la_sched_chunk(const la_attn_ctx *c, int ch, int *i0, int *i1) {
    int npairs = c->B * c->Hkv, p0 = ch * c->prep_pairs;
    int p1 = p0 + c->prep_pairs < npairs ? p0 + c->prep_pairs : npairs;
    /* the query heads of pair (b, hkv) are b * H + hkv * group + g: pairs are contiguous */
    *i0 = p0 * c->group * c->nqt;
    *i1 = p1 * c->group * c->nqt;
}

la_item la_sched_qitem(const la_attn_ctx *c, int pos) {
    int id = c->qorder[pos];
    return (la_item){id / (c->H * c->nqt), id / c->nqt % c->H, id % c->nqt, 0};
}

la_item la_sched_kitem(const la_attn_ctx *c, int pos) {
    int id = c->korder[pos];
    return (la_item){id / (c->Hkv * c->nkt), id / c->nkt % c->Hkv, id % c->nkt, 0};
}

la_item la_sched_hitem(const la_attn_ctx *c, int pos) {
    la_item it = la_sched_kitem(c, pos / c->group);
    it.g = pos % c->group;
    it.h = it.h * c->group + it.g;
    return it;
}

/* Pair items in id order: the pairs of one call have equal costs unless doc ids differ
 * between batches, and their count is what decides whether they are used at all. */
la_item la_sched_pitem(const la_attn_ctx *c, int pos) {
    return (la_item){pos / c->Hkv, pos % c->Hkv, 0, 0};
}

int la_sched_any_q(const la_attn_ctx *c, int i0, int i1) {
    if (!c->qsel) return 1;
    for (int pos = i0; pos < i1; pos++)
        if (c->qsel[c->qorder[pos]]) return 1;
    return 0;
}

void la_sched_for(const la_attn_ctx *c, la_item_kind kind, int i0, int i1, la_item_fn fn,
                  void *arg) {
#pragma omp for schedule(dynamic, 1)
    for (int pos = i0; pos < i1; pos++) {
        if (kind == LA_ITEMS_Q && c->qsel && !c->qsel[c->qorder[pos]]) continue;
        if (kind == LA_ITEMS_KV && c->ksel && !c->ksel[c->korder[pos]]) continue;
        fn(arg, kind == LA_ITEMS_Q    ? la_sched_qitem(c, pos)
                : kind == LA_ITEMS_KV ? la_sched_kitem(c, pos)
                : kind == LA_ITEMS_PAIR ? la_sched_pitem(c, pos)
                                      : la_sched_hitem(c, pos));
    }
}

void la_kiter_init(la_kiter *it, const la_attn_ctx *c, int b, int qt) {
    int i0 = qt * LA_BQ;
    it->nr = c->T - i0 < LA_BQ ? c->T - i0 : LA_BQ;
    it->rows = c->rows + (size_t)b * c->T + i0;
    it->S = c->S;
    it->sp = c->qspan[(size_t)b * c->nqt + qt];
    it->pass = 0;
    it->kt = it->sp.a0;
    it->end = it->sp.a1;
}

int la_kiter_next(la_kiter *it, la_ktile *t) {
    for (;;) {
        if (it->kt >= it->end) {
            if (it->pass) return 0;
            it->pass = 1;
            it->kt = it->sp.b0;
            it->end = it->sp.b1;
            continue;
        }
        int kt = it->kt++, j0 = kt * LA_BK, nc = it->S - j0 < LA_BK ? it->S - j0 : LA_BK;
        int cls = la_tile_class(it->rows, it->nr, j0, nc);
        if (!cls) continue; /* fully masked: skipped */
        t->kt = kt, t->j0 = j0, t->nc = nc, t->cls = cls;
        return 1;
    }
}

void la_qiter_init(la_qiter *it, const la_attn_ctx *c, int b, int kt) {
    it->c = c, it->b = b, it->kt = kt, it->qt = 0;
}

int la_qiter_next(la_qiter *it, la_qtile *t) {
    const la_attn_ctx *c = it->c;
    while (it->qt < c->nqt) {
        int qt = it->qt++, cls = la_sched_tile_cls(c, it->b, qt, it->kt);
        if (!cls) continue;
        int i0 = qt * LA_BQ, nr = c->T - i0 < LA_BQ ? c->T - i0 : LA_BQ;
        t->qt = qt, t->i0 = i0, t->nr = nr, t->cls = cls, t->rows = c->rows + (size_t)it->b * c->T + i0;
        return 1;
    }
    return 0;
}

int la_sched_tile_cls(const la_attn_ctx *c, int b, int qt, int kt) {
    const la_tilespan *sp = &c->qspan[(size_t)b * c->nqt + qt];
    if (!((kt >= sp->a0 && kt < sp->a1) || (kt >= sp->b0 && kt < sp->b1))) return 0;
    int i0 = qt * LA_BQ, nr = c->T - i0 < LA_BQ ? c->T - i0 : LA_BQ;
    int j0 = kt * LA_BK, nc = c->S - j0 < LA_BK ? c->S - j0 : LA_BK;
    return la_tile_class(c->rows + (size_t)b * c->T + i0, nr, j0, nc);
}

void la_sum_parts(const la_attn_ctx *c, float *out) {
    for (int h = 0; h < c->H; h++) {
        double acc = 0.0;
        for (int b = 0; b < c->B; b++)
            for (int qt = 0; qt < c->nqt; qt++) acc += c->part[((size_t)b * c->H + h) * c->nqt + qt];
        out[h] = (float)acc;
    }
}
