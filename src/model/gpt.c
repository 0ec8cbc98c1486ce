/* gpt.c -- the decoder-only transformer of SPEC 7: parameters (one allocation), gradients
 * (one allocation), activation buffers that grow with B*T, and the forward / backward /
 * evaluation passes that chain the layers of layers.h with the library's attention. */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/ring.h"
#include "core/dist.h"
#include "core/internal.h"
#include "core/prof.h"
#include "model/layers.h"
#include "model/lm.h"

#define NONE ((size_t)-1)
#define LA_MAX_TENSORS_PER_LAYER 16

/* Offsets (in floats) of one block's tensors inside the parameter / gradient arrays. */
typedef struct {
    size_t ln1_g, wq, wk, wv, qn_g, kn_g, wo, logn_s, sinks, as_wb, as_bb, as_wg, as_bg, ln2_g, w_fc,
        w_proj;
} layer_off;

/* One block's activations for N = B*T rows. In evaluation mode one set is shared by every
 * block and the fields marked (train) are NULL. */
typedef struct {
    float *ln1;       // (N, C)   RMSNorm(x_in); eval: also used for ln2
    float *ln1_rstd;  // (N)
    attn_acts at;     // the attention sublayer's activations (eval: y aliases q_raw)
    float *mid;       // (N, C) (train) residual after attention
    float *ln2;       // (N, C) (train) RMSNorm(mid)
    float *ln2_rstd;  // (N)
    float *h_pre;     // (N, F)
    float *h_act;     // (N, F) (train; eval aliases h_pre)
    float *res_out;   // (N, C) (train) block output
} acts;

struct la_model {
    la_model_config cfg;
    la_spec spec;
    int L, H, Hkv, C, D, F, V;
    int asent, logn, sink; /* sink: learned sink logits (softmax+sink) */

    size_t n_params;
    float *params, *grads;
    la_tensor_info *tensors;
    char (*names)[48];
    int n_tensors;
    size_t off_wte, off_lnf_g, off_lm_head;
    layer_off *lo;  // (L)

    /* training activations */
    size_t cap_train;    // rows allocated
    acts *ta;            // (L)
    float *res0, *lnf, *lnf_rstd, *logits, *lse, *loss;  // (N,C) (N,C) (N) (N,V) (N) (N)
    int32_t *tokens, *targets;                             // (N) copies for backward
    /* backward scratch */
    float *dres, *dln, *dh;  // (N, C) (N, C) (N, F)
    attn_scratch sc;
    float *train_block;
    int fB, fT;          // shape of the last training forward
    int can_backward;
    int logits_valid;

    /* evaluation activations */
    size_t cap_eval;
    acts ea;
    float *ex, *e_lse, *e_loss, *e_logits;  // (N,C) (chunk) (chunk) (chunk, V)
    float *eval_block;

    la_workspace *ws;
    int n_threads;  // attention threads, 0: OpenMP default
    la_model_timing timing;
    la_lm lm;       // the model as a language model (la_model_lm)
    /* precision (la_model_set_precision): mm.buf == NULL float32; bf16 keeps the rounded
     * operand copies of the largest product of max(cap_train, cap_eval) rows in mm.buf */
    la_dtype precision;
    la_mm_ctx mm;
    /* sequence parallelism (la_model_set_seq_parallel): asked for; this rank's rows during a
     * training forward / backward over several ranks (else NULL) */
    int seq_parallel;
    la_sp_part sp;
    const la_sp_part *cur_sp;
};

/* The rows this process computes of N = B*T, as ranges [n0, n0 + n): all of them, or (sp)
 * its two pieces of every sequence widened to whole 24-row groups (la_sp_wide_range: the
 * products' rows take one process's sgemm path; the extra rows are never read before the
 * gathers overwrite them). Row-wise work and products alike run on these ranges. */
#define FOR_ROWS(sp, N, i, n0, n)                                                               \
    for (int i = 0, n0 = 0, n = 0;                                                             \
         (sp) ? (n = la_sp_wide_range((sp), &i, &n0)) > 0 : (i++ == 0 && (n = (int)(N)) > 0);)

enum { EVAL_CHUNK = 256 };

la_model_config la_model_config_default(void) {
    la_model_config c;
    memset(&c, 0, sizeof c);
    c.n_layer = 4;
    c.n_head = 4;
    c.n_kv_head = 0;
    c.d_model = 128;
    c.d_ff = 0;
    c.vocab = 256;
    c.train_len = 128;
    c.init_std = 0.02f;
    c.qk_gain = 1.0f;
    snprintf(c.spec, sizeof c.spec, "softmax+rope+causal");
    return c;
}

static int is_rope_family(la_pos p) {
    return p == LA_POS_ROPE || p == LA_POS_PROPE || p == LA_POS_NTK || p == LA_POS_DYNAMIC_NTK ||
           p == LA_POS_YARN || p == LA_POS_PI;
}

/* ---- parameter table ---- */

static size_t add_tensor(la_model *m, const char *name, int64_t rows, int64_t cols,
                         la_param_class pc) {
    int i = m->n_tensors++;
    la_tensor_info *t = &m->tensors[i];
    snprintf(m->names[i], sizeof m->names[i], "%s", name);
    t->name = m->names[i];
    t->ndim = cols > 0 ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols > 0 ? cols : 0;
    t->numel = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
    t->offset = m->n_params;
    t->pclass = pc;
    m->n_params += t->numel;
    return t->offset;
}

