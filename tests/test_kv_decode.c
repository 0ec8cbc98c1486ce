/* test_kv_decode.c -- KV cache element types (f32, f16, bf16, int8) and the decode kernel
 * (src/infer/kv_decode.c) under every eviction policy, SmolLM2's attention shape (H = 9
 * query heads, Hkv = 3 kv heads, D = 64).
 *
 * 1. Against the float64 reference (tests/support/ref_attn.c): every step of a stream
 *    appended and attended one token at a time, the output and log-sum-exp of la_kv_attend
 *    (the decode kernel for the reduced types, the fused kernel for f32) against the
 *    naive double loop over the rows the cache holds (read back with la_kv_read, i.e. after
 *    rounding to the type). Tolerance 2e-5 absolute (|v| ~ 1, |out| <= 4): float32 sums of
 *    at most 300 terms whose rounding errors stay ~1e-6 (measured <= 6e-6, critical
 *    with its larger logits); a wrong key, position, scale or
 *    a chunk merged twice costs > 1e-2.
 * 2. Against the f32 path: the same stream through an f32 cache of the same policy. The
 *    bound is computed from the data at every step, not guessed: with Delta k, Delta v the
 *    storage errors of the kept rows (stored - original; f16 <= 2^-11 |x|, bf16 <= 2^-8 |x|,
 *    int8 <= scale/2 per element), each logit moves by at most
 *        delta = max_j sum over RoPE pairs |q_pair| |Delta k_j,pair| / sqrt(D)
 *    (rotations keep pair norms; times the row's logit factor: temp, critical, YaRN), so every probability changes by a factor within
 *    e^(+-2 delta) and
 *        |out' - out| <= max |Delta v| + (e^(2 delta) - 1) max |v'| + 2e-5,
 *    2e-5 for the two paths' float32 rounding. Keys kept by the two caches must be the same
 *    (stream positions) for full, window and sinks; h2o may keep different keys once the
 *    scores differ by rounding: those steps are counted and must stay a minority.
 * 3. Thread-count independence: the decode kernel with 1, 2 and 3 threads is bitwise the
 *    same (output, log-sum-exp, key mass), also a whole h2o stream (scores evolve).
 * 4. Parsing: "+f16", "+bf16", "+int8" (old spelling), la_kv_type_parse, the setter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "core/internal.h"
#include "infer/kv_internal.h"
#include "longattn.h"
#include "support/ref_attn.h"

enum { H = 9, HKV = 3, G = H / HKV, D = 64, N = 300 };
static const double TOL_REF = 2e-5, TOL_F32 = 2e-5;

static const char *TYPES[] = {"f32", "f16", "bf16", "int8", "int8(group=16)"};
enum { NTYPES = sizeof TYPES / sizeof TYPES[0] };
static const char *POLICIES[] = {"full", "window(200)", "sinks(4,196)", "h2o(100,100,4)"};
enum { NPOL = sizeof POLICIES / sizeof POLICIES[0] };

typedef struct {
    float *q, *k, *v; /* (N, H, D), (N, HKV, D), (N, HKV, D) */
} stream;

static stream make_stream(uint64_t seed) {
    stream s;
    s.q = malloc(sizeof(float) * N * H * D);
    s.k = malloc(sizeof(float) * N * HKV * D);
    s.v = malloc(sizeof(float) * N * HKV * D);
    la_rng r;
    la_rng_seed(&r, seed);
    for (size_t i = 0; i < (size_t)N * H * D; i++) s.q[i] = (float)la_rng_normal(&r);
    for (size_t i = 0; i < (size_t)N * HKV * D; i++) s.k[i] = (float)la_rng_normal(&r);
    for (size_t i = 0; i < (size_t)N * HKV * D; i++) s.v[i] = (float)la_rng_normal(&r);
    return s;
}

static void free_stream(stream *s) { free(s->q), free(s->k), free(s->v); }

static la_kv_params params(const char *policy, const char *type) {
    la_kv_params p = la_kv_params_default();
    p.n_layers = 1, p.H = H, p.Hkv = HKV, p.D = D, p.max_tokens = N;
    assert_int_equal(la_kv_policy_parse(policy, &p), LA_OK);
    assert_int_equal(la_kv_type_parse(type, &p), LA_OK);
    return p;
}

