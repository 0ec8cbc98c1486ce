/*
 * longattn/train.h -- training data (byte text, llm.c token shards) and the trainer:
 * AdamW / Muon, schedule, checkpoints, training loop (layer train).
 */
#ifndef LONGATTN_TRAIN_H
#define LONGATTN_TRAIN_H

#include "core.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* Training data: byte text and llm.c token shards                          */
/* ======================================================================== */

/* Token source split into train and validation documents (opaque).
 * Text: a file or a directory of files (regular files, not recursive, sorted by name,
 * hidden files skipped), read as bytes, vocab 256, one document per file. A directory with a
 * train/ subfolder (the study corpus layout) is read as train/ plus, if present, val/: the
 * val/ documents are then the validation split and val_fraction is not used. Every document is
 * assigned to validation with probability val_fraction (la_rng seeded with split_seed);
 * if that leaves a split empty and there is more than one document, the last document by
 * name moves across; a single document is cut at byte (1 - val_fraction) * size.
 * Shards: files ending ".bin" (a file, or every .bin in a directory), llm.c format: 256
 * int32 header (magic 20240520, version 1, token count N), then N uint16 tokens; the file
 * must be exactly 1024 + 2N bytes. Documents start at each end-of-text id (eot) and are
 * split like text documents; files whose name contains "_val_" are validation and then
 * no train document moves to validation. Vocab is 50257 unless set.
 * The train split is the concatenation of its documents, sampled by window. */
typedef struct la_data la_data;

typedef enum { LA_SPLIT_TRAIN = 0, LA_SPLIT_VAL = 1 } la_split;

typedef struct {
    double val_fraction;  /* share of documents held out, in [0, 1). default 0.1 */
    uint64_t split_seed;  /* seed of the document split. default 1234 */
    int eot;              /* shard end-of-text id. default 50256 */
    int vocab;            /* 0: 256 for text, 50257 for shards */
} la_data_config;

LA_API la_data_config la_data_config_default(void);

/* Open a text file/directory or shard file/directory (the kind is chosen by the ".bin"
 * suffix; a directory must hold only one kind). Errors: LA_EIO (missing/unreadable),
 * LA_EFORMAT (wrong magic/version, size not 1024 + 2N, truncated, token >= vocab, empty
 * file set; the message names the file and the fix), LA_ENOMEM. */
LA_API la_status la_data_open(const char *path, const la_data_config *cfg, la_data **out);
LA_API void la_data_free(la_data *d);

LA_API int la_data_vocab(const la_data *d);
/* Total tokens / number of documents of a split. */
LA_API int64_t la_data_num_tokens(const la_data *d, la_split split);
LA_API int la_data_num_docs(const la_data *d, la_split split);
/* Length of document i of a split (tokens). -1 if out of range. */
LA_API int64_t la_data_doc_len(const la_data *d, la_split split, int i);
/* Copy n tokens of document `doc` starting at `offset` into out (n int32).
 * Errors: LA_EINVAL (bad doc, offset + n beyond the document). */
LA_API la_status la_data_read(const la_data *d, la_split split, int doc, int64_t offset, int64_t n,
                              int32_t *out);

/* Resumable sampling state (it goes into checkpoints). */
typedef struct {
    uint64_t rng[4];     /* xoshiro256** state of the window sampler */
    uint64_t n_windows;  /* windows drawn so far */
} la_data_state;

/* Seed the train sampler (state becomes a function of seed only). */
LA_API void la_data_seed(la_data *d, uint64_t seed);
LA_API void la_data_get_state(const la_data *d, la_data_state *st);
LA_API void la_data_set_state(la_data *d, const la_data_state *st);

/* Draw B windows of T+1 consecutive tokens from the train split, each start uniform over
 * every position where a full window fits (so every full window is reachable; nothing is
 * read past the declared count). out: (B, T+1) int32; inputs are out[b][0..T), targets
 * out[b][1..T]. Errors: LA_EINVAL (B, T < 1, out NULL), LA_ESHAPE (train split shorter
 * than T+1 tokens: the message gives both numbers). */
LA_API la_status la_data_sample(la_data *d, int B, int T, int32_t *out);

/* Deterministic validation windows: the validation split's concatenation cut into
 * consecutive non-overlapping windows of T+1 tokens; batch `index` holds windows
 * index*B .. index*B+B-1 (wrapping around). out: (B, T+1). Errors as la_data_sample. */
LA_API la_status la_data_val_batch(const la_data *d, int index, int B, int T, int32_t *out);

/* ======================================================================== */
/* Trainer: AdamW / Muon, schedule, checkpoints, training loop              */
/* ======================================================================== */

