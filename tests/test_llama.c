/* test_llama.c -- Llama-family models (src/model/llama.c, src/infer/llama_session.c) on
 * tiny GGUF files written here: the cached decode path against the cache-less forward
 * (full policy: every row; evicting policies: a fresh forward of the kept tokens at
 * re-indexed positions), metadata errors, the spec's default theta, chat templates.
 * (tests/python/test_llama.py checks the forward itself against a NumPy reference.)
 *
 * Tolerance of logits: 1e-4 absolute on logits of magnitude ~1-10. Both sides compute the
 * same float32 function with different summation orders (mat-vec rows vs sgemm blocks,
 * different attention tilings), each op rounding at relative 6e-8; over dot products of
 * at most 128 terms and 2 blocks the measured difference is ~1e-6. A token at a wrong
 * position or a missed eviction changes logits by 1e-2 or more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <math.h>

#include "core/half.h"
#include "core/internal.h"
#include "infer/kv_internal.h"
#include "model/posreg.h"
#include "longattn.h"
#include "support/gguf_writer.h"

#define TOL 1e-4

/* ---- tiny Llama files (written with tests/support/gguf_writer.h) ---- */

typedef struct {
    const char *arch;
    int L, C, H, K, F, V;
    int omit_ctx;       /* leave <arch>.context_length out */
    int bad_ffn_shape;  /* ffn_up with the wrong row count */
} tiny_cfg;

/* write a random model file; returns its path (static buffer per call site) */
static void write_tiny(const tiny_cfg *c, const char *path, uint64_t seed) {
    la_rng r;
    la_rng_seed(&r, seed);
    const int D = c->C / c->H;
    la_tg_tensor t[64];
    int nt = 0;
    char nm[64];
    la_tg_add_normal(t, &nt, "token_embd.weight", c->C, c->V, &r, 1.0, 0);
    la_tg_add_normal(t, &nt, "output_norm.weight", c->C, 0, &r, 0.1, 1);
    for (int l = 0; l < c->L; l++) {
        double s = 1.0 / sqrt(c->C);
#define T2(suf, cols, rows, std)                              \
    snprintf(nm, sizeof nm, "blk.%d." suf ".weight", l);      \
    la_tg_add_normal(t, &nt, nm, cols, rows, &r, std, 0)
        T2("attn_q", c->C, c->H * D, 2 * s);
        T2("attn_k", c->C, c->K * D, 2 * s);
        T2("attn_v", c->C, c->K * D, s);
        T2("attn_output", c->H * D, c->C, 1.0 / sqrt(c->H * D));
        T2("ffn_gate", c->C, c->F, s);
        T2("ffn_up", c->C, c->F + (c->bad_ffn_shape ? 1 : 0), s);
        T2("ffn_down", c->F, c->C, 1.0 / sqrt(c->F));
#undef T2
        snprintf(nm, sizeof nm, "blk.%d.attn_norm.weight", l);
        la_tg_add_normal(t, &nt, nm, c->C, 0, &r, 0.1, 1);
        snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", l);
        la_tg_add_normal(t, &nt, nm, c->C, 0, &r, 0.1, 1);
    }
    la_tg_buf kv = {0};
    char key[96];
    la_tg_kv_str(&kv, "general.architecture", c->arch);
#define KV_U32(suf, v)                             \
    snprintf(key, sizeof key, "%s." suf, c->arch); \
    la_tg_kv_u32(&kv, key, (uint32_t)(v))
    KV_U32("block_count", c->L);
    if (!c->omit_ctx) { KV_U32("context_length", 256); }
    KV_U32("embedding_length", c->C);
    KV_U32("feed_forward_length", c->F);
    KV_U32("attention.head_count", c->H);
    KV_U32("attention.head_count_kv", c->K);
    KV_U32("rope.dimension_count", D);
#undef KV_U32
    snprintf(key, sizeof key, "%s.rope.freq_base", c->arch);
    la_tg_kv_f32(&kv, key, 5000.0f);
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", c->arch);
    la_tg_kv_f32(&kv, key, 1e-5f);
    assert_int_equal(la_tg_write_file(path, &kv, t, nt), 0);
    la_tg_free(&kv);
    for (int i = 0; i < nt; i++) free(t[i].data);
}

