/* test_synth.c -- synthetic task generators (src/tasks/synth.c).
 *
 * Every generator is checked against hand-written solvers that read only the source part
 * of an example (between BOS and SEP) and know nothing of the generator's internals but
 * the documented token ids; a solver scoring 100% shows the target is a function of the
 * source. Formats, sizes, reproducibility, the training-batch packing and the error paths
 * are checked too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "longattn.h"

/* documented content ids (header, "Synthetic tasks") */
enum { SPACE = 0, KVSEP = 1, QSEP = 2, ALPHA0 = 3 };
enum { BIT0 = 0, BIT1 = 1, WRITE = 2, IGNORE = 3, READ = 4 };

static const la_task ALL[] = {LA_TASK_MQMTAR, LA_TASK_COPY, LA_TASK_REVERSE, LA_TASK_SORT,
                              LA_TASK_FLIPFLOP};
#define N_ALL 5

/* Source / target sizes the header documents, computed here independently. */
static void expected_sizes(const la_task_params *p, int L, int *src, int *tgt) {
    switch (p->task) {
    case LA_TASK_MQMTAR:
        if (p->mq_layout == LA_MQ_INLINE) {
            *src = L;
            *tgt = p->n_queries * (1 + p->k_len + p->v_len);
        } else {
            *src = L + p->n_queries * (1 + p->k_len);
            *tgt = p->n_queries * (1 + (p->mq_layout == LA_MQ_ECHO ? p->k_len : 0) + p->v_len);
        }
        break;
    case LA_TASK_FLIPFLOP:
        *src = 2 * (L / 2) - 1;
        *tgt = 1;
        break;
    default:
        *src = L;
        *tgt = L;
    }
}

/* ---- solvers: src (n) -> answer into out, returns its length (or -1 if the source is
 * malformed). They read nothing but the source tokens and the task's parameters. ---- */

static int solve_copy(const int32_t *src, int n, int32_t *out) {
    for (int i = 0; i < n; i++) out[i] = src[i];
    return n;
}

static int solve_reverse(const int32_t *src, int n, int32_t *out) {
    for (int i = 0; i < n; i++) out[i] = src[n - 1 - i];
    return n;
}

static int solve_sort(const int32_t *src, int n, int32_t *out) { /* insertion sort */
    for (int i = 0; i < n; i++) {
        int32_t x = src[i];
        int j = i;
        while (j > 0 && out[j - 1] > x) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = x;
    }
    return n;
}

/* The last WRITE command's bit; commands sit at even offsets, bits at odd ones. */
static int solve_flipflop(const int32_t *src, int n, int32_t *out) {
    int32_t bit = -1;
    for (int i = 0; i + 1 < n; i += 2)
        if (src[i] == WRITE) bit = src[i + 1];
    if (bit < 0) return -1;
    out[0] = bit;
    return 1;
}

/* Scan the source: a KVSEP with k tokens before it and v after it is a pair; a QSEP starts
 * a query. Each query is answered by the value of the pair whose key matches, preceded by
 * the key itself when echo is set (LA_MQ_ECHO). */
static int solve_mqmtar(const int32_t *src, int n, int k, int v, int echo, int32_t *out) {
    int o = 0;
    for (int i = 0; i < n; i++) {
        if (src[i] != QSEP) continue;
        const int32_t *q = src + i + 1;
        int found = -1;
        for (int j = k; j + v < n; j++) {
            if (src[j] != KVSEP) continue;
            if (!memcmp(src + j - k, q, (size_t)k * sizeof *q)) {
                if (found >= 0) return -1; /* ambiguous key: not determined */
                found = j;
            }
        }
        if (found < 0) return -1;
        out[o++] = QSEP;
        for (int t = 0; echo && t < k; t++) out[o++] = q[t];
        for (int t = 0; t < v; t++) out[o++] = src[found + 1 + t];
        i += k;
    }
    return o;
}

/* LA_MQ_INLINE: the queries are the given keys inside the target (QSEP key value ...); the
 * solver reads the source and those keys only, and writes the whole target. */
