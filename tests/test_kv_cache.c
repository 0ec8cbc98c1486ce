/* test_kv_cache.c -- the KV cache (src/infer/kv_*.c): policies, positions, int8 storage,
 * attention over the cache, memory bound, errors. No model needed.
 *
 * Independent references used here:
 *   - ref_attn(): naive double-precision softmax attention with its own RoPE / p-RoPE /
 *     ALiBi and causal / window / sinks masks (SPEC 1-3), written from the formulas;
 *   - a policy model that recomputes which stream positions each policy keeps, from the
 *     policy definitions (sinks + newest + top-`heavy` by reference attention mass), not
 *     from the cache's eviction loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <cmocka.h>
#include <math.h>

#include "core/internal.h"
#include "longattn.h"

/* ---------------------------------------------------------------- helpers */

static void fill_normal(la_rng *r, float *x, size_t n, double scale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * la_rng_normal(r));
}

static la_spec mkspec(la_pos pos, la_pattern pat, int window, int sinks) {
    la_spec s = la_spec_default();
    s.norm = LA_NORM_SOFTMAX;
    s.xform = LA_XF_NONE;
    s.pos = pos;
    s.pattern = pat;
    s.window = window;
    s.sinks = sinks;
    return s;
}

/* Rotate row x (D) in double by position p: half-split pairs, omega_k = theta^(-2k/D) for
 * k < m (m = D/2 for rope, floor(p_frac*D/2) for p-RoPE). SPEC 3. */
static void ref_rotate(const la_spec *s, double *x, int D, double p) {
    int m = 0;
    if (s->pos == LA_POS_ROPE) m = D / 2;
    if (s->pos == LA_POS_PROPE) m = (int)floor(s->rope_p * D / 2);
    for (int k = 0; k < m; k++) {
        double a = p * pow(s->theta, -2.0 * k / D);
        double x0 = x[k], x1 = x[k + D / 2];
        x[k] = x0 * cos(a) - x1 * sin(a);
        x[k + D / 2] = x0 * sin(a) + x1 * cos(a);
    }
}

/* Naive softmax attention, keys at 0..S-1, queries at S-T+i. q: (H,T,D), k, v: (Hkv,S,D),
 * out: (H,T,D); mass (H,S) += probabilities (if not NULL). */
static void ref_attn(const la_spec *s, int H, int Hkv, int T, int S, int D, const float *q, const float *k,
                     const float *v, double *out, double *mass) {
    double *qr = malloc(sizeof(double) * D), *kr = malloc(sizeof(double) * (size_t)S * D);
    double *lg = malloc(sizeof(double) * S);
    for (int h = 0; h < H; h++) {
        int hk = h / (H / Hkv);
        double slope = pow(2.0, -8.0 * (h + 1) / H); /* H is a power of two in these tests */
        for (int j = 0; j < S; j++) {
            for (int d = 0; d < D; d++) kr[j * D + d] = k[((size_t)hk * S + j) * D + d];
            ref_rotate(s, kr + (size_t)j * D, D, j);
        }
        for (int i = 0; i < T; i++) {
            int p = S - T + i;
            for (int d = 0; d < D; d++) qr[d] = q[((size_t)h * T + i) * D + d];
            ref_rotate(s, qr, D, p);
            double mx = -INFINITY;
            for (int j = 0; j < S; j++) {
                int t = p - j, vis = t >= 0;
                if (s->pattern == LA_PAT_WINDOW) vis = t >= 0 && t < s->window;
                if (s->pattern == LA_PAT_SINKS) vis = t >= 0 && (t < s->window || j < s->sinks);
                if (!vis) {
                    lg[j] = -INFINITY;
                    continue;
                }
                double dot = 0;
                for (int d = 0; d < D; d++) dot += qr[d] * kr[j * D + d];
                lg[j] = dot / sqrt((double)D) - (s->pos == LA_POS_ALIBI ? slope * t : 0.0);
                if (lg[j] > mx) mx = lg[j];
            }
            double z = 0;
            for (int j = 0; j < S; j++) z += isinf(lg[j]) ? 0 : exp(lg[j] - mx);
            double *o = out + ((size_t)h * T + i) * D;
            for (int d = 0; d < D; d++) o[d] = 0;
            for (int j = 0; j < S; j++) {
                if (isinf(lg[j])) continue;
                double w = exp(lg[j] - mx) / z;
                for (int d = 0; d < D; d++) o[d] += w * v[((size_t)hk * S + j) * D + d];
                if (mass) mass[(size_t)h * S + j] += w;
            }
        }
    }
    free(qr);
    free(kr);
    free(lg);
}

/* rows t0..t0+T of a (Hh, N, D) stream into (Hh, T, D) */
static void take(const float *src, int Hh, int N, int D, int t0, int T, float *dst) {
    for (int h = 0; h < Hh; h++)
        memcpy(dst + (size_t)h * T * D, src + ((size_t)h * N + t0) * D, sizeof(float) * (size_t)T * D);
}

/* ------------------------------------------------ full cache = one forward */

/* Appending a stream in chunks to a full cache and attending each chunk gives the rows of
 * one causal la_attn_forward over the whole stream (slot = original position), and the
 * naive reference. Tolerances: kernel vs kernel 2e-5 (same math, possibly different tile
 * boundaries / summation order; values are O(1)); kernel vs double reference 2e-4 (float
 * accumulation over <= 48 keys of D = 16 and float cos/sin, relative ~1e-6 each). */