static la_llama *open_tiny(const tiny_cfg *c, uint64_t seed, char *path) {
    snprintf(path, 64, "/tmp/la_test_llama_%d_%llu.gguf", (int)getpid(), (unsigned long long)seed);
    write_tiny(c, path, seed);
    la_llama *m = NULL;
    la_status st = la_llama_open(path, NULL, &m);
    if (st != LA_OK) fprintf(stderr, "%s\n", la_errmsg());
    assert_int_equal(st, LA_OK);
    return m;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]));
    return e;
}

/* ---- full policy: every step size gives the cache-less forward's logits ---- */
static void full_cache_equals_forward(const char *spec_text) {
    tiny_cfg c = {"llama", 2, 64, 4, 2, 128, 50, 0, 0};
    char path[64];
    la_llama *m = open_tiny(&c, 1, path);
    if (spec_text) {
        la_spec sp;
        assert_int_equal(la_llama_spec_parse(m, spec_text, &sp), LA_OK);
        assert_int_equal(la_llama_set_spec(m, &sp), LA_OK);
    }
    const int N = 30, V = c.V;
    int32_t tok[30];
    la_rng r;
    la_rng_seed(&r, 5);
    for (int i = 0; i < N; i++) tok[i] = (int32_t)la_rng_below(&r, (uint64_t)V);
    float *ref = malloc(sizeof(float) * N * V), *got = malloc(sizeof(float) * N * V);
    assert_int_equal(la_llama_forward(m, tok, N, 0, ref, 1), LA_OK);
    /* chunked cache-less forward (chunks of 7) equals the one-chunk forward */
    assert_int_equal(la_llama_forward(m, tok, N, 7, got, 1), LA_OK);
    assert_true(max_abs_diff(ref, got, (size_t)N * V) < TOL);
    const int steps[] = {1, 3, 8};
    for (int s = 0; s < 3; s++) {
        la_kv_params kp = la_kv_params_default();
        kp.max_tokens = N;
        la_llama_session *ss = NULL;
        assert_int_equal(la_llama_session_new(m, &kp, steps[s], &ss), LA_OK);
        for (int i = 0; i < N; i += steps[s]) {
            int T = N - i < steps[s] ? N - i : steps[s];
            assert_int_equal(la_llama_session_step(ss, tok + i, T, got + (size_t)i * V, 1), LA_OK);
        }
        double e = max_abs_diff(ref, got, (size_t)N * V);
        if (e >= TOL) fprintf(stderr, "step %d: max diff %g\n", steps[s], e);
        assert_true(e < TOL);
        assert_int_equal(la_llama_session_pos(ss), N);
        /* the full cache refuses a token past its capacity, naming the fix */
        assert_int_equal(la_llama_session_step(ss, tok, 1, got, 0), LA_EINVAL);
        assert_non_null(strstr(la_errmsg(), "evicting policy"));
        la_llama_session_free(ss);
    }
    free(ref);
    free(got);
    la_llama_free(m);
    unlink(path);
}

static void test_full_cache_equals_forward(void **state) {
    (void)state;
    full_cache_equals_forward(NULL);
    /* ALiBi and NaPE slopes depend on a head's index among all H query heads: the
     * cache-less forward (one kernel call per kv head) and the session must both give
     * every head its own slope (2 kv heads of 2 query heads each here) */
    full_cache_equals_forward("softmax+alibi+causal");
    full_cache_equals_forward("softmax+nape+causal");
}

/* ---- evicting policies: the last token's logits equal a fresh forward of the tokens the
 * cache keeps, at positions 0..len-1 (StreamingLLM re-indexing). One layer, so that the
 * kept keys/values depend only on their own token (layer-0 k, v are functions of the
 * embedding); one kv head, so that H2O keeps one token set. ---- */