static void build_table(la_model *m) {
    int C = m->C, H = m->H, K = m->Hkv, D = m->D, F = m->F, V = m->V;
    char nm[48];
    m->off_wte = add_tensor(m, "wte", V, C, LA_PCLASS_EMBED);
    for (int l = 0; l < m->L; l++) {
        layer_off *o = &m->lo[l];
#define T_(field, suffix, r, c, pc)                        \
    do {                                                   \
        snprintf(nm, sizeof nm, "h.%d.%s", l, suffix);     \
        o->field = add_tensor(m, nm, r, c, pc);            \
    } while (0)
        T_(ln1_g, "ln1.g", C, 0, LA_PCLASS_GAIN);
        T_(wq, "attn.wq", (int64_t)H * D, C, LA_PCLASS_MATRIX);
        T_(wk, "attn.wk", (int64_t)K * D, C, LA_PCLASS_MATRIX);
        T_(wv, "attn.wv", (int64_t)K * D, C, LA_PCLASS_MATRIX);
        T_(qn_g, "attn.q_norm.g", D, 0, LA_PCLASS_GAIN);
        T_(kn_g, "attn.k_norm.g", D, 0, LA_PCLASS_GAIN);
        T_(wo, "attn.wo", C, (int64_t)H * D, LA_PCLASS_MATRIX);
        o->logn_s = o->sinks = o->as_wb = o->as_bb = o->as_wg = o->as_bg = NONE;
        if (m->logn) T_(logn_s, "attn.logn_s", H, 0, LA_PCLASS_SCALAR);
        if (m->sink) T_(sinks, "attn.sinks", H, 0, LA_PCLASS_SCALAR);
        if (m->asent) {
            T_(as_wb, "attn.as_wb", H, C, LA_PCLASS_SCALAR);
            T_(as_bb, "attn.as_bb", H, 0, LA_PCLASS_SCALAR);
            T_(as_wg, "attn.as_wg", H, C, LA_PCLASS_SCALAR);
            T_(as_bg, "attn.as_bg", H, 0, LA_PCLASS_SCALAR);
        }
        T_(ln2_g, "ln2.g", C, 0, LA_PCLASS_GAIN);
        T_(w_fc, "mlp.w_fc", F, C, LA_PCLASS_MATRIX);
        T_(w_proj, "mlp.w_proj", C, F, LA_PCLASS_MATRIX);
#undef T_
    }
    m->off_lnf_g = add_tensor(m, "lnf.g", C, 0, LA_PCLASS_GAIN);
    m->off_lm_head = add_tensor(m, "lm_head", V, C, LA_PCLASS_EMBED);
}

static void init_params(la_model *m, uint64_t seed) {
    la_rng rng;
    la_rng_seed(&rng, seed);
    double proj_scale = 1.0 / sqrt(2.0 * m->L);
    double logn0 = m->spec.logn_s > 0 ? m->spec.logn_s : 1.0 / log((double)m->cfg.train_len);
    for (int i = 0; i < m->n_tensors; i++) {
        const la_tensor_info *t = &m->tensors[i];
        float *p = m->params + t->offset;
        const char *nm = t->name;
        size_t n = t->numel;
        if (strstr(nm, "q_norm.g") || strstr(nm, "k_norm.g")) {
            for (size_t j = 0; j < n; j++) p[j] = m->cfg.qk_gain;
        } else if (t->pclass == LA_PCLASS_GAIN) {
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
        } else if (strstr(nm, "logn_s")) {
            for (size_t j = 0; j < n; j++) p[j] = (float)logn0;
        } else if (strstr(nm, "attn.sinks") || strstr(nm, "as_w") || strstr(nm, "as_bg")) {
            /* sink logits start at 0: softmax plus one at init (gpt-oss initialises its sinks
             * from a normal draw; 0 is the parameter-free form the learned one departs from);
             * ASEntmax coefficient weights start at 0: beta, gamma constant per head at init */
            for (size_t j = 0; j < n; j++) p[j] = 0.0f;  // as_bg: gamma = 0 at init
        } else if (strstr(nm, "as_bb")) {
            /* beta = softplus(-2) = 0.127 at init: the query scale starts close to delta */
            for (size_t j = 0; j < n; j++) p[j] = -2.0f;
        } else {
            double sd = m->cfg.init_std;
            if (strstr(nm, "attn.wo") || strstr(nm, "mlp.w_proj")) sd *= proj_scale;
            for (size_t j = 0; j < n; j++) p[j] = (float)(sd * la_rng_normal(&rng));
        }
    }
}

/* ---- the GPT as a la_lm (src/model/lm.h) ---- */

static la_status lm_forward(void *model, const int32_t *tokens, int T, const la_model_kv_hook *hook, float *logits,
                            int all_rows) {
    return la_model_forward_cached(model, tokens, T, hook, logits, all_rows);
}
static const la_spec *lm_spec(const void *model) { return la_model_spec(model); }
static const la_lm_ops gpt_lm_ops = {"gpt", lm_forward, lm_spec, NULL, NULL};

la_lm *la_model_lm(la_model *m) { return m ? &m->lm : NULL; }

/* cfg with its defaults filled in (n_kv_head, d_ff) into *c, checked; its spec parsed into
 * *spec with train_len from the config (la_model_new, la_model_config_validate) */