static int solve_mqmtar_inline(const int32_t *src, int n, const int32_t *tgt, int nq, int k, int v,
                               int32_t *out) {
    int o = 0;
    for (int q = 0; q < nq; q++) {
        const int32_t *key = tgt + q * (1 + k + v) + 1;
        int found = -1;
        for (int j = k; j + v < n; j++) {
            if (src[j] != KVSEP || memcmp(src + j - k, key, (size_t)k * sizeof *key)) continue;
            if (found >= 0) return -1;
            found = j;
        }
        if (found < 0) return -1;
        out[o++] = QSEP;
        for (int t = 0; t < k; t++) out[o++] = key[t];
        for (int t = 0; t < v; t++) out[o++] = src[found + 1 + t];
    }
    return o;
}

static int solve(const la_task_params *p, const int32_t *src, int n, int32_t *out) {
    switch (p->task) {
    case LA_TASK_COPY: return solve_copy(src, n, out);
    case LA_TASK_REVERSE: return solve_reverse(src, n, out);
    case LA_TASK_SORT: return solve_sort(src, n, out);
    case LA_TASK_FLIPFLOP: return solve_flipflop(src, n, out);
    case LA_TASK_MQMTAR: return solve_mqmtar(src, n, p->k_len, p->v_len, p->mq_layout == LA_MQ_ECHO, out);
    default: return -1;
    }
}

/* Generate n examples at content length L (0: training range); check format and sizes;
 * return how many the solver gets exactly right. */
static int check_and_solve(const la_task_params *p, int L, uint64_t seed, int n) {
    la_task_vocab voc;
    assert_int_equal(la_task_get_vocab(p, &voc), LA_OK);
    int cap = 0;
    assert_int_equal(la_task_tokens_at(p, L ? L : p->max_len, &cap), LA_OK);
    int32_t *tok = malloc((size_t)cap * sizeof *tok);
    int32_t *ans = malloc((size_t)cap * sizeof *ans);
    assert_non_null(tok);
    assert_non_null(ans);
    int correct = 0, saw_min = 0, saw_max = 0;
    for (int i = 0; i < n; i++) {
        la_task_example ex;
        assert_int_equal(la_task_sample(p, L, seed, (uint64_t)i, tok, cap, &ex), LA_OK);
        if (L) assert_int_equal(ex.content_len, L);
        else {
            assert_true(ex.content_len >= p->min_len && ex.content_len <= p->max_len);
            saw_min |= ex.content_len == p->min_len;
            saw_max |= ex.content_len == p->max_len;
        }
        int es, et;
        expected_sizes(p, ex.content_len, &es, &et);
        assert_int_equal(ex.src_len, es);
        assert_int_equal(ex.tgt_len, et);
        assert_int_equal(ex.n_tokens, es + et + 3);
        int nt = 0;
        assert_int_equal(la_task_tokens_at(p, ex.content_len, &nt), LA_OK);
        assert_int_equal(nt, ex.n_tokens);
        /* BOS source SEP target EOS, specials nowhere else */
        assert_int_equal(ex.src_start, 1);
        assert_int_equal(ex.sep, 1 + es);
        assert_int_equal(ex.tgt_start, 2 + es);
        assert_int_equal(ex.eos, ex.n_tokens - 1);
        assert_int_equal(tok[0], voc.bos);
        assert_int_equal(tok[ex.sep], voc.sep);
        assert_int_equal(tok[ex.eos], voc.eos);
        for (int t = 1; t < ex.eos; t++)
            if (t != ex.sep) assert_true(tok[t] >= 0 && tok[t] < voc.n_content);
        int m = p->task == LA_TASK_MQMTAR && p->mq_layout == LA_MQ_INLINE
                    ? solve_mqmtar_inline(tok + ex.src_start, ex.src_len, tok + ex.tgt_start, p->n_queries,
                                          p->k_len, p->v_len, ans)
                    : solve(p, tok + ex.src_start, ex.src_len, ans);
        if (m == ex.tgt_len && !memcmp(ans, tok + ex.tgt_start, (size_t)m * sizeof *ans)) correct++;
    }
    if (!L && n >= 500) assert_true(saw_min && saw_max); /* the whole range is drawn */
    free(tok);
    free(ans);
    return correct;
}