/* Runs the stream one token at a time; outputs (N, H, D), lse (N, H); kept positions of
 * every step into pos (N, HKV, N) and lengths into len (N) when given. */
static void run_stream(const la_kv_params *p, const la_spec *spec, const stream *s, int n_threads, float *out,
                       float *lse, int64_t *pos, int64_t *len, float *scores) {
    la_kv_cache *c;
    assert_int_equal(la_kv_new(p, &c), LA_OK);
    la_attn_opts o = la_attn_opts_default();
    o.n_threads = n_threads;
    for (int t = 0; t < N; t++) {
        assert_int_equal(la_kv_append(c, 0, s->k + (size_t)t * HKV * D, s->v + (size_t)t * HKV * D, 1), LA_OK);
        assert_int_equal(la_kv_attend(c, 0, spec, s->q + (size_t)t * H * D, 1, out + (size_t)t * H * D,
                                      lse + (size_t)t * H, &o),
                         LA_OK);
        if (len) len[t] = la_kv_len(c, 0);
        if (pos) assert_int_equal(la_kv_read(c, 0, NULL, NULL, pos + (size_t)t * HKV * N), LA_OK);
    }
    if (scores) assert_int_equal(la_kv_scores(c, 0, scores), LA_OK);
    la_kv_free(c);
}

/* ---- 1 and 2: every type x policy against the float64 reference and the f32 path ---- */