static la_status check_config(const la_model_config *cfg, la_model_config *out, la_spec *out_spec) {
    la_model_config c = *cfg;
    la_spec spec;
    if (c.n_kv_head == 0) c.n_kv_head = c.n_head;
    if (c.d_model > INT_MAX / 4) /* 4 * d_model (the default d_ff, the MLP's rows) must fit an int */
        return la_fail(LA_EINVAL, "model config: d_model=%d is too large (at most %d)", c.d_model, INT_MAX / 4);
    if (c.d_ff == 0) c.d_ff = 4 * c.d_model;
    if (c.n_layer > (INT_MAX - 3) / LA_MAX_TENSORS_PER_LAYER) /* the tensor table's size must fit an int */
        return la_fail(LA_EINVAL, "model config: n_layer=%d is too large (at most %d)", c.n_layer,
                       (INT_MAX - 3) / LA_MAX_TENSORS_PER_LAYER);
    if (c.n_layer < 1 || c.n_head < 1 || c.n_kv_head < 1 || c.d_model < 1 || c.d_ff < 1 ||
        c.vocab < 2 || c.train_len < 2)
        return la_fail(LA_EINVAL,
                       "model config: n_layer=%d n_head=%d n_kv_head=%d d_model=%d d_ff=%d "
                       "vocab=%d train_len=%d; all must be >= 1 (vocab, train_len >= 2)",
                       c.n_layer, c.n_head, c.n_kv_head, c.d_model, c.d_ff, c.vocab, c.train_len);
    if (c.d_model % c.n_head)
        return la_fail(LA_EINVAL, "model config: n_head=%d does not divide d_model=%d", c.n_head,
                       c.d_model);
    if (c.n_head % c.n_kv_head)
        return la_fail(LA_EINVAL, "model config: n_kv_head=%d does not divide n_head=%d",
                       c.n_kv_head, c.n_head);
    if (!(c.init_std > 0)) return la_fail(LA_EINVAL, "model config: init_std must be > 0");
    if (!(c.qk_gain > 0 && c.qk_gain <= 100))
        return la_fail(LA_EINVAL, "model config: qk_gain must be in (0, 100] (the initial QK-norm gain; "
                       "la_model_config_default sets 1)");
    if (memchr(c.spec, 0, sizeof c.spec) == NULL)
        return la_fail(LA_EINVAL, "model config: spec text is not NUL-terminated");
    LA_TRY(la_spec_parse(c.spec, &spec));
    if (spec.train_len == 0) spec.train_len = c.train_len;
    LA_TRY(la_spec_validate(&spec));
    int D = c.d_model / c.n_head;
    if (is_rope_family(spec.pos) && D % 2)
        return la_fail(LA_EINVAL,
                       "model config: head size d_model/n_head = %d is odd, but the spec's "
                       "RoPE-family encoding rotates pairs; choose an even head size", D);
    if (la_spec_format(&spec, c.spec, sizeof c.spec) >= (int)sizeof c.spec)
        return la_fail(LA_EINVAL, "model config: canonical spec text longer than %d bytes",
                       LA_SPEC_TEXT_MAX - 1);
    *out = c;
    *out_spec = spec;
    return LA_OK;
}

la_status la_model_config_validate(const la_model_config *cfg) {
    if (!cfg) return la_fail(LA_EINVAL, "la_model_config_validate: cfg is NULL");
    la_model_config c;
    la_spec spec;
    return check_config(cfg, &c, &spec);
}

la_status la_model_new(const la_model_config *cfg, uint64_t seed, la_model **out) {
    if (!out) return la_fail(LA_EINVAL, "la_model_new: out is NULL");
    *out = NULL;
    if (!cfg) return la_fail(LA_EINVAL, "la_model_new: cfg is NULL");
    la_model_config c;
    la_spec spec;
    LA_TRY(check_config(cfg, &c, &spec));
    const int D = c.d_model / c.n_head;
    la_model *m = la_calloc(1, sizeof *m);
    if (!m) return la_fail(LA_ENOMEM, "la_model_new: out of memory");
    m->cfg = c;
    m->spec = spec;
    m->L = c.n_layer;
    m->H = c.n_head;
    m->Hkv = c.n_kv_head;
    m->C = c.d_model;
    m->D = D;
    m->F = c.d_ff;
    m->V = c.vocab;
    m->logn = spec.xform == LA_XF_LOGN;
    m->asent = spec.norm == LA_NORM_ASENTMAX;
    m->precision = LA_DTYPE_F32;
    m->mm.timer = &m->timing.matmul_s;
    m->sink = spec.sink == LA_SINK_LEARNED;
    m->lm = (la_lm){.ops = &gpt_lm_ops, .model = m, .vocab = m->V, .n_ctx = c.train_len, .n_layers = m->L,
                    .H = m->H, .Hkv = m->Hkv, .D = m->D};
    int max_t = 3 + m->L * LA_MAX_TENSORS_PER_LAYER;
    m->tensors = la_calloc(max_t, sizeof *m->tensors);
    m->names = la_calloc(max_t, sizeof *m->names);
    m->lo = la_calloc(m->L, sizeof *m->lo);
    m->ta = la_calloc(m->L, sizeof *m->ta);
    (void)la_workspace_create(&m->ws); /* NULL when it failed: checked below */
    if (!m->tensors || !m->names || !m->lo || !m->ta || !m->ws) {
        la_model_free(m);
        return la_fail(LA_ENOMEM, "la_model_new: out of memory");
    }
    build_table(m);
    m->params = la_malloc(m->n_params * sizeof(float));
    m->grads = la_calloc(m->n_params, sizeof(float));
    m->sc.dlogn = la_calloc(m->H, sizeof(float));
    m->sc.dsinks = la_calloc(m->H, sizeof(float));
    if (!m->params || !m->grads || !m->sc.dlogn || !m->sc.dsinks) {
        size_t np = m->n_params;
        la_model_free(m);
        return la_fail(LA_ENOMEM, "la_model_new: cannot allocate %zu parameters", np);
    }
    init_params(m, seed);
    *out = m;
    return LA_OK;
}

void la_model_release_buffers(la_model *m) {
    if (!m) return;
    free(m->train_block);
    m->train_block = NULL;
    free(m->eval_block);
    m->eval_block = NULL;
    m->cap_train = m->cap_eval = 0;
    m->can_backward = 0;
    m->logits_valid = 0;
    free(m->mm.buf);
    m->mm.buf = NULL;
    m->mm.cap = 0;
}

void la_model_free(la_model *m) {
    if (!m) return;
    la_model_release_buffers(m);
    free(m->params);
    free(m->grads);
    free(m->sc.dlogn);
    free(m->sc.dsinks);
    free(m->tensors);
    free(m->names);
    free(m->lo);
    free(m->ta);
    la_workspace_free(m->ws);
    free(m);
}

const la_model_config *la_model_get_config(const la_model *m) { return &m->cfg; }
const la_spec *la_model_spec(const la_model *m) { return &m->spec; }
size_t la_model_num_params(const la_model *m) { return m->n_params; }
float *la_model_params(la_model *m) { return m->params; }
float *la_model_grads(la_model *m) { return m->grads; }
int la_model_num_tensors(const la_model *m) { return m->n_tensors; }