static void test_full_cache_equals_one_forward(void **state) {
    (void)state;
    const int H = 4, Hkv = 2, D = 16, N = 48, NL = 2;
    la_rng r;
    la_rng_seed(&r, 7);
    float *q = malloc(sizeof(float) * H * N * D), *k = malloc(sizeof(float) * Hkv * N * D);
    float *v = malloc(sizeof(float) * Hkv * N * D), *out_all = malloc(sizeof(float) * H * N * D);
    float *out_inc = malloc(sizeof(float) * H * N * D), *stat = malloc(sizeof(float) * H * N);
    float *qc = malloc(sizeof(float) * H * N * D), *kc = malloc(sizeof(float) * Hkv * N * D);
    float *vc = malloc(sizeof(float) * Hkv * N * D), *oc = malloc(sizeof(float) * H * N * D);
    double *ref = malloc(sizeof(double) * H * N * D);
    int64_t *pos = malloc(sizeof(int64_t) * Hkv * N);
    fill_normal(&r, q, (size_t)H * N * D, 1.0);
    fill_normal(&r, k, (size_t)Hkv * N * D, 1.0);
    fill_normal(&r, v, (size_t)Hkv * N * D, 1.0);
    la_spec specs[4] = {mkspec(LA_POS_ROPE, LA_PAT_CAUSAL, 0, 0), mkspec(LA_POS_ALIBI, LA_PAT_CAUSAL, 0, 0),
                        mkspec(LA_POS_PROPE, LA_PAT_CAUSAL, 0, 0), mkspec(LA_POS_ROPE, LA_PAT_WINDOW, 7, 0)};
    const int chunks[] = {1, 3, 1, 5, 2, 1, 8, 1};
    for (int si = 0; si < 4; si++) {
        la_kv_params p = la_kv_params_default();
        p.n_layers = NL;
        p.H = H;
        p.Hkv = Hkv;
        p.D = D;
        p.max_tokens = N;
        la_kv_cache *c = NULL;
        assert_int_equal(la_kv_new(&p, &c), LA_OK);
        la_shape sh = {1, H, Hkv, N, N, D, LA_POS0_AUTO};
        assert_int_equal(la_attn_forward(&specs[si], &sh, q, k, v, out_all, stat, NULL), LA_OK);
        ref_attn(&specs[si], H, Hkv, N, N, D, q, k, v, ref, NULL);
        for (int t0 = 0, ci = 0; t0 < N; ci++) {
            int T = chunks[ci % 8];
            if (t0 + T > N) T = N - t0;
            take(k, Hkv, N, D, t0, T, kc);
            take(v, Hkv, N, D, t0, T, vc);
            take(q, H, N, D, t0, T, qc);
            for (int l = 0; l < NL; l++) {
                assert_int_equal(la_kv_append(c, l, kc, vc, T), LA_OK);
                assert_int_equal(la_kv_attend(c, l, &specs[si], qc, T, oc, NULL, NULL), LA_OK);
            }
            for (int h = 0; h < H; h++)
                memcpy(out_inc + ((size_t)h * N + t0) * D, oc + (size_t)h * T * D, sizeof(float) * T * D);
            t0 += T;
        }
        for (size_t i = 0; i < (size_t)H * N * D; i++) {
            assert_true(fabsf(out_inc[i] - out_all[i]) <= 2e-5f);
            assert_true(fabs(out_inc[i] - ref[i]) <= 2e-4);
        }
        /* full policy: slot j holds original position j */
        assert_int_equal(la_kv_len(c, 1), N);
        assert_int_equal(la_kv_read(c, 1, NULL, NULL, pos), LA_OK);
        for (int h = 0; h < Hkv; h++)
            for (int j = 0; j < N; j++) assert_int_equal(pos[h * N + j], j);
        la_kv_free(c);
    }
    free(q), free(k), free(v), free(out_all), free(out_inc), free(stat), free(qc), free(kc), free(vc), free(oc);
    free(ref), free(pos);
}

/* ------------------------------------------- evicting policies = fresh forward */

/* Policy model: per kv head a list of kept stream positions with reference scores. */
typedef struct {
    int n;
    int64_t pos[64];
    double score[64];
} model_head;

static const double *g_sort_scores;
static int cmp_idx(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    double si = g_sort_scores[i], sj = g_sort_scores[j];
    if (si != sj) return si > sj ? -1 : 1;
    return j - i; /* ties: newer (larger index) first */
}

/* The policy definition: before T new tokens arrive, keep the first `sinks`, the newest
 * (recent - T) and the `heavy` highest-scored of the others; budget = sinks+heavy+recent. */
static void model_make_room(model_head *m, int sinks, int heavy, int recent, int T) {
    int budget = sinks + heavy + recent;
    if (m->n + T <= budget) return;
    int keep_flag[64] = {0};
    for (int j = 0; j < m->n && j < sinks; j++) keep_flag[j] = 1;
    for (int j = m->n - (recent - T); j < m->n; j++) keep_flag[j] = 1;
    int idx[64], nc = 0;
    for (int j = 0; j < m->n; j++)
        if (!keep_flag[j]) idx[nc++] = j;
    g_sort_scores = m->score;
    qsort(idx, (size_t)nc, sizeof(int), cmp_idx);
    for (int i = 0; i < heavy && i < nc; i++) keep_flag[idx[i]] = 1;
    int w = 0;
    for (int j = 0; j < m->n; j++)
        if (keep_flag[j]) {
            m->pos[w] = m->pos[j];
            m->score[w] = m->score[j];
            w++;
        }
    m->n = w;
}