static void check_spec(const char *spec_text) {
    la_spec spec;
    assert_int_equal(la_spec_parse(spec_text, &spec), LA_OK);
    stream s = make_stream(7);
    float *kk = malloc(sizeof(float) * HKV * N * D), *vv = malloc(sizeof(float) * HKV * N * D);
    double *qd = malloc(sizeof(double) * H * D), *kd = malloc(sizeof(double) * HKV * N * D),
           *vd = malloc(sizeof(double) * HKV * N * D), od[H * D], ld[H];
    int64_t *kpos = malloc(sizeof(int64_t) * HKV * N);
    float *out[NTYPES], *lse[NTYPES];
    int64_t *pos[NTYPES], *len[NTYPES];
    for (int pi = 0; pi < NPOL; pi++) {
        for (int ti = 0; ti < NTYPES; ti++) {
            la_kv_params p = params(POLICIES[pi], TYPES[ti]);
            if (ti > 0) assert_true(p.storage != LA_KV_F32);
            out[ti] = malloc(sizeof(float) * N * H * D);
            lse[ti] = malloc(sizeof(float) * N * H);
            pos[ti] = malloc(sizeof(int64_t) * N * HKV * N);
            len[ti] = malloc(sizeof(int64_t) * N);
            run_stream(&p, &spec, &s, 1, out[ti], lse[ti], pos[ti], len[ti], NULL); /* threads: test 3 */
        }
        double worst_ref[NTYPES] = {0}, worst_ratio[NTYPES] = {0};
        int differ[NTYPES] = {0};
        for (int ti = 0; ti < NTYPES; ti++) {
            /* replay the stream to read each step's kept rows back (after rounding) */
            la_kv_params p = params(POLICIES[pi], TYPES[ti]);
            la_kv_cache *c;
            assert_int_equal(la_kv_new(&p, &c), LA_OK);
            for (int t = 0; t < N; t++) {
                assert_int_equal(la_kv_append(c, 0, s.k + (size_t)t * HKV * D, s.v + (size_t)t * HKV * D, 1), LA_OK);
                /* the attend call updates h2o scores: replay it too (output discarded) */
                float scratch[H * D];
                la_attn_opts o1 = la_attn_opts_default();
                o1.n_threads = 1;
                assert_int_equal(la_kv_attend(c, 0, &spec, s.q + (size_t)t * H * D, 1, scratch, NULL, &o1), LA_OK);
                assert_memory_equal(scratch, out[ti] + (size_t)t * H * D, sizeof scratch); /* deterministic */
                const int64_t n = la_kv_len(c, 0);
                assert_int_equal(la_kv_read(c, 0, kk, vv, kpos), LA_OK);
                /* (1) float64 reference over the stored rows, every 20th step and the last */
                if (t % 20 == 0 || t == N - 1) {
                    for (size_t i = 0; i < (size_t)H * D; i++) qd[i] = s.q[(size_t)t * H * D + i];
                    for (size_t i = 0; i < (size_t)HKV * n * D; i++) kd[i] = kk[i], vd[i] = vv[i];
                    la_shape sh = {.B = 1, .H = H, .Hkv = HKV, .T = 1, .S = (int)n, .D = D, .pos0 = n - 1};
                    ref_attn_opts ro = {0};
                    assert_int_equal(ref_attn_forward(&spec, &sh, qd, kd, vd, &ro, od, ld, NULL, NULL), 0);
                    for (int h = 0; h < H; h++) {
                        for (int d = 0; d < D; d++) {
                            double e = fabs(od[h * D + d] - out[ti][((size_t)t * H + h) * D + d]);
                            if (e > worst_ref[ti]) worst_ref[ti] = e;
                        }
                        double e = fabs(ld[h] - lse[ti][(size_t)t * H + h]);
                        if (e > worst_ref[ti]) worst_ref[ti] = e;
                    }
                }
                /* (2) against the f32 path, where it keeps the same keys (every 4th step) */
                if (ti == 0 || (t % 4 && t != N - 1)) continue;
                if (len[0][t] != n || memcmp(pos[0] + (size_t)t * HKV * N, kpos, sizeof(int64_t) * HKV * n)) {
                    differ[ti]++;
                    continue;
                }
                /* storage errors of the kept rows: original rows by stream position */
                double delta = 0, dv = 0, vmax = 0;
                for (int hk = 0; hk < HKV; hk++)
                    for (int64_t j = 0; j < n; j++) {
                        const int64_t sp = kpos[hk * n + j];
                        const float *k0 = s.k + ((size_t)sp * HKV + hk) * D, *v0 = s.v + ((size_t)sp * HKV + hk) * D;
                        const float *k1 = kk + ((size_t)hk * n + j) * D, *v1 = vv + ((size_t)hk * n + j) * D;
                        for (int g = 0; g < G; g++) {
                            const float *qq = s.q + ((size_t)t * H + hk * G + g) * D;
                            double a = 0;
                            for (int d = 0; d < D / 2; d++) { /* RoPE pairs (d, d + D/2) */
                                const double e0 = (double)k1[d] - k0[d], e1 = (double)k1[d + D / 2] - k0[d + D / 2];
                                a += sqrt(((double)qq[d] * qq[d] + (double)qq[d + D / 2] * qq[d + D / 2]) *
                                          (e0 * e0 + e1 * e1));
                            }
                            a *= fabs(la_kv_row_factor(&spec, n - 1, la_kv_budget(&p))) / sqrt((double)D);
                            if (a > delta) delta = a;
                        }
                        for (int d = 0; d < D; d++) {
                            if (fabs(v1[d] - v0[d]) > dv) dv = fabs(v1[d] - v0[d]);
                            if (fabs(v1[d]) > vmax) vmax = fabs(v1[d]);
                        }
                    }
                const double bound = dv + expm1(2 * delta) * vmax + TOL_F32;
                for (size_t i = 0; i < (size_t)H * D; i++) {
                    double e = fabs((double)out[ti][(size_t)t * H * D + i] - out[0][(size_t)t * H * D + i]);
                    if (e / bound > worst_ratio[ti]) worst_ratio[ti] = e / bound;
                }
            }
            la_kv_free(c);
        }
        for (int ti = 0; ti < NTYPES; ti++) {
            printf("  %-34s %-16s %-14s  ref %.2e  vs f32 %.3f of the bound  (%d steps with other keys)\n", spec_text,
                   POLICIES[pi], TYPES[ti], worst_ref[ti], worst_ratio[ti], differ[ti]);
            assert_true(worst_ref[ti] <= TOL_REF);
            assert_true(worst_ratio[ti] <= 1.0);
            if (strncmp(POLICIES[pi], "h2o", 3)) assert_int_equal(differ[ti], 0);
            else assert_true(differ[ti] < N / 2);
            free(out[ti]), free(lse[ti]), free(pos[ti]), free(len[ti]);
        }
        /* the reduced types must really differ from f32 (the storage is not f32 in disguise) */
    }
    free(kk), free(vv), free(qd), free(kd), free(vd), free(kpos);
    free_stream(&s);
}