static void test_solvers_score_100_percent(void **state) {
    (void)state;
    /* 1000 examples at the training range, 1x, 8x and 64x the training length */
    const int lens[] = {0, 64, 512, 4096};
    for (int a = 0; a < N_ALL; a++) {
        la_task_params p = la_task_params_default(ALL[a]);
        for (int l = 0; l < 4; l++) {
            int n = lens[l] >= 4096 ? 200 : 1000; /* keep the quadratic solvers cheap */
            if (lens[l] >= 4096 && (ALL[a] == LA_TASK_SORT || ALL[a] == LA_TASK_MQMTAR)) n = 50;
            int c = check_and_solve(&p, lens[l], 7, n);
            if (c != n) fail_msg("%s at L=%d: solver %d/%d", la_task_name(ALL[a]), lens[l], c, n);
        }
    }
}

static void test_1024x_length(void **state) {
    (void)state;
    /* 1024 x 64 = 65536: still well-formed and solvable (a few examples: the MQMTAR
     * solver is quadratic) */
    for (int a = 0; a < N_ALL; a++) {
        la_task_params p = la_task_params_default(ALL[a]);
        int n = ALL[a] == LA_TASK_MQMTAR || ALL[a] == LA_TASK_SORT ? 2 : 5;
        assert_int_equal(check_and_solve(&p, 65536, 3, n), n);
    }
}

static void test_other_params_solvable(void **state) {
    (void)state;
    la_task_params p = la_task_params_default(LA_TASK_MQMTAR);
    p.n_symbols = 4; /* only 16 keys: n_kv is capped by the alphabet */
    p.k_len = 2;
    p.v_len = 3;
    p.n_queries = 2;
    p.min_len = 24; /* 24 * 0.8 / 7 -> 2 pairs, enough for 2 queries */
    p.max_len = 40;
    assert_int_equal(check_and_solve(&p, 0, 11, 1000), 1000);
    assert_int_equal(check_and_solve(&p, 1000, 11, 100), 100);
    p.k_len = 1;
    p.v_len = 1;
    p.n_symbols = 40;
    p.kv_frac = 1.0;
    assert_int_equal(check_and_solve(&p, 0, 12, 1000), 1000);
    la_task_params c = la_task_params_default(LA_TASK_SORT);
    c.n_symbols = 2;
    c.min_len = c.max_len = 5;
    assert_int_equal(check_and_solve(&c, 0, 1, 1000), 1000);
}

/* A corrupted example must fail the solver check: the test can fail. */
static void test_solver_detects_corruption(void **state) {
    (void)state;
    for (int a = 0; a < N_ALL; a++) {
        la_task_params p = la_task_params_default(ALL[a]);
        int cap = 0;
        assert_int_equal(la_task_tokens_at(&p, 64, &cap), LA_OK);
        int32_t *tok = malloc((size_t)cap * sizeof *tok), *ans = malloc((size_t)cap * sizeof *ans);
        la_task_example ex;
        assert_int_equal(la_task_sample(&p, 64, 5, 0, tok, cap, &ex), LA_OK);
        int m = solve(&p, tok + 1, ex.src_len, ans);
        assert_int_equal(m, ex.tgt_len);
        assert_memory_equal(ans, tok + ex.tgt_start, (size_t)m * sizeof *ans);
        /* flip the last target token to another valid content token */
        int32_t *last = tok + ex.tgt_start + ex.tgt_len - 1;
        *last = ALL[a] == LA_TASK_FLIPFLOP ? 1 - *last : (*last == ALPHA0 ? ALPHA0 + 1 : ALPHA0);
        assert_memory_not_equal(ans, tok + ex.tgt_start, (size_t)m * sizeof *ans);
        free(tok);
        free(ans);
    }
}