la_status la_model_get_tensor(const la_model *m, int i, la_tensor_info *info) {
    if (!m || !info) return la_fail(LA_EINVAL, "la_model_get_tensor: NULL argument");
    if (i < 0 || i >= m->n_tensors)
        return la_fail(LA_EINVAL, "la_model_get_tensor: index %d outside [0, %d)", i, m->n_tensors);
    *info = m->tensors[i];
    return LA_OK;
}

void la_model_set_threads(la_model *m, int n_threads) { m->n_threads = n_threads > 0 ? n_threads : 0; }

/* bf16: grow mm.buf to the rounded operands of the largest product over N rows, N the
 * largest activation buffer (training or evaluation). Called after ensure_train /
 * ensure_eval; allocates only when those grew. */
static la_status mm_reserve(la_model *m) {
    if (m->precision != LA_DTYPE_BF16) return LA_OK;
    size_t N = m->cap_train > m->cap_eval ? m->cap_train : m->cap_eval;
    size_t C = (size_t)m->C, HD = (size_t)m->H * m->D, KD = (size_t)m->Hkv * m->D;
    size_t prod[6][2] = {{C, HD}, {C, KD}, {HD, C}, {C, (size_t)m->F}, {(size_t)m->F, C}, {C, (size_t)m->V}};
    size_t need = 0;
    for (int i = 0; i < 6; i++) {
        size_t f = la_mm_bf16_floats(N, prod[i][0], prod[i][1]);
        need = f > need ? f : need;
    }
    if (need <= m->mm.cap && m->mm.buf) return LA_OK;
    float *p = la_aligned_alloc(64, need * sizeof(float));
    if (!p)
        return la_fail(LA_ENOMEM, "model: cannot allocate %.1f MB for the bf16 operand copies of %zu tokens; "
                       "use a smaller batch or precision f32", need * 4.0 / 1e6, N);
    free(m->mm.buf);
    m->mm.buf = p;
    m->mm.cap = need;
    return LA_OK;
}

la_status la_model_set_precision(la_model *m, la_dtype precision) {
    if (!m) return la_fail(LA_EINVAL, "la_model_set_precision: model is NULL");
    if (precision != LA_DTYPE_F32 && precision != LA_DTYPE_BF16)
        return la_fail(LA_EINVAL, "model precision %s (%d) is not supported; use f32 or bf16",
                       la_dtype_name(precision), (int)precision);
    m->precision = precision;
    if (precision == LA_DTYPE_F32) {
        free(m->mm.buf);
        m->mm.buf = NULL;
        m->mm.cap = 0;
        return LA_OK;
    }
    return mm_reserve(m);
}

la_dtype la_model_get_precision(const la_model *m) { return m->precision; }

void la_model_zero_grad(la_model *m) {
    LA_PROF_LAP(LA_PROF_OTHER);
    memset(m->grads, 0, m->n_params * sizeof(float));
    LA_PROF_LAP(LA_PROF_ZERO);
}

void la_model_get_timing(const la_model *m, la_model_timing *t) { *t = m->timing; }
void la_model_reset_timing(la_model *m) { memset(&m->timing, 0, sizeof m->timing); }

const float *la_model_logits(const la_model *m) { return m->logits_valid ? m->logits : NULL; }

/* ---- activation buffers ---- */

/* Carve consecutive float arrays out of one block: pass 1 (base NULL) counts. */
typedef struct {
    float *base;
    size_t used;
} carver;
static float *carve(carver *cv, size_t n) {
    n = (n + 15) & ~(size_t)15;  // 64-byte aligned pieces
    float *p = cv->base ? cv->base + cv->used : NULL;
    cv->used += n;
    return p;
}

static void carve_acts(carver *cv, acts *a, const la_model *m, size_t N, int train) {
    size_t C = m->C, HD = (size_t)m->H * m->D, KD = (size_t)m->Hkv * m->D, F = m->F, H = m->H;
    attn_acts *t = &a->at;
    a->ln1 = carve(cv, N * C);
    a->ln1_rstd = carve(cv, N);
    t->q_raw = carve(cv, N * HD);
    t->k_raw = carve(cv, N * KD);
    t->v_raw = carve(cv, N * KD);
    t->q_rstd = carve(cv, N * H);
    t->k_rstd = carve(cv, N * m->Hkv);
    t->qh = carve(cv, N * HD);
    t->kh = carve(cv, N * KD);
    t->vh = carve(cv, N * KD);
    t->att = carve(cv, N * HD);
    t->row_stat = carve(cv, N * H);
    a->h_pre = carve(cv, N * F);
    a->ln2_rstd = carve(cv, N);
    if (train) {
        t->y = carve(cv, N * HD);
        a->mid = carve(cv, N * C);
        a->ln2 = carve(cv, N * C);
        a->h_act = carve(cv, N * F);
        a->res_out = carve(cv, N * C);
    } else {
        t->y = t->q_raw;  // q_raw is dead once QK-norm has run
        a->mid = a->ln2 = a->res_out = NULL;
        a->h_act = a->h_pre;
    }
    if (m->asent) {
        t->as_beta = carve(cv, N * H);
        t->as_gamma = carve(cv, N * H);
    } else {
        t->as_beta = t->as_gamma = NULL;
    }
}

static void carve_train(carver *cv, la_model *m, size_t N) {
    size_t C = m->C, HD = (size_t)m->H * m->D, KD = (size_t)m->Hkv * m->D, F = m->F, H = m->H;
    for (int l = 0; l < m->L; l++) carve_acts(cv, &m->ta[l], m, N, 1);
    m->res0 = carve(cv, N * C);
    m->lnf = carve(cv, N * C);
    m->lnf_rstd = carve(cv, N);
    m->logits = carve(cv, N * (size_t)m->V);
    m->lse = carve(cv, N);
    m->loss = carve(cv, N);
    m->tokens = (int32_t *)carve(cv, N);
    m->targets = (int32_t *)carve(cv, N);
    m->dres = carve(cv, N * C);
    m->dln = carve(cv, N * C);
    m->dh = carve(cv, N * F);
    attn_scratch *sc = &m->sc;
    sc->dy = carve(cv, N * HD);
    sc->datt = carve(cv, N * HD);
    sc->dqh = carve(cv, N * HD);
    sc->dkh = carve(cv, N * KD);
    sc->dvh = carve(cv, N * KD);
    sc->dq_raw = carve(cv, N * HD);
    sc->dk_raw = carve(cv, N * KD);
    sc->dv_raw = carve(cv, N * KD);
    if (m->asent) {
        sc->dbeta = carve(cv, N * H);
        sc->dgamma = carve(cv, N * H);
    }
}

