/* trainer.c -- optimizer steps (AdamW, or Muon on hidden matrices), gradient accumulation
 * and clipping, validation, and the training loop with logging and checkpoints. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dist.h"
#include "core/prof.h"
#include "train/optim.h"
#include "train/trainer_internal.h"
#include "longattn/train.h"

/* Element loops of the update run on the OpenMP threads from this many entries on. */
#define LA_PAR_ELEMS ((size_t)1 << 17)

la_train_config la_train_config_default(void) {
    la_train_config c;
    memset(&c, 0, sizeof c);
    c.steps = 400;
    c.B = 16;
    c.T = 128;
    c.grad_accum = 1;
    c.lr = 3e-3;
    c.min_lr = 3e-4;
    c.warmup = 20;
    c.beta1 = 0.9;
    c.beta2 = 0.95;
    c.eps = 1e-8;
    c.weight_decay = 0.1;
    c.clip = 1.0;
    c.optimizer = LA_OPT_ADAMW;
    c.muon_lr = 0.02;
    c.muon_momentum = 0.95;
    c.seed = 1;
    c.eval_every = 0;
    c.eval_batches = 8;
    c.ckpt_every = 0;
    return c;
}

static la_status check_config(const la_train_config *c) {
#define REQ(cond, ...) \
    if (!(cond)) return la_fail(LA_EINVAL, __VA_ARGS__)
    REQ(c->steps >= 1, "train config: steps=%d must be >= 1", c->steps);
    REQ(c->B >= 1 && c->T >= 1, "train config: B=%d and T=%d must be >= 1", c->B, c->T);
    REQ(c->grad_accum >= 1, "train config: grad_accum=%d must be >= 1", c->grad_accum);
    REQ(c->lr > 0 && isfinite(c->lr), "train config: lr=%g must be > 0", c->lr);
    REQ(c->min_lr >= 0 && c->min_lr <= c->lr, "train config: min_lr=%g must be in [0, lr=%g]", c->min_lr, c->lr);
    REQ(c->warmup >= 0, "train config: warmup=%d must be >= 0", c->warmup);
    REQ(c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1,
        "train config: beta1=%g, beta2=%g must be in [0, 1)", c->beta1, c->beta2);
    REQ(c->eps > 0, "train config: eps=%g must be > 0", c->eps);
    REQ(c->weight_decay >= 0, "train config: weight_decay=%g must be >= 0", c->weight_decay);
    REQ(c->clip >= 0, "train config: clip=%g must be >= 0 (0 disables)", c->clip);
    REQ(c->optimizer == LA_OPT_ADAMW || c->optimizer == LA_OPT_MUON, "train config: unknown optimizer %d", (int)c->optimizer);
    REQ(c->precision == LA_DTYPE_F32 || c->precision == LA_DTYPE_BF16,
        "train config: precision %s (%d) is not supported; use f32 or bf16", la_dtype_name(c->precision),
        (int)c->precision);
    REQ(c->optimizer != LA_OPT_MUON || (c->muon_lr > 0 && c->muon_momentum >= 0 && c->muon_momentum < 1),
        "train config: muon_lr=%g must be > 0 and muon_momentum=%g in [0, 1)", c->muon_lr, c->muon_momentum);
    REQ(c->eval_every >= 0 && c->eval_batches >= 1 && c->ckpt_every >= 0,
        "train config: eval_every=%d, ckpt_every=%d must be >= 0 and eval_batches=%d >= 1",
        c->eval_every, c->ckpt_every, c->eval_batches);
    REQ(c->seq_parallel >= 0, "train config: seq_parallel=%d must be >= 0", c->seq_parallel);
    REQ(c->seq_parallel <= 1 || c->T >= 64 * (2 * c->seq_parallel - 1) + 1,
        "train config: seq_parallel %d: a sequence of %d tokens is too short to split over %d ranks (each holds 2 "
        "of its 2 x %d pieces of whole 64-token tiles); use a sequence length of at least %d (--seq-len, or "
        "seq_len in a study file) or a smaller seq_parallel", c->seq_parallel, c->T, c->seq_parallel,
        c->seq_parallel, 64 * (2 * c->seq_parallel - 1) + 1);
    REQ(memchr(c->ckpt_path, 0, sizeof c->ckpt_path) && memchr(c->csv_path, 0, sizeof c->csv_path),
        "train config: ckpt_path / csv_path not NUL-terminated");
#undef REQ
    return LA_OK;
}

/* The sequence groups, at the first step (collective over the current group: every rank
 * steps together, whereas la_trainer_new may be reached by some ranks only when another
 * failed before it). */