static void test_mqmtar_structure(void **state) {
    (void)state;
    la_task_params p = la_task_params_default(LA_TASK_MQMTAR);
    const int lens[] = {32, 48, 64, 640, 8192};
    for (int l = 0; l < 5; l++) {
        int L = lens[l], cap = 0;
        assert_int_equal(la_task_tokens_at(&p, L, &cap), LA_OK);
        int32_t *tok = malloc((size_t)cap * sizeof *tok);
        /* paper's count: floor(L * 0.8 / 6), capped at 16^2 = 256 distinct keys */
        int nkv = (int)(L * 0.8 / 6);
        if (nkv > 256) nkv = 256;
        for (int i = 0; i < 50; i++) {
            la_task_example ex;
            assert_int_equal(la_task_sample(&p, L, 9, (uint64_t)i, tok, cap, &ex), LA_OK);
            const int32_t *src = tok + 1;
            int pairs = 0;
            int keys[300];
            for (int j = 0; j < L; j++) {
                if (src[j] != KVSEP) continue;
                assert_true(j >= 2 && j + 3 < L);
                assert_int_equal(src[j + 3], SPACE); /* a SPACE after every value */
                for (int t = 1; t <= 2; t++) {
                    assert_true(src[j - t] >= ALPHA0 && src[j + t] >= ALPHA0);
                }
                assert_true(pairs < 300);
                keys[pairs++] = (src[j - 2] - ALPHA0) * 16 + (src[j - 1] - ALPHA0);
            }
            assert_int_equal(pairs, nkv);
            for (int x = 0; x < pairs; x++)
                for (int y = x + 1; y < pairs; y++) assert_int_not_equal(keys[x], keys[y]);
            /* no QSEP in the region; queries are QSEP + key after it */
            for (int j = 0; j < L; j++) assert_int_not_equal(src[j], QSEP);
            for (int q = 0; q < p.n_queries; q++) assert_int_equal(src[L + 3 * q], QSEP);
            /* target = n_queries x (QSEP value) */
            for (int q = 0; q < p.n_queries; q++) assert_int_equal(tok[ex.tgt_start + 3 * q], QSEP);
        }
        free(tok);
    }
}

static void test_flipflop_structure(void **state) {
    (void)state;
    la_task_params p = la_task_params_default(LA_TASK_FLIPFLOP);
    int cap = 0;
    assert_int_equal(la_task_tokens_at(&p, 512, &cap), LA_OK);
    int32_t *tok = malloc((size_t)cap * sizeof *tok);
    long writes = 0, middles = 0, ones = 0, targets = 0;
    for (int i = 0; i < 400; i++) {
        la_task_example ex;
        assert_int_equal(la_task_sample(&p, 512, 2, (uint64_t)i, tok, cap, &ex), LA_OK);
        const int32_t *src = tok + 1;
        int P = 256;
        assert_int_equal(src[0], WRITE);
        assert_int_equal(src[2 * (P - 1)], READ);
        for (int c = 1; c < P - 1; c++) {
            int32_t cmd = src[2 * c];
            assert_true(cmd == WRITE || cmd == IGNORE);
            writes += cmd == WRITE;
            middles++;
        }
        for (int c = 0; c < P - 1; c++) assert_true(src[2 * c + 1] == BIT0 || src[2 * c + 1] == BIT1);
        ones += tok[ex.tgt_start];
        targets++;
    }
    /* write frequency 0.1: binomial with n = 101600, sd = sqrt(0.09 / n) ~ 0.00094; 5 sd */
    double f = (double)writes / middles;
    assert_true(f > 0.1 - 0.0047 && f < 0.1 + 0.0047);
    /* both answers occur (fair bits: 400 draws, P(all equal) ~ 2^-399) */
    assert_true(ones > 0 && ones < targets);
    free(tok);
}

