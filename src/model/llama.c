/* llama.c -- Llama-family models ("llama", "qwen2") from GGUF files (SPEC 9): loading
 * (hyperparameters from the metadata, tensors checked against them, q/k rows of "llama"
 * files un-permuted), the block forward over a KV-cache hook, and the cache-less forward
 * in chunks over the model's own KV buffer. See include/longattn/llama.h. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/ring.h"
#include "core/dist.h"
#include "core/internal.h"
#include "model/layers.h"
#include "model/kv_hook.h"
#include "model/lm.h"
#include "model/posreg.h"

/* one weight matrix (rows, cols), row-major, in the file's type */
typedef struct {
    const char *name;
    uint32_t type;
    int64_t rows, cols;
    size_t row_bytes;
    const uint8_t *data; /* in the map, or in m->perm (un-permuted q/k) */
    float *f32;          /* float32 copy (keep_f32) or NULL */
} lw;

typedef struct {
    lw wq, wk, wv, wo, wg, wu, wd;
    float *attn_norm, *ffn_norm; /* (C) */
    float *bq, *bk, *bv;         /* (H*D), (K*D), (K*D) or NULL */
    float *sinks;                /* (H) learned sink logits (gpt-oss blk.N.attn_sinks) or NULL */
} llayer;

struct la_llama {
    la_gguf *g;
    la_llama_config cfg;
    la_llama_params p;
    la_spec spec;
    lw tok_embd, output; /* output == tok_embd when tied */
    float *out_norm;     /* (C) */
    llayer *ly;          /* (L) */
    uint8_t *perm;       /* un-permuted q/k data of every layer */
    size_t perm_bytes;
    float *vecs;         /* norms and biases (float32) */
    size_t vec_floats;
    size_t f32_bytes;    /* keep_f32 copies */
    float *scratch;      /* dequantized weight rows for sgemm (prefill), lazily allocated */
    size_t scratch_floats;
    /* step buffers for up to cap_T tokens */
    int cap_T;
    float *buf;
    float *x, *xn, *q, *k, *v, *qh, *kh, *vh, *att, *y, *gate, *up; /* shapes in ensure_buf */
    float *mv;           /* (max(rows)) matvec result before accumulation */
    double t_mm, t_attn;
    /* la_llama_forward's own KV buffer: (K, kv_cap, D) each */
    float *kvk, *kvv, *kv_stat;
    int64_t kv_cap, kv_len;
    float *kvc;          /* ALiBi / NaPE: contiguous (K, len, D) copies of k and v, 2 K kvc_cap D */
    int64_t kvc_cap;
    la_workspace *ws;
    la_posreg *posreg;   /* SelfExtend / ReRoPE / DCA (src/model/posreg.c) or NULL */
    la_lm lm;            /* the model as a language model (la_llama_lm) */
};

la_llama_params la_llama_params_default(void) {
    la_llama_params p = {0, 4, 0};
    return p;
}

const la_llama_config *la_llama_get_config(const la_llama *m) { return m ? &m->cfg : NULL; }
const la_gguf *la_llama_gguf(const la_llama *m) { return m ? m->g : NULL; }
const la_spec *la_llama_spec(const la_llama *m) { return m ? &m->spec : NULL; }

void la_llama_timing(const la_llama *m, double *mm_s, double *attn_s) {
    if (mm_s) *mm_s = m->t_mm;
    if (attn_s) *attn_s = m->t_attn;
}

size_t la_llama_weight_bytes(const la_llama *m) {
    if (!m) return 0;
    size_t b = 0;
    for (int64_t i = 0; i < la_gguf_n_tensors(m->g); i++) b += la_gguf_tensor_at(m->g, i)->nbytes;
    return b + m->perm_bytes + m->f32_bytes + m->vec_floats * sizeof(float) + m->scratch_floats * sizeof(float);
}

void la_llama_free(la_llama *m) {
    if (!m) return;
    la_posreg_release(m->posreg);
    free(m->posreg);
    if (m->ly)
        for (int l = 0; l < m->cfg.n_layer; l++) {
            llayer *y = &m->ly[l];
            lw *ws[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wg, &y->wu, &y->wd};
            for (int i = 0; i < 7; i++) free(ws[i]->f32);
        }
    free(m->tok_embd.f32);
    if (m->output.f32 != m->tok_embd.f32) free(m->output.f32);
    free(m->ly);
    free(m->perm);
    free(m->vecs);
    free(m->scratch);
    free(m->buf);
    free(m->kvk);
    free(m->kvv);
    free(m->kv_stat);
    free(m->kvc);
    la_workspace_free(m->ws);
    la_gguf_close(m->g);
    free(m);
}

/* ---- loading ---- */

/* metadata key "<arch>.<suffix>" into *u32 (u32 not NULL) or *f64; absent: LA_OK unless required */
static la_status arch_key(const la_llama *m, const char *suffix, int required, uint32_t *u32, double *f64) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", m->cfg.arch, suffix);
    if (!la_gguf_find_kv(m->g, key)) {
        if (!required) return LA_OK;
        return la_fail(LA_EFORMAT, "%s: metadata key '%s' is missing (a %s model needs it)", "llama", key, m->cfg.arch);
    }
    return u32 ? la_gguf_get_u32(m->g, key, u32) : la_gguf_get_f64(m->g, key, f64);
}
static la_status key_u32(const la_llama *m, const char *suffix, uint32_t *out, int required) {
    return arch_key(m, suffix, required, out, NULL);
}
static la_status key_f64(const la_llama *m, const char *suffix, double *out, int required) {
    return arch_key(m, suffix, required, NULL, out);
}

static la_status find_tensor(la_llama *m, const char *name, int required, const la_gguf_tensor **out) {
    *out = la_gguf_find_tensor(m->g, name);
    if (!*out && required)
        return la_fail(LA_EFORMAT, "tensor '%s' is missing from the %s model file", name, m->cfg.arch);
    if (*out && !la_ggml_type_supported((*out)->type))
        return la_fail(LA_EUNSUPPORTED, "tensor '%s' has type %s, which longattn does not read (supported: %s)", name,
                       la_ggml_type_name((*out)->type) ? la_ggml_type_name((*out)->type) : "?", LA_GGML_SUPPORTED);
    return LA_OK;
}