static void test_evicting_cache_equals_fresh_prefill(void **state) {
    (void)state;
    tiny_cfg c = {"llama", 1, 64, 4, 1, 128, 50, 0, 0};
    char path[64];
    la_llama *m = open_tiny(&c, 2, path);
    const int N = 40, V = c.V;
    int32_t tok[40], kept[40];
    la_rng r;
    la_rng_seed(&r, 6);
    for (int i = 0; i < N; i++) tok[i] = (int32_t)la_rng_below(&r, (uint64_t)V);
    const char *policies[] = {"window(8)", "sinks(2,6)", "h2o(4,4)", "h2o(3,4,sinks=2)"};
    float *got = malloc(sizeof(float) * V), *ref = malloc(sizeof(float) * V);
    int64_t pos[40];
    for (int p = 0; p < 4; p++) {
        la_kv_params kp = la_kv_params_default();
        assert_int_equal(la_kv_policy_parse(policies[p], &kp), LA_OK);
        kp.max_tokens = N;
        la_llama_session *ss = NULL;
        assert_int_equal(la_llama_session_new(m, &kp, 1, &ss), LA_OK);
        int evicted = 0;
        for (int i = 0; i < N; i++) {
            assert_int_equal(la_llama_session_step(ss, tok + i, 1, got, 0), LA_OK);
            la_kv_cache *kc = la_llama_session_cache(ss);
            int64_t len = la_kv_len(kc, 0);
            assert_int_equal(la_kv_read(kc, 0, NULL, NULL, pos), LA_OK);
            assert_int_equal(pos[len - 1], i); /* the newest token is always kept */
            for (int64_t j = 0; j < len; j++) kept[j] = tok[pos[j]];
            evicted |= len < i + 1;
            assert_int_equal(la_llama_forward(m, kept, len, 0, NULL, 0), LA_OK); /* no logits: just runs */
            float *all = malloc(sizeof(float) * (size_t)len * V);
            assert_int_equal(la_llama_forward(m, kept, len, 0, all, 1), LA_OK);
            memcpy(ref, all + (size_t)(len - 1) * V, sizeof(float) * V);
            free(all);
            double e = max_abs_diff(ref, got, (size_t)V);
            if (e >= TOL) fprintf(stderr, "%s token %d: max diff %g\n", policies[p], i, e);
            assert_true(e < TOL);
        }
        assert_true(evicted);
        la_llama_session_free(ss);
    }
    free(got);
    free(ref);
    la_llama_free(m);
    unlink(path);
}

/* ---- metadata errors ---- */
static void test_metadata_errors(void **state) {
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/la_test_llama_err_%d.gguf", (int)getpid());
    la_llama *m = NULL;
    tiny_cfg c = {"gpt2", 1, 64, 4, 1, 128, 50, 0, 0};
    write_tiny(&c, path, 3);
    assert_int_equal(la_llama_open(path, NULL, &m), LA_EUNSUPPORTED);
    assert_null(m);
    assert_non_null(strstr(la_errmsg(), "'gpt2'"));
    assert_non_null(strstr(la_errmsg(), LA_LLAMA_ARCHS));
    tiny_cfg c2 = {"llama", 1, 64, 4, 1, 128, 50, 1, 0};
    write_tiny(&c2, path, 3);
    assert_int_equal(la_llama_open(path, NULL, &m), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "llama.context_length"));
    tiny_cfg c3 = {"llama", 1, 64, 4, 1, 128, 50, 0, 1};
    write_tiny(&c3, path, 3);
    assert_int_equal(la_llama_open(path, NULL, &m), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "blk.0.ffn_up.weight"));
    tiny_cfg c4 = {"qwen2", 1, 64, 4, 1, 128, 50, 0, 0}; /* qwen2 without the q/k/v biases */
    write_tiny(&c4, path, 3);
    assert_int_equal(la_llama_open(path, NULL, &m), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "blk.0.attn_q.bias"));
    assert_int_equal(la_llama_open("/nonexistent/x.gguf", NULL, &m), LA_EIO);
    unlink(path);
}