static void run_policy_vs_fresh(const char *policy, const la_spec *spec, int seed) {
    const int H = 4, Hkv = 2, D = 16, N = 48; /* budgets <= 8: >= 40 evictions */
    la_kv_params p = la_kv_params_default();
    p.H = H;
    p.Hkv = Hkv;
    p.D = D;
    p.n_layers = 1;
    assert_int_equal(la_kv_policy_parse(policy, &p), LA_OK);
    int64_t sinks = p.policy == LA_KV_WINDOW ? 0 : p.sinks;
    int64_t heavy = p.policy == LA_KV_H2O ? p.heavy : 0;
    int64_t recent = p.policy == LA_KV_H2O ? p.recent : p.window;
    assert_int_equal(la_kv_budget(&p), sinks + heavy + recent);
    la_kv_cache *c = NULL;
    assert_int_equal(la_kv_new(&p, &c), LA_OK);
    la_rng r;
    la_rng_seed(&r, (uint64_t)seed);
    float *q = malloc(sizeof(float) * H * N * D), *k = malloc(sizeof(float) * Hkv * N * D);
    float *v = malloc(sizeof(float) * Hkv * N * D);
    fill_normal(&r, q, (size_t)H * N * D, 1.5);
    fill_normal(&r, k, (size_t)Hkv * N * D, 1.0);
    fill_normal(&r, v, (size_t)Hkv * N * D, 1.0);
    const int B = (int)la_kv_budget(&p);
    float *qc = malloc(sizeof(float) * H * 8 * D), *kc = malloc(sizeof(float) * Hkv * 8 * D);
    float *vc = malloc(sizeof(float) * Hkv * 8 * D);
    float *o1 = malloc(sizeof(float) * H * 8 * D), *o2 = malloc(sizeof(float) * H * 8 * D);
    float *st = malloc(sizeof(float) * H * 8), *mass = malloc(sizeof(float) * H * B);
    float *kk = malloc(sizeof(float) * Hkv * B * D), *vk = malloc(sizeof(float) * Hkv * B * D);
    float *sc = malloc(sizeof(float) * Hkv * B);
    double *ref = malloc(sizeof(double) * H * 8 * D), *rmass = malloc(sizeof(double) * H * B);
    int64_t *pos = malloc(sizeof(int64_t) * Hkv * B);
    model_head model[2];
    memset(model, 0, sizeof model);
    const int chunks[] = {1, 2, 1, 3, 1, 1, 4};
    int max_chunk = (int)la_kv_max_chunk(&p);
    for (int t0 = 0, ci = 0; t0 < N; ci++) {
        int T = chunks[ci % 7];
        if (T > max_chunk) T = max_chunk;
        if (t0 + T > N) T = N - t0;
        take(k, Hkv, N, D, t0, T, kc);
        take(v, Hkv, N, D, t0, T, vc);
        take(q, H, N, D, t0, T, qc);
        assert_int_equal(la_kv_append(c, 0, kc, vc, T), LA_OK);
        for (int h = 0; h < Hkv; h++) {
            model_make_room(&model[h], (int)sinks, (int)heavy, (int)recent, T);
            for (int t = 0; t < T; t++) {
                model[h].pos[model[h].n] = t0 + t;
                model[h].score[model[h].n++] = 0;
            }
        }
        int n = (int)la_kv_len(c, 0);
        assert_true(n <= B);
        assert_int_equal(la_kv_seen(c, 0), t0 + T);
        /* the cache keeps exactly what the policy definition keeps */
        assert_int_equal(la_kv_read(c, 0, kk, vk, pos), LA_OK);
        for (int h = 0; h < Hkv; h++) {
            assert_int_equal(model[h].n, n);
            for (int j = 0; j < n; j++) assert_int_equal(pos[h * n + j], model[h].pos[j]);
            /* sinks and the newest `recent` tokens survive */
            for (int j = 0; j < sinks && j <= t0 + T - 1; j++) assert_int_equal(pos[h * n + j], j);
            for (int j = 0; j < recent && j < t0 + T; j++) assert_int_equal(pos[h * n + n - 1 - j], t0 + T - 1 - j);
        }
        la_attn_opts o = la_attn_opts_default();
        o.key_mass = mass;
        o.n_threads = 1; /* tiny calls: thread start-up would dominate */
        assert_int_equal(la_kv_attend(c, 0, spec, qc, T, o1, st, &o), LA_OK);
        /* fresh computation over the kept (dequantised) tokens at re-indexed positions 0..n-1:
         * same kernel, same inputs -> equal up to summation-order noise (1e-6 on O(1) values) */
        la_shape sh = {1, H, Hkv, T, n, D, LA_POS0_AUTO};
        float *st2 = malloc(sizeof(float) * H * T), *mass2 = malloc(sizeof(float) * H * n);
        la_attn_opts o2o = la_attn_opts_default();
        o2o.key_mass = mass2;
        o2o.n_threads = 1;
        assert_int_equal(la_attn_forward(spec, &sh, qc, kk, vk, o2, st2, &o2o), LA_OK);
        for (int i = 0; i < H * T * D; i++) assert_true(fabsf(o1[i] - o2[i]) <= 1e-6f);
        for (int i = 0; i < H * n; i++) assert_true(fabsf(mass[i] - mass2[i]) <= 1e-6f);
        /* independent double reference over the kept tokens (tolerance as in the full test) */
        memset(rmass, 0, sizeof(double) * H * n);
        ref_attn(spec, H, Hkv, T, n, D, qc, kk, vk, ref, rmass);
        for (int i = 0; i < H * T * D; i++) assert_true(fabs(o1[i] - ref[i]) <= 2e-4);
        for (int h = 0; h < H; h++)
            for (int j = 0; j < n; j++) model[h / (H / Hkv)].score[j] += rmass[(size_t)h * n + j];
        /* H2O scores: the cache's float accumulation of key_mass vs the double reference */
        if (p.policy == LA_KV_H2O) {
            assert_int_equal(la_kv_scores(c, 0, sc), LA_OK);
            for (int h = 0; h < Hkv; h++)
                for (int j = 0; j < n; j++) assert_true(fabs(sc[h * n + j] - model[h].score[j]) <= 1e-4 * (1 + model[h].score[j]));
        }
        free(st2);
        free(mass2);
        t0 += T;
    }
    assert_int_equal(la_kv_len(c, 0), B); /* the stream was longer than the budget */
    la_kv_free(c);
    free(q), free(k), free(v), free(qc), free(kc), free(vc), free(o1), free(o2), free(st), free(mass);
    free(kk), free(vk), free(sc), free(ref), free(rmass), free(pos);
}