static void test_types_rope(void **st) {
    (void)st;
    check_spec("softmax+rope(theta=10000)+causal");
}

static void test_types_other_specs(void **st) {
    (void)st;
    check_spec("softmax+nope+causal");
    check_spec("softmax+yarn(2,16)+causal");
    check_spec("softmax+critical(0.7)+rope+causal");
    check_spec("softmax+temp(1.3)+prope(0.5)+causal");
}

/* rounding really happens: f16 / bf16 rows read back are the rounded originals */
static void test_rows_rounded(void **st) {
    (void)st;
    stream s = make_stream(3);
    const char *types[] = {"f16", "bf16"};
    for (int ti = 0; ti < 2; ti++) {
        la_kv_params p = params("full", types[ti]);
        la_kv_cache *c;
        assert_int_equal(la_kv_new(&p, &c), LA_OK);
        assert_int_equal(la_kv_append(c, 0, s.k, s.v, 1), LA_OK);
        float k[HKV * D], want[HKV * D];
        assert_int_equal(la_kv_read(c, 0, k, NULL, NULL), LA_OK);
        memcpy(want, s.k, sizeof want);
        if (ti == 0) la_round_f16(want, HKV * D);
        else la_round_bf16(want, HKV * D);
        assert_memory_equal(k, want, sizeof want);
        assert_true(memcmp(k, s.k, sizeof k) != 0);
        assert_true(la_kv_bytes_per_token(&p) == 2.0 * HKV * D * 2);
        la_kv_free(c);
    }
    /* f16 cannot hold 1e5: the append says so instead of storing infinity */
    la_kv_params p = params("full", "f16");
    la_kv_cache *c;
    assert_int_equal(la_kv_new(&p, &c), LA_OK);
    float big[HKV * D];
    memcpy(big, s.k, sizeof big);
    big[5] = 1e5f;
    assert_int_equal(la_kv_append(c, 0, big, s.v, 1), LA_ENUMERIC);
    assert_non_null(strstr(la_errmsg(), "bf16"));
    la_kv_free(c);
    free_stream(&s);
}

/* ---- 3: thread-count independence ---- */

static void test_threads_bitwise(void **st) {
    (void)st;
    la_spec spec;
    assert_int_equal(la_spec_parse("softmax+rope(theta=10000)+causal", &spec), LA_OK);
    stream s = make_stream(11);
    for (int ti = 0; ti < NTYPES; ti++) {
        /* the kernel called directly on a full cache of N rows (3 chunks), every type */
        la_kv_params p = params("full", TYPES[ti]);
        la_kv_cache *c;
        assert_int_equal(la_kv_new(&p, &c), LA_OK);
        for (int t = 0; t < N; t++)
            assert_int_equal(la_kv_append(c, 0, s.k + (size_t)t * HKV * D, s.v + (size_t)t * HKV * D, 1), LA_OK);
        float o[3][H * D], l[3][H], *m[3];
        for (int nt = 1; nt <= 3; nt++) {
            m[nt - 1] = malloc(sizeof(float) * H * N);
            assert_int_equal(la_kv_decode_attend(c, 0, &spec, s.q + (size_t)(N - 1) * H * D, o[nt - 1], l[nt - 1],
                                                 m[nt - 1], nt),
                             LA_OK);
        }
        for (int i = 1; i < 3; i++) {
            assert_memory_equal(o[0], o[i], sizeof o[0]);
            assert_memory_equal(l[0], l[i], sizeof l[0]);
            assert_memory_equal(m[0], m[i], sizeof(float) * H * N);
        }
        /* the key mass sums to 1 per head */
        for (int h = 0; h < H; h++) {
            double z = 0;
            for (int j = 0; j < N; j++) z += m[0][(size_t)h * N + j];
            assert_true(fabs(z - 1) < 1e-4);
        }
        for (int i = 0; i < 3; i++) free(m[i]);
        la_kv_free(c);
    }
    /* a whole h2o stream (evictions follow the scores) with 1 and 3 threads */
    for (int ti = 1; ti < NTYPES; ti++) {
        la_kv_params p = params("h2o(100,100,4)", TYPES[ti]);
        float *o1 = malloc(sizeof(float) * N * H * D), *o3 = malloc(sizeof(float) * N * H * D);
        float *l1 = malloc(sizeof(float) * N * H), *l3 = malloc(sizeof(float) * N * H);
        float s1[HKV * 204], s3[HKV * 204];
        run_stream(&p, &spec, &s, 1, o1, l1, NULL, NULL, s1);
        run_stream(&p, &spec, &s, 3, o3, l3, NULL, NULL, s3);
        assert_memory_equal(o1, o3, sizeof(float) * N * H * D);
        assert_memory_equal(l1, l3, sizeof(float) * N * H);
        assert_memory_equal(s1, s3, sizeof(float) * HKV * 204);
        free(o1), free(o3), free(l1), free(l3);
    }
    free_stream(&s);
}