/* matrix tensor name with ne = {cols, rows} */
static la_status get_matrix(la_llama *m, const char *name, int64_t rows, int64_t cols, int required, lw *w) {
    const la_gguf_tensor *t;
    memset(w, 0, sizeof *w);
    LA_TRY(find_tensor(m, name, required, &t));
    if (!t) return LA_OK;
    if (t->n_dims != 2 || t->ne[0] != cols || (rows >= 0 && t->ne[1] != rows))
        return la_fail(LA_EFORMAT, "tensor '%s' has shape [%lld, %lld, %lld, %lld] (fastest first); the metadata "
                       "asks for [%lld, %lld]",
                       name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                       (long long)cols, (long long)rows);
    w->name = t->name;
    w->type = t->type;
    w->rows = t->ne[1];
    w->cols = cols;
    w->row_bytes = (size_t)la_ggml_row_bytes(t->type, cols);
    w->data = t->data;
    return LA_OK;
}

/* vector tensor (n) dequantized into *dst (from m->vecs at *used) */
static la_status get_vector(la_llama *m, const char *name, int64_t n, int required, float **dst, size_t *used) {
    const la_gguf_tensor *t;
    *dst = NULL;
    LA_TRY(find_tensor(m, name, required, &t));
    if (!t) return LA_OK;
    if (la_gguf_tensor_nelem(t) != n || t->ne[0] != n)
        return la_fail(LA_EFORMAT, "tensor '%s' has %lld values; the metadata asks for %lld", name,
                       (long long)la_gguf_tensor_nelem(t), (long long)n);
    *dst = m->vecs + *used;
    *used += (size_t)n;
    return la_gguf_dequant(t, *dst);
}

/* ggml's converter stored each head's rows r = 2i + j (i < D/2, j in {0,1}) of the
 * Hugging Face row j*D/2 + i (so that ggml's adjacent-pair RoPE applies): put them back. */
static void unpermute_rows(lw *w, int n_heads, int D, uint8_t *dst) {
    const size_t rb = w->row_bytes;
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < D / 2; i++)
            for (int j = 0; j < 2; j++) {
                size_t src_row = (size_t)h * D + 2 * (size_t)i + j, dst_row = (size_t)h * D + (size_t)j * (D / 2) + i;
                memcpy(dst + dst_row * rb, w->data + src_row * rb, rb);
            }
    w->data = dst;
}

static void unpermute_vec(float *b, int n_heads, int D, float *tmp) {
    for (int h = 0; h < n_heads; h++) {
        float *bh = b + (size_t)h * D;
        for (int i = 0; i < D / 2; i++)
            for (int j = 0; j < 2; j++) tmp[j * (D / 2) + i] = bh[2 * i + j];
        memcpy(bh, tmp, sizeof(float) * (size_t)D);
    }
}

/* dequantize rows [r0, r0+n) of w into dst (n, cols), rows split over threads */
static void dequant_rows(const lw *w, int64_t r0, int64_t n, float *dst) {
    const int64_t blk = 16, nb = (n + blk - 1) / blk;
    const int par = n * w->cols >= (1 << 16) && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (par)
    for (int64_t b = 0; b < nb; b++) {
        int64_t a = b * blk, e = a + blk < n ? a + blk : n;
        /* the type was checked at load: la_ggml_dequant cannot fail here */
        (void)la_ggml_dequant(w->type, w->data + (size_t)(r0 + a) * w->row_bytes, dst + (size_t)a * w->cols,
                              (e - a) * w->cols);
    }
}

static la_status keep_copy(la_llama *m, lw *w) {
    w->f32 = la_malloc(sizeof(float) * (size_t)w->rows * (size_t)w->cols);
    if (!w->f32) return la_fail(LA_ENOMEM, "llama: out of memory for the float32 copy of '%s'", w->name);
    dequant_rows(w, 0, w->rows, w->f32);
    m->f32_bytes += sizeof(float) * (size_t)w->rows * (size_t)w->cols;
    return LA_OK;
}