static void test_evicting_policies_equal_fresh_forward(void **state) {
    (void)state;
    const char *policies[] = {"window(6)", "sinks(2,5)", "h2o(heavy=3,recent=4,sinks=1)", "h2o(4,3)",
                              "window(6)+int8", "sinks(n=2,w=5)+int8(group=4)", "h2o(3,4,1)+int8(group=8)"};
    la_spec specs[4] = {mkspec(LA_POS_ROPE, LA_PAT_CAUSAL, 0, 0), mkspec(LA_POS_ALIBI, LA_PAT_CAUSAL, 0, 0),
                        mkspec(LA_POS_PROPE, LA_PAT_CAUSAL, 0, 0), mkspec(LA_POS_NOPE, LA_PAT_SINKS, 3, 1)};
    /* every policy under two of the specs, every spec under several policies */
    for (int pi = 0; pi < 7; pi++)
        for (int j = 0; j < 2; j++) run_policy_vs_fresh(policies[pi], &specs[(pi + j) % 4], 100 + pi * 4 + j);
}

/* ------------------------------------------------------------ rope shift */

/* Rotations compose: R(b) R(a) = R(a+b). Each la_rope_apply call rounds cos/sin to float
 * (relative 2^-24) and does 2 products + 1 sum per element, so one shift has error
 * ~4 ulp of the pair's norm; two shifts vs one: tolerance 1e-5 * row max-norm. */
static void test_rope_shift_composes(void **state) {
    (void)state;
    const int N = 5, D = 32;
    la_rng r;
    la_rng_seed(&r, 3);
    float x[5 * 32], y1[5 * 32], y2[5 * 32], z[5 * 32];
    fill_normal(&r, x, (size_t)N * D, 1.0);
    const int64_t ab[][2] = {{3, 5}, {1000, -999}, {(int64_t)1 << 20, 12345}, {-7, 7}, {0, 4096}};
    la_spec specs[2] = {mkspec(LA_POS_ROPE, LA_PAT_CAUSAL, 0, 0), mkspec(LA_POS_PROPE, LA_PAT_CAUSAL, 0, 0)};
    for (int si = 0; si < 2; si++)
        for (int c = 0; c < 5; c++) {
            int64_t a = ab[c][0], b = ab[c][1];
            memcpy(y1, x, sizeof x);
            memcpy(y2, x, sizeof x);
            assert_int_equal(la_kv_rope_shift(&specs[si], y1, N, D, a, 0), LA_OK);
            assert_int_equal(la_kv_rope_shift(&specs[si], y1, N, D, b, 0), LA_OK);
            assert_int_equal(la_kv_rope_shift(&specs[si], y2, N, D, a + b, 0), LA_OK);
            for (int i = 0; i < N * D; i++) assert_true(fabsf(y1[i] - y2[i]) <= 1e-5f * 4.0f);
            /* rope(x, p) shifted by d equals rope(x, p + d) */
            int64_t pp[5], pd[5];
            for (int i = 0; i < N; i++) pp[i] = 10 + i, pd[i] = 10 + i + a;
            memcpy(y1, x, sizeof x);
            memcpy(z, x, sizeof x);
            assert_int_equal(la_rope_apply(&specs[si], y1, N, D, pp, 0, 0), LA_OK);
            assert_int_equal(la_kv_rope_shift(&specs[si], y1, N, D, a, 0), LA_OK);
            assert_int_equal(la_rope_apply(&specs[si], z, N, D, pd, 0, 0), LA_OK);
            for (int i = 0; i < N * D; i++) assert_true(fabsf(y1[i] - z[i]) <= 1e-5f * 4.0f);
            /* a shift by a non-zero delta actually rotates (the test can fail) */
            if (a != 0) {
                double diff = 0;
                memcpy(y1, x, sizeof x);
                la_kv_rope_shift(&specs[si], y1, N, D, a, 0);
                for (int i = 0; i < N * D; i++) diff += fabs(y1[i] - x[i]);
                assert_true(diff > 1e-2);
            }
            /* p-RoPE: the pairs that do not rotate are bit-identical */
            if (specs[si].pos == LA_POS_PROPE) {
                int m = (int)floor(specs[si].rope_p * D / 2);
                memcpy(y1, x, sizeof x);
                la_kv_rope_shift(&specs[si], y1, N, D, a, 0);
                for (int row = 0; row < N; row++)
                    for (int kk = m; kk < D / 2; kk++) {
                        assert_true(y1[row * D + kk] == x[row * D + kk]);
                        assert_true(y1[row * D + kk + D / 2] == x[row * D + kk + D / 2]);
                    }
            }
        }
    /* NoPE: a shift changes nothing */
    la_spec nope = mkspec(LA_POS_NOPE, LA_PAT_CAUSAL, 0, 0);
    memcpy(y1, x, sizeof x);
    assert_int_equal(la_kv_rope_shift(&nope, y1, N, D, 77, 0), LA_OK);
    assert_memory_equal(y1, x, sizeof x);
    assert_int_equal(la_kv_rope_shift(NULL, y1, N, D, 1, 0), LA_EINVAL);
    assert_int_equal(la_kv_rope_shift(&nope, y1, 0, D, 1, 0), LA_ESHAPE);
}