/* (Re)allocates one carved block (*block, *cap rows) for N tokens; what/advice word the error. */
static la_status ensure_block(la_model *m, size_t N, float **block, size_t *cap,
                              void (*carve_fn)(carver *, la_model *, size_t), const char *what,
                              const char *advice) {
    if (N <= *cap) return LA_OK;
    free(*block);
    *block = NULL;
    *cap = 0;
    carver cv = {NULL, 0};
    carve_fn(&cv, m, N);
    float *blk = la_malloc(cv.used * sizeof(float) + 64);
    if (!blk)
        return la_fail(LA_ENOMEM, "model: cannot allocate %.1f MB of %s for %zu tokens; use %s",
                       cv.used * 4.0 / 1e6, what, N, advice);
    memset(blk, 0, cv.used * sizeof(float) + 64);  // sequence parallelism leaves other ranks' rows unset
    *block = blk;
    carver cv2 = {blk, 0};
    carve_fn(&cv2, m, N);
    *cap = N;
    return LA_OK;
}

static la_status ensure_train(la_model *m, size_t N) {
    return ensure_block(m, N, &m->train_block, &m->cap_train, carve_train, "training activations",
                        "a smaller batch or sequence");
}

static void carve_eval(carver *cv, la_model *m, size_t N) {
    carve_acts(cv, &m->ea, m, N, 0);
    m->ex = carve(cv, N * (size_t)m->C);
    m->e_lse = carve(cv, EVAL_CHUNK);
    m->e_loss = carve(cv, EVAL_CHUNK);
    m->e_logits = carve(cv, (size_t)EVAL_CHUNK * m->V);
}

/* The evaluation buffers for N tokens, and the bf16 operand copies for them. */
static la_status ensure_eval(la_model *m, size_t N) {
    LA_TRY(ensure_block(m, N, &m->eval_block, &m->cap_eval, carve_eval, "evaluation buffers",
                        "a shorter sequence"));
    return mm_reserve(m);
}

/* ---- one transformer block ---- */

/* One block's attention weights inside an array of the parameter layout (params or grads). */
static attn_weights weights_at(const la_model *m, float *base, const layer_off *o) {
    attn_weights w;
    w.wq = base + o->wq;
    w.wk = base + o->wk;
    w.wv = base + o->wv;
    w.q_norm_g = base + o->qn_g;
    w.k_norm_g = base + o->kn_g;
    w.wo = base + o->wo;
    w.logn_s = m->logn ? base + o->logn_s : NULL;
    w.sinks = m->sink ? base + o->sinks : NULL;
    w.as_wb = m->asent ? base + o->as_wb : NULL;
    w.as_bb = m->asent ? base + o->as_bb : NULL;
    w.as_wg = m->asent ? base + o->as_wg : NULL;
    w.as_bg = m->asent ? base + o->as_bg : NULL;
    return w;
}

static attn_dims dims_of(la_model *m, int B, int T) {
    attn_dims d = {&m->spec, B, T, m->C, m->H, m->Hkv, m->D, m->ws, m->n_threads,
                   &m->mm, &m->timing.attn_s, NULL, 0, m->cur_sp};
    return d;
}

/* x_in (N, C) -> x_out (N, C). Training: mid and x_out are separate buffers; evaluation:
 * x_in == mid == x_out (the residual stream is updated in place). kv: NULL, or the KV-cache
 * hook the attention sub-layer goes through (B = 1, la_model_forward_cached). */
static la_status block_forward(la_model *m, int l, acts *a, const float *x_in, float *mid,
                               float *x_out, int B, int T, const la_model_kv_hook *kv) {
    const layer_off *o = &m->lo[l];
    const float *P = m->params;
    int N = B * T, C = m->C, F = m->F;
    const la_mm_ctx *tm = &m->mm;
    attn_dims d = dims_of(m, B, T);
    d.kv = kv;
    d.layer = l;
    attn_weights w = weights_at(m, m->params, o);
    const la_sp_part *sp = m->cur_sp;  // NULL: all N rows; else this rank's (row-wise: any split)
    size_t C_ = (size_t)C, F_ = (size_t)F;
    FOR_ROWS(sp, N, i, n0, n)
    la_rmsnorm_forward(a->ln1 + n0 * C_, a->ln1_rstd + n0, x_in + n0 * C_, P + o->ln1_g, n, C);  // F1: a = RMSNorm(x)
    LA_PROF_LAP(LA_PROF_OTHER);
    if (mid != x_in) FOR_ROWS(sp, N, i, n0, n) memcpy(mid + n0 * C_, x_in + n0 * C_, sizeof(float) * n * C_);
    LA_PROF_LAP(LA_PROF_RESID);
    LA_TRY(la_attn_layer_forward(&d, &w, &a->at, a->ln1, mid));               // F2: mid = x + attn(a)
    float *ln2 = a->ln2 ? a->ln2 : a->ln1;
    FOR_ROWS(sp, N, i, n0, n)
    la_rmsnorm_forward(ln2 + n0 * C_, a->ln2_rstd + n0, mid + n0 * C_, P + o->ln2_g, n, C);  // F3: RMSNorm(mid)
    LA_PROF_LAP(LA_PROF_OTHER);
    if (x_out != mid) FOR_ROWS(sp, N, i, n0, n) memcpy(x_out + n0 * C_, mid + n0 * C_, sizeof(float) * n * C_);
    LA_PROF_LAP(LA_PROF_RESID);
    FOR_ROWS(sp, N, i, n0, n)  // F4
    la_mlp_forward(tm, x_out + n0 * C_, a->h_pre + n0 * F_, a->h_act + n0 * F_, ln2 + n0 * C_, P + o->w_fc,
                   P + o->w_proj, n, C, F);
    return LA_OK;
}

