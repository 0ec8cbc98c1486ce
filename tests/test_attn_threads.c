/* test_attn_threads.c -- the tile scheduler (src/attn/sched.c) and what it promises:
 *   - every output and statistic of every kernel path (softmax, entmax 1.5, entmax 1.3 by
 *     bisection, sparsemax, ASEntmax; forward and backward; row_entropy, row_support,
 *     key_mass, logn's dlogn_s, ASEntmax's d beta / d gamma; documents; GQA) is bitwise the
 *     same for 1, 2 and 3 threads (memcmp; the output buffers are pre-filled with a
 *     different byte pattern for each thread count, so an entry that a run leaves
 *     unwritten fails the comparison too);
 *   - a second call with the same shapes on the same workspace does not grow it (the
 *     entmax path used to allocate delta and the scaled queries on every call);
 *   - the work-item orders are permutations, pair by pair and costliest first within a
 *     (b, kv head) pair, and the tile iterators
 *     visit exactly the tiles with a visible pair (checked pair by pair against SPEC 2's
 *     visibility rule written out in attn_testutil.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attn/attn_internal.h"
#include "attn_testutil.h"
#include "longattn.h"

typedef struct {
    const char *spec;
    int B, H, Hkv, T, S, D;
    int docs;  /* documents of 37 / 53 / ... tokens */
} tcase;

/* every output of one forward + backward */
typedef struct {
    float *out, *stat, *ent, *sup, *km, *dq, *dk, *dv, *dbeta, *dgamma;
    float dlogn[16];
} outs;

enum { N_OUT = 11 };

static size_t out_sizes(const tcase *c, size_t sz[N_OUT]) {
    size_t nq = (size_t)c->B * c->H * c->T * c->D, nk = (size_t)c->B * c->Hkv * c->S * c->D;
    size_t bht = (size_t)c->B * c->H * c->T;
    size_t v[N_OUT] = {nq, bht, bht, bht, (size_t)c->B * c->H * c->S, nq, nk, nk, bht, bht, 16};
    memcpy(sz, v, sizeof v);
    return N_OUT;
}

static float **out_ptr(outs *o, int i) {
    float **p[N_OUT] = {&o->out, &o->stat, &o->ent, &o->sup, &o->km, &o->dq, &o->dk, &o->dv,
                        &o->dbeta, &o->dgamma, NULL};
    return p[i];
}

static const char *out_name(int i) {
    static const char *n[N_OUT] = {"out", "row_stat", "row_entropy", "row_support", "key_mass",
                                   "dq", "dk", "dv", "das_beta", "das_gamma", "dlogn_s"};
    return n[i];
}

static float *out_buf(outs *o, int i) { return i == N_OUT - 1 ? o->dlogn : *out_ptr(o, i); }

static void outs_alloc(const tcase *c, outs *o, int pattern) {
    size_t sz[N_OUT];
    out_sizes(c, sz);
    memset(o, pattern, sizeof *o);
    for (int i = 0; i < N_OUT - 1; i++) {
        *out_ptr(o, i) = malloc(sizeof(float) * sz[i]);
        assert_non_null(*out_ptr(o, i));
        memset(*out_ptr(o, i), pattern, sizeof(float) * sz[i]);
    }
    memset(o->dlogn, pattern, sizeof o->dlogn);
}

static void outs_free(outs *o) {
    for (int i = 0; i < N_OUT - 1; i++) free(*out_ptr(o, i));
}

typedef struct {
    la_shape sh;
    float *q, *k, *v, *dout, *beta, *gamma;
    int32_t *ids;
} inputs;