typedef enum {
    LA_OPT_ADAMW = 0, /* AdamW (Loshchilov & Hutter 2019) on every tensor */
    LA_OPT_MUON       /* Muon (K. Jordan 2024): momentum orthogonalised by 5 quintic
                         Newton-Schulz steps (a, b, c) = (3.4445, -4.7750, 2.0315) on
                         LA_PCLASS_MATRIX tensors, AdamW on the rest */
} la_optimizer;

typedef struct {
    int steps;            /* optimizer steps in total (schedule length). default 400 */
    int B, T;             /* micro-batch size and sequence length. default 16, 128 */
    int grad_accum;       /* micro-batches per step (gradients averaged). default 1 */
    double lr;            /* AdamW peak learning rate. default 3e-3 */
    double min_lr;        /* cosine floor. default lr / 10 */
    int warmup;           /* linear warm-up steps (from lr/warmup). default 20 */
    double beta1, beta2, eps;  /* AdamW, default 0.9, 0.95, 1e-8 */
    double weight_decay;  /* decoupled, on EMBED and MATRIX tensors only. default 0.1 */
    double clip;          /* global gradient-norm clip; 0 disables. default 1.0 */
    la_optimizer optimizer; /* default LA_OPT_ADAMW */
    double muon_lr;       /* Muon peak lr (same schedule shape). default 0.02 */
    double muon_momentum; /* Nesterov momentum of Muon. default 0.95 */
    uint64_t seed;        /* data sampler seed. default 1 */
    int eval_every;       /* la_trainer_run: validation every N steps (and at the end); 0: never */
    int eval_batches;     /* validation batches of B x T per evaluation. default 8 */
    int ckpt_every;       /* la_trainer_run: checkpoint every N steps (and at the end); 0: end only */
    char ckpt_path[1024]; /* la_trainer_run: checkpoint path ("" = none), see la_trainer_save */
    char csv_path[1024];  /* la_trainer_run: CSV log ("" = none): step,lr,loss,val_loss,grad_norm,tokens_per_s,elapsed_s */
    int n_threads;        /* attention threads of the model (la_model_set_threads); 0: leave as is */
    la_dtype precision;   /* LA_DTYPE_F32 (default) or LA_DTYPE_BF16: matrix products and attention
                             inputs in bf16 with float32 accumulation, float32 master weights,
                             gradients and optimizer state (la_model_set_precision, applied by
                             la_trainer_new) */
    int seq_parallel;     /* ranks per sequence (issue 30): 0 or 1 (default) none; k > 1 under MPI:
                             groups of k consecutive ranks share each micro-batch, every rank
                             holding its share of every sequence (la_model_set_seq_parallel);
                             the groups split the micro-batches like data-parallel ranks. The
                             weights stay bitwise one process's. T must be at least
                             64 (2k - 1) + 1 (2k tiles of 64) and k must divide the ranks
                             (la_trainer_new checks both). */
} la_train_config;

LA_API la_train_config la_train_config_default(void);

/* Learning-rate multiplier in [min_lr/lr, 1] at a step (0-based): linear warm-up over
 * `warmup` steps, then cosine decay to min_lr at `steps`. */
LA_API double la_train_lr_factor(const la_train_config *cfg, int step);

typedef struct la_trainer la_trainer;

/* Trainer for model m drawing from data (data may be NULL: then only
 * la_trainer_step_batch works). Both must outlive the trainer; the trainer seeds the
 * data sampler with cfg->seed. Errors: LA_EINVAL (bad config value, named), LA_ENOMEM. */
LA_API la_status la_trainer_new(la_model *m, la_data *data, const la_train_config *cfg,
                                la_trainer **out);
LA_API void la_trainer_free(la_trainer *tr);

typedef struct {
    int step;          /* steps done after this one */
    float loss;        /* mean training loss of the step (over its micro-batches) */
    float grad_norm;   /* global gradient norm before clipping */
    double lr;         /* AdamW learning rate used */
    double seconds;    /* wall time of the step */
    double comm_seconds; /* of which in the MPI gradient exchange after every rank finished
                            its micro-batches (0 on one process) */
} la_step_info;

/* One optimizer step on grad_accum batches of B x T drawn from the train split.
 * Errors: LA_EINVAL (no data), LA_ENUMERIC (non-finite loss: parameters untouched), others
 * from the model. info may be NULL. */
LA_API la_status la_trainer_step(la_trainer *tr, la_step_info *info);

/* One optimizer step on a caller-provided batch (e.g. passkey fine-tuning):
 * tokens, targets (B, T) as la_model_forward (targets < 0 ignored). Uses and advances the
 * same schedule and step counter. */
LA_API la_status la_trainer_step_batch(la_trainer *tr, const int32_t *tokens, const int32_t *targets,
                                       int B, int T, la_step_info *info);