/* dres (N, C): gradient w.r.t. the block output on entry, w.r.t. x_in on return. */
static la_status block_backward(la_model *m, int l, acts *a, const float *x_in, int B, int T) {
    const layer_off *o = &m->lo[l];
    const float *P = m->params;
    float *G = m->grads;
    int N = B * T, C = m->C, F = m->F;
    const la_mm_ctx *tm = &m->mm;
    attn_dims d = dims_of(m, B, T);
    attn_weights w = weights_at(m, m->params, o), g = weights_at(m, m->grads, o);
    const la_sp_part *sp = m->cur_sp;
    /* F4: x_out = mid + MLP(ln2): dln2, dWfc, dWproj; the identity path keeps dres */
    if (sp) { /* la_mlp_backward cut in two: each weight gradient from every rank's rows (the
               * one-process sgemm), dh and dln of this rank's rows; dres is complete here */
        LA_TRY(la_attn_sp_gather(a->h_act, B, T, F, NULL));
        la_mm_backward(tm, NULL, G + o->w_proj, m->dres, a->h_act, P + o->w_proj, N, F, C, 0);
        la_mm_dx_rows(sp, tm, m->dh, m->dres, P + o->w_proj, F, C, 0);
        FOR_ROWS(sp, N, i, n0, n)
        la_mlp_act_backward(m->dh + (size_t)n0 * F, a->h_pre + (size_t)n0 * F, (size_t)n * F);
        LA_TRY(la_attn_sp_gather(m->dh, B, T, F, NULL));
        LA_TRY(la_attn_sp_gather(a->ln2, B, T, C, NULL));
        la_mm_backward(tm, NULL, G + o->w_fc, m->dh, a->ln2, P + o->w_fc, N, C, F, 0);
        la_mm_dx_rows(sp, tm, m->dln, m->dh, P + o->w_fc, C, F, 0);
        float *full[] = {m->dln, a->mid, a->ln2_rstd};  // for F3 (its gain's gradient sums over rows)
        LA_TRY(la_sp_gather_all(3, full, (int[]){B, B, B}, T, (int[]){C, C, 1}));
    } else {
        la_mlp_backward(tm, m->dln, G + o->w_fc, G + o->w_proj, m->dh, m->dres, a->ln2, a->h_pre,
                        a->h_act, P + o->w_fc, P + o->w_proj, N, C, F);
    }
    /* F3: dres += d RMSNorm(mid) -> dres is now d mid (sp: every row, from complete inputs) */
    la_rmsnorm_backward(m->dres, G + o->ln2_g, m->dln, a->mid, a->ln2_rstd, P + o->ln2_g, N, C);
    /* F2: mid = x + attn(a): d a into dln; the identity path keeps dres */
    LA_TRY(la_attn_layer_backward(&d, &w, &g, &a->at, &m->sc, a->ln1, m->dres, m->dln));
    if (sp) {  // for F1: dln of every rank, the block input and the norm's rstd
        float *full[] = {m->dln, (float *)x_in, a->ln1_rstd};  // x_in: the previous block's output buffer
        LA_TRY(la_sp_gather_all(3, full, (int[]){B, B, B}, T, (int[]){C, C, 1}));
    }
    /* F1: dres += d RMSNorm(x) -> dres is now d x_in */
    la_rmsnorm_backward(m->dres, G + o->ln1_g, m->dln, x_in, a->ln1_rstd, P + o->ln1_g, N, C);
    return LA_OK;
}

/* A pass begins: no backward, logits nor sequence-parallel rows of an earlier one are
 * kept; then the tokens (and targets) are checked. */
static la_status begin_pass(la_model *m, const int32_t *tokens, const int32_t *targets, int B, int T) {
    m->can_backward = 0;
    m->cur_sp = NULL;
    m->logits_valid = 0;
    if (!tokens) return la_fail(LA_EINVAL, "model: tokens is NULL");
    if (B < 1 || T < 1) return la_fail(LA_EINVAL, "model: B=%d and T=%d must be >= 1", B, T);
    size_t N = (size_t)B * T;
    for (size_t i = 0; i < N; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->V)
            return la_fail(LA_EINVAL, "model: token %d at index %zu is outside the vocabulary [0, %d)",
                           tokens[i], i, m->V);
        if (targets && targets[i] >= m->V)
            return la_fail(LA_EINVAL, "model: target %d at index %zu is outside the vocabulary [0, %d)",
                           targets[i], i, m->V);
    }
    return LA_OK;
}

/* ---- the whole model ---- */

void la_model_set_seq_parallel(la_model *m, int on) {
    if (m) m->seq_parallel = on != 0;
}

/* Sequence parallelism for a training forward of B x T over the current process group's
 * ranks (the trainer's sequence group): this rank's rows (attn/ring.h's zigzag pieces), or
 * a refusal agreed by every rank. Each rank needs 2 non-empty pieces: T of at least 2P
 * 64-row tiles. */
static la_status sp_begin(la_model *m, int B, int T) {
    m->cur_sp = NULL;
    int P = la_dist_size(), r = la_dist_rank(), min_T = LA_SP_MIN_T(P);
    if (!m->seq_parallel || P == 1) return LA_OK;
    la_status st = LA_OK;
    if (T < min_T)
        st = la_fail(LA_EINVAL, "seq_parallel %d: a sequence of %d tokens is too short to split over %d ranks (each "
                     "holds 2 of its 2 x %d pieces of whole 64-token tiles); use a sequence length of at least %d, "
                     "or a smaller seq_parallel", P, T, P, P, min_T);
    LA_TRY(la_dist_agree(st));
    m->sp = (la_sp_part){.P = P, .r = r, .B = B, .T = T};
    la_attn_sp_rows(T, P, r, m->sp.rows);
    m->cur_sp = &m->sp;
    return LA_OK;
}