static void inputs_new(const tcase *c, inputs *in) {
    size_t nq = (size_t)c->B * c->H * c->T * c->D, nk = (size_t)c->B * c->Hkv * c->S * c->D;
    size_t bht = (size_t)c->B * c->H * c->T;
    in->sh = (la_shape){c->B, c->H, c->Hkv, c->T, c->S, c->D, LA_POS0_AUTO};
    in->q = malloc(sizeof(float) * nq), in->dout = malloc(sizeof(float) * nq);
    in->k = malloc(sizeof(float) * nk), in->v = malloc(sizeof(float) * nk);
    in->beta = malloc(sizeof(float) * bht), in->gamma = malloc(sizeof(float) * bht);
    in->ids = malloc(sizeof(int32_t) * (size_t)c->B * c->S);
    assert_true(in->q && in->dout && in->k && in->v && in->beta && in->gamma && in->ids);
    la_rng r;
    la_rng_seed(&r, 77 + (uint64_t)c->T * 3 + (uint64_t)c->S);
    /* q scaled up so that entmax rows have small supports and many exact zeros */
    for (size_t i = 0; i < nq; i++) in->q[i] = (float)(2.0 * la_rng_normal(&r));
    for (size_t i = 0; i < nq; i++) in->dout[i] = (float)la_rng_normal(&r);
    for (size_t i = 0; i < nk; i++) in->k[i] = (float)la_rng_normal(&r);
    for (size_t i = 0; i < nk; i++) in->v[i] = (float)la_rng_normal(&r);
    for (size_t i = 0; i < bht; i++) {
        in->beta[i] = (float)(0.3 + 0.5 * la_rng_uniform(&r));
        in->gamma[i] = (float)(0.8 * la_rng_uniform(&r) - 0.4);
    }
    for (int b = 0; b < c->B; b++) /* documents of varying lengths, different per batch */
        for (int j = 0; j < c->S; j++) in->ids[(size_t)b * c->S + j] = j / (37 + 16 * b);
}

static void inputs_free(inputs *in) {
    free(in->q), free(in->k), free(in->v), free(in->dout), free(in->beta), free(in->gamma);
    free(in->ids);
}

static void run(const tcase *c, const la_spec *sp, const inputs *in, outs *o, int threads,
                la_workspace *ws) {
    la_attn_opts a = la_attn_opts_default();
    a.n_threads = threads;
    a.ws = ws;
    a.doc_ids = c->docs ? in->ids : NULL;
    a.row_entropy = o->ent;
    a.row_support = o->sup;
    a.key_mass = o->km;
    a.dlogn_s = o->dlogn;
    int as = sp->norm == LA_NORM_ASENTMAX;
    if (as) {
        a.as_beta = in->beta, a.as_gamma = in->gamma;
        a.das_beta = o->dbeta, a.das_gamma = o->dgamma;
    }
    la_status st = la_attn_forward(sp, &in->sh, in->q, in->k, in->v, o->out, o->stat, &a);
    if (st != LA_OK) fail_msg("%s: forward: %s", c->spec, la_errmsg());
    st = la_attn_backward(sp, &in->sh, in->q, in->k, in->v, o->out, o->stat, in->dout, o->dq, o->dk,
                          o->dv, &a);
    if (st != LA_OK) fail_msg("%s: backward: %s", c->spec, la_errmsg());
    if (!as) { /* not written for other normalisers: make them compare equal */
        size_t bht = (size_t)c->B * c->H * c->T;
        memset(o->dbeta, 0, sizeof(float) * bht);
        memset(o->dgamma, 0, sizeof(float) * bht);
    }
    if (c->H < 16) memset(o->dlogn + c->H, 0, sizeof(float) * (size_t)(16 - c->H));
}

static const tcase cases[] = {
    /* GQA (group 2), several query and key tiles, partial last tiles */
    {"softmax+causal", 2, 4, 2, 150, 200, 32, 0},
    {"softmax+logn(s=0.3)+rope+causal", 2, 4, 2, 150, 200, 32, 1},
    {"softmax+sinv(tau=10)+prope(p=0.5)+window(70)", 2, 4, 1, 130, 130, 16, 0},
    {"softmax+alibi+global(20)+window(30)", 1, 4, 2, 200, 200, 16, 1},
    {"entmax(alpha=1.5)+causal", 2, 4, 2, 150, 200, 32, 0},
    {"entmax(alpha=1.5)+logn(s=0.3)+rope+causal", 2, 4, 2, 150, 200, 32, 1},
    {"entmax(alpha=1.3)+causal", 2, 4, 2, 150, 200, 32, 0},           /* bisection alpha */
    {"entmax(alpha=1.3)+logn(s=0.3)+sinks(3,50)", 2, 4, 2, 150, 200, 16, 1},
    {"sparsemax+nape+full", 1, 4, 4, 130, 130, 16, 0},
    {"asentmax(alpha=1.5)+causal", 2, 4, 2, 150, 200, 32, 1},
    {"asentmax(alpha=1.3)+nape+causal", 1, 4, 2, 150, 150, 16, 0},
    /* many keys: the prepared K/V tiles of the softmax paths come in two chunks of
     * (b, kv head) pairs, so the chunked query-item order is exercised */
    {"softmax+logn(s=0.3)+sinks(4,200)", 2, 4, 2, 64, 16384, 64, 0},
    {"entmax(alpha=1.5)+logn(s=0.3)+sinks(4,200)", 2, 4, 2, 64, 16384, 64, 0},
};