/* ---- spec: the file's RoPE base unless the text gives theta ---- */
static void test_spec_theta_default(void **state) {
    (void)state;
    tiny_cfg c = {"llama", 1, 64, 4, 1, 128, 50, 0, 0};
    char path[64];
    la_llama *m = open_tiny(&c, 4, path);
    assert_int_equal(la_llama_get_config(m)->n_head_kv, 1);
    const la_spec *d = la_llama_spec(m);
    assert_int_equal(d->pos, LA_POS_ROPE);
    assert_true(d->theta == 5000.0);
    struct { const char *text; la_pos pos; double theta, s; } cases[] = {
        {NULL, LA_POS_ROPE, 5000, 1},
        {"softmax+rope+causal", LA_POS_ROPE, 5000, 1},
        {"softmax+rope(theta=500)+causal", LA_POS_ROPE, 500, 1},
        {"rope(700)", LA_POS_ROPE, 700, 1},
        {"softmax+window(16)", LA_POS_ROPE, 5000, 1},
        {"softmax+ntk(4)+causal", LA_POS_NTK, 5000, 4},
        {"ntk(4, 777)", LA_POS_NTK, 777, 4},
        {"yarn(s=2, train=256)", LA_POS_YARN, 5000, 2},
        {"yarn(2, 256, 32, 1, 900)", LA_POS_YARN, 900, 2},
        {"pi(4)", LA_POS_PI, 5000, 4},
        {"pi(2, 333)+sinks(4,64)", LA_POS_PI, 333, 2},
        {"dynamic-ntk(2,256,theta=123)+qwen-logn(256)", LA_POS_DYNAMIC_NTK, 123, 2},
        {"softmax+nope+causal", LA_POS_NOPE, 5000, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        la_spec s;
        assert_int_equal(la_llama_spec_parse(m, cases[i].text, &s), LA_OK);
        assert_int_equal(s.pos, cases[i].pos);
        if (cases[i].pos != LA_POS_NOPE) assert_true(s.theta == cases[i].theta);
        assert_true(s.pos_scale == cases[i].s);
    }
    la_spec s;
    assert_int_equal(la_llama_spec_parse(m, "softmax+bogus", &s), LA_ESPEC);
    la_llama_free(m);
    unlink(path);
}

/* sigmoid / logn without b / s take train from the file's context_length (the forward
 * failed on them, naming C fields); asentmax is refused at parse time (its per-query scales
 * cannot come from a GGUF file); a refused la_llama_set_spec leaves the model's spec as it
 * was (it used to assign it before checking) */
static void test_spec_train_and_refusals(void **state) {
    (void)state;
    tiny_cfg c = {"llama", 1, 64, 4, 1, 128, 50, 0, 0};
    char path[64];
    la_llama *m = open_tiny(&c, 6, path);
    int32_t tok[3] = {1, 2, 3};
    float *lg = malloc(sizeof(float) * 3 * (size_t)c.V);
    const char *ok[] = {"sigmoid+rope", "softmax+logn+rope", "sigmoid(b=-3)+logn(s=0.5)"};
    for (int i = 0; i < 3; i++) {
        la_spec s;
        assert_int_equal(la_llama_spec_parse(m, ok[i], &s), LA_OK);
        assert_int_equal(s.train_len, 256);
        assert_int_equal(la_llama_set_spec(m, &s), LA_OK);
        assert_int_equal(la_llama_forward(m, tok, 3, 0, lg, 1), LA_OK);
    }
    la_spec s, a;
    assert_int_equal(la_llama_spec_parse(m, "asentmax+rope", &s), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "asentmax"));
    assert_int_equal(la_llama_spec_parse(m, "softmax+rope", &s), LA_OK);
    assert_int_equal(la_llama_set_spec(m, &s), LA_OK);
    assert_int_equal(la_spec_parse("asentmax+rope", &a), LA_OK);
    assert_int_equal(la_llama_set_spec(m, &a), LA_ESPEC);
    assert_int_equal(la_llama_spec(m)->norm, LA_NORM_SOFTMAX);
    free(lg);
    la_llama_free(m);
    unlink(path);
}

/* ---- sequence-parallel prefill into a session (issue 30), one process ----
 * la_session_prefill_sp runs the T prompt tokens in one pass (the ring of one rank) and
 * leaves every layer's keys and values in the cache. Float32 cache: its last row's logits
 * and nll, and the logits of the steps after it, equal the cache-less forward over the
 * whole stream within TOL (only summation orders differ). Float16 cache: it holds exactly
 * the float16 rounding of the float32 cache's rows (bitwise: the same ring, then
 * la_kv_append's conversion). Bitwise equality over ranks is tests/mpi.sh's (longeval
 * --seq-parallel np 1 vs np 2). */