la_status la_model_forward(la_model *m, const int32_t *tokens, const int32_t *targets, int B,
                           int T, float *mean_loss, float *loss_per_token) {
    if (!m) return la_fail(LA_EINVAL, "la_model_forward: model is NULL");
    LA_TRY(begin_pass(m, tokens, targets, B, T));
    double t_start = omp_get_wtime();
    size_t N = (size_t)B * T;
    LA_TRY(sp_begin(m, B, T));
    const la_sp_part *sp = m->cur_sp;
    la_status st = ensure_train(m, N);
    if (st == LA_OK) st = mm_reserve(m);
    if (sp) st = la_dist_agree(st);  // every rank of the sequence stops together
    LA_TRY(st);
    int C = m->C, V = m->V;
    size_t C_ = (size_t)C, V_ = (size_t)V;
    const float *P = m->params;
    memcpy(m->tokens, tokens, N * sizeof(int32_t));
    FOR_ROWS(sp, N, i, n0, n) la_embed_forward(m->res0 + n0 * C_, tokens + n0, P + m->off_wte, n, C);  // x = wte[tokens]
    const float *x = m->res0;
    for (int l = 0; l < m->L; l++) {
        acts *a = &m->ta[l];
        LA_TRY(block_forward(m, l, a, x, a->mid, a->res_out, B, T, NULL));
        x = a->res_out;
    }
    FOR_ROWS(sp, N, i, n0, n) {
        la_rmsnorm_forward(m->lnf + n0 * C_, m->lnf_rstd + n0, x + n0 * C_, P + m->off_lnf_g, n, C);  // final norm
        la_mm_forward(&m->mm, m->logits + n0 * V_, m->lnf + n0 * C_, P + m->off_lm_head, n, C, V, 0);  // logits
    }
    m->logits_valid = !sp;  // sp: this rank's rows only
    m->fB = B;
    m->fT = T;
    double sum = 0;
    int64_t cnt = 0;
    if (targets) {
        memcpy(m->targets, targets, N * sizeof(int32_t));
        if (sp) { /* each rank's token losses, gathered, summed as la_xent_forward sums them */
            double part;
            FOR_ROWS(sp, N, i, n0, n)
            la_xent_forward(m->loss + n0, m->lse + n0, m->logits + n0 * V_, targets + n0, n, V, &part);
            LA_TRY(la_attn_sp_gather(m->loss, B, T, 1, NULL));
            for (size_t i = 0; i < N; i++)
                if (targets[i] >= 0) sum += m->loss[i], cnt++;
        } else {
            cnt = la_xent_forward(m->loss, m->lse, m->logits, targets, (int)N, m->V, &sum);
        }
        if (loss_per_token) memcpy(loss_per_token, m->loss, N * sizeof(float));
        m->can_backward = cnt > 0 ? 2 : 1;  // 2: gradient exists; 1: all targets ignored
    } else if (loss_per_token) {
        memset(loss_per_token, 0, N * sizeof(float));
    }
    if (mean_loss) *mean_loss = cnt ? (float)(sum / cnt) : 0.0f;
    m->timing.total_s += omp_get_wtime() - t_start;
    return LA_OK;
}

la_status la_model_backward(la_model *m) {
    if (!m) return la_fail(LA_EINVAL, "la_model_backward: model is NULL");
    if (!m->can_backward)
        return la_fail(LA_EINVAL, "la_model_backward: needs a preceding la_model_forward with "
                                  "targets (la_model_eval and a second backward do not count)");
    int was = m->can_backward;
    m->can_backward = 0;
    if (was == 1) return LA_OK;  // every target ignored: the loss is constant 0
    double t_start = omp_get_wtime();
    int B = m->fB, T = m->fT, N = B * T, C = m->C;
    const float *P = m->params;
    float *G = m->grads;
    int64_t cnt = 0;
    for (int i = 0; i < N; i++) cnt += m->targets[i] >= 0;
    /* mean loss = sum / cnt */
    const la_sp_part *sp = m->cur_sp;
    int V = m->V;
    FOR_ROWS(sp, N, i, n0, n)
    la_xent_backward(m->logits + (size_t)n0 * V, m->lse + n0, m->targets + n0, n, V, 1.0f / (float)cnt);
    m->logits_valid = 0;
    float *xL = m->L ? m->ta[m->L - 1].res_out : m->res0;
    if (sp) { /* sequence parallelism: every weight and gain gradient from every rank's rows, by
               * the one-process call; the products' dx of this rank's rows. From here on dres
               * holds every row (each RMSNorm backward runs on complete inputs). */
        float *head[] = {m->logits, m->lnf}, *full[] = {m->dln, xL, m->lnf_rstd};
        LA_TRY(la_sp_gather_all(2, head, (int[]){B, B}, T, (int[]){V, C}));
        la_mm_backward(&m->mm, NULL, G + m->off_lm_head, m->logits, m->lnf, P + m->off_lm_head, N, C, V, 0);
        la_mm_dx_rows(sp, &m->mm, m->dln, m->logits, P + m->off_lm_head, C, V, 0);
        LA_TRY(la_sp_gather_all(3, full, (int[]){B, B, B}, T, (int[]){C, C, 1}));
    } else {
        la_mm_backward(&m->mm, m->dln, G + m->off_lm_head, m->logits, m->lnf,
                       P + m->off_lm_head, N, C, m->V, 0);
    }
    LA_PROF_LAP(LA_PROF_OTHER);
    memset(m->dres, 0, sizeof(float) * (size_t)N * C);
    LA_PROF_LAP(LA_PROF_RESID);
    la_rmsnorm_backward(m->dres, G + m->off_lnf_g, m->dln, xL, m->lnf_rstd, P + m->off_lnf_g, N, C);
    for (int l = m->L - 1; l >= 0; l--) {
        const float *x_in = l ? m->ta[l - 1].res_out : m->res0;
        LA_TRY(block_backward(m, l, &m->ta[l], x_in, B, T));
    }
    la_embed_backward(G + m->off_wte, m->dres, m->tokens, N, C);
    m->cur_sp = NULL;
    m->timing.total_s += omp_get_wtime() - t_start;
    return LA_OK;
}