static uint64_t fnv1a(const int32_t *x, int n, uint64_t h) {
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)x[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void test_reproducible(void **state) {
    (void)state;
    for (int a = 0; a < N_ALL; a++) {
        la_task_params p = la_task_params_default(ALL[a]);
        int cap = 0;
        assert_int_equal(la_task_tokens_at(&p, 64, &cap), LA_OK);
        int32_t *x = malloc((size_t)cap * sizeof *x), *y = malloc((size_t)cap * sizeof *y);
        int differ = 0;
        for (int i = 0; i < 100; i++) {
            la_task_example ex, ey;
            assert_int_equal(la_task_sample(&p, 0, 42, (uint64_t)i, x, cap, &ex), LA_OK);
            assert_int_equal(la_task_sample(&p, 0, 42, (uint64_t)i, y, cap, &ey), LA_OK);
            assert_int_equal(ex.n_tokens, ey.n_tokens);
            assert_memory_equal(x, y, (size_t)ex.n_tokens * sizeof *x);
            assert_int_equal(la_task_sample(&p, 0, 43, (uint64_t)i, y, cap, &ey), LA_OK);
            differ += ex.n_tokens != ey.n_tokens || memcmp(x, y, (size_t)ex.n_tokens * sizeof *x);
        }
        assert_true(differ >= 95); /* another seed gives other data */
        free(x);
        free(y);
    }
}

/* Golden checksum of the first 200 training examples of each task with seed 1: the data
 * of a run is reproducible across machines and versions. If a deliberate generator
 * change alters it, update the constants and say so (old results stop reproducing). */
static void test_golden_checksum(void **state) {
    (void)state;
    static const uint64_t golden[N_ALL] = {
        0x242f64cf64906876ULL, 0x04b7e006f18d6917ULL, 0x1f05c4247655709bULL,
        0x55b66fb02eccbf3bULL, 0x5e3f5e1ad8a33275ULL};
    int bad = 0;
    for (int a = 0; a < N_ALL; a++) {
        /* explicit parameters, so changing a default does not move the checksum */
        la_task_params p = la_task_params_default(ALL[a]);
        p.n_symbols = 16;
        p.min_len = 32;
        p.max_len = 64;
        p.k_len = p.v_len = 2;
        p.kv_frac = 0.8;
        p.n_queries = 4;
        p.write_prob = 0.1;
        int cap = 0;
        assert_int_equal(la_task_tokens_at(&p, 64, &cap), LA_OK);
        int32_t *x = malloc((size_t)cap * sizeof *x);
        uint64_t h = 0xcbf29ce484222325ULL;
        for (int i = 0; i < 200; i++) {
            la_task_example ex;
            assert_int_equal(la_task_sample(&p, 0, 1, (uint64_t)i, x, cap, &ex), LA_OK);
            h = fnv1a(x, ex.n_tokens, h);
        }
        if (h != golden[a]) print_error("%s: checksum 0x%016llxULL\n", la_task_name(ALL[a]), (unsigned long long)h);
        bad += h != golden[a];
        free(x);
    }
    assert_int_equal(bad, 0);
}

/* Layout p (inline or echo) asks the same queries as the paper layout pp from the same
 * draws: the same region at L = 64 (echo: the whole BOS source SEP), and each target unit is
 * QSEP, the paper's query key, the paper's value (default k_len = v_len = 2). */
static void check_same_queries_as_paper(const la_task_params *pp, const la_task_params *p) {
    int cap = 0, capp = 0;
    assert_int_equal(la_task_tokens_at(p, 64, &cap), LA_OK);
    assert_int_equal(la_task_tokens_at(pp, 64, &capp), LA_OK);
    int32_t *a = malloc((size_t)capp * sizeof *a), *b = malloc((size_t)cap * sizeof *b);
    const int u = 1 + p->k_len + p->v_len;
    for (int i = 0; i < 50; i++) {
        la_task_example ea, eb;
        assert_int_equal(la_task_sample(pp, 64, 3, (uint64_t)i, a, capp, &ea), LA_OK);
        assert_int_equal(la_task_sample(p, 64, 3, (uint64_t)i, b, cap, &eb), LA_OK);
        if (p->mq_layout == LA_MQ_ECHO) {
            assert_int_equal(eb.src_len, ea.src_len);
            assert_memory_equal(a, b, (size_t)(ea.sep + 1) * sizeof *a); /* BOS source SEP */
        } else {
            assert_int_equal(eb.src_len, 64);
            assert_memory_equal(a + 1, b + 1, 64 * sizeof *a); /* the same region */
        }
        for (int q = 0; q < p->n_queries; q++) {
            const int32_t *tq = b + eb.tgt_start + q * u;
            assert_int_equal(tq[0], QSEP);
            assert_memory_equal(tq + 1, a + 1 + 64 + q * 3 + 1, 2 * sizeof *a);       /* key */
            assert_memory_equal(tq + 3, a + ea.tgt_start + q * 3 + 1, 2 * sizeof *a); /* value */
        }
    }
    free(a), free(b);
}

/* LA_MQ_INLINE: source = the region alone, target = n_queries x (QSEP key value) asking the
 * same queries as the paper layout from the same draws; the solver (source + given keys)
 * scores 100%; la_task_batch scores exactly the QSEPs, the values and EOS. */
static void test_mqmtar_inline(void **state) {
    (void)state;
    la_task_params pp = la_task_params_default(LA_TASK_MQMTAR), p = pp;
    p.mq_layout = LA_MQ_INLINE;
    assert_int_equal(check_and_solve(&p, 0, 5, 1000), 1000);
    assert_int_equal(check_and_solve(&p, 1024, 5, 100), 100);
    la_task_params p1 = p;
    p1.k_len = p1.v_len = 1;
    p1.n_queries = 6;
    assert_int_equal(check_and_solve(&p1, 0, 6, 1000), 1000);
    int cap = 0, capp = 0;
    assert_int_equal(la_task_tokens_at(&p, 64, &cap), LA_OK);
    assert_int_equal(la_task_tokens_at(&pp, 64, &capp), LA_OK);
    assert_int_equal(cap, capp - p.n_queries); /* one QSEP per query fewer: QSEP k v, not QSEP k + QSEP v */
    check_same_queries_as_paper(&pp, &p);
    int32_t *b = malloc((size_t)cap * sizeof *b);
    const int u = 1 + p.k_len + p.v_len;
    /* batch: -1 where the next token is a given key; scored: QSEPs, values, EOS */
    const int B = 3, T = cap - 1;
    int32_t *in = malloc((size_t)B * T * sizeof *in), *tg = malloc((size_t)B * T * sizeof *tg);
    la_task_example ex[3];
    assert_int_equal(la_task_batch(&p, 64, 3, 0, B, T, in, tg, ex), LA_OK);
    for (int r = 0; r < B; r++) {
        assert_int_equal(la_task_sample(&p, 64, 3, (uint64_t)r, b, cap, NULL), LA_OK);
        int scored = 0;
        for (int t = 0; t < T; t++) {
            int nxt = t + 1, j = nxt - ex[r].tgt_start;
            int key = nxt < ex[r].eos && j >= 0 && j % u >= 1 && j % u <= p.k_len;
            int want = nxt >= ex[r].tgt_start && nxt <= ex[r].eos && !key;
            assert_int_equal(tg[(size_t)r * T + t], want ? b[nxt] : -1);
            scored += want;
        }
        assert_int_equal(scored, p.n_queries * (1 + p.v_len) + 1);
    }
    p.mq_layout = (la_mq_layout)7;
    assert_int_equal(la_task_validate(&p), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "mq_layout"));
    free(in), free(tg), free(b);
}