static la_status load(la_llama *m) {
    la_llama_config *c = &m->cfg;
    const char *arch;
    LA_TRY(la_gguf_get_str(m->g, "general.architecture", &arch));
    if (strcmp(arch, "llama") && strcmp(arch, "qwen2"))
        return la_fail(LA_EUNSUPPORTED, "model architecture '%s' is not supported (supported: %s)", arch, LA_LLAMA_ARCHS);
    snprintf(c->arch, sizeof c->arch, "%s", arch);
    uint32_t L = 0, C = 0, F = 0, H = 0, K = 0, D = 0, rd = 0, ctx = 0;
    LA_TRY(key_u32(m, "block_count", &L, 1));
    LA_TRY(key_u32(m, "embedding_length", &C, 1));
    LA_TRY(key_u32(m, "feed_forward_length", &F, 1));
    LA_TRY(key_u32(m, "attention.head_count", &H, 1));
    LA_TRY(key_u32(m, "context_length", &ctx, 1));
    K = H;
    LA_TRY(key_u32(m, "attention.head_count_kv", &K, 0));
    if (L < 1 || C < 1 || F < 1 || H < 1 || K < 1 || H % K || L > 4096 || C > (1u << 20) || F > (1u << 24) || H > C)
        return la_fail(LA_EFORMAT, "%s: hyperparameters out of range: block_count %u, embedding_length %u, "
                       "feed_forward_length %u, head_count %u, head_count_kv %u (head_count must be a multiple of "
                       "head_count_kv)", arch, L, C, F, H, K);
    D = C / H;
    LA_TRY(key_u32(m, "attention.key_length", &D, 0));
    rd = D;
    LA_TRY(key_u32(m, "rope.dimension_count", &rd, 0));
    if (D < 2 || D % 2 || D > 4096)
        return la_fail(LA_EFORMAT, "%s: head dimension %u must be even and in [2, 4096]", arch, D);
    if (rd != D)
        return la_fail(LA_EUNSUPPORTED, "%s.rope.dimension_count = %u but the head dimension is %u: partial rotary "
                       "embeddings are not supported", arch, rd, D);
    double base = 10000.0, eps = 0;
    LA_TRY(key_f64(m, "rope.freq_base", &base, 0));
    LA_TRY(key_f64(m, "attention.layer_norm_rms_epsilon", &eps, 1));
    if (!(base > 1.0) || !isfinite(base)) return la_fail(LA_EFORMAT, "%s.rope.freq_base = %g must be > 1", arch, base);
    if (!(eps >= 0.0) || !isfinite(eps)) return la_fail(LA_EFORMAT, "%s.attention.layer_norm_rms_epsilon = %g must be >= 0", arch, eps);
    c->n_layer = (int)L, c->n_embd = (int)C, c->n_ff = (int)F, c->n_head = (int)H, c->n_head_kv = (int)K;
    c->head_dim = (int)D, c->rope_dim = (int)rd, c->rope_base = base, c->rms_eps = (float)eps, c->n_ctx_train = ctx;
    c->qk_permuted = !strcmp(arch, "llama");

    LA_TRY(get_matrix(m, "token_embd.weight", -1, C, 1, &m->tok_embd));
    if (m->tok_embd.rows < 1 || m->tok_embd.rows > INT32_MAX)
        return la_fail(LA_EFORMAT, "token_embd.weight: %lld rows is not a vocabulary size", (long long)m->tok_embd.rows);
    c->n_vocab = (int)m->tok_embd.rows;
    LA_TRY(get_matrix(m, "output.weight", c->n_vocab, C, 0, &m->output));
    c->tied_output = m->output.data == NULL;
    if (c->tied_output) m->output = m->tok_embd;

    const size_t HD = (size_t)H * D, KD = (size_t)K * D;
    m->vec_floats = C + (size_t)L * (2 * (size_t)C + HD + 2 * KD + (size_t)H);
    m->vecs = la_malloc(sizeof(float) * m->vec_floats);
    m->ly = la_calloc(L, sizeof *m->ly);
    if (!m->vecs || !m->ly) return la_fail(LA_ENOMEM, "llama: out of memory");
    size_t used = 0;
    LA_TRY(get_vector(m, "output_norm.weight", C, 1, &m->out_norm, &used));
    char name[96];
    uint32_t sink_layer = 0;
    for (uint32_t l = 0; l < L; l++) {
        llayer *y = &m->ly[l];
#define MAT(field, suffix, rows, cols)                                             \
    snprintf(name, sizeof name, "blk.%u." suffix ".weight", l);                    \
    LA_TRY(get_matrix(m, name, (int64_t)(rows), (int64_t)(cols), 1, &y->field))
#define VEC(field, suffix, kind, n, req)                                          \
    snprintf(name, sizeof name, "blk.%u." suffix "." kind, l);                     \
    LA_TRY(get_vector(m, name, (int64_t)(n), req, &y->field, &used))
        MAT(wq, "attn_q", HD, C);
        MAT(wk, "attn_k", KD, C);
        MAT(wv, "attn_v", KD, C);
        MAT(wo, "attn_output", C, HD);
        MAT(wg, "ffn_gate", F, C);
        MAT(wu, "ffn_up", F, C);
        MAT(wd, "ffn_down", C, F);
        VEC(attn_norm, "attn_norm", "weight", C, 1);
        VEC(ffn_norm, "ffn_norm", "weight", C, 1);
        int need_bias = !strcmp(arch, "qwen2");
        VEC(bq, "attn_q", "bias", HD, need_bias);
        VEC(bk, "attn_k", "bias", KD, need_bias);
        VEC(bv, "attn_v", "bias", KD, need_bias);
#undef MAT
#undef VEC
        if (y->bq || y->bk || y->bv) c->qkv_bias = 1;
        /* gpt-oss's per-head sink logits (llama.cpp names the tensor blk.N.attn_sinks with
         * the ".weight" suffix; the bare name is accepted too), one f32 per query head: they
         * join every softmax row's denominator (SPEC 10, softmax+sink) */
        snprintf(name, sizeof name, "blk.%u.attn_sinks.weight", l);
        if (!la_gguf_find_tensor(m->g, name)) snprintf(name, sizeof name, "blk.%u.attn_sinks", l);
        LA_TRY(get_vector(m, name, (int64_t)H, 0, &y->sinks, &used));
        if (y->sinks && !c->attn_sinks) {
            c->attn_sinks = 1;
            sink_layer = l; /* the first layer with sinks, named if another lacks them */
        }
    }
    for (uint32_t l = 0; c->attn_sinks && l < L; l++)
        if (!m->ly[l].sinks)
            return la_fail(LA_EFORMAT, "blk.%u.attn_sinks is present but blk.%u.attn_sinks is missing; a model "
                           "with attention sinks has them in every layer", sink_layer, l);
    if (c->qk_permuted) {
        size_t total = 0;
        for (uint32_t l = 0; l < L; l++) total += m->ly[l].wq.row_bytes * HD + m->ly[l].wk.row_bytes * KD;
        m->perm_bytes = total;
        m->perm = la_malloc(total);
        float *tmp = la_malloc(sizeof(float) * D);
        if (!m->perm || !tmp) {
            free(tmp);
            return la_fail(LA_ENOMEM, "llama: out of memory for the un-permuted q/k rows (%zu bytes)", total);
        }
        uint8_t *p = m->perm;
        for (uint32_t l = 0; l < L; l++) {
            llayer *y = &m->ly[l];
            size_t qb = y->wq.row_bytes * HD, kb = y->wk.row_bytes * KD;
            unpermute_rows(&y->wq, (int)H, (int)D, p);
            unpermute_rows(&y->wk, (int)K, (int)D, p + qb);
            p += qb + kb;
            if (y->bq) unpermute_vec(y->bq, (int)H, (int)D, tmp);
            if (y->bk) unpermute_vec(y->bk, (int)K, (int)D, tmp);
        }
        free(tmp);
    }
    if (m->p.keep_f32) {
        for (uint32_t l = 0; l < L; l++) {
            llayer *y = &m->ly[l];
            lw *ws[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wg, &y->wu, &y->wd};
            for (int i = 0; i < 7; i++) LA_TRY(keep_copy(m, ws[i]));
        }
        LA_TRY(keep_copy(m, &m->tok_embd));
        if (c->tied_output) m->output.f32 = m->tok_embd.f32;
        else LA_TRY(keep_copy(m, &m->output));
    }
    return la_llama_spec_parse(m, NULL, &m->spec);
}

static void init_lm(la_llama *m); /* the la_lm handle, below */

la_status la_llama_open(const char *path, const la_llama_params *p, la_llama **out) {
    if (!out) return la_fail(LA_EINVAL, "la_llama_open: out is NULL");
    *out = NULL;
    if (!path) return la_fail(LA_EINVAL, "la_llama_open: path is NULL");
    la_llama *m = la_calloc(1, sizeof *m);
    if (!m) return la_fail(LA_ENOMEM, "la_llama_open: out of memory");
    m->p = p ? *p : la_llama_params_default();
    if (m->p.gemm_min < 1) m->p.gemm_min = 1;
    la_status st = la_gguf_open(path, &m->g);
    if (st == LA_OK) st = load(m);
    if (st != LA_OK) {
        la_llama_free(m);
        return st;
    }
    init_lm(m);
    *out = m;
    return LA_OK;
}

la_status la_llama_tokenizer(const la_llama *m, la_tokenizer **out) {
    if (out) *out = NULL; /* as every constructor: NULL on any failure */
    if (!m) return la_fail(LA_EINVAL, "la_llama_tokenizer: model is NULL");
    LA_TRY(la_tokenizer_from_gguf(m->g, out));
    int32_t n = la_tokenizer_n_vocab(*out); /* an id without an embedding row would be read past its end */
    if (n <= m->cfg.n_vocab) return LA_OK;
    la_tokenizer_free(*out);
    *out = NULL;
    return la_fail(LA_EFORMAT, "the tokenizer has %d tokens (tokenizer.ggml.tokens) but the model only %d "
                   "(token_embd.weight rows): the file is inconsistent", n, m->cfg.n_vocab);
}