static void test_threads_bitwise(void **state) {
    (void)state;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const tcase *c = &cases[ci];
        la_spec sp;
        assert_int_equal(la_spec_parse(c->spec, &sp), LA_OK);
        inputs in;
        inputs_new(c, &in);
        outs ref;
        outs_alloc(c, &ref, 0x5a);
        run(c, &sp, &in, &ref, 1, NULL);
        size_t sz[N_OUT];
        out_sizes(c, sz);
        for (int th = 2; th <= 3; th++) {
            outs o;
            outs_alloc(c, &o, 0x11 * th); /* another pattern: unwritten entries differ */
            la_workspace *ws = la_workspace_new();
            run(c, &sp, &in, &o, th, ws);
            la_workspace_free(ws);
            for (int i = 0; i < N_OUT; i++)
                if (memcmp(out_buf(&ref, i), out_buf(&o, i), sizeof(float) * sz[i]) != 0) {
                    size_t at = 0;
                    while (memcmp(out_buf(&ref, i) + at, out_buf(&o, i) + at, sizeof(float)) == 0) at++;
                    fail_msg("%s docs=%d: %s differs between 1 and %d threads at [%zu]: %.9g vs %.9g",
                             c->spec, c->docs, out_name(i), th, at, (double)out_buf(&ref, i)[at],
                             (double)out_buf(&o, i)[at]);
                }
            outs_free(&o);
        }
        /* key_mass is a real statistic, not a constant: rows of p sum to 1, so the key
         * masses of one (b, h) sum to the number of rows that see a key */
        double tot = 0;
        for (int j = 0; j < c->S; j++) tot += ref.km[j];
        int rows = 0;
        for (int t = 0; t < c->T; t++) rows += ref.sup[t] > 0;
        assert_true(fabs(tot - rows) <= 1e-3 * rows + 1e-3);
        outs_free(&ref);
        inputs_free(&in);
    }
}

/* Paths that must agree bitwise (the automatic choice between them looks at the thread
 * count, so thread invariance depends on it):
 *   softmax backward (softmax.c): the fused one (one P and dP per tile pair feed dq, dk and
 *     dv; work items are (b, kv head) pairs) and the two passes (dq per query tile, then
 *     dk/dv per key tile);
 *   entmax family (entmax_attn.c): the sparse products over the nonzero p with the pair-item
 *     backward, and the dense tile products with the two-pass backward (every skipped term
 *     is an exact zero).
 * Forced each way, every output and statistic is compared with memcmp. */