/* LA_MQ_ECHO: the paper's source (same region and queries from the same draws), target
 * n_queries x (QSEP key value); the source-only solver scores 100%; la_task_batch scores
 * every target token (keys included) and EOS. */
static void test_mqmtar_echo(void **state) {
    (void)state;
    la_task_params pp = la_task_params_default(LA_TASK_MQMTAR), p = pp;
    p.mq_layout = LA_MQ_ECHO;
    assert_int_equal(check_and_solve(&p, 0, 5, 1000), 1000);
    assert_int_equal(check_and_solve(&p, 1024, 5, 100), 100);
    int cap = 0, capp = 0;
    assert_int_equal(la_task_tokens_at(&p, 64, &cap), LA_OK);
    assert_int_equal(la_task_tokens_at(&pp, 64, &capp), LA_OK);
    assert_int_equal(cap, capp + p.n_queries * p.k_len); /* each answer repeats its key */
    check_same_queries_as_paper(&pp, &p);
    const int u = 1 + p.k_len + p.v_len;
    const int B = 3, T = cap - 1;
    int32_t *in = malloc((size_t)B * T * sizeof *in), *tg = malloc((size_t)B * T * sizeof *tg);
    la_task_example ex[3];
    assert_int_equal(la_task_batch(&p, 64, 3, 0, B, T, in, tg, ex), LA_OK);
    for (int r = 0; r < B; r++) {
        int scored = 0;
        for (int t = 0; t < T; t++) scored += tg[(size_t)r * T + t] >= 0;
        assert_int_equal(scored, p.n_queries * u + 1);
    }
    free(in), free(tg);
}