/* ------------------------------------------------------------------ int8 */

/* Per element |x - x'| <= scale/2, scale = max|group| / 127 computed here in double. Slack:
 * the stored scale is float (relative 2^-24) and x' = scale * q is one float product, so
 * allow scale/2 * (1 + 1e-6) + 1 ulp of |x|. */
static void check_roundtrip(int group) {
    const int D = 32, T = 6;
    la_kv_params p = la_kv_params_default();
    p.D = D;
    p.storage = LA_KV_INT8;
    p.group = group;
    p.max_tokens = 16;
    la_kv_cache *c = NULL;
    assert_int_equal(la_kv_new(&p, &c), LA_OK);
    la_rng r;
    la_rng_seed(&r, 11 + (uint64_t)group);
    float k[6 * 32], v[6 * 32], kr[6 * 32], vr[6 * 32];
    fill_normal(&r, k, sizeof k / sizeof *k, 2.0);
    fill_normal(&r, v, sizeof v / sizeof *v, 0.01);
    int g = group ? group : D;
    for (int i = 0; i < D; i++) k[1 * D + i] = 0.0f; /* all-zero row */
    for (int i = 0; i < D; i++) v[1 * D + i] = -3.25f; /* constant row */
    if (group) {
        for (int i = 0; i < g; i++) k[2 * D + g + i] = 0.0f;    /* all-zero group */
        for (int i = 0; i < g; i++) v[3 * D + i] = 1.5e-3f;     /* constant group */
    }
    v[4 * D + 5] = 1e6f; /* an outlier dominates its group's scale */
    assert_int_equal(la_kv_append(c, 0, k, v, T), LA_OK);
    assert_int_equal(la_kv_read(c, 0, kr, vr, NULL), LA_OK);
    double max_err_steps = 0;
    for (int t = 0; t < T; t++)
        for (int g0 = 0; g0 < D; g0 += g)
            for (int which = 0; which < 2; which++) {
                const float *x = (which ? v : k) + t * D, *xr = (which ? vr : kr) + t * D;
                double amax = 0;
                for (int i = g0; i < g0 + g; i++) amax = fmax(amax, fabs(x[i]));
                double step = amax / 127.0;
                for (int i = g0; i < g0 + g; i++) {
                    assert_true(isfinite(xr[i]));
                    double err = fabs((double)x[i] - xr[i]);
                    assert_true(err <= step / 2 * (1 + 1e-6) + fabs(x[i]) * 1.2e-7);
                    if (amax == 0) assert_true(xr[i] == 0.0f); /* zero groups are exact */
                    if (step > 0) max_err_steps = fmax(max_err_steps, err / step);
                }
            }
    /* the storage really is 8-bit: random data shows errors of a sizeable fraction of a step */
    assert_true(max_err_steps > 0.2);
    /* constant rows/groups come back to float precision */
    for (int i = 0; i < D; i++) assert_true(fabsf(vr[1 * D + i] + 3.25f) <= 3.25f * 1e-6f);
    if (group)
        for (int i = 0; i < g; i++) assert_true(fabsf(vr[3 * D + i] - 1.5e-3f) <= 1.5e-3f * 1e-6f);
    /* int8 + scales are smaller than f32 */
    la_kv_params pf = p;
    pf.storage = LA_KV_F32;
    assert_true(la_kv_bytes_per_token(&p) <= 0.5 * la_kv_bytes_per_token(&pf));
    assert_true(la_kv_bytes_per_token(&p) == 2.0 * (D + 4.0 * D / g));
    /* non-finite input cannot be stored in int8 */
    k[0] = NAN;
    assert_int_equal(la_kv_append(c, 0, k, v, 1), LA_ENUMERIC);
    assert_true(strstr(la_errmsg(), "non-finite") != NULL);
    la_kv_free(c);
}