static void test_paths_bitwise(void **state) {
    (void)state;
    int ncmp[2] = {0, 0};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const tcase *c = &cases[ci];
        la_spec sp;
        assert_int_equal(la_spec_parse(c->spec, &sp), LA_OK);
        int em = sp.norm != LA_NORM_SOFTMAX;
        inputs in;
        inputs_new(c, &in);
        size_t sz[N_OUT];
        out_sizes(c, sz);
        for (int th = 1; th <= 2; th++) {
            outs two, one;
            outs_alloc(c, &two, 0x33);
            outs_alloc(c, &one, 0x44);
            if (em) la_entmax_sparse = 0;
            else la_softmax_bwd_fused = 0;
            run(c, &sp, &in, &two, th, NULL);
            for (int mode = 2; mode <= (em ? 3 : 2); mode++) {
            if (em) la_entmax_sparse = mode; /* pairs with / without prepared K, V tiles */
            else la_softmax_bwd_fused = 1;
            run(c, &sp, &in, &one, th, NULL);
            la_softmax_bwd_fused = -1, la_entmax_sparse = 1;
            for (int i = 0; i < N_OUT; i++)
                if (memcmp(out_buf(&two, i), out_buf(&one, i), sizeof(float) * sz[i]) != 0) {
                    size_t at = 0;
                    while (memcmp(out_buf(&two, i) + at, out_buf(&one, i) + at, sizeof(float)) == 0) at++;
                    fail_msg("%s docs=%d, %d threads: %s differs between the %s paths at [%zu]: %.9g vs %.9g",
                             c->spec, c->docs, th, out_name(i),
                             em ? "dense and sparse entmax" : "two-pass and fused softmax backward", at,
                             (double)out_buf(&two, i)[at], (double)out_buf(&one, i)[at]);
                }
            }
            outs_free(&two);
            outs_free(&one);
            ncmp[em]++;
        }
        inputs_free(&in);
    }
    assert_true(ncmp[0] >= 10 && ncmp[1] >= 14); /* every case, not a vacuous loop */
}

/* A second call with the same shapes on the same workspace: no growth (the arena and the
 * RoPE table keep their size; la_workspace.grows counts every allocation). */
static void test_workspace_reused(void **state) {
    (void)state;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const tcase *c = &cases[ci];
        if (c->S > 1000) continue; /* the small shapes are enough here */
        la_spec sp;
        assert_int_equal(la_spec_parse(c->spec, &sp), LA_OK);
        inputs in;
        inputs_new(c, &in);
        outs o;
        outs_alloc(c, &o, 0);
        la_workspace *ws = la_workspace_new();
        run(c, &sp, &in, &o, 2, ws);
        size_t grows = ws->grows, cap = la_workspace_capacity(ws);
        assert_true(grows >= 1 && cap > 0);
        run(c, &sp, &in, &o, 2, ws);
        run(c, &sp, &in, &o, 2, ws);
        if (ws->grows != grows || la_workspace_capacity(ws) != cap)
            fail_msg("%s: the workspace grew on a repeated call (%zu -> %zu allocations, %zu -> %zu bytes)",
                     c->spec, grows, ws->grows, cap, la_workspace_capacity(ws));
        la_workspace_free(ws);
        outs_free(&o);
        inputs_free(&in);
    }
}

/* Orders are permutations sorted by cost; iterators visit exactly the tiles that hold a
 * visible pair (SPEC 2 by brute force), in increasing order. */