la_status la_model_eval(la_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                        float *mean_loss, float *loss_per_token, int32_t *argmax,
                        float *last_logits) {
    if (!m) return la_fail(LA_EINVAL, "la_model_eval: model is NULL");
    LA_TRY(begin_pass(m, tokens, targets, B, T));
    double t_start = omp_get_wtime();
    size_t N = (size_t)B * T;
    LA_TRY(ensure_eval(m, N));
    int C = m->C, V = m->V;
    const float *P = m->params;
    la_embed_forward(m->ex, tokens, P + m->off_wte, (int)N, C);
    for (int l = 0; l < m->L; l++) LA_TRY(block_forward(m, l, &m->ea, m->ex, m->ex, m->ex, B, T, NULL));
    float *xn = m->ea.ln1;  // (N, C) final norm output
    la_rmsnorm_forward(xn, m->ea.ln1_rstd, m->ex, P + m->off_lnf_g, (int)N, C);
    double sum = 0;
    int64_t cnt = 0;
    for (size_t r0 = 0; r0 < N; r0 += EVAL_CHUNK) {
        int rows = (int)(N - r0 < EVAL_CHUNK ? N - r0 : EVAL_CHUNK);
        float *z = m->e_logits;  // (rows, V)
        la_mm_forward(&m->mm, z, xn + r0 * C, P + m->off_lm_head, rows, C, V, 0);
        double s = 0;
        float *lossbuf = loss_per_token ? loss_per_token + r0 : m->e_loss;
        cnt += la_xent_forward(lossbuf, m->e_lse, z, targets ? targets + r0 : NULL, rows, V, &s);
        sum += s;
        for (int r = 0; r < rows; r++) {
            const float *zr = z + (size_t)r * V;
            size_t n = r0 + r;
            if (argmax) {
                int best = 0;
                for (int v = 1; v < V; v++)
                    if (zr[v] > zr[best]) best = v;
                argmax[n] = best;
            }
            if (last_logits && (int)(n % T) == T - 1)
                memcpy(last_logits + (n / T) * V, zr, sizeof(float) * V);
        }
    }
    if (mean_loss) *mean_loss = cnt ? (float)(sum / cnt) : 0.0f;
    m->timing.total_s += omp_get_wtime() - t_start;
    return LA_OK;
}

la_status la_model_forward_cached(la_model *m, const int32_t *tokens, int T,
                                  const la_model_kv_hook *hook, float *logits, int all_rows) {
    if (!m || !hook || !hook->append_attend)
        return la_fail(LA_EINVAL, "la_model_forward_cached: NULL model or KV hook");
    LA_TRY(begin_pass(m, tokens, NULL, 1, T));
    double t_start = omp_get_wtime();
    LA_TRY(ensure_eval(m, (size_t)T));
    const int C = m->C;
    const float *P = m->params;
    la_embed_forward(m->ex, tokens, P + m->off_wte, T, C);
    for (int l = 0; l < m->L; l++) LA_TRY(block_forward(m, l, &m->ea, m->ex, m->ex, m->ex, 1, T, hook));
    if (logits) {
        const int r0 = all_rows ? 0 : T - 1, rows = T - r0;
        float *xn = m->ea.ln1;  // (rows, C) final norm output
        la_rmsnorm_forward(xn, m->ea.ln1_rstd, m->ex + (size_t)r0 * C, P + m->off_lnf_g, rows, C);
        la_mm_forward(&m->mm, logits, xn, P + m->off_lm_head, rows, C, m->V, 0);
    }
    m->timing.total_s += omp_get_wtime() - t_start;
    return LA_OK;
}

la_status la_model_diagnose(la_model *m, const int32_t *tokens, int T, la_diag **diag) {
    return la_model_diagnose_rows(m, tokens, T, NULL, diag);
}

la_status la_model_diagnose_rows(la_model *m, const int32_t *tokens, int T, const la_diag_rows *sel,
                                 la_diag **diag) {
    if (!m) return la_fail(LA_EINVAL, "la_model_diagnose: model is NULL");
    if (!diag) return la_fail(LA_EINVAL, "la_model_diagnose: diag is NULL (n_layer * n_head accumulators)");
    LA_TRY(begin_pass(m, tokens, NULL, 1, T));
    for (int i = 0; i < m->L * m->H; i++) {
        if (!diag[i])
            return la_fail(LA_EINVAL, "la_model_diagnose: diag[%d] (layer %d, head %d) is NULL", i, i / m->H, i % m->H);
        if (la_diag_max_dist(diag[i]) < (int64_t)T - 1)
            return la_fail(LA_EINVAL, "la_model_diagnose: diag[%d] covers distances up to %lld < T - 1 = %d; "
                                      "create it with max_dist >= T - 1",
                           i, (long long)la_diag_max_dist(diag[i]), T - 1);
    }
    double t_start = omp_get_wtime();
    LA_TRY(ensure_eval(m, (size_t)T));
    la_embed_forward(m->ex, tokens, m->params + m->off_wte, T, m->C);
    for (int l = 0; l < m->L; l++) {
        /* the eval activations keep this layer's q, k (after QK-norm), row statistics and
         * ASEntmax beta/gamma until the next block overwrites them */
        LA_TRY(block_forward(m, l, &m->ea, m->ex, m->ex, m->ex, 1, T, NULL));
        attn_dims d = dims_of(m, 1, T);
        attn_weights w = weights_at(m, m->params, &m->lo[l]);
        /* this layer's block of sel->mass: (n_head, n_rows, n_spans) */
        la_diag_rows ls;
        if (sel) {
            ls = *sel;
            if (sel->mass) ls.mass = sel->mass + (size_t)l * m->H * sel->n_rows * (sel->n_spans > 0 ? sel->n_spans : 0);
        }
        LA_TRY(la_attn_layer_diagnose(&d, &w, &m->ea.at, sel ? &ls : NULL, diag + (size_t)l * m->H));
    }
    m->timing.total_s += omp_get_wtime() - t_start;
    return LA_OK;
}