static void test_int8_roundtrip_half_step(void **state) {
    (void)state;
    check_roundtrip(0);
    check_roundtrip(8);
    check_roundtrip(4);
}

/* Attention over an int8 cache vs the same stream in float32 (softmax, RoPE, causal).
 * Bound (derived here, checked per element): with key error dk_j and value error dv_j,
 * a logit moves by |(R q).(R dk_j)|/sqrt(D) <= ||q|| ||dk_j|| / sqrt(D) =: eps (rotations
 * keep norms), so each probability moves by a factor in [e^-2eps, e^2eps] and
 *   |out' - out|_d <= (e^{2 eps} - 1) max_j |v'_jd| + max_j |dv_jd|.
 * With ||dk|| <= sqrt(D) max|k| / 254 this is eps <= ||q|| max|k| / 254: for unit-normal q,
 * k at D = 32 about 5.7 * 3 / 254 ~ 0.07, so the worst case is ~0.15 * max|v| ~ 0.4 here.
 * We assert that data-dependent bound per element (+1e-5 float slack). It is a worst case
 * (all logit errors aligned); the rounding errors are independent and mostly cancel, so
 * the stated tolerance of the int8 cache is 0.03 absolute on these unit-variance outputs
 * (3% of the values' scale; measured 0.012 per-token, less with groups of 8). */
static void test_int8_attention_within_bound(void **state) {
    (void)state;
    const int H = 2, Hkv = 1, D = 32, N = 40;
    la_rng r;
    la_rng_seed(&r, 21);
    float *q = malloc(sizeof(float) * H * N * D), *k = malloc(sizeof(float) * Hkv * N * D);
    float *v = malloc(sizeof(float) * Hkv * N * D);
    fill_normal(&r, q, (size_t)H * N * D, 1.0);
    fill_normal(&r, k, (size_t)Hkv * N * D, 1.0);
    fill_normal(&r, v, (size_t)Hkv * N * D, 1.0);
    la_spec spec = mkspec(LA_POS_ROPE, LA_PAT_CAUSAL, 0, 0);
    const int groups[2] = {0, 8};
    for (int gi = 0; gi < 2; gi++) {
        la_kv_params p = la_kv_params_default();
        p.H = H, p.Hkv = Hkv, p.D = D, p.max_tokens = N;
        la_kv_cache *cf = NULL, *cq = NULL;
        assert_int_equal(la_kv_new(&p, &cf), LA_OK);
        p.storage = LA_KV_INT8;
        p.group = groups[gi];
        assert_int_equal(la_kv_new(&p, &cq), LA_OK);
        float qc[2 * 32], kc[32], vc[32], of[2 * 32], oq[2 * 32];
        float *kq = malloc(sizeof(float) * N * D), *vq = malloc(sizeof(float) * N * D);
        double worst = 0, worst_bound = 0;
        for (int t = 0; t < N; t++) {
            take(k, Hkv, N, D, t, 1, kc);
            take(v, Hkv, N, D, t, 1, vc);
            take(q, H, N, D, t, 1, qc);
            assert_int_equal(la_kv_append(cf, 0, kc, vc, 1), LA_OK);
            assert_int_equal(la_kv_append(cq, 0, kc, vc, 1), LA_OK);
            assert_int_equal(la_kv_attend(cf, 0, &spec, qc, 1, of, NULL, NULL), LA_OK);
            assert_int_equal(la_kv_attend(cq, 0, &spec, qc, 1, oq, NULL, NULL), LA_OK);
            assert_int_equal(la_kv_read(cq, 0, kq, vq, NULL), LA_OK);
            double dk = 0, dvmax[32] = {0}, vmax[32] = {0};
            for (int j = 0; j <= t; j++) {
                double e = 0;
                for (int d = 0; d < D; d++) {
                    double dd = (double)kq[j * D + d] - k[j * D + d];
                    e += dd * dd;
                    dvmax[d] = fmax(dvmax[d], fabs((double)vq[j * D + d] - v[j * D + d]));
                    vmax[d] = fmax(vmax[d], fabs(vq[j * D + d]));
                }
                dk = fmax(dk, sqrt(e));
            }
            for (int h = 0; h < H; h++) {
                double qn = 0;
                for (int d = 0; d < D; d++) qn += (double)qc[h * D + d] * qc[h * D + d];
                double eps = sqrt(qn) * dk / sqrt((double)D);
                for (int d = 0; d < D; d++) {
                    double bound = expm1(2 * eps) * vmax[d] + dvmax[d] + 1e-5;
                    double err = fabs((double)oq[h * D + d] - of[h * D + d]);
                    assert_true(err <= bound);
                    worst = fmax(worst, err);
                    worst_bound = fmax(worst_bound, bound);
                }
            }
        }
        /* measured worst: 0.012 (per-token), see the comment above */
        assert_true(worst <= 0.03);
        assert_true(worst_bound < 0.6);
        assert_true(worst > 0); /* int8 really differs from f32 */
        free(kq);
        free(vq);
        la_kv_free(cf);
        la_kv_free(cq);
    }
    free(q), free(k), free(v);
}

/* ------------------------------------------------------------ memory bound */