/* the decode kernel on f32 rows too (la_kv_attend keeps the fused kernel for f32): against
 * the fused kernel's result, same tolerance as the reference */
static void test_decode_kernel_f32(void **st) {
    (void)st;
    la_spec spec;
    assert_int_equal(la_spec_parse("softmax+rope(theta=10000)+causal", &spec), LA_OK);
    stream s = make_stream(5);
    la_kv_params p = params("sinks(4,196)", "f32");
    la_kv_cache *c;
    assert_int_equal(la_kv_new(&p, &c), LA_OK);
    double worst = 0;
    for (int t = 0; t < N; t++) {
        assert_int_equal(la_kv_append(c, 0, s.k + (size_t)t * HKV * D, s.v + (size_t)t * HKV * D, 1), LA_OK);
        float a[H * D], b[H * D], la[H], lb[H];
        assert_int_equal(la_kv_attend(c, 0, &spec, s.q + (size_t)t * H * D, 1, a, la, NULL), LA_OK);
        assert_int_equal(la_kv_decode_attend(c, 0, &spec, s.q + (size_t)t * H * D, b, lb, NULL, 2), LA_OK);
        for (int i = 0; i < H * D; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
        for (int h = 0; h < H; h++) worst = fmax(worst, fabs((double)la[h] - lb[h]));
    }
    printf("  decode kernel vs fused kernel, f32 rows, sinks(4,196): %.2e\n", worst);
    assert_true(worst <= TOL_REF);
    la_kv_free(c);
    free_stream(&s);
}

/* other group sizes and head dims: the AVX2 path takes G = H / Hkv in 1..6 and D a multiple
 * of 16 (G = 1, 2, 4, 5, 6 below; rows of 32, 48 and 128), the portable loop the rest (G = 8,
 * D = 40), every type, with RoPE and without; 263 rows: two full chunks and a partial one of
 * 7 rows, which leaves rows over after the AVX2 path's blocks of 4 (G <= 2) or 2 (G >= 3)
 * rows. Against the float64 reference on the stored rows (TOL_REF, as above) and bitwise for
 * 1 and 3 threads. */
static void test_decode_shapes(void **st) {
    (void)st;
    static const int shapes[][3] = {{4, 4, 32}, {12, 6, 64}, {12, 2, 128}, {8, 1, 64},
                                    {16, 4, 48}, {10, 2, 64}, {6, 3, 40}};
    enum { NS = 263 };
    static const char *specs[] = {"softmax+rope(theta=10000)+causal", "softmax+nope+causal"};
    for (int pi = 0; pi < 2; pi++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            la_spec spec;
            assert_int_equal(la_spec_parse(specs[pi], &spec), LA_OK);
            const int h = shapes[si][0], hkv = shapes[si][1], d = shapes[si][2];
            float *k = malloc(sizeof(float) * NS * hkv * d), *v = malloc(sizeof(float) * NS * hkv * d);
            float *q = malloc(sizeof(float) * h * d), *o1 = malloc(sizeof(float) * h * d),
                  *o3 = malloc(sizeof(float) * h * d);
            float l1[16], l3[16];
            double *qd = malloc(sizeof(double) * h * d), *kd = malloc(sizeof(double) * hkv * NS * d),
                   *vd = malloc(sizeof(double) * hkv * NS * d), *od = malloc(sizeof(double) * h * d), ld[16];
            la_rng r;
            la_rng_seed(&r, 100 + si);
            for (int i = 0; i < NS * hkv * d; i++) k[i] = (float)la_rng_normal(&r), v[i] = (float)la_rng_normal(&r);
            for (int i = 0; i < h * d; i++) q[i] = (float)la_rng_normal(&r), qd[i] = q[i];
            for (int ti = 0; ti < NTYPES; ti++) {
                la_kv_params p = la_kv_params_default();
                p.n_layers = 1, p.H = h, p.Hkv = hkv, p.D = d, p.max_tokens = NS;
                const char *type = ti == NTYPES - 1 ? "int8(group=8)" : TYPES[ti];
                assert_int_equal(la_kv_type_parse(type, &p), LA_OK);
                la_kv_cache *c;
                assert_int_equal(la_kv_new(&p, &c), LA_OK);
                /* la_kv_append takes (Hkv, T, D): the rows of one token at a time */
                for (int t = 0; t < NS; t++)
                    assert_int_equal(la_kv_append(c, 0, k + (size_t)t * hkv * d, v + (size_t)t * hkv * d, 1), LA_OK);
                assert_int_equal(la_kv_decode_attend(c, 0, &spec, q, o1, l1, NULL, 1), LA_OK);
                assert_int_equal(la_kv_decode_attend(c, 0, &spec, q, o3, l3, NULL, 3), LA_OK);
                assert_memory_equal(o1, o3, sizeof(float) * h * d);
                assert_memory_equal(l1, l3, sizeof(float) * h);
                float *kk = malloc(sizeof(float) * hkv * NS * d), *vv = malloc(sizeof(float) * hkv * NS * d);
                assert_int_equal(la_kv_read(c, 0, kk, vv, NULL), LA_OK);
                for (int i = 0; i < hkv * NS * d; i++) kd[i] = kk[i], vd[i] = vv[i];
                la_shape sh = {.B = 1, .H = h, .Hkv = hkv, .T = 1, .S = NS, .D = d, .pos0 = NS - 1};
                ref_attn_opts ro = {0};
                assert_int_equal(ref_attn_forward(&spec, &sh, qd, kd, vd, &ro, od, ld, NULL, NULL), 0);
                double worst = 0;
                for (int i = 0; i < h * d; i++) worst = fmax(worst, fabs(od[i] - o1[i]));
                for (int i = 0; i < h; i++) worst = fmax(worst, fabs(ld[i] - l1[i]));
                printf("  H=%2d Hkv=%d D=%3d %-13s %-4s ref %.2e\n", h, hkv, d, type, pi ? "nope" : "rope", worst);
                assert_true(worst <= TOL_REF);
                free(kk), free(vv);
                la_kv_free(c);
            }
            free(k), free(v), free(q), free(o1), free(o3), free(qd), free(kd), free(vd), free(od);
        }
    }
}