/* ---- attention spec ---- */

/* index of theta among a RoPE-family token's positional parameters, -1 for the others,
 * -2 for a word that is not a position encoding */
static int theta_index(const char *name, size_t n) {
    static const struct { const char *w; int idx; } pos[] = {{"rope", 0}, {"prope", 1}, {"ntk", 1},
        {"dynamic-ntk", 2}, {"yarn", 4}, {"pi", 1}, {"nope", -1}, {"alibi", -1}, {"nape", -1}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (strlen(pos[i].w) == n && !strncmp(pos[i].w, name, n)) return pos[i].idx;
    return -2;
}

/* what a spec needs on a GGUF model (la_llama_spec_parse, la_llama_set_spec): no asentmax
 * (its per-query scales come from a trained projection that a GGUF file does not hold), the
 * file's sinks in a softmax, and train = the trained context (<arch>.context_length) where
 * the spec leaves it 0, as la_model_new fills it from the GPT's train_len (logn's
 * s = 1/log(train), sigmoid's b = -ln(train)); WHO starts the messages */
static la_status fit_spec(const la_llama *m, const char *who, la_spec *s) {
    if (s->norm == LA_NORM_ASENTMAX)
        return la_fail(LA_ESPEC, "%s: asentmax takes per-query scales from a trained projection, which a GGUF "
                       "model does not have; use softmax, entmax or sparsemax", who);
    if (m->cfg.attn_sinks) { /* the file's sink logits are part of its attention */
        if (s->norm != LA_NORM_SOFTMAX)
            return la_fail(LA_ESPEC, "%s: this model carries attention sinks (blk.N.attn_sinks), which join "
                           "a softmax denominator; use a softmax spec (the sinks are added to it)", who);
        s->sink = LA_SINK_LEARNED;
    }
    if (!s->train_len) s->train_len = m->cfg.n_ctx_train > INT32_MAX ? INT32_MAX : (int)m->cfg.n_ctx_train;
    if (s->train_len < 2 && ((s->norm == LA_NORM_SIGMOID && !s->sig_b_set) || (s->xform == LA_XF_LOGN && !s->logn_s)))
        return la_fail(LA_ESPEC, "%s: the model's trained context (context_length %lld) is too short for the "
                       "default train of sigmoid / logn; give b (sigmoid(b=-5.5)) or s (logn(s=0.1))", who,
                       (long long)m->cfg.n_ctx_train);
    return la_spec_validate(s);
}

la_status la_llama_spec_parse(const la_llama *m, const char *text, la_spec *out) {
    if (!m || !out) return la_fail(LA_EINVAL, "la_llama_spec_parse: NULL model or out");
    if (!text || !*text) text = "softmax+rope+causal";
    la_spec s;
    LA_TRY(la_spec_parse(text, &s));
    /* which position token the text names, and whether it gives theta: la_spec_parse has
     * accepted the text, so its tokens are well formed */
    int pos_named = 0, theta_given = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == '+') p++;
        const char *w = p;
        while (*p && *p != '(' && *p != '+' && *p != ' ') p++;
        size_t wn = (size_t)(p - w);
        while (*p == ' ') p++;
        const char *args = NULL, *args_end = NULL;
        if (*p == '(') {
            args = ++p;
            while (*p && *p != ')') p++;
            args_end = p;
            if (*p) p++;
        }
        int idx = theta_index(w, wn);
        if (idx == -2) continue;
        pos_named = 1;
        if (idx < 0 || !args) continue;
        int npos = 0;
        for (const char *a = args; a < args_end;) {
            const char *e = a;
            while (e < args_end && *e != ',') e++;
            int named = 0;
            for (const char *c = a; c < e; c++)
                if (*c == '=') named = 1;
            const char *c = a;
            while (c < e && *c == ' ') c++;
            if (named && e - c >= 5 && !strncmp(c, "theta", 5)) theta_given = 1;
            if (!named && e > c) npos++;
            a = e < args_end ? e + 1 : e;
        }
        if (npos > idx) theta_given = 1;
    }
    if (!pos_named) s.pos = LA_POS_ROPE;
    if (!theta_given) s.theta = m->cfg.rope_base;
    char who[160];
    snprintf(who, sizeof who, "spec '%.140s'", text);
    LA_TRY(fit_spec(m, who, &s));
    *out = s;
    return LA_OK;
}

la_status la_llama_set_spec(la_llama *m, const la_spec *spec) {
    if (!m || !spec) return la_fail(LA_EINVAL, "la_llama_set_spec: NULL model or spec");
    la_spec s = *spec; /* the model keeps its spec unless this one is accepted */
    LA_TRY(fit_spec(m, "la_llama_set_spec", &s));
    m->spec = s;
    return LA_OK;
}

la_status la_llama_set_posreg(la_llama *m, const char *text) {
    if (!m) return la_fail(LA_EINVAL, "la_llama_set_posreg: NULL model");
    if (!text || !*text || !strcmp(text, "none")) {
        la_posreg_release(m->posreg);
        free(m->posreg);
        m->posreg = NULL;
        return LA_OK;
    }
    if (m->cfg.attn_sinks) /* la_posreg_attend has its own softmax, without a sink term (issue 31) */
        return la_fail(LA_EUNSUPPORTED, "'%s': this model carries attention sinks (blk.N.attn_sinks) and the "
                       "position-regime methods do not add them; use a spec string (softmax+...) instead", text);
    la_posreg r;
    memset(&r, 0, sizeof r);
    int k = la_posreg_parse(text, m->cfg.rope_base, &r);
    if (k < 0) return LA_ESPEC; /* la_posreg_parse named the problem */
    if (k == 0) return la_fail(LA_ESPEC, "'%s' is not a position-regime method (selfextend(G,W), rerope(W), "
                               "leaky-rerope(W,k), dca(C) or dca(chunk,local))", text);
    if (!m->posreg && !(m->posreg = la_calloc(1, sizeof *m->posreg))) return la_fail(LA_ENOMEM, "llama: out of memory");
    la_posreg_release(m->posreg);
    *m->posreg = r;
    return LA_OK;
}

int la_llama_is_posreg(const char *text) {
    la_posreg r;
    memset(&r, 0, sizeof r);
    int k = la_posreg_parse(text, 10000, &r);
    la_posreg_release(&r);
    return k != 0;
}