static void test_session_prefill_sp(void **state) {
    (void)state;
    tiny_cfg c = {"llama", 2, 64, 4, 2, 128, 50, 0, 0};
    char path[64];
    la_llama *m = open_tiny(&c, 7, path);
    enum { T = 150, X = 3, N = T + X };
    const int V = c.V;
    int32_t tok[N];
    la_rng r;
    la_rng_seed(&r, 9);
    for (int i = 0; i < N; i++) tok[i] = (int32_t)la_rng_below(&r, (uint64_t)V);
    float *ref = malloc(sizeof(float) * N * V), *got = malloc(sizeof(float) * (X + 1) * V);
    double *nll = malloc(sizeof(double) * T);
    assert_int_equal(la_llama_forward(m, tok, N, 0, ref, 1), LA_OK);
    la_llama_session *s[2] = {NULL, NULL};
    const char *types[] = {"f32", "f16"};
    for (int ty = 0; ty < 2; ty++) {
        la_kv_params kp = la_kv_params_default();
        assert_int_equal(la_kv_type_parse(types[ty], &kp), LA_OK);
        kp.max_tokens = N;
        assert_int_equal(la_llama_session_new(m, &kp, 64, &s[ty]), LA_OK);
        la_status st = la_session_prefill_sp(s[ty], tok, T, got, nll);
        if (st != LA_OK) fprintf(stderr, "%s\n", la_errmsg());
        assert_int_equal(st, LA_OK);
        assert_int_equal(la_llama_session_pos(s[ty]), T);
    }
    /* the f16 cache: the f16 rounding of the f32 cache's rows, every layer, head, token */
    const la_kv_cache *c32 = la_llama_session_cache(s[0]), *c16 = la_llama_session_cache(s[1]);
    const int D = c.C / c.H;
    uint16_t h[64];
    for (int l = 0; l < c.L; l++) {
        assert_int_equal(c32->layers[l].len, T);
        assert_int_equal(c16->layers[l].len, T);
        for (int kv = 0; kv < 2; kv++)
            for (int hh = 0; hh < c.K; hh++)
                for (int t = 0; t < T; t++) {
                    const float *a = (const float *)(kv ? c32->layers[l].v : c32->layers[l].k) +
                                     ((size_t)hh * c32->cap + t) * D;
                    const uint16_t *b = (const uint16_t *)(kv ? c16->layers[l].v : c16->layers[l].k) +
                                        ((size_t)hh * c16->cap + t) * D;
                    la_cvt_f32_to_f16(h, a, (size_t)D);
                    assert_memory_equal(h, b, sizeof(uint16_t) * (size_t)D);
                }
    }
    /* the f32 session against the cache-less forward: last row, nll, the steps after */
    assert_int_equal(la_session_prefill_sp(s[0], tok, T, NULL, NULL), LA_EINVAL); /* not empty: refused */
    assert_non_null(strstr(la_errmsg(), "la_session_reset"));
    la_session_reset(s[0]);
    assert_int_equal(la_session_prefill_sp(s[0], tok, T, got, nll), LA_OK);
    for (int x = 1; x <= X; x++)
        assert_int_equal(la_llama_session_step(s[0], tok + T + x - 1, 1, got + (size_t)x * V, 0), LA_OK);
    double e = max_abs_diff(got, ref + (size_t)(T - 1) * V, (size_t)(X + 1) * V);
    if (e >= TOL) fprintf(stderr, "f32 cache: max diff %g\n", e);
    assert_true(e < TOL);
    for (int p = 0; p + 1 < T; p++) { /* nll[p] = -log softmax(logits[p])[tok[p+1]] */
        const float *z = ref + (size_t)p * V;
        double mx = z[0], se = 0;
        for (int v = 1; v < V; v++) mx = fmax(mx, z[v]);
        for (int v = 0; v < V; v++) se += exp(z[v] - mx);
        assert_true(fabs(nll[p] - (log(se) + mx - z[tok[p + 1]])) < TOL);
    }
    assert_true(nll[T - 1] == 0);
    la_llama_session_free(s[0]);
    la_llama_session_free(s[1]);
    /* an evicting policy is refused */
    la_kv_params kp = la_kv_params_default();
    assert_int_equal(la_kv_policy_parse("sinks(4,60)", &kp), LA_OK);
    la_llama_session *w = NULL;
    assert_int_equal(la_llama_session_new(m, &kp, 16, &w), LA_OK);
    assert_int_equal(la_session_prefill_sp(w, tok, T, NULL, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "full KV policy"));
    la_llama_session_free(w);
    /* the GPT has no sequence-parallel prefill */
    la_model_config gc = la_model_config_default();
    la_model *g = NULL;
    assert_int_equal(la_model_new(&gc, 1, &g), LA_OK);
    la_kv_params gp = la_kv_params_default();
    gp.max_tokens = 64;
    la_decoder *d = NULL;
    assert_int_equal(la_decoder_new(g, &gp, 8, &d), LA_OK);
    assert_int_equal(la_session_prefill_sp(d, tok, 8, NULL, NULL), LA_EUNSUPPORTED);
    assert_non_null(strstr(la_errmsg(), "gpt"));
    la_decoder_free(d);
    la_model_free(g);
    free(ref);
    free(got);
    free(nll);
    la_llama_free(m);
    unlink(path);
}