/* One optimizer step on caller-provided rows cut into cfg.grad_accum micro-batches of
 * cfg.B x cfg.T: tokens, targets (grad_accum * B, T), micro-batch a = rows [a B, (a+1) B).
 * Under MPI (la_trainer_step's data parallelism) every rank passes the same rows and
 * computes the gradients of its block of micro-batches; the step equals a one-process
 * step bit for bit (micro-batch gradients summed in a fixed order). With grad_accum 1 on
 * one process it is la_trainer_step_batch. */
LA_API la_status la_trainer_step_rows(la_trainer *tr, const int32_t *tokens, const int32_t *targets,
                                      la_step_info *info);

/* Mean validation loss (nats/token) over cfg.eval_batches deterministic validation
 * batches (la_data_val_batch) of B x T, via la_model_eval. Errors: LA_EINVAL (no data or
 * empty validation split). */
LA_API la_status la_trainer_eval(la_trainer *tr, float *val_loss);

/* Steps done so far. */
LA_API int la_trainer_step_count(const la_trainer *tr);

/* Checkpoint: weights to `path` (la_model_save) and optimiser moments, Muon momenta,
 * step, data sampler state and train config to `path`.state (also safetensors: tensors
 * "adam.m", "adam.v", "muon.mom"; metadata as strings). Both written atomically; each
 * records a hash of the weights so a mismatched pair is detected. Errors: LA_EIO. */
LA_API la_status la_trainer_save(const la_trainer *tr, const char *path);

/* Restore a checkpoint into an existing trainer (whose model was built with the same
 * config, e.g. by la_model_load(path)): weights, moments, step, data state. Training
 * then continues bit-identically to an uninterrupted run. Errors: LA_EIO (missing file),
 * LA_EFORMAT (corrupt, truncated, weights/state mismatch, model config or optimizer
 * different from the trainer's: the message names the field). Nothing is changed on error. */
LA_API la_status la_trainer_load(la_trainer *tr, const char *path);

/* The train config stored in checkpoint `path`'s state file (to resume with the same
 * settings). Errors: LA_EIO, LA_EFORMAT. */
LA_API la_status la_trainer_read_config(const char *path, la_train_config *cfg);

/* Progress report of la_trainer_run, once per step. val_loss is NAN unless an evaluation
 * ran at this step. Return nonzero to stop: la_trainer_run then saves a checkpoint (if
 * ckpt_path is set) and returns LA_EINTERRUPTED. */
typedef struct {
    int step, steps;
    float loss, val_loss, grad_norm;
    double lr, tokens_per_s, elapsed_s, eta_s;
} la_train_progress;
/* user data first, like every callback of the API */
typedef int (*la_trainer_progress_fn)(void *user, const la_train_progress *p);

/* Run tr until cfg.steps (continuing from its step count, so a resumed trainer finishes
 * the same schedule), evaluating, logging CSV and checkpointing as configured. The CSV is
 * opened once the first step has succeeded: a new run replaces it; a resumed one keeps its
 * rows up to the checkpoint's step (rewritten atomically) and appends. progress is called
 * after each step's row and before that step's checkpoint; it may be NULL. Errors: from the steps,
 * LA_EINTERRUPTED (progress asked to stop; checkpoint saved), LA_EIO (log/checkpoint). */
LA_API la_status la_trainer_run(la_trainer *tr, la_trainer_progress_fn progress, void *user);

/* ---- deprecated names: kept so existing programs compile (with a warning naming
 * the replacement); see the naming rule in longattn.h ---- */

LA_DEPRECATED("use la_data_config_default") static inline la_data_config la_data_default_config(void) {
    return la_data_config_default();
}
LA_DEPRECATED("use la_train_config_default") static inline la_train_config la_train_default_config(void) {
    return la_train_config_default();
}
/* la_train_run took the callback with the user data last; la_trainer_run calls it through
 * this adapter. */
typedef int (*la_train_progress_fn)(const la_train_progress *p, void *user);
typedef struct {
    la_train_progress_fn fn;
    void *user;
} la_train_progress_adapter_;
static inline int la_train_progress_adapt_(void *adapter, const la_train_progress *p) {
    const la_train_progress_adapter_ *a = (const la_train_progress_adapter_ *)adapter;
    return a->fn(p, a->user);
}
LA_DEPRECATED("use la_trainer_run (callback (void *user, const la_train_progress *p))")
static inline la_status la_train_run(la_trainer *tr, la_train_progress_fn progress, void *user) {
    la_train_progress_adapter_ a = {progress, user};
    return la_trainer_run(tr, progress ? la_train_progress_adapt_ : (la_trainer_progress_fn)0, &a);
}

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_TRAIN_H */