static la_status sp_groups(la_trainer *tr) {
    if (tr->sp_k == 1 || tr->sp_on) return LA_OK;
    int seq, n_seq;
    LA_TRY(la_dist_agree(la_dist_seq_begin(tr->sp_k, &seq, &n_seq)));
    la_model_set_seq_parallel(tr->m, 1);
    tr->sp_on = 1;
    return LA_OK;
}

void la_trainer_free(la_trainer *tr) {
    if (!tr) return;
    if (tr->sp_on) {
        la_model_set_seq_parallel(tr->m, 0);
        la_dist_seq_end();
    }
    free(tr->adam_m);
    free(tr->adam_v);
    free(tr->mom);
    free(tr->scratch);
    free(tr->gn_part);
    free(tr->window);
    free(tr->inp);
    free(tr->tgt);
    free(tr->acc);
    free(tr->dp_send);
    free(tr->dp_recv);
    free(tr->dp_loss);
    free(tr->dp_lossall);
    free(tr->dp_counts);
    free(tr);
}

la_status la_trainer_new(la_model *m, la_data *data, const la_train_config *cfg, la_trainer **out) {
    if (!out) return la_fail(LA_EINVAL, "la_trainer_new: out is NULL");
    *out = NULL;
    if (!m || !cfg) return la_fail(LA_EINVAL, "la_trainer_new: model and cfg must not be NULL");
    LA_TRY(check_config(cfg));
    if (data && la_data_vocab(data) > la_model_get_config(m)->vocab)
        return la_fail(LA_EINVAL, "trainer: the data's vocabulary (%d) is larger than the model's (%d)",
                       la_data_vocab(data), la_model_get_config(m)->vocab);
    la_trainer *tr = la_calloc(1, sizeof *tr);
    if (!tr) return la_fail(LA_ENOMEM, "trainer: out of memory");
    tr->m = m;
    tr->data = data;
    tr->cfg = *cfg;
    tr->P = la_model_num_params(m);
    size_t BT = (size_t)cfg->B * cfg->T;
    tr->adam_m = la_calloc(tr->P, sizeof(float));
    tr->adam_v = la_calloc(tr->P, sizeof(float));
    tr->window = la_malloc((BT + cfg->B) * sizeof(int32_t));
    tr->inp = la_malloc(BT * sizeof(int32_t));
    tr->tgt = la_malloc(BT * sizeof(int32_t));
    tr->gn_part = la_malloc(((tr->P + LA_GN_CHUNK - 1) / LA_GN_CHUNK + 1) * sizeof(double));
    int ok = tr->adam_m && tr->adam_v && tr->window && tr->inp && tr->tgt && tr->gn_part;
    if (ok && cfg->optimizer == LA_OPT_MUON) {
        size_t need = 0;
        for (int i = 0; i < la_model_num_tensors(m); i++) {
            la_tensor_info t;
            la_model_get_tensor(m, i, &t);
            if (t.pclass != LA_PCLASS_MATRIX) continue;
            size_t r = (size_t)t.shape[0], c = (size_t)t.shape[1], mn = r < c ? r : c;
            size_t s = 3 * r * c + 2 * mn * mn;
            if (s > need) need = s;
        }
        tr->mom = la_calloc(tr->P, sizeof(float));
        tr->scratch = la_malloc((need ? need : 1) * sizeof(float));
        ok = tr->mom && tr->scratch;
    }
    if (!ok) {
        size_t np = tr->P;
        la_trainer_free(tr);
        return la_fail(LA_ENOMEM, "trainer: out of memory for the optimizer state of %zu parameters and the "
                       "token buffers of a %d x %d batch; lower --batch / --seq-len or the model size",
                       np, cfg->B, cfg->T);
    }
    if (data) la_data_seed(data, cfg->seed);
    tr->sp_k = cfg->seq_parallel > 1 ? cfg->seq_parallel : 1;
    if (tr->sp_k > 1 && la_dist_size() % tr->sp_k) { /* the same answer on every rank: no collective */
        int k = tr->sp_k, n = la_dist_size();
        tr->sp_k = 1;
        la_trainer_free(tr);
        return la_fail(LA_EINVAL, "seq_parallel is %d but %d rank%s %s: start a multiple of %d ranks (mpirun -np %d) "
                       "or set seq_parallel to a divisor of %d (--seq-parallel N; 1 on one process)", k, n,
                       n == 1 ? "" : "s", n == 1 ? "was started" : "were started (or are in this group)", k,
                       k * (n / k + 1), n);
    }
    if (cfg->n_threads > 0) la_model_set_threads(m, cfg->n_threads);
    la_status ps = la_model_set_precision(m, cfg->precision);
    if (ps != LA_OK) {
        la_trainer_free(tr);
        return ps;
    }
    *out = tr;
    return LA_OK;
}