/* ---- chat templates ---- */
static void test_chat_templates(void **state) {
    (void)state;
    char *out = NULL;
    const char *stop = NULL;
    const char *chatml = "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are SmolLM<|im_end|>\n' }}"
                         "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}";
    assert_int_equal(la_chat_apply(chatml, NULL, "Hi?", &out, &stop), LA_OK);
    assert_string_equal(out, "<|im_start|>system\nYou are SmolLM<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n"
                             "<|im_start|>assistant\n");
    assert_string_equal(stop, "<|im_end|>");
    free(out);
    assert_int_equal(la_chat_apply(chatml, "Be brief.", "Hi?", &out, &stop), LA_OK);
    assert_string_equal(out, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n"
                             "<|im_start|>assistant\n");
    free(out);
    assert_int_equal(la_chat_apply("{{ '<|start_header_id|>' + role }}", NULL, "Hi?", &out, &stop), LA_OK);
    assert_string_equal(out, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi?<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n");
    assert_string_equal(stop, "<|eot_id|>");
    free(out);
    assert_int_equal(la_chat_apply("{{ bos_token + '[INST] ' + content + ' [/INST]' }}", "S", "Hi?", &out, &stop), LA_OK);
    assert_string_equal(out, "[INST] <<SYS>>\nS\n<</SYS>>\n\nHi? [/INST]");
    free(out);
    assert_int_equal(la_chat_apply("{{ '### Human: ' + content }}", NULL, "Hi?", &out, &stop), LA_EUNSUPPORTED);
    assert_null(out);
    assert_non_null(strstr(la_errmsg(), "### Human"));
    assert_non_null(strstr(la_errmsg(), "ChatML"));
    assert_int_equal(la_chat_apply(NULL, NULL, "Hi?", &out, &stop), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "no chat template"));
}

/* la_posreg_parse (src/model/posreg.c) refuses arguments too large to convert to positions, by name,
 * and still parses the authors' settings */
static void test_posreg_parse_bounds(void **state) {
    (void)state;
    const char *bad[] = {"selfextend(1e300,2)", "selfextend(8,inf)", "rerope(1e10)", "leaky-rerope(512,1e10)",
                         "dca(1e300)", "dca(1e300,16)"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        la_posreg r;
        memset(&r, 0, sizeof r);
        assert_int_equal(la_posreg_parse(bad[i], 10000, &r), -1);
        assert_non_null(strstr(la_errmsg(), "above 2147483647"));
        assert_non_null(strstr(la_errmsg(), bad[i]));
    }
    const char *good[] = {"selfextend(8,1024)", "rerope(512)", "leaky-rerope(512,16)", "dca(4096)", "dca(2147483647,1)"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        la_posreg r;
        memset(&r, 0, sizeof r);
        assert_int_equal(la_posreg_parse(good[i], 10000, &r), 1);
        la_posreg_release(&r);
    }
    la_posreg r;
    memset(&r, 0, sizeof r);
    assert_int_equal(la_posreg_parse("rerope(nan)", 10000, &r), -1); /* NaN: the method's own message, as before */
    assert_non_null(strstr(la_errmsg(), "rerope(W) needs a whole window"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_cache_equals_forward),
        cmocka_unit_test(test_evicting_cache_equals_fresh_prefill),
        cmocka_unit_test(test_metadata_errors),
        cmocka_unit_test(test_spec_theta_default),
        cmocka_unit_test(test_spec_train_and_refusals),
        cmocka_unit_test(test_chat_templates),
        cmocka_unit_test(test_posreg_parse_bounds),
        cmocka_unit_test(test_session_prefill_sp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