static void test_batch_packing(void **state) {
    (void)state;
    for (int a = 0; a < N_ALL; a++) {
        la_task_params p = la_task_params_default(ALL[a]);
        la_task_vocab voc;
        assert_int_equal(la_task_get_vocab(&p, &voc), LA_OK);
        int cap = 0;
        assert_int_equal(la_task_tokens_at(&p, p.max_len, &cap), LA_OK);
        const int B = 6, T = cap - 1 + 3; /* 3 spare columns of padding at least */
        int32_t *in = malloc((size_t)B * T * sizeof *in), *tg = malloc((size_t)B * T * sizeof *tg);
        int32_t *row = malloc((size_t)cap * sizeof *row);
        la_task_example ex[6];
        assert_int_equal(la_task_batch(&p, 0, 99, 10, B, T, in, tg, ex), LA_OK);
        for (int b = 0; b < B; b++) {
            la_task_example e;
            /* row b is example 10 + b of the stream, whatever the batch */
            assert_int_equal(la_task_sample(&p, 0, 99, 10 + (uint64_t)b, row, cap, &e), LA_OK);
            assert_int_equal(e.n_tokens, ex[b].n_tokens);
            int n = e.n_tokens, counted = 0;
            const int32_t *ib = in + (size_t)b * T, *tb = tg + (size_t)b * T;
            for (int t = 0; t < T; t++) {
                if (t < n - 1) {
                    assert_int_equal(ib[t], row[t]);
                    /* loss exactly on the positions predicting target tokens and EOS */
                    int want = t + 1 >= e.tgt_start && t + 1 <= e.eos;
                    assert_int_equal(tb[t], want ? row[t + 1] : -1);
                    counted += want;
                } else {
                    assert_int_equal(ib[t], voc.pad);
                    assert_int_equal(tb[t], -1);
                }
            }
            assert_int_equal(counted, e.tgt_len + 1);
            /* exact match: perfect prediction 1; a wrong prediction outside the target does
             * not count; one wrong target position (here the EOS prediction) gives 0 */
            int32_t *pred = malloc((size_t)T * sizeof *pred);
            for (int t = 0; t < T; t++) pred[t] = tb[t] >= 0 ? tb[t] : ib[t];
            assert_int_equal(la_task_exact_match(pred, tb, T), 1);
            pred[0] = voc.sep;
            assert_int_equal(la_task_exact_match(pred, tb, T), 1);
            pred[e.eos - 1] = voc.pad;
            assert_int_equal(la_task_exact_match(pred, tb, T), 0);
            free(pred);
        }
        /* T too small for the longest example */
        assert_int_equal(la_task_batch(&p, p.max_len, 99, 0, 1, cap - 2, in, tg, NULL), LA_ESHAPE);
        assert_non_null(strstr(la_errmsg(), "T >="));
        free(in);
        free(tg);
        free(row);
    }
}

static void test_vocab_and_names(void **state) {
    (void)state;
    for (int a = 0; a < N_ALL; a++) {
        la_task t;
        assert_int_equal(la_task_from_name(la_task_name(ALL[a]), &t), LA_OK);
        assert_int_equal(t, ALL[a]);
    }
    la_task t;
    assert_int_equal(la_task_from_name("flip-flop", &t), LA_OK);
    assert_int_equal(t, LA_TASK_FLIPFLOP);
    assert_int_equal(la_task_from_name("mqar", &t), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "mqar"));
    assert_non_null(strstr(la_errmsg(), "mqmtar"));
    la_task_vocab v;
    la_task_params p = la_task_params_default(LA_TASK_MQMTAR);
    assert_int_equal(la_task_get_vocab(&p, &v), LA_OK);
    assert_int_equal(v.n_content, 3 + 16);
    assert_int_equal(v.pad, 19);
    assert_int_equal(v.bos, 20);
    assert_int_equal(v.eos, 21);
    assert_int_equal(v.sep, 22);
    assert_int_equal(v.vocab_size, 23);
    p = la_task_params_default(LA_TASK_FLIPFLOP);
    assert_int_equal(la_task_get_vocab(&p, &v), LA_OK);
    assert_int_equal(v.vocab_size, 9);
    p = la_task_params_default(LA_TASK_COPY);
    p.n_symbols = 8;
    assert_int_equal(la_task_get_vocab(&p, &v), LA_OK);
    assert_int_equal(v.vocab_size, 12);
    assert_string_equal(la_task_name((la_task)77), "?");
}