int la_trainer_step_count(const la_trainer *tr) { return tr->step; }

/* Sum of squares of g[0, P) after scaling it by inv in place, in fixed chunks of
 * LA_GN_CHUNK entries: each chunk in double over 8 interleaved lanes, the chunks added in
 * order. Threads take whole chunks, so the result does not depend on their number. */
static double scale_sumsq(float *g, size_t P, float inv, double *part) {
    size_t nch = (P + LA_GN_CHUNK - 1) / LA_GN_CHUNK;
#pragma omp parallel for schedule(static) if (P >= LA_PAR_ELEMS)
    for (size_t ch = 0; ch < nch; ch++) {
        size_t i0 = ch * LA_GN_CHUNK, n = P - i0 < LA_GN_CHUNK ? P - i0 : LA_GN_CHUNK;
        float *x = g + i0;
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        size_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++) {
                x[i + l] *= inv;
                acc[l] += (double)x[i + l] * x[i + l];
            }
        for (; i < n; i++) {
            x[i] *= inv;
            acc[i & 7] += (double)x[i] * x[i];
        }
        part[ch] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    double ss = 0;
    for (size_t ch = 0; ch < nch; ch++) ss += part[ch];
    return ss;
}

/* grads hold the SUM of n_micro mean-loss gradients: average, clip, update. One pass
 * averages and sums the squares; a second clips and applies AdamW to every tensor (Muon's
 * matrices are only clipped there and updated after), threads on contiguous ranges. */
static la_status apply_update(la_trainer *tr, double loss, int n_micro, la_step_info *info,
                              double t0) {
    LA_PROF_LAP(LA_PROF_OTHER);
    la_model *m = tr->m;
    float *g = la_model_grads(m), *p = la_model_params(m);
    size_t P = tr->P;
    float inv = 1.0f / (float)n_micro;
    double norm = sqrt(scale_sumsq(g, P, inv, tr->gn_part));
    if (!isfinite(loss) || !isfinite(norm)) {
        la_model_zero_grad(m);
        return la_fail(LA_ENUMERIC, "trainer: non-finite loss (%g) or gradient norm (%g) at step "
                       "%d; parameters left unchanged; lower the learning rate", loss, norm, tr->step + 1);
    }
    LA_PROF_LAP(LA_PROF_GNORM);
    const la_train_config *c = &tr->cfg;
    int clip = c->clip > 0 && norm > c->clip;
    float sc = clip ? (float)(c->clip / norm) : 1.0f;
    double f = la_train_lr_factor(c, tr->step);
    double lr = c->lr * f;
    la_adamw_k k = la_adamw_consts(lr, c->beta1, c->beta2, c->eps, tr->step + 1);
    int nt = la_model_num_tensors(m), muon = c->optimizer == LA_OPT_MUON;
#pragma omp parallel if (P >= LA_PAR_ELEMS)
    {
        int me = omp_get_thread_num(), nth = omp_get_num_threads();
        size_t lo = P * (size_t)me / (size_t)nth, hi = P * (size_t)(me + 1) / (size_t)nth;
        for (int i = 0; i < nt; i++) {
            la_tensor_info t;
            la_model_get_tensor(m, i, &t);
            size_t a = t.offset > lo ? t.offset : lo, b = t.offset + t.numel < hi ? t.offset + t.numel : hi;
            if (a >= b) continue;
            if (clip)
                for (size_t j = a; j < b; j++) g[j] *= sc;
            if (muon && t.pclass == LA_PCLASS_MATRIX) continue;  // below
            int decays = t.pclass == LA_PCLASS_EMBED || t.pclass == LA_PCLASS_MATRIX;
            float wd = decays ? (float)c->weight_decay : 0.0f;
            for (size_t j = a; j < b; j++) la_adamw_elem(p + j, g[j], tr->adam_m + j, tr->adam_v + j, &k, wd);
        }
    }
    if (muon)
        for (int i = 0; i < nt; i++) {
            la_tensor_info t;
            la_model_get_tensor(m, i, &t);
            if (t.pclass != LA_PCLASS_MATRIX) continue;
            size_t o = t.offset;
            la_muon_update(p + o, g + o, tr->mom + o, (int)t.shape[0], (int)t.shape[1], c->muon_lr * f,
                           c->muon_momentum, c->weight_decay, tr->scratch);
        }
    LA_PROF_LAP(LA_PROF_OPTIM);
    tr->step++;
    if (info) {
        info->step = tr->step;
        info->loss = (float)loss;
        info->grad_norm = (float)norm;
        info->lr = lr;
        info->seconds = omp_get_wtime() - t0;
        info->comm_seconds = 0;
    }
    return LA_OK;
}