la_posreg *la_llama_posreg(const la_llama *m) { return m ? m->posreg : NULL; }

/* ---- the model as a la_lm (src/model/lm.h) ---- */

static la_status lm_forward(void *model, const int32_t *tokens, int T, const la_model_kv_hook *hook, float *logits,
                            int all_rows) {
    return la_llama_forward_cached(model, tokens, T, hook, logits, all_rows);
}
static const la_spec *lm_spec(const void *model) { return la_llama_spec(model); }
static la_posreg *lm_posreg(const void *model) { return la_llama_posreg(model); }
static la_status lm_prefill_sp(void *model, const int32_t *tokens, int T, const la_model_kv_keep *keep, float *last,
                               double *nll) {
    return la_llama_prefill_sp_keep(model, tokens, T, NULL, last, nll, keep);
}
static const la_lm_ops llama_lm_ops = {"llama", lm_forward, lm_spec, lm_posreg, lm_prefill_sp};

static void init_lm(la_llama *m) {
    const la_llama_config *c = &m->cfg;
    m->lm = (la_lm){.ops = &llama_lm_ops, .model = m, .vocab = c->n_vocab, .n_ctx = c->n_ctx_train,
                    .n_layers = c->n_layer, .H = c->n_head, .Hkv = c->n_head_kv, .D = c->head_dim};
}

la_lm *la_llama_lm(la_llama *m) { return m ? &m->lm : NULL; }

/* ---- forward ---- */

static la_status ensure_buf(la_llama *m, int T) {
    if (T <= m->cap_T) return LA_OK;
    const la_llama_config *c = &m->cfg;
    const size_t C = (size_t)c->n_embd, HD = (size_t)c->n_head * c->head_dim, KD = (size_t)c->n_head_kv * c->head_dim,
                 F = (size_t)c->n_ff, t = (size_t)T;
    size_t mvn = C > F ? C : F;
    if ((size_t)c->n_vocab > mvn) mvn = (size_t)c->n_vocab;
    if (HD > mvn) mvn = HD;
    size_t n = t * (2 * C + 4 * HD + 4 * KD + 2 * F) + mvn;
    float *b = la_malloc(sizeof(float) * n);
    if (!b) return la_fail(LA_ENOMEM, "llama: out of memory for the buffers of %d tokens", T);
    free(m->buf);
    m->buf = b;
    m->x = b, b += t * C;       // (T, C) residual stream
    m->xn = b, b += t * C;      // (T, C) normed
    m->q = b, b += t * HD;      // (T, H*D)
    m->k = b, b += t * KD;      // (T, K*D)
    m->v = b, b += t * KD;      // (T, K*D)
    m->qh = b, b += t * HD;     // (H, T, D)
    m->kh = b, b += t * KD;     // (K, T, D)
    m->vh = b, b += t * KD;     // (K, T, D)
    m->att = b, b += t * HD;    // (H, T, D)
    m->y = b, b += t * HD;      // (T, H*D)
    m->gate = b, b += t * F;    // (T, F)
    m->up = b, b += t * F;      // (T, F)
    m->mv = b;                  // (max rows)
    m->cap_T = T;
    return LA_OK;
}

static la_status ensure_scratch(la_llama *m) {
    if (m->scratch) return LA_OK;
    size_t need = (size_t)1 << 22; /* 16 MB: the output matrix goes through it in row chunks */
    for (int l = 0; l < m->cfg.n_layer; l++) {
        llayer *y = &m->ly[l];
        lw *ws[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wg, &y->wu, &y->wd};
        for (int i = 0; i < 7; i++)
            if ((size_t)(ws[i]->rows * ws[i]->cols) > need) need = (size_t)(ws[i]->rows * ws[i]->cols);
    }
    if ((size_t)m->output.cols > need) need = (size_t)m->output.cols;
    m->scratch = la_malloc(sizeof(float) * need);
    if (!m->scratch) return la_fail(LA_ENOMEM, "llama: out of memory for the prefill scratch (%zu floats)", need);
    m->scratch_floats = need;
    return LA_OK;
}

/* y (T, w->rows) (+)= x (T, w->cols) W^T */
static la_status matmul(la_llama *m, const lw *w, const float *x, int T, float *y, int accumulate) {
    double t0 = omp_get_wtime();
    const int64_t R = w->rows, K = w->cols;
    if (T < m->p.gemm_min) {
        for (int t = 0; t < T; t++) {
            float *dst = accumulate ? m->mv : y + (size_t)t * R;
            LA_TRY((m->p.x_q8 ? la_qmatvec_q8x : la_qmatvec)(w->type, w->data, R, K, x + (size_t)t * K, dst));
            if (accumulate)
                for (int64_t r = 0; r < R; r++) y[(size_t)t * R + r] += dst[r];
        }
    } else if (w->f32) {
        la_mm_sgemm_rows(y, (int)R, x, w->f32, T, (int)K, (int)R, accumulate ? 1.0f : 0.0f);
    } else {
        LA_TRY(ensure_scratch(m));
        int64_t chunk = (int64_t)(m->scratch_floats / (size_t)K);
        for (int64_t r0 = 0; r0 < R; r0 += chunk) {
            int64_t n = R - r0 < chunk ? R - r0 : chunk;
            dequant_rows(w, r0, n, m->scratch);
            la_mm_sgemm_rows(y + r0, (int)R, x, m->scratch, T, (int)K, (int)n, accumulate ? 1.0f : 0.0f);
        }
    }
    m->t_mm += omp_get_wtime() - t0;
    return LA_OK;
}

/* y (N, C) = x / sqrt(mean(x^2) + eps) * g. Not la_rmsnorm_forward (model/layers.h): that
 * one sums x^2 in float (vectorised) with the GPT's fixed eps 1e-6; this one sums in double
 * with the file's eps. The two differ in the last bits, so sharing one would change every
 * GGUF output (issue 32 keeps them byte-identical); the products and permutations are the
 * model layer's (la_mm_sgemm_rows, la_permute_*). */
static void rmsnorm(float *y, const float *x, const float *g, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C;
        float *yr = y + (size_t)n * C;
        double ss = 0;
        for (int i = 0; i < C; i++) ss += (double)xr[i] * xr[i];
        float r = (float)(1.0 / sqrt(ss / C + eps));
        for (int i = 0; i < C; i++) yr[i] = xr[i] * r * g[i];
    }
}

static void add_bias(float *x, const float *b, int T, int n) {
    if (!b) return;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) x[(size_t)t * n + i] += b[i];
}