/* 10k single-token steps per policy: the length never exceeds the budget, the storage
 * size never changes, sinks and the newest token are always there, and (outside the
 * sanitizer build, whose allocator is not glibc's) the heap does not grow. */
static void test_budget_over_long_stream(void **state) {
    (void)state;
    const char *policies[] = {"window(32)", "sinks(4,28)", "h2o(8,16,2)", "h2o(8,16)+int8", "sinks(4,28)+int8(group=4)", "full"};
    const int H = 2, Hkv = 1, D = 8, N = 10000;
    la_spec spec = mkspec(LA_POS_ROPE, LA_PAT_CAUSAL, 0, 0);
    la_rng r;
    la_rng_seed(&r, 5);
    for (int pi = 0; pi < 6; pi++) {
        la_kv_params p = la_kv_params_default();
        p.H = H, p.Hkv = Hkv, p.D = D, p.n_layers = 2, p.max_tokens = N;
        assert_int_equal(la_kv_policy_parse(policies[pi], &p), LA_OK);
        la_kv_cache *c = NULL;
        assert_int_equal(la_kv_new(&p, &c), LA_OK);
        const int64_t B = la_kv_budget(&p);
        const size_t bytes = la_kv_bytes(c);
        assert_true(bytes == (size_t)(B * la_kv_bytes_per_token(&p)));
        int64_t sinks = p.policy == LA_KV_WINDOW || p.policy == LA_KV_FULL ? 0 : p.sinks;
        int64_t *pos = malloc(sizeof(int64_t) * (size_t)B * Hkv);
        float q[2 * 8], k[8], v[8], o[2 * 8];
        size_t heap0 = 0;
        la_attn_opts one_thread = la_attn_opts_default();
        one_thread.n_threads = 1;
        for (int t = 0; t < N; t++) {
            fill_normal(&r, q, 16, 1.0);
            fill_normal(&r, k, 8, 1.0);
            fill_normal(&r, v, 8, 1.0);
            for (int l = 0; l < 2; l++) {
                assert_int_equal(la_kv_append(c, l, k, v, 1), LA_OK);
                assert_true(la_kv_len(c, l) <= B);
                /* H2O needs the attention mass of every step; the other policies evict
                 * without it, so attend only now and then (one thread: tiny calls) */
                if (p.policy == LA_KV_H2O || t % 250 == 0)
                    assert_int_equal(la_kv_attend(c, l, &spec, q, 1, o, NULL, &one_thread), LA_OK);
            }
            if (t == 260) heap0 = mallinfo2().uordblks; /* after the first attend of every policy */
            if (t % 997 == 0 || t == N - 1) {
                int64_t n = la_kv_len(c, 1);
                assert_int_equal(la_kv_read(c, 1, NULL, NULL, pos), LA_OK);
                for (int j = 0; j < sinks && j <= t; j++) assert_int_equal(pos[j], j);
                assert_int_equal(pos[n - 1], t);
            }
        }
        assert_int_equal(la_kv_len(c, 0), B < N ? B : N);
        assert_true(la_kv_bytes(c) == bytes);
        /* (full grows the kernel's workspace with S, legitimately) */
        if (!getenv("LA_SANITIZED") && p.policy != LA_KV_FULL) assert_true(mallinfo2().uordblks <= heap0);
        free(pos);
        la_kv_free(c);
    }
}

/* ------------------------------------------------------------------ errors */

static void expect_bad_params(la_kv_params p, const char *word) {
    la_kv_cache *c = (la_kv_cache *)1;
    assert_int_equal(la_kv_params_validate(&p), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), word));
    assert_int_equal(la_kv_new(&p, &c), LA_EINVAL);
    assert_null(c);
}