/* Micro-batches [lo, hi) of a step's n are rank r's (of N): contiguous blocks whose sizes
 * differ by at most one; ranks beyond n get none. */
static void my_block(int n, int r, int N, int *lo, int *hi) {
    *lo = (int)((long long)n * r / N);
    *hi = (int)((long long)n * (r + 1) / N);
}

/* Sequence parallelism (seq_parallel k): the ranks form N / k sequence groups of k; group g
 * computes micro-batch block g of N / k (every rank of it holds the same gradients after each
 * micro-batch: la_model_set_seq_parallel), and only its first rank sends them to the
 * exchange below, so the fold sees each micro-batch once, in order. k = 1: rank r, block r. */
static void compute_block(const la_trainer *tr, int q, int N, int *lo, int *hi) {
    my_block(tr->cfg.grad_accum, q / tr->sp_k, N / tr->sp_k, lo, hi);
}

static void send_block(const la_trainer *tr, int q, int N, int *lo, int *hi) {
    compute_block(tr, q, N, lo, hi);
    if (q % tr->sp_k) *hi = *lo;
}

/* Element range [*o, *o + *n) of parameter slice q of N. */
static void slice(size_t P, int q, int N, size_t *o, size_t *n) {
    *o = P * (size_t)q / (size_t)N;
    *n = P * (size_t)(q + 1) / (size_t)N - *o;
}

/* Buffers for the gradient exchange, allocated at the first step that needs them. */
static la_status dp_buffers(la_trainer *tr) {
    int A = tr->cfg.grad_accum, N = la_dist_size(), me = la_dist_rank(), lo, hi;
    if (N == 1) {
        if (A > 1 && !tr->acc && !(tr->acc = la_malloc(tr->P * sizeof(float))))
            return la_fail(LA_ENOMEM, "trainer: cannot allocate the gradient accumulator (%zu floats)", tr->P);
        return LA_OK;
    }
    if (tr->dp_send) return LA_OK;
    size_t P = tr->P, o, n, mine_n;
    slice(P, me, N, &o, &mine_n);
    send_block(tr, me, N, &lo, &hi);
    int nm = hi - lo;
    if ((double)(nm > 0 ? nm : 1) * P > 2147483647.0 || (double)A * mine_n > 2147483647.0)
        return la_fail(LA_EINVAL, "trainer: %d micro-batch gradients of %zu parameters exceed one MPI exchange "
                       "(2^31 floats); lower --accum or use more ranks", A, P);
    tr->dp_counts = la_malloc((size_t)N * 4 * sizeof(int));
    /* it also carries this rank's summed slice to the final allgather (an idle rank, with
     * no micro-batch, still sums and sends its slice) */
    size_t send_n = (size_t)nm * P > mine_n ? (size_t)nm * P : mine_n;
    tr->dp_send = la_malloc((send_n + 1) * sizeof(float));
    tr->dp_recv = la_malloc(((size_t)A * mine_n + 1) * sizeof(float));
    tr->dp_loss = la_malloc(((size_t)nm + 1) * sizeof(float));
    tr->dp_lossall = la_malloc((size_t)A * sizeof(float));
    if (!tr->dp_counts || !tr->dp_send || !tr->dp_recv || !tr->dp_loss || !tr->dp_lossall) {
        free(tr->dp_send);
        free(tr->dp_recv);
        free(tr->dp_loss);
        free(tr->dp_lossall);
        free(tr->dp_counts);
        tr->dp_send = tr->dp_recv = tr->dp_loss = tr->dp_lossall = NULL;
        tr->dp_counts = NULL;
        return la_fail(LA_ENOMEM, "trainer: cannot allocate the gradient exchange buffers (%d micro-batches of "
                       "%zu parameters)", A, P);
    }
    int *send = tr->dp_counts, *recv = send + N, *loss = recv + N;
    for (int q = 0; q < N; q++) {
        int l2, h2;
        slice(P, q, N, &o, &n);
        send[q] = (int)(nm * n);          /* my micro-batches' slice q, to rank q */
        send_block(tr, q, N, &l2, &h2);
        recv[q] = (int)((h2 - l2) * mine_n); /* rank q's micro-batches' slice me, from rank q */
        loss[q] = h2 - l2;
    }
    return LA_OK;
}

static void load_window(la_trainer *tr, int B, int T) {
    for (int b = 0; b < B; b++) {
        memcpy(tr->inp + (size_t)b * T, tr->window + (size_t)b * (T + 1), T * sizeof(int32_t));
        memcpy(tr->tgt + (size_t)b * T, tr->window + (size_t)b * (T + 1) + 1, T * sizeof(int32_t));
    }
}