/* Rows [a, a + n) of layer w before its attention: q, k, v (T, H*D | K*D) of RMSNorm(x) g. */
static la_status block_in(la_llama *m, const llayer *w, int a, int n) {
    const la_llama_config *c = &m->cfg;
    const int C = c->n_embd, H = c->n_head, K = c->n_head_kv, D = c->head_dim;
    rmsnorm(m->xn + (size_t)a * C, m->x + (size_t)a * C, w->attn_norm, n, C, c->rms_eps);  // n = RMSNorm(x) g
    LA_TRY(matmul(m, &w->wq, m->xn + (size_t)a * C, n, m->q + (size_t)a * H * D, 0));       // q (T, H*D)
    LA_TRY(matmul(m, &w->wk, m->xn + (size_t)a * C, n, m->k + (size_t)a * K * D, 0));       // k (T, K*D)
    LA_TRY(matmul(m, &w->wv, m->xn + (size_t)a * C, n, m->v + (size_t)a * K * D, 0));       // v (T, K*D)
    add_bias(m->q + (size_t)a * H * D, w->bq, n, H * D);
    add_bias(m->k + (size_t)a * K * D, w->bk, n, K * D);
    add_bias(m->v + (size_t)a * K * D, w->bv, n, K * D);
    return LA_OK;
}

/* Rows [a, a + n) of layer w after its attention y (T, H*D): x += Wo y, then the MLP. */
static la_status block_out(la_llama *m, const llayer *w, int a, int n) {
    const la_llama_config *c = &m->cfg;
    const int C = c->n_embd, HD = c->n_head * c->head_dim, F = c->n_ff;
    LA_TRY(matmul(m, &w->wo, m->y + (size_t)a * HD, n, m->x + (size_t)a * C, 1));         // x += Wo y
    rmsnorm(m->xn + (size_t)a * C, m->x + (size_t)a * C, w->ffn_norm, n, C, c->rms_eps);
    LA_TRY(matmul(m, &w->wg, m->xn + (size_t)a * C, n, m->gate + (size_t)a * F, 0));       // (T, F)
    LA_TRY(matmul(m, &w->wu, m->xn + (size_t)a * C, n, m->up + (size_t)a * F, 0));         // (T, F)
    for (size_t j = (size_t)a * F; j < (size_t)(a + n) * F; j++) {
        float g = m->gate[j];
        m->gate[j] = g / (1.0f + expf(-g)) * m->up[j];                                    // silu(g) * u
    }
    return matmul(m, &w->wd, m->gate + (size_t)a * F, n, m->x + (size_t)a * C, 1);       // x += Wdown h
}

static la_status block(la_llama *m, int l, int T, const la_model_kv_hook *hook) {
    const la_llama_config *c = &m->cfg;
    const llayer *w = &m->ly[l];
    const int H = c->n_head, K = c->n_head_kv, D = c->head_dim;
    LA_TRY(block_in(m, w, 0, T));
    la_permute_bthd_to_bhtd(m->qh, m->q, 1, T, H, D);                      // (H, T, D)
    la_permute_bthd_to_bhtd(m->kh, m->k, 1, T, K, D);                      // (K, T, D)
    la_permute_bthd_to_bhtd(m->vh, m->v, 1, T, K, D);
    la_attn_opts op = la_attn_opts_default();
    op.ws = m->ws;
    op.sinks = w->sinks; /* (H) or NULL */
    double t0 = omp_get_wtime();
    LA_TRY(hook->append_attend(hook->ctx, l, &m->spec, m->qh, m->kh, m->vh, T, m->att, &op));  // att (H, T, D)
    m->t_attn += omp_get_wtime() - t0;
    la_permute_bhtd_to_bthd(m->y, m->att, 1, T, H, D);                     // (T, H*D)
    return block_out(m, w, 0, T);
}

la_status la_llama_forward_cached(la_llama *m, const int32_t *tokens, int T, const la_model_kv_hook *hook,
                                  float *logits, int all_rows) {
    if (!m || !tokens || !hook || !hook->append_attend)
        return la_fail(LA_EINVAL, "la_llama_forward_cached: NULL model, tokens or hook");
    if (T < 1) return la_fail(LA_EINVAL, "la_llama_forward_cached: T = %d must be >= 1", T);
    const la_llama_config *c = &m->cfg;
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= c->n_vocab)
            return la_fail(LA_EINVAL, "token %d at index %d is outside the vocabulary [0, %d)", tokens[t], t, c->n_vocab);
    LA_TRY(ensure_buf(m, T));
    if (!m->ws) LA_TRY(la_workspace_create(&m->ws));
    const int C = c->n_embd;
    for (int t = 0; t < T; t++)                                            // x = tok_embd[token]
        LA_TRY(la_ggml_dequant(m->tok_embd.type, m->tok_embd.data + (size_t)tokens[t] * m->tok_embd.row_bytes,
                               m->x + (size_t)t * C, C));
    for (int l = 0; l < c->n_layer; l++) LA_TRY(block(m, l, T, hook));
    if (!logits) return LA_OK;
    const int r0 = all_rows ? 0 : T - 1, rows = T - r0;
    rmsnorm(m->xn, m->x + (size_t)r0 * C, m->out_norm, rows, C, c->rms_eps);
    return matmul(m, &m->output, m->xn, rows, logits, 0);                 // logits (rows, V)
}

/* ---- cache-less forward: the model's own KV buffer, attention per kv head ---- */