static void test_bad_params(void **state) {
    (void)state;
    la_task_params p = la_task_params_default(LA_TASK_COPY);
    int32_t buf[512];
    la_task_vocab v;
    assert_int_equal(la_task_validate(NULL), LA_EINVAL);
    p.min_len = 70;
    assert_int_equal(la_task_validate(&p), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "min_len"));
    p = la_task_params_default(LA_TASK_COPY);
    p.n_symbols = 1;
    assert_int_equal(la_task_get_vocab(&p, &v), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "n_symbols"));
    p = la_task_params_default(LA_TASK_FLIPFLOP);
    p.write_prob = 1.0;
    assert_int_equal(la_task_validate(&p), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "write_prob"));
    p = la_task_params_default(LA_TASK_MQMTAR);
    p.min_len = 20; /* 20 * 0.8 / 6 = 2 pairs < 4 queries */
    assert_int_equal(la_task_validate(&p), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "n_queries"));
    p = la_task_params_default(LA_TASK_MQMTAR);
    p.kv_frac = 0;
    assert_int_equal(la_task_validate(&p), LA_EINVAL);
    p = la_task_params_default(LA_TASK_MQMTAR);
    p.k_len = 0;
    assert_int_equal(la_task_validate(&p), LA_EINVAL);
    p.task = (la_task)-1;
    assert_int_equal(la_task_validate(&p), LA_EINVAL);
    /* content lengths and buffers */
    p = la_task_params_default(LA_TASK_COPY);
    assert_int_equal(la_task_sample(&p, 2, 1, 0, buf, 512, NULL), LA_EINVAL);
    assert_int_equal(la_task_sample(&p, -1, 1, 0, buf, 512, NULL), LA_EINVAL);
    assert_int_equal(la_task_sample(&p, 64, 1, 0, NULL, 512, NULL), LA_EINVAL);
    assert_int_equal(la_task_sample(&p, 64, 1, 0, buf, 130, NULL), LA_ESHAPE); /* needs 131 */
    assert_non_null(strstr(la_errmsg(), "131"));
    assert_int_equal(la_task_sample(&p, 64, 1, 0, buf, 131, NULL), LA_OK);
    int n;
    assert_int_equal(la_task_tokens_at(&p, 1 << 30, &n), LA_EINVAL);
    p = la_task_params_default(LA_TASK_MQMTAR);
    assert_int_equal(la_task_tokens_at(&p, 7, &n), LA_EINVAL); /* 7 tokens hold no pair */
    assert_non_null(strstr(la_errmsg(), "no key-value pair"));
    assert_int_equal(la_task_batch(&p, 0, 1, 0, 0, 4, buf, buf, NULL), LA_ESHAPE);
    assert_int_equal(la_task_batch(&p, 0, 1, 0, 1, 4, NULL, buf, NULL), LA_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_solvers_score_100_percent),
        cmocka_unit_test(test_1024x_length),
        cmocka_unit_test(test_other_params_solvable),
        cmocka_unit_test(test_solver_detects_corruption),
        cmocka_unit_test(test_mqmtar_structure),
        cmocka_unit_test(test_flipflop_structure),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_golden_checksum),
        cmocka_unit_test(test_batch_packing),
        cmocka_unit_test(test_mqmtar_inline),
        cmocka_unit_test(test_mqmtar_echo),
        cmocka_unit_test(test_vocab_and_names),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