/* Micro-batch a of a step: the rows to train on when it is this rank's (mine), else only
 * whatever keeps every rank's state in step (the data sampler draws it all the same). */
typedef la_status (*micro_fn)(la_trainer *tr, int a, int mine, const void *ctx, const int32_t **inp,
                              const int32_t **tgt);

static la_status micro_from_data(la_trainer *tr, int a, int mine, const void *ctx, const int32_t **inp,
                                 const int32_t **tgt) {
    (void)a;
    (void)ctx;
    const la_train_config *c = &tr->cfg;
    LA_TRY(la_data_sample(tr->data, c->B, c->T, tr->window));
    if (mine) load_window(tr, c->B, c->T);
    *inp = tr->inp;
    *tgt = tr->tgt;
    return LA_OK;
}

typedef struct {
    const int32_t *tokens, *targets; // (grad_accum * B, T)
} rows_ctx;

static la_status micro_from_rows(la_trainer *tr, int a, int mine, const void *ctx, const int32_t **inp,
                                 const int32_t **tgt) {
    (void)mine;
    const rows_ctx *r = ctx;
    size_t o = (size_t)a * tr->cfg.B * tr->cfg.T;
    *inp = r->tokens + o;
    *tgt = r->targets + o;
    return LA_OK;
}

/* One step's gradient, split over the ranks. Every rank visits all grad_accum micro-batches
 * (so the sampler state stays the same on every rank and in checkpoints) and computes the
 * gradients of its own block, each into zeroed gradients; the step's gradient is
 *   g = ((g_0 + g_1) + g_2) + ...      (micro-batch order, float, element by element)
 * whatever the number of ranks: one process folds as it goes; N ranks cut the parameters
 * into N slices, rank q receives slice q of every micro-batch gradient (MPI_Alltoallv,
 * arriving in micro-batch order) and folds it in that order (a reduce-scatter whose order
 * we fix, unlike MPI_Allreduce's tree), then every rank receives every summed slice
 * (MPI_Allgatherv). The same operations on the same numbers: N ranks give the weights of
 * one rank bit for bit (with the same threads per rank). Traffic per rank and step: its
 * n_mine micro-batch gradients out and one summed gradient in, (n_mine + 1) P floats at most,
 * whatever N (a ring all-reduce moves 2 P). */
static la_status dp_step(la_trainer *tr, micro_fn micro, const void *ctx, la_step_info *info) {
    double t0 = omp_get_wtime();
    LA_PROF_START();
    const la_train_config *c = &tr->cfg;
    int B = c->B, T = c->T, A = c->grad_accum, N = la_dist_size(), lo, hi;
    size_t P = tr->P;
    float *g = la_model_grads(tr->m);
    compute_block(tr, la_dist_rank(), N, &lo, &hi);
    int sends = la_dist_rank() % tr->sp_k == 0; /* this rank's gradients go to the exchange */
    LA_TRY(sp_groups(tr));
    la_status s = dp_buffers(tr);
    double loss_sum = 0;
    double t_comm = 0;
    for (int a = 0; a < A && s == LA_OK; a++) {
        const int32_t *inp, *tgt;
        int mine = a >= lo && a < hi;
        s = micro(tr, a, mine, ctx, &inp, &tgt);
        if (s != LA_OK || !mine) continue;
        la_model_zero_grad(tr->m);
        float l = 0;
        if (tr->sp_k > 1) la_dist_seq_enter(); /* the model's collectives: this sequence group */
        s = la_model_forward(tr->m, inp, tgt, B, T, &l, NULL);
        if (s == LA_OK) s = la_model_backward(tr->m);
        if (tr->sp_k > 1) la_dist_seq_leave();
        if (s != LA_OK) break;
        if (N > 1) { /* slice q of this gradient goes to rank q: packed by rank, then micro-batch */
            if (!sends) continue; /* seq_parallel: the group's first rank sends the same gradients */
            int nm = hi - lo;
            for (int q = 0; q < N; q++) {
                size_t o, n;
                slice(P, q, N, &o, &n);
                memcpy(tr->dp_send + o * (size_t)nm + (size_t)(a - lo) * n, g + o, n * sizeof(float));
            }
            tr->dp_loss[a - lo] = l;
        } else {
            loss_sum += l;
            if (A > 1 && a == 0) memcpy(tr->acc, g, P * sizeof(float));
            else if (A > 1)
                for (size_t i = 0; i < P; i++) tr->acc[i] += g[i];
        }
    }
    if (N > 1) {
        /* a rank that failed (bad data, out of memory) stops every rank here, named; it is
         * also where the ranks wait for the slowest, so comm_seconds starts after it */
        LA_TRY(la_dist_agree(s));
        t_comm = omp_get_wtime();
        const int *send = tr->dp_counts, *recv = send + N, *lcount = recv + N;
        int *gcount = tr->dp_counts + 3 * N;
        size_t o, n;
        /* reduce-scatter in a fixed order: rank me receives slice me of every micro-batch
         * gradient, in micro-batch order (ranks hold ascending blocks), and folds them */
        LA_TRY(la_dist_agree(la_dist_alltoallv_f32(tr->dp_send, send, tr->dp_recv, recv)));
        slice(P, la_dist_rank(), N, &o, &n);
        float *mine = g + o;
        memcpy(mine, tr->dp_recv, n * sizeof(float));
        for (int a = 1; a < A; a++) {
            const float *ga = tr->dp_recv + (size_t)a * n;
            for (size_t i = 0; i < n; i++) mine[i] += ga[i];
        }
        /* every rank gets every summed slice (in place: slice q lands at its offset) */
        for (int q = 0; q < N; q++) {
            size_t oq, nq;
            slice(P, q, N, &oq, &nq);
            gcount[q] = (int)nq;
        }
        memmove(tr->dp_send, mine, n * sizeof(float));
        LA_TRY(la_dist_agree(la_dist_allgatherv_f32(tr->dp_send, g, gcount)));
        LA_TRY(la_dist_agree(la_dist_allgatherv_f32(tr->dp_loss, tr->dp_lossall, lcount)));
        for (int a = 0; a < A; a++) loss_sum += tr->dp_lossall[a];
        t_comm = omp_get_wtime() - t_comm;
    } else {
        LA_TRY(s);
        if (A > 1) memcpy(g, tr->acc, P * sizeof(float));
    }
    s = apply_update(tr, loss_sum / A, A, info, t0);
    if (info) info->comm_seconds = t_comm;
    return s;
}