static la_status own_append_attend(void *ctx, int layer, const la_spec *spec, const float *qh, const float *kh,
                                   const float *vh, int T, float *att, const la_attn_opts *op) {
    la_llama *m = ctx;
    const int H = m->cfg.n_head, K = m->cfg.n_head_kv, D = m->cfg.head_dim, G = H / K;
    const int64_t cap = m->kv_cap, len0 = m->kv_len, len = len0 + T;
    if (len > cap) return la_fail(LA_EINVAL, "llama: KV buffer of %lld tokens is full", (long long)cap);
    float *kl = m->kvk + (size_t)layer * K * cap * D, *vl = m->kvv + (size_t)layer * K * cap * D;
    for (int h = 0; h < K; h++) {
        memcpy(kl + ((size_t)h * cap + len0) * D, kh + (size_t)h * T * D, sizeof(float) * (size_t)T * D);
        memcpy(vl + ((size_t)h * cap + len0) * D, vh + (size_t)h * T * D, sizeof(float) * (size_t)T * D);
    }
    if (!m->posreg && K > 1 && (spec->pos == LA_POS_ALIBI || spec->pos == LA_POS_NAPE)) {
        /* ALiBi / NaPE slopes depend on a head's index among all H query heads (SPEC §3), which
         * a call over one kv head's G query heads would renumber 0..G-1: one call over every
         * head instead, on contiguous (K, len, D) copies of the buffer's keys and values */
        if (m->kvc_cap < cap) {
            free(m->kvc);
            m->kvc_cap = 0;
            m->kvc = la_malloc(sizeof(float) * 2 * (size_t)K * (size_t)cap * D);
            if (!m->kvc) return la_fail(LA_ENOMEM, "llama: out of memory for the ALiBi key/value copies");
            m->kvc_cap = cap;
        }
        float *kc = m->kvc, *vc = m->kvc + (size_t)K * len * D; // (K, len, D) each
        for (int h = 0; h < K; h++) {
            memcpy(kc + (size_t)h * len * D, kl + (size_t)h * cap * D, sizeof(float) * (size_t)len * D);
            memcpy(vc + (size_t)h * len * D, vl + (size_t)h * cap * D, sizeof(float) * (size_t)len * D);
        }
        la_shape sh = {.B = 1, .H = H, .Hkv = K, .T = T, .S = (int)len, .D = D, .pos0 = LA_POS0_AUTO};
        return la_attn_forward(spec, &sh, qh, kc, vc, att, m->kv_stat, op);
    }
    /* one kernel call per kv head: its G query heads over its contiguous (len, D) keys */
    la_attn_opts o = *op;
    for (int h = 0; h < K && m->posreg; h++) /* or the regimes of SelfExtend / ReRoPE / DCA */
        LA_TRY(la_posreg_attend(m->posreg, G, T, (int)len, D, qh + (size_t)h * G * T * D, kl + (size_t)h * cap * D,
                                vl + (size_t)h * cap * D, att + (size_t)h * G * T * D, op->n_threads));
    for (int h = 0; h < K && !m->posreg; h++) {
        la_shape sh = {.B = 1, .H = G, .Hkv = 1, .T = T, .S = (int)len, .D = D, .pos0 = LA_POS0_AUTO};
        if (op->sinks) o.sinks = op->sinks + (size_t)h * G; /* the call's query heads h*G .. h*G+G-1 */
        LA_TRY(la_attn_forward(spec, &sh, qh + (size_t)h * G * T * D, kl + (size_t)h * cap * D, vl + (size_t)h * cap * D,
                               att + (size_t)h * G * T * D, m->kv_stat, &o));
    }
    return LA_OK;
}

la_status la_llama_forward(la_llama *m, const int32_t *tokens, int64_t T, int max_chunk, float *logits, int all_rows) {
    if (!m || !tokens) return la_fail(LA_EINVAL, "la_llama_forward: NULL model or tokens");
    if (T < 1 || T > INT32_MAX) return la_fail(LA_EINVAL, "la_llama_forward: T = %lld must be in [1, 2^31)", (long long)T);
    if (max_chunk <= 0) max_chunk = 512;
    const la_llama_config *c = &m->cfg;
    if (T > m->kv_cap) {
        const size_t n = (size_t)c->n_layer * c->n_head_kv * (size_t)T * c->head_dim;
        free(m->kvk), free(m->kvv), free(m->kv_stat);
        m->kvk = la_malloc(sizeof(float) * n);
        m->kvv = la_malloc(sizeof(float) * n);
        m->kv_stat = la_malloc(sizeof(float) * (size_t)c->n_head * (size_t)(max_chunk < T ? max_chunk : T));
        m->kv_cap = 0;
        if (!m->kvk || !m->kvv || !m->kv_stat)
            return la_fail(LA_ENOMEM, "la_llama_forward: out of memory for a KV buffer of %lld tokens", (long long)T);
        m->kv_cap = T;
    } else {
        free(m->kv_stat);
        m->kv_stat = la_malloc(sizeof(float) * (size_t)c->n_head * (size_t)(max_chunk < T ? max_chunk : T));
        if (!m->kv_stat) return la_fail(LA_ENOMEM, "la_llama_forward: out of memory");
    }
    la_model_kv_hook hook = {own_append_attend, m};
    m->kv_len = 0;
    for (int64_t i = 0; i < T; i += max_chunk) {
        int n = (int)(T - i < max_chunk ? T - i : max_chunk);
        int last = i + n == T;
        float *lg = NULL;
        if (all_rows && logits) lg = logits + (size_t)i * c->n_vocab;
        else if (last) lg = logits;
        LA_TRY(la_llama_forward_cached(m, tokens + i, n, &hook, lg, all_rows));
        m->kv_len += n;
    }
    return LA_OK;
}

/* ---- sequence-parallel prefill (issue 30) ---- */

/* This rank's rows of T (attn/ring.h's zigzag layout) as at most 2 ranges [lo, hi), each
 * widened to multiples of 24 rows (the last to T) and merged where they meet. A product
 * over a widened range computes each row in the same kind of OpenBLAS row group as one
 * call over all T rows (layers.h: la_mm_row_block): the groups start at multiples of 24
 * and only the rows past T's last multiple of 24 take the tail path, in both. The extra
 * rows (other ranks') are computed from whatever those rows hold and never read. */
static int sp_wide_ranges(int T, int P, int r, int lo[2], int hi[2]) {
    la_sp_part sp = {.P = P, .r = r, .B = 1, .T = T}; /* the GPT's widening (layers.h), one sequence */
    la_attn_sp_rows(T, P, r, sp.rows);
    int n = 0;
    for (int i = 0, a, len; (len = la_sp_wide_range(&sp, &i, &a)) > 0; n++) lo[n] = a, hi[n] = a + len;
    return n;
}

static la_status sp_block(la_llama *m, int l, int T, int nr, const int *lo, const int *hi, float *row_stat,
                          const la_model_kv_keep *keep) {
    const la_llama_config *c = &m->cfg;
    const llayer *w = &m->ly[l];
    const int H = c->n_head, K = c->n_head_kv, D = c->head_dim;
    for (int i = 0; i < nr; i++) LA_TRY(block_in(m, w, lo[i], hi[i] - lo[i])); /* this rank's rows, as block() */
    la_permute_bthd_to_bhtd(m->qh, m->q, 1, T, H, D);  // (H, T, D): every row (the other ranks' are scratch)
    la_permute_bthd_to_bhtd(m->kh, m->k, 1, T, K, D);  // (K, T, D)
    la_permute_bthd_to_bhtd(m->vh, m->v, 1, T, K, D);
    la_attn_opts op = la_attn_opts_default();
    op.ws = m->ws;
    op.sinks = w->sinks; /* (H) or NULL: gpt-oss's learned sink logits, as block() */
    la_shape sh = {.B = 1, .H = H, .Hkv = K, .T = T, .S = T, .D = D, .pos0 = 0};
    double t0 = omp_get_wtime();
    /* the ring: att (H, T, D) this rank's rows; k, v the rows its queries see, or (a cache
     * to fill) every rank's */
    LA_TRY(keep ? la_attn_sp_forward_all_kv(&m->spec, &sh, m->qh, m->kh, m->vh, m->att, row_stat, &op, NULL)
                : la_attn_sp_forward(&m->spec, &sh, m->qh, m->kh, m->vh, m->att, row_stat, &op, NULL));
    m->t_attn += omp_get_wtime() - t0;
    if (keep) LA_TRY(keep->append(keep->ctx, l, m->kh, m->vh, T)); /* kh, vh (K, T, D): every rank's rows now */
    la_permute_bhtd_to_bthd(m->y, m->att, 1, T, H, D);  // (T, H*D)
    for (int i = 0; i < nr; i++) LA_TRY(block_out(m, w, lo[i], hi[i] - lo[i]));
    return LA_OK;
}