/* ---- 4: parsing ---- */

static void test_parse(void **st) {
    (void)st;
    la_kv_params p = la_kv_params_default();
    char buf[128];
    assert_int_equal(la_kv_policy_parse("sinks(4,252)+bf16", &p), LA_OK);
    assert_int_equal(p.storage, LA_KV_BF16);
    assert_int_equal(la_kv_params_type(&p), LA_DTYPE_BF16);
    la_kv_policy_format(&p, buf, sizeof buf);
    assert_string_equal(buf, "sinks(n=4,w=252)+bf16");
    assert_int_equal(la_kv_policy_parse("f16+full", &p), LA_OK);
    assert_int_equal(p.storage, LA_KV_F16);
    la_kv_policy_format(&p, buf, sizeof buf);
    assert_string_equal(buf, "full+f16");
    assert_int_equal(la_kv_policy_parse("int8", &p), LA_OK); /* the old spelling: full + int8 */
    assert_int_equal(p.storage, LA_KV_INT8);
    assert_int_equal(p.policy, LA_KV_FULL);
    assert_int_equal(la_kv_policy_parse("window(8)+int8(group=16)", &p), LA_OK);
    assert_int_equal(p.group, 16);
    assert_int_equal(la_kv_policy_parse("window(8)", &p), LA_OK);
    assert_int_equal(p.storage, LA_KV_F32);
    assert_int_equal(la_kv_policy_parse("full+f16+bf16", &p), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "element type given twice"));
    assert_int_equal(la_kv_policy_parse("full+f8", &p), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "+bf16"));

    p = la_kv_params_default();
    assert_int_equal(la_kv_type_parse("bf16", &p), LA_OK);
    assert_int_equal(p.storage, LA_KV_BF16);
    assert_int_equal(la_kv_type_parse("float16", &p), LA_OK);
    assert_int_equal(p.storage, LA_KV_F16);
    assert_int_equal(la_kv_type_parse("int8(group=32)", &p), LA_OK);
    assert_int_equal(p.storage, LA_KV_INT8);
    assert_int_equal(p.group, 32);
    assert_int_equal(la_kv_type_parse("f32", &p), LA_OK);
    assert_int_equal(p.storage, LA_KV_F32);
    assert_int_equal(p.group, 0);
    assert_int_equal(la_kv_type_parse("int8(group=7)", &p), LA_ESPEC); /* 7 does not divide 64 */
    assert_non_null(strstr(la_errmsg(), "divide"));
    assert_int_equal(la_kv_type_parse("fp8", &p), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "bf16"));
    assert_int_equal(la_kv_type_parse("f16(group=2)", &p), LA_ESPEC);
    assert_int_equal(p.storage, LA_KV_F32); /* untouched on error */

    assert_int_equal(la_kv_params_set_type(&p, LA_DTYPE_F16, 0), LA_OK);
    assert_int_equal(p.storage, LA_KV_F16);
    assert_int_equal(la_kv_params_set_type(&p, LA_DTYPE_I8, 16), LA_OK);
    assert_int_equal(p.group, 16);
    assert_int_equal(la_kv_params_set_type(&p, (la_dtype)9, 0), LA_EINVAL);
    p.storage = (la_kv_storage)7;
    assert_int_equal(la_kv_params_validate(&p), LA_EINVAL);

    /* D = 0: options read before the model; the group is checked once D is known */
    p = la_kv_params_default();
    p.D = 0;
    assert_int_equal(la_kv_type_parse("int8(group=128)", &p), LA_OK);
    assert_int_equal(p.group, 128);
    assert_int_equal(la_kv_policy_parse("window(8)+int8(group=48)", &p), LA_OK);
    assert_int_equal(p.group, 48);
    assert_int_equal(la_kv_params_validate(&p), LA_EINVAL); /* no D yet */
    p.D = 96;
    assert_int_equal(la_kv_params_validate(&p), LA_OK);
    p.D = 128;
    assert_int_equal(la_kv_params_validate(&p), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "group = 48 must divide D = 128"));
    p.D = 0;
    assert_int_equal(la_kv_policy_parse("window(8)+int8(group=2000000000)", &p), LA_ESPEC); /* > 2^30 */
    assert_int_equal(la_kv_policy_parse("window(0)+int8", &p), LA_ESPEC); /* the rest is still checked */

    /* spaces before '(' (la_kv_policy_names_type already took them), and params whose shape
     * is not filled in yet: the parser checks the policy, not the shape (both failed before
     * 2026-12-05) */
    assert_int_equal(la_kv_policy_names_type("window(4) + int8 (group=4)"), 1);
    assert_int_equal(la_kv_policy_parse("window (4) + int8 (group=4)", &p), LA_OK);
    assert_int_equal(p.window, 4);
    assert_int_equal(p.group, 4);
    assert_int_equal(la_kv_type_parse(" int8 (group=8) ", &p), LA_OK);
    assert_int_equal(p.group, 8);
    memset(&p, 0, sizeof p);
    assert_int_equal(la_kv_policy_parse("sinks(4,252)+f16", &p), LA_OK);
    assert_int_equal(p.n_layers, 0); /* untouched */
    assert_int_equal(p.window, 252);
    assert_int_equal(la_kv_policy_parse("full", &p), LA_OK);
    assert_int_equal(p.max_tokens, 0);
    assert_int_equal(la_kv_policy_parse("h2o(1073741824,1073741824,1073741824)", &p), LA_ESPEC); /* budget */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_rows_rounded),
        cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_decode_kernel_f32),
        cmocka_unit_test(test_decode_shapes),
        cmocka_unit_test(test_types_rope),
        cmocka_unit_test(test_types_other_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