la_status la_trainer_step(la_trainer *tr, la_step_info *info) {
    if (!tr) return la_fail(LA_EINVAL, "la_trainer_step: trainer is NULL");
    if (!tr->data) return la_fail(LA_EINVAL, "la_trainer_step: the trainer has no data; use la_trainer_step_batch");
    return dp_step(tr, micro_from_data, NULL, info);
}

la_status la_trainer_step_rows(la_trainer *tr, const int32_t *tokens, const int32_t *targets, la_step_info *info) {
    if (!tr || !tokens || !targets) return la_fail(LA_EINVAL, "la_trainer_step_rows: NULL argument");
    rows_ctx r = {tokens, targets};
    return dp_step(tr, micro_from_rows, &r, info);
}

la_status la_trainer_step_batch(la_trainer *tr, const int32_t *tokens, const int32_t *targets,
                                int B, int T, la_step_info *info) {
    if (!tr) return la_fail(LA_EINVAL, "la_trainer_step_batch: trainer is NULL");
    if (!targets) return la_fail(LA_EINVAL, "la_trainer_step_batch: targets must not be NULL");
    double t0 = omp_get_wtime();
    LA_PROF_START();
    LA_TRY(sp_groups(tr));
    la_model_zero_grad(tr->m);
    float l;
    if (tr->sp_k > 1) la_dist_seq_enter(); /* seq_parallel: this batch over the sequence group */
    la_status s = la_model_forward(tr->m, tokens, targets, B, T, &l, NULL);
    if (s == LA_OK) s = la_model_backward(tr->m);
    if (tr->sp_k > 1) la_dist_seq_leave();
    LA_TRY(s);
    return apply_update(tr, l, 1, info, t0);
}

/* Validation batches are split over the ranks like micro-batches; their losses are summed
 * in batch order (double), so every rank gets the value of one process. */
la_status la_trainer_eval(la_trainer *tr, float *val_loss) {
    if (!tr || !val_loss) return la_fail(LA_EINVAL, "la_trainer_eval: NULL argument");
    if (!tr->data) return la_fail(LA_EINVAL, "la_trainer_eval: the trainer has no data");
    const la_train_config *c = &tr->cfg;
    int B = c->B, T = c->T, E = c->eval_batches, N = la_dist_size(), lo, hi;
    my_block(E, la_dist_rank(), N, &lo, &hi);
    float *mine = la_malloc((size_t)(hi - lo + 1) * sizeof(float)), *all = la_malloc((size_t)E * sizeof(float));
    int *counts = la_malloc((size_t)N * sizeof(int));
    la_status s = mine && all && counts ? LA_OK : la_fail(LA_ENOMEM, "la_trainer_eval: out of memory");
    for (int i = lo; i < hi && s == LA_OK; i++) {
        s = la_data_val_batch(tr->data, i, B, T, tr->window);
        if (s != LA_OK) break;
        load_window(tr, B, T);
        s = la_model_eval(tr->m, tr->inp, tr->tgt, B, T, &mine[i - lo], NULL, NULL, NULL);
    }
    s = la_dist_agree(s);
    if (s == LA_OK) {
        for (int r = 0; r < N; r++) {
            int l2, h2;
            my_block(E, r, N, &l2, &h2);
            counts[r] = h2 - l2;
        }
        s = la_dist_agree(la_dist_allgatherv_f32(mine, all, counts));
    }
    if (s == LA_OK) {
        double sum = 0;
        for (int i = 0; i < E; i++) sum += all[i];
        *val_loss = (float)(sum / E);
    }
    free(mine);
    free(all);
    free(counts);
    return s;
}