static void test_schedule(void **state) {
    (void)state;
    const char *specs[] = {"softmax+causal", "softmax+window(70)", "softmax+sinks(3,50)",
                           "softmax+global(20)+window(30)", "softmax+full"};
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++)
        for (int docs = 0; docs < 2; docs++) {
            la_spec sp;
            assert_int_equal(la_spec_parse(specs[si], &sp), LA_OK);
            tcase c = {specs[si], 2, 4, 2, 300, 330, 8, docs};
            inputs in;
            inputs_new(&c, &in);
            la_attn_opts a = la_attn_opts_default();
            a.doc_ids = docs ? in.ids : NULL;
            a.n_threads = 2;
            la_attn_ctx ctx;
            la_workspace *own = NULL;
            assert_int_equal(la_attn_ctx_init(&ctx, &sp, &in.sh, in.q, in.k, in.v, &a, NULL, &own), LA_OK);
            int nq = la_sched_nq(&ctx), nk = la_sched_nk(&ctx);
            char *seen = calloc((size_t)(nq > nk ? nq : nk), 1);
            /* brute-force visibility per (b, query tile, key tile) */
            int64_t pos0 = c.S - c.T;
            char *vis = calloc((size_t)c.B * ctx.nqt * ctx.nkt, 1);
            for (int b = 0; b < c.B; b++)
                for (int i = 0; i < c.T; i++)
                    for (int j = 0; j < c.S; j++) {
                        int64_t qa = pos0 + i, ds = 0, kd = 0;
                        const int32_t *ids = in.ids + (size_t)b * c.S;
                        if (docs) {
                            if (ids[qa] != ids[j]) continue;
                            ds = tu_doc_start(ids, (int)qa);
                            kd = tu_doc_start(ids, j);
                            if (ds != kd) continue; /* same id, another run */
                        }
                        if (tu_visible(&sp, qa - ds, j - kd))
                            vis[((size_t)b * ctx.nqt + i / LA_BQ) * ctx.nkt + j / LA_BK] = 1;
                    }
            /* query items: a permutation; each chunk holds its own items, pair by pair, and
             * within a pair costs never increase */
            for (int ch = 0; ch < la_sched_nchunks(&ctx); ch++) {
                int i0, i1, prev = INT32_MAX, prev_pair = -1;
                la_sched_chunk(&ctx, ch, &i0, &i1);
                for (int pos = i0; pos < i1; pos++) {
                    la_item it = la_sched_qitem(&ctx, pos);
                    int id = (it.b * c.H + it.h) * ctx.nqt + it.tile;
                    int pair = it.b * c.Hkv + it.h / ctx.group;
                    assert_true(id >= i0 && id < i1);
                    assert_true(pair >= prev_pair);
                    if (pair != prev_pair) prev = INT32_MAX, prev_pair = pair;
                    assert_false(seen[id]);
                    seen[id] = 1;
                    la_kiter ki;
                    la_ktile t;
                    int cost = 0, last = -1;
                    la_kiter_init(&ki, &ctx, it.b, it.tile);
                    while (la_kiter_next(&ki, &t)) {
                        assert_true(t.kt > last);
                        last = t.kt;
                        assert_true(vis[((size_t)it.b * ctx.nqt + it.tile) * ctx.nkt + t.kt]);
                        cost++;
                    }
                    int want = 0;
                    for (int kt = 0; kt < ctx.nkt; kt++) want += vis[((size_t)it.b * ctx.nqt + it.tile) * ctx.nkt + kt];
                    assert_int_equal(cost, want);
                    const la_tilespan *s = &ctx.qspan[(size_t)it.b * ctx.nqt + it.tile];
                    int scost = (s->a1 - s->a0) + (s->b1 - s->b0); /* the scheduler's estimate */
                    assert_true(scost <= prev);
                    prev = scost;
                }
            }
            memset(seen, 0, (size_t)nq);
            int prev = INT32_MAX, prev_pair = -1;
            for (int pos = 0; pos < nk; pos++) {
                la_item it = la_sched_kitem(&ctx, pos);
                int id = (it.b * c.Hkv + it.h) * ctx.nkt + it.tile;
                int pair = it.b * c.Hkv + it.h;
                assert_true(pair >= prev_pair);
                if (pair != prev_pair) prev = INT32_MAX, prev_pair = pair;
                assert_false(seen[id]);
                seen[id] = 1;
                la_qiter qi;
                la_qtile t;
                int cost = 0, last = -1, spans = 0;
                la_qiter_init(&qi, &ctx, it.b, it.tile);
                while (la_qiter_next(&qi, &t)) {
                    assert_true(t.qt > last);
                    last = t.qt;
                    assert_true(vis[((size_t)it.b * ctx.nqt + t.qt) * ctx.nkt + it.tile]);
                    cost++;
                }
                int want = 0;
                for (int qt = 0; qt < ctx.nqt; qt++) {
                    want += vis[((size_t)it.b * ctx.nqt + qt) * ctx.nkt + it.tile];
                    const la_tilespan *s = &ctx.qspan[(size_t)it.b * ctx.nqt + qt];
                    spans += (it.tile >= s->a0 && it.tile < s->a1) || (it.tile >= s->b0 && it.tile < s->b1);
                }
                assert_int_equal(cost, want);
                assert_true(spans <= prev);
                prev = spans;
                /* head items expand kv items over the group, in order */
                for (int g = 0; g < ctx.group; g++) {
                    la_item hi = la_sched_hitem(&ctx, pos * ctx.group + g);
                    assert_int_equal(hi.b, it.b);
                    assert_int_equal(hi.tile, it.tile);
                    assert_int_equal(hi.h, it.h * ctx.group + g);
                }
            }
            free(seen);
            free(vis);
            la_workspace_free(own);
            inputs_free(&in);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_paths_bitwise),
        cmocka_unit_test(test_workspace_reused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