/* Rows [a, a + n) of the head: logits (n, V) into lg, and their nll when wanted. */
static la_status sp_head(la_llama *m, const int32_t *tokens, int T, int a, int n, float *lg, double *nll) {
    const la_llama_config *c = &m->cfg;
    const int C = c->n_embd, V = c->n_vocab;
    rmsnorm(m->xn + (size_t)a * C, m->x + (size_t)a * C, m->out_norm, n, C, c->rms_eps);
    LA_TRY(matmul(m, &m->output, m->xn + (size_t)a * C, n, lg, 0));  // logits (n, V)
    for (int i = 0; nll && i < n; i++) { /* as longattn perplexity scores a row */
        const int p = a + i;
        const float *z = lg + (size_t)i * V;
        if (p + 1 >= T) {
            nll[p] = 0;
            continue;
        }
        float mx = z[0];
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        double se = 0;
        for (int v = 0; v < V; v++) se += exp((double)z[v] - mx);
        nll[p] = log(se) + mx - z[tokens[p + 1]];
    }
    return LA_OK;
}

/* The rank whose own (not widened) rows hold row t of T over P ranks. */
static int sp_row_owner(int T, int P, int t) {
    for (int r = 0; r < P; r++) {
        int rows[4];
        la_attn_sp_rows(T, P, r, rows);
        if ((t >= rows[0] && t < rows[1]) || (t >= rows[2] && t < rows[3])) return r;
    }
    return 0;
}

la_status la_llama_prefill_sp(la_llama *m, const int32_t *tokens, int T, float *logits, double *nll) {
    return la_llama_prefill_sp_keep(m, tokens, T, logits, NULL, nll, NULL);
}

la_status la_llama_prefill_sp_keep(la_llama *m, const int32_t *tokens, int T, float *logits, float *last,
                                   double *nll, const la_model_kv_keep *keep) {
    la_status st = LA_OK;
    if (!m || !tokens) st = la_fail(LA_EINVAL, "la_llama_prefill_sp: NULL model or tokens");
    else if (T < 2) st = la_fail(LA_EINVAL, "la_llama_prefill_sp: T = %d must be >= 2", T);
    else if (m->posreg)
        st = la_fail(LA_EUNSUPPORTED, "sequence-parallel prefill: the position-regime methods (SelfExtend, ReRoPE, "
                     "DCA) have their own attention, which the ring does not run; use a spec string");
    else if (m->p.gemm_min > 24)
        st = la_fail(LA_EINVAL, "sequence-parallel prefill: gemm_min %d > 24 would send a rank's short pieces to "
                     "the matrix-vector path; use gemm_min <= 24", m->p.gemm_min);
    for (int t = 0; st == LA_OK && t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= m->cfg.n_vocab)
            st = la_fail(LA_EINVAL, "token %d at index %d is outside the vocabulary [0, %d)", tokens[t], t,
                         m->cfg.n_vocab);
    LA_TRY(la_dist_agree(st));
    const la_llama_config *c = &m->cfg;
    const int C = c->n_embd, V = c->n_vocab, P = la_dist_size(), r = la_dist_rank();
    float *row_stat = NULL, *lg = NULL;
    int lo[2], hi[2], nr = sp_wide_ranges(T, P, r, lo, hi);
    enum { HEAD_ROWS = 240 }; /* logits computed in pieces of this many rows (a multiple of 24) */
    if ((st = ensure_buf(m, T)) == LA_OK && !m->ws) st = la_workspace_create(&m->ws);
    if (st == LA_OK && !(row_stat = la_malloc(sizeof(float) * (size_t)c->n_head * T)))
        st = la_fail(LA_ENOMEM, "sequence-parallel prefill: out of memory");
    if (st == LA_OK && !logits && !(lg = la_malloc(sizeof(float) * (size_t)HEAD_ROWS * V)))
        st = la_fail(LA_ENOMEM, "sequence-parallel prefill: out of memory for %d rows of logits", HEAD_ROWS);
    if (st == LA_OK) { /* every row's embedding (the tokens are on every rank; other rows are never read) */
        memset(m->buf, 0, sizeof(float) * (size_t)T * C * 2);
        for (int i = 0; i < nr && st == LA_OK; i++)
            for (int t = lo[i]; t < hi[i] && st == LA_OK; t++)  // x = tok_embd[token]
                st = la_ggml_dequant(m->tok_embd.type, m->tok_embd.data + (size_t)tokens[t] * m->tok_embd.row_bytes,
                                     m->x + (size_t)t * C, C);
    }
    if ((st = la_dist_agree(st)) == LA_OK)
        for (int l = 0; l < c->n_layer && st == LA_OK; l++) st = sp_block(m, l, T, nr, lo, hi, row_stat, keep);
    const int last_owner = sp_row_owner(T, P, T - 1);
    for (int i = 0; i < nr && st == LA_OK; i++)
        for (int a = lo[i]; a < hi[i] && st == LA_OK; a += HEAD_ROWS) {
            int n = hi[i] - a < HEAD_ROWS ? hi[i] - a : HEAD_ROWS;
            float *out = logits ? logits + (size_t)a * V : lg;
            st = sp_head(m, tokens, T, a, n, out, nll);
            if (st == LA_OK && last && r == last_owner && a + n == T) /* row T - 1, computed by its owner */
                memcpy(last, out + (size_t)(n - 1) * V, sizeof(float) * (size_t)V);
        }
    /* every rank's rows (own rows are exact; the widened extra rows are overwritten) */
    if ((st = la_dist_agree(st)) == LA_OK && logits) st = la_attn_sp_gather(logits, 1, T, V, NULL);
    if (st == LA_OK && nll) st = la_attn_sp_gather((float *)nll, 1, T, 2, NULL); /* doubles as float pairs */
    if (st == LA_OK && last && P > 1) st = la_dist_bcast(last, sizeof(float) * (size_t)V, last_owner);
    free(row_stat);
    free(lg);
    return st;
}