/* The CSV log, opened once the first step has succeeded, so that a run that cannot start
 * leaves the folder's log as it was. A new run (step0 0) starts it afresh; a resumed one
 * keeps the header and the rows up to its checkpoint's step, dropping those of steps done
 * after it by a run that was killed (they are done again now; rewritten atomically), and
 * appends. */
static la_status open_log(const char *path, int step0, FILE **out) {
    int keep = step0 > 0 && access(path, F_OK) == 0;
    if (keep) {
        char *old;
        size_t n;
        la_afile af;
        LA_TRY(la_read_file(path, 0, &old, &n));
        la_status s = la_afile_open(&af, path);
        for (char *l = old, *e; s == LA_OK && (e = memchr(l, '\n', (size_t)(old + n - l))); l = e + 1)
            if (l == old || atoi(l) <= step0) fwrite(l, 1, (size_t)(e - l + 1), af.f); /* a torn last row: dropped */
        free(old);
        LA_TRY(s == LA_OK ? la_afile_commit(&af) : s);
    }
    FILE *f = fopen(path, keep ? "a" : "w");
    if (!f) return la_fail(LA_EIO, "cannot open the CSV log %s: %s", path, strerror(errno));
    if (!keep) fprintf(f, "step,lr,loss,val_loss,grad_norm,tokens_per_s,elapsed_s,step_s,comm_s\n");
    *out = f;
    return LA_OK;
}

/* Under MPI every rank runs this loop in step; rank 0 alone writes the CSV log and the
 * checkpoints, and its I/O status is shared with every rank (la_dist_agree), so a failed
 * write stops all of them; a stop asked on any rank stops all of them at the same step. */
la_status la_trainer_run(la_trainer *tr, la_trainer_progress_fn progress, void *user) {
    if (!tr) return la_fail(LA_EINVAL, "la_trainer_run: trainer is NULL");
    const la_train_config *c = &tr->cfg;
    int writer = la_dist_rank() == 0;
    FILE *csv = NULL;
    la_status s = LA_OK;
    double t0 = omp_get_wtime();
    int start = tr->step;
    double tok_per_step = (double)c->B * c->T * c->grad_accum;
    while (tr->step < c->steps) {
        la_step_info info;
        s = la_trainer_step(tr, &info);
        if (s != LA_OK) break;
        float val = NAN;
        if (c->eval_every && (tr->step % c->eval_every == 0 || tr->step == c->steps)) {
            s = la_trainer_eval(tr, &val);
            if (s != LA_OK) break;
        }
        double el = omp_get_wtime() - t0;
        int done = tr->step - start;
        la_train_progress pr = {tr->step, c->steps, info.loss, val, info.grad_norm, info.lr,
                                done * tok_per_step / (el > 0 ? el : 1e-9), el,
                                el / done * (c->steps - tr->step)};
        if (tr->step == start + 1 && c->csv_path[0]) { /* every rank: the writer's status is shared */
            s = la_dist_agree(writer ? open_log(c->csv_path, start, &csv) : LA_OK);
            if (s != LA_OK) break;
        }
        if (csv) {
            fprintf(csv, "%d,%.6g,%.6f,%.6f,%.6f,%.1f,%.3f,%.6f,%.6f\n", pr.step, pr.lr, pr.loss, pr.val_loss,
                    pr.grad_norm, pr.tokens_per_s, pr.elapsed_s, info.seconds, info.comm_seconds);
            fflush(csv);
        }
        la_test_point("train-step");
        /* progress before the step's checkpoint: the caller learns that the run has started
         * (`longattn train` then records its data for --resume) before a checkpoint exists */
        if (la_dist_any(progress && progress(user, &pr))) {
            if (c->ckpt_path[0]) s = la_dist_agree(writer ? la_trainer_save(tr, c->ckpt_path) : LA_OK);
            if (s == LA_OK)
                s = la_fail(LA_EINTERRUPTED, "training stopped at step %d of %d%s%s", tr->step,
                            c->steps, c->ckpt_path[0] ? "; checkpoint saved to " : "",
                            c->ckpt_path);
            break;
        }
        if (c->ckpt_path[0] && c->ckpt_every && tr->step % c->ckpt_every == 0 && tr->step < c->steps) {
            s = la_dist_agree(writer ? la_trainer_save(tr, c->ckpt_path) : LA_OK);
            if (s != LA_OK) break;
        }
    }
    if (s == LA_OK && c->ckpt_path[0]) s = la_dist_agree(writer ? la_trainer_save(tr, c->ckpt_path) : LA_OK);
    if (csv) fclose(csv);
    return s;
}