static void test_bad_params_are_clear_errors(void **state) {
    (void)state;
    la_kv_params d = la_kv_params_default(), p;
    assert_int_equal(la_kv_params_validate(&d), LA_OK);
    p = d, p.H = 6, p.Hkv = 4;
    expect_bad_params(p, "multiple of Hkv");
    p = d, p.D = 0;
    expect_bad_params(p, "D = 0");
    p = d, p.n_layers = 0;
    expect_bad_params(p, "n_layers");
    p = d, p.max_tokens = 0;
    expect_bad_params(p, "max_tokens");
    p = d, p.policy = LA_KV_WINDOW, p.window = 0;
    expect_bad_params(p, "window(w)");
    p = d, p.policy = LA_KV_SINKS, p.window = 4, p.sinks = -1;
    expect_bad_params(p, "n >= 0");
    p = d, p.policy = LA_KV_H2O, p.heavy = 4, p.recent = 0;
    expect_bad_params(p, "recent");
    p = d, p.storage = LA_KV_INT8, p.group = 5;
    expect_bad_params(p, "group");
    assert_int_equal(la_kv_params_validate(NULL), LA_EINVAL);
    assert_int_equal(la_kv_new(&d, NULL), LA_EINVAL);

    /* policy text */
    const char *bad[] = {"foo", "window", "window(0)", "window(x)", "sinks(4)", "h2o(1)", "window(4)+sinks(1,2)",
                         "int8(group=5)", "window(w=4,q=3)", "window(4", "", "int8+int8", "window(-3)", "full(3)"};
    const char *word[] = {"unknown term 'foo'", "window needs", "w >= 1", "bad value 'x'", "both n and w", "heavy and recent",
                          "two eviction policies", "divide D", "no parameter 'q'", "closing", "empty", "twice",
                          "bad value", "no arguments"};
    for (int i = 0; i < 14; i++) {
        la_kv_params q = d;
        q.window = 99;
        assert_int_equal(la_kv_policy_parse(bad[i], &q), LA_ESPEC);
        if (!strstr(la_errmsg(), word[i])) fail_msg("'%s': message '%s' lacks '%s'", bad[i], la_errmsg(), word[i]);
        assert_int_equal(q.window, 99); /* untouched on error */
    }
    assert_int_equal(la_kv_policy_parse(NULL, &d), LA_EINVAL);

    /* bad calls */
    la_kv_params p2 = d;
    p2.H = 2, p2.Hkv = 1, p2.D = 8, p2.n_layers = 2, p2.max_tokens = 4;
    la_kv_cache *c = NULL;
    assert_int_equal(la_kv_new(&p2, &c), LA_OK);
    float k[8 * 8] = {0}, q[2 * 8 * 8] = {0}, o[2 * 8 * 8];
    la_spec spec = mkspec(LA_POS_ROPE, LA_PAT_CAUSAL, 0, 0);
    assert_int_equal(la_kv_append(c, 0, k, k, 0), LA_EINVAL);
    assert_int_equal(la_kv_append(c, 2, k, k, 1), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "layer 2"));
    assert_int_equal(la_kv_append(c, -1, k, k, 1), LA_EINVAL);
    assert_int_equal(la_kv_append(c, 0, NULL, k, 1), LA_EINVAL);
    assert_int_equal(la_kv_attend(c, 0, &spec, q, 1, o, NULL, NULL), LA_EINVAL); /* nothing appended */
    assert_non_null(strstr(la_errmsg(), "la_kv_append"));
    assert_int_equal(la_kv_append(c, 0, k, k, 3), LA_OK);
    assert_int_equal(la_kv_append(c, 0, k, k, 2), LA_EINVAL); /* full out of room */
    assert_non_null(strstr(la_errmsg(), "max_tokens"));
    assert_int_equal(la_kv_len(c, 0), 3);
    assert_int_equal(la_kv_attend(c, 0, &spec, q, 4, o, NULL, NULL), LA_EINVAL); /* T > len */
    assert_int_equal(la_kv_attend(c, 0, &spec, q, 0, o, NULL, NULL), LA_ESHAPE);
    assert_int_equal(la_kv_attend(c, 0, NULL, q, 1, o, NULL, NULL), LA_EINVAL);
    la_attn_opts op = la_attn_opts_default();
    int32_t ids[8] = {0};
    op.doc_ids = ids;
    assert_int_equal(la_kv_attend(c, 0, &spec, q, 1, o, NULL, &op), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "doc_ids"));
    assert_int_equal(la_kv_len(c, 5), -1);
    la_kv_reset(c);
    assert_int_equal(la_kv_len(c, 0), 0);
    la_kv_free(c);
    la_kv_free(NULL);

    /* a chunk larger than the recent window would evict part of itself */
    la_kv_params p3 = d;
    p3.D = 8;
    assert_int_equal(la_kv_policy_parse("sinks(2,3)", &p3), LA_OK);
    assert_int_equal(la_kv_new(&p3, &c), LA_OK);
    assert_int_equal(la_kv_append(c, 0, k, k, 4), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "[1, 3]"));
    la_kv_free(c);
}

static void test_policy_text_roundtrip(void **state) {
    (void)state;
    const char *texts[] = {"full", "window(256)", "sinks(4,252)", "h2o(64,64)", "h2o(heavy=8,recent=4,sinks=2)",
                           "sinks(4,28)+int8", "int8(group=16)+window(w=9)", "int8"};
    for (int i = 0; i < 8; i++) {
        la_kv_params a = la_kv_params_default(), b = la_kv_params_default();
        char buf[128];
        assert_int_equal(la_kv_policy_parse(texts[i], &a), LA_OK);
        int n = la_kv_policy_format(&a, buf, sizeof buf);
        assert_true(n > 0 && n < (int)sizeof buf);
        assert_int_equal(la_kv_policy_parse(buf, &b), LA_OK);
        assert_memory_equal(&a, &b, sizeof a);
    }
    la_kv_params a = la_kv_params_default();
    assert_int_equal(la_kv_policy_parse("sinks(4,252)+int8(group=32)", &a), LA_OK);
    assert_int_equal(a.policy, LA_KV_SINKS);
    assert_int_equal(a.sinks, 4);
    assert_int_equal(a.window, 252);
    assert_int_equal(a.storage, LA_KV_INT8);
    assert_int_equal(a.group, 32);
    assert_int_equal(la_kv_budget(&a), 256);
    assert_int_equal(la_kv_max_chunk(&a), 252);
    assert_int_equal(a.D, 64); /* shape fields untouched */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_text_roundtrip),
        cmocka_unit_test(test_bad_params_are_clear_errors),
        cmocka_unit_test(test_full_cache_equals_one_forward),
        cmocka_unit_test(test_evicting_policies_equal_fresh_forward),
        cmocka_unit_test(test_rope_shift_composes),
        cmocka_unit_test(test_int8_roundtrip_half_step),
        cmocka_unit_test(test_int8_attention_within_bound),
        cmocka_unit_test(test_budget_over_long_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