/* ---- config <-> JSON ---- */

char *la_train_config_to_json(const la_train_config *c) {
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL; /* every add checked: a missing key would be saved as a success */
    ok = ok && cJSON_AddNumberToObject(o, "steps", c->steps) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "B", c->B) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "T", c->T) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "grad_accum", c->grad_accum) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "lr", c->lr) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "min_lr", c->min_lr) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "warmup", c->warmup) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "beta1", c->beta1) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "beta2", c->beta2) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "eps", c->eps) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "weight_decay", c->weight_decay) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "clip", c->clip) != NULL;
    ok = ok && cJSON_AddStringToObject(o, "optimizer", c->optimizer == LA_OPT_MUON ? "muon" : "adamw") != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "muon_lr", c->muon_lr) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "muon_momentum", c->muon_momentum) != NULL;
    /* written only for bf16, so that a float32 run's JSON (checkpoints) stays as it was */
    if (c->precision != LA_DTYPE_F32)
        ok = ok && cJSON_AddStringToObject(o, "precision", la_dtype_name(c->precision)) != NULL;
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
    ok = ok && cJSON_AddStringToObject(o, "seed", seed) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "eval_every", c->eval_every) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "eval_batches", c->eval_batches) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "ckpt_every", c->ckpt_every) != NULL;
    ok = ok && cJSON_AddStringToObject(o, "ckpt_path", c->ckpt_path) != NULL;
    ok = ok && cJSON_AddStringToObject(o, "csv_path", c->csv_path) != NULL;
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

la_status la_train_config_from_json(const char *text, la_train_config *out) {
    errno = 0;
    cJSON *o = cJSON_Parse(text);
    if (!o && errno == ENOMEM) return la_fail(LA_ENOMEM, "train config JSON: out of memory");
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return la_fail(LA_EFORMAT, "train config JSON is not an object");
    }
    la_train_config c = la_train_config_default();
#define NUM(key, field, type)                                              \
    do {                                                                   \
        cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);              \
        if (cJSON_IsNumber(it)) c.field = (type)it->valuedouble;           \
    } while (0)
    NUM("steps", steps, int);
    NUM("B", B, int);
    NUM("T", T, int);
    NUM("grad_accum", grad_accum, int);
    NUM("lr", lr, double);
    NUM("min_lr", min_lr, double);
    NUM("warmup", warmup, int);
    NUM("beta1", beta1, double);
    NUM("beta2", beta2, double);
    NUM("eps", eps, double);
    NUM("weight_decay", weight_decay, double);
    NUM("clip", clip, double);
    NUM("muon_lr", muon_lr, double);
    NUM("muon_momentum", muon_momentum, double);
    NUM("eval_every", eval_every, int);
    NUM("eval_batches", eval_batches, int);
    NUM("ckpt_every", ckpt_every, int);
#undef NUM
    cJSON *it = cJSON_GetObjectItemCaseSensitive(o, "optimizer");
    if (cJSON_IsString(it)) c.optimizer = strcmp(it->valuestring, "muon") ? LA_OPT_ADAMW : LA_OPT_MUON;
    it = cJSON_GetObjectItemCaseSensitive(o, "precision");
    if (cJSON_IsString(it) && la_dtype_parse(it->valuestring, &c.precision) != LA_OK) {
        la_status st = la_fail(LA_EFORMAT, "train config JSON: precision '%s' is not f32 or bf16", it->valuestring);
        cJSON_Delete(o); /* after the message: it quotes the value */
        return st;
    }
    it = cJSON_GetObjectItemCaseSensitive(o, "seed");
    if (cJSON_IsString(it)) c.seed = strtoull(it->valuestring, NULL, 10);
    it = cJSON_GetObjectItemCaseSensitive(o, "ckpt_path");
    if (cJSON_IsString(it)) snprintf(c.ckpt_path, sizeof c.ckpt_path, "%s", it->valuestring);
    it = cJSON_GetObjectItemCaseSensitive(o, "csv_path");
    if (cJSON_IsString(it)) snprintf(c.csv_path, sizeof c.csv_path, "%s", it->valuestring);
    cJSON_Delete(o);
    *out = c;
    return LA_OK;
}
