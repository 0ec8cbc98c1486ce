/*
 * longattn/experiments.h -- the experiments built on the model (layer experiments):
 * documents, evaluation loss by context length, passkey retrieval, length-generalisation
 * study files and runs, synthetic tasks, the critical-scaling simulation, the
 * Gaussian-model diagnostics, and the experiment runners behind `longattn synth`,
 * `kv-eval`, `diagnose` and `critical`.
 */
#ifndef LONGATTN_EXPERIMENTS_H
#define LONGATTN_EXPERIMENTS_H

#include "attn.h"
#include "core.h"
#include "model.h"
#include "train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* Length-generalisation study (SPEC 8): documents, evaluation loss,        */
/* passkey, study files and runs                                            */
/* ======================================================================== */

/* ---- documents ---- */

/* A set of documents as token ids, kept apart so that evaluation windows never cross a
 * document boundary. */
typedef struct {
    int32_t *tokens;   /* (n_tokens) every document, concatenated */
    int64_t *offset;   /* (n_docs + 1) document d is tokens[offset[d] .. offset[d+1]) */
    int64_t n_tokens;
    int n_docs;
    int vocab;         /* 256 for text read as bytes, 50257 for GPT-2 token shards */
    int is_bytes;      /* 1: tokens are bytes, so losses are bits per byte */
} la_docs;

/* Load every document under dir. If dir holds llm.c token shards (*.bin: 256 int32
 * header with magic 20240520, version 1 and the token count, then uint16 GPT-2 ids) they
 * are read in name order and split into documents at each <|endoftext|> (id 50256, which
 * starts every document in llm.c shards). Otherwise each regular, non-hidden file is one
 * byte-level document, in name order, except one named MANIFEST (the list of documents
 * that scripts/prepare_corpus.sh and prepare_longdocs.sh write beside them). Errors: LA_EINVAL (NULL), LA_EIO (cannot open or
 * read), LA_EFORMAT (bad shard header, truncated shard, no documents). On error *out is
 * zeroed. */
LA_API la_status la_docs_load(const char *dir, la_docs *out);
LA_API void la_docs_free(la_docs *docs);
/* Length in tokens of the longest document (0 if none). */
LA_API int64_t la_docs_longest(const la_docs *docs);

/* ---- validation loss at a context length ---- */

/* Per-position next-token loss of one window, supplied by the caller (the study binds it
 * to the GPT model; tests bind it to reference models). inputs, targets: (T) token ids;
 * writes loss: (T) in nats, loss[t] = -ln p(targets[t] | inputs[0..t]). */
typedef la_status (*la_token_loss_fn)(void *ctx, const int32_t *inputs, const int32_t *targets,
                                      int T, float *loss);

/* Choose n evaluation windows of T+1 tokens (T inputs, T shifted targets), each inside
 * one document with at least T+1 tokens: the eligible documents are shuffled with seed and
 * used in turn, each window at a seeded uniform offset. Same (docs, T, n, seed), same
 * windows. start: (n) offsets into docs->tokens. Errors: LA_EINVAL (T < 1, n < 1, NULL),
 * LA_ESHAPE when no document is long enough (the message gives the longest). */
LA_API la_status la_eval_windows(const la_docs *docs, int T, int n, uint64_t seed, int64_t *start);

/* Validation loss at context length T, one window at a time (B = 1, so memory is whatever
 * fn needs for one length-T window). The text evaluated is n spans of span+1 tokens
 * (la_eval_windows(docs, span, n, seed)); each span is cut into floor(span/T) windows of T
 * inputs placed back to back, each evaluated from position 0. With span = the longest
 * evaluation length (and lengths dividing it), every length scores exactly the same target
 * tokens, so differences between lengths come from context length alone. span = 0 means T.
 * Results in bits per token (bits per byte for byte documents):
 *   *loss: mean over every scored target token;
 *   bucket_loss: (ceil(T / bucket)) or NULL, the mean over target positions
 *   [b*bucket, (b+1)*bucket) of every window; bucket_tokens: (same) or NULL, their counts.
 * The token-weighted mean of bucket_loss is *loss. Sums are in double.
 * Errors: as la_eval_windows (for span), LA_EINVAL (bucket < 1, T < 1, span < T),
 * LA_ENUMERIC (a non-finite loss), or whatever fn returns. */
LA_API la_status la_eval_loss(la_token_loss_fn fn, void *ctx, const la_docs *docs, int T, int span, int n,
                              uint64_t seed, int bucket, double *loss, double *bucket_loss,
                              int64_t *bucket_tokens);

/* ---- passkey retrieval ---- */

/* Byte-level passkey task (Mohtashami & Jaggi 2023, the format RULER's NIAH reuses): a
 * haystack of real text with the needle
 *   " The pass key is KKKKK. Remember it. KKKKK is the pass key. "
 * inserted at a depth fraction, followed by
 *   "\nWhat is the pass key? The pass key is " and the five answer digits KKKKK. */
#define LA_PASSKEY_DIGITS 5

typedef struct {
    int key;          /* the pass key, 10000 .. 99999 */
    int needle_pos;   /* index of the needle's first byte in the example */
    int needle_len;   /* bytes of the needle text (with its two spaces) */
    int answer_pos;   /* index of the first answer digit: T + 1 - LA_PASSKEY_DIGITS */
    double depth;     /* realised depth: haystack bytes before the needle / haystack bytes */
} la_passkey;

/* Smallest T for which an example fits (needle + question + answer, no haystack). */
LA_API int la_passkey_min_len(void);

/* Build one example of T+1 byte tokens: the model reads tokens[0..T) and is scored on
 * predicting tokens[answer_pos .. T] (the digits). The haystack is a contiguous stretch of
 * hay (byte documents, joined by '\n' when one is too short), starting at a seeded offset;
 * the needle goes after floor(depth * haystack bytes), moved back to the previous
 * whitespace when one is within 16 bytes, so words stay whole. The key is drawn from seed
 * and redrawn until its digits occur nowhere in the haystack, so the answer is present
 * only in the needle and at the end. Errors: LA_EINVAL (NULL, depth outside [0,1], hay not
 * byte-level or empty), LA_ESHAPE (T < la_passkey_min_len()). */
LA_API la_status la_passkey_make(const la_docs *hay, int T, double depth, uint64_t seed,
                                 int32_t *tokens, la_passkey *info);

/* Exact-match score of greedy decoding: pred (T) holds the model's argmax next token at
 * each input position of the example tokens (T+1) built by la_passkey_make (e.g. the
 * argmax output of la_model_eval). Returns 1 iff pred[answer_pos-1+i] equals the digit
 * tokens[answer_pos+i] for every i < LA_PASSKEY_DIGITS -- teacher-forced argmax right at
 * every digit is exactly greedy decoding reproducing the whole key; 0 otherwise (one wrong
 * digit scores 0: no partial credit). */
LA_API int la_passkey_exact(const int32_t *pred, const int32_t *tokens, const la_passkey *info);

/* ---- study files ---- */

#define LA_STUDY_MAX_SPECS 16
#define LA_STUDY_MAX_LENS 12
#define LA_STUDY_MAX_DEPTHS 16
#define LA_STUDY_MAX_SEEDS 16

/* One length-generalisation study: a JSON file (format in docs/study.md, "Study file").
 * Every variant in specs is trained with the same data, data order, seed and model size,
 * then evaluated at every eval length and on the passkey grid. */
typedef struct {
    char name[128];            /* "name", for titles; default: the file's base name */
    char data[1024];           /* "data": folder with train/ and val/ (text files or llm.c shards) */
    int n_layer, d_model, n_head, n_kv_head; /* "model": {...} */
    int steps, batch, seq_len; /* "steps", "batch", "seq_len" (= L, the training length) */
    double lr;                 /* "lr": peak learning rate */
    int warmup;                /* "warmup": linear warm-up steps, default steps/10 */
    uint64_t seed;             /* "seed": weights, data order and evaluation windows */
    int eval_lens[LA_STUDY_MAX_LENS]; /* "eval_lens": strictly increasing, default L, 4L, 16L */
    int n_eval_lens;
    int eval_windows;          /* "eval_windows": windows per eval length, default 8 */
    int val_every;             /* "val_every": steps between validation losses during training, default steps/4 */
    /* "passkey": {...}; trials = 0 switches the task off */
    int pk_steps;              /* "finetune_steps" at length L, default steps/4 */
    double pk_lr;              /* "finetune_lr", default lr/3 */
    int pk_lens[LA_STUDY_MAX_LENS]; /* "lens": strictly increasing, default eval_lens */
    int n_pk_lens;
    double pk_depths[LA_STUDY_MAX_DEPTHS]; /* "depths" in [0,1], default 0, .25, .5, .75, 1 */
    int n_pk_depths;
    int pk_trials;             /* "trials" per length x depth, default 10 */
    char specs[LA_STUDY_MAX_SPECS][256]; /* "specs": attention spec strings (SPEC 6) */
    int n_specs;
    double qk_gain;            /* "model": {"qk_gain"}: initial QK-norm gain (la_model_config.qk_gain), default 1 */
    double pk_mix;             /* "passkey": {"pretrain_mix"}: fraction of every pre-training batch
                                  that is passkey examples at L (loss on the answer digits), default 0 */
    int accum;                 /* "accum": micro-batches per step (pre-training and fine-tune): the
                                  batch is cut into accum blocks of batch/accum rows whose mean
                                  losses' gradients are averaged; must divide batch; default 1 */
    int ranks_per_variant;     /* "ranks_per_variant": under mpirun, groups of this many ranks
                                  train one variant data-parallel (each rank a block of the accum
                                  micro-batches); variants spread over the groups. The numbers do
                                  not depend on it (only on accum). Default 1 */
    int n_seeds;               /* "seeds": every variant is trained with seeds seed, seed+1, ...,
                                  seed+n_seeds-1 (each one cell); tables report mean and spread, default 1 */
    int pk_mix_all;            /* "passkey": {"pretrain_targets": "all"}: the passkey rows of pre-training
                                  are scored on every byte (needle, question, answer) instead of the
                                  answer digits only ("answer", the default: 0) */
    la_dtype precision;        /* "precision": "f32" (default) or "bf16": the trainer's precision
                                  (la_train_config.precision) for pre-training and fine-tuning;
                                  evaluations run the same model precision */
    int seq_parallel;          /* "seq_parallel": under mpirun, this many ranks of a variant's group
                                  share each training sequence (la_train_config.seq_parallel); it
                                  must divide ranks_per_variant, which defaults to it when the file
                                  does not give it, and seq_len must be at least 64 (2 it - 1) + 1.
                                  The numbers do not depend on it. Default 1 */
} la_study;

/* Parse study-file text. where names the source in messages (a file name). Every key is
 * checked: an unknown key, a wrong type, a value out of range, lengths that do not
 * increase or a spec that la_spec_parse rejects gives LA_EFORMAT (LA_ESPEC for the spec)
 * with a message "<where>: key \"k\": problem; fix". Missing keys take the defaults above;
 * "data", "steps", "batch", "seq_len", "lr" and "specs" are required. */
LA_API la_status la_study_parse(const char *text, const char *where, la_study *out);
/* Read and parse a study file. Errors: LA_EIO, then as la_study_parse. */
LA_API la_status la_study_load(const char *path, la_study *out);

/* ---- running a study ---- */

/* Progress of la_study_run, reported at every step and phase change. */
typedef struct {
    int spec_index, n_specs; /* variant being worked on (0-based) */
    const char *spec;        /* its spec text */
    const char *phase;       /* "train", "eval", "finetune", "passkey" or "write" */
    int done, total;         /* steps / windows / examples done in this phase */
    double loss;             /* latest training loss in bits per token, NAN if none */
    double val_loss;         /* latest validation loss at L in bits per token, NAN if none */
    double elapsed_s;        /* wall time since the study started */
    double eta_s;            /* estimated seconds left for the whole study, NAN until known;
                                from a flop count of every remaining phase and the measured rate */
    int seed_index, n_seeds; /* seed of the cell being worked on (0-based) of the study's n_seeds */
    uint64_t seed;           /* its value (study seed + seed_index) */
} la_study_progress;
typedef void (*la_study_progress_fn)(void *user, const la_study_progress *p);

typedef struct {
    int n_threads;                 /* attention threads; 0: OpenMP default */
    la_study_progress_fn progress; /* NULL: silent */
    void *user;
    const char *gnuplot;           /* gnuplot program; NULL: "gnuplot"; "": no plots */
    const char *data;              /* non-NULL: use this data folder instead of the file's "data" */
    int resume;                    /* 1: keep the variants an interrupted run of the same study in
                                      out_dir finished (out_dir/cells/); refused (LA_EINVAL naming the
                                      setting) when the study or options differ. 0: start afresh */
    int ranks_per_variant;         /* > 0: instead of the study's "ranks_per_variant" */
    int seq_parallel;              /* > 0: instead of the study's "seq_parallel" */
} la_study_opts;

LA_API la_study_opts la_study_opts_default(void);

/* What a finished study reports besides its files. */
typedef struct {
    double wall_s;       /* wall time of the whole study */
    int plots_ok;        /* 1 if every PNG was written */
    char warning[512];   /* non-fatal problems (e.g. gnuplot missing), "" if none */
    int n_resumed;       /* finished variants loaded from an interrupted run (opts.resume) */
    int n_continued;     /* variants continued from a pre-training checkpoint of that run */
} la_study_summary;

/* Run a study: for each spec, build the GPT of the study's size (same seed), train it for
 * `steps` optimizer steps on B x L windows of <data>/train (the same windows in the same
 * order for every spec), evaluate the validation loss on <data>/val at every eval length
 * (la_eval_loss, buckets of L positions), then fine-tune on passkey examples of length L
 * (haystacks from the training documents, loss on the answer digits only) and score exact
 * match over passkey lens x depths x trials (haystacks from the validation documents).
 * With n_seeds > 1 every spec is trained once per seed (study->seed + k), each (spec, seed)
 * a separate cell equal to a one-seed study with that seed.
 * Writes into out_dir (created if needed), atomically, after every cell:
 *   results.csv  spec,seed,eval_len,loss_bpb,windows,tokens,pos_0,pos_L,... (bucket losses)
 *   passkey.csv  spec,seed,length,depth,trials,correct,passkey_acc
 *   training.csv spec,seed,step,train_loss_bpb,val_loss_bpb,elapsed_s
 *   finetune.csv spec,seed,step,answer_loss_bits_per_digit (the passkey fine-tune)
 *   summary.csv  spec,seeds,metric,length,mean,std,min,max (over the seeds)
 *   results.json every number above plus the study's settings and the per-spec summary
 *   results.md   the summary table (markdown; with seeds: mean ± sample std, then min-max;
 *                passkey beyond L "not learned" where the accuracy at L is below 0.5)
 * and at the end PNG plots made by gnuplot from a generated script (plots.gp), with error
 * bars of one sample std over the seeds: loss_vs_length.png, passkey_vs_length.png,
 * loss_by_position.png, finetune_loss.png, passkey_<i>.png (one heatmap per spec).
 * Losses are bits per byte for text data (bits per token for shards). summary may be NULL.
 * Each finished variant is also saved in out_dir/cells/ (runner/cells.h) as it finishes;
 * with opts->resume the variants an interrupted run saved are loaded instead of rerun, and
 * the files above come out as those of an uninterrupted run (timings aside).
 * Errors: LA_EINVAL (NULL; a resume whose settings differ), LA_EIO (data or output folder), LA_ESHAPE (a validation
 * document shorter than the longest eval length: checked before any training), errors of
 * the model and trainer; files of finished variants stay written. */
LA_API la_status la_study_run(const la_study *study, const char *out_dir, const la_study_opts *opts,
                              la_study_summary *summary);

/* Seed of example (length index li, depth index di, trial k) of the passkey grid that
 * la_study_run scores for a cell trained with `seed` (li, di: indices into the study's
 * passkey lens and depths): la_passkey_make(<data>/val documents, lens[li], depths[di], this
 * seed, ...) rebuilds that very example. The same for every spec of the cell's seed. */
LA_API uint64_t la_study_passkey_seed(uint64_t seed, int li, int di, int k);

/* ======================================================================== */
/* Synthetic tasks (SPEC 8)                                                 */
/* ======================================================================== */

/* Length-generalisation tasks of Vasylenko et al. 2025 (ASEntmax, arXiv 2506.16640),
 * in the format of its public data generator: one example is the token sequence
 *     BOS source SEP target EOS
 * and the loss (and exact match) covers the positions that predict target and EOS.
 * Every task has its own vocabulary: content tokens 0 .. n_content-1, then the special
 * tokens PAD = n_content, BOS = n_content+1, EOS = n_content+2, SEP = n_content+3
 * (the paper's tokenizer order pad, bos, eos, [mask,] sep; there is no mask token).
 *
 * "Content length" L is the task's sequence-length knob (the paper's seq_len): training
 * draws L uniformly from [min_len, max_len] (32-64 as in the paper); evaluation fixes
 * L = m * max_len for m = 1, 2, 4, ... Source and target sizes at length L:
 *   copy / reverse / sort  source L random tokens in [0, n_symbols); target the source,
 *                          reversed, or sorted ascending (L tokens).
 *   mqmtar                 source: a key-value region of exactly L tokens, then
 *                          n_queries x (QSEP key); target n_queries x (QSEP value)
 *                          (mq_layout LA_MQ_PAPER, the default). With LA_MQ_INLINE the
 *                          source is the region alone and the target n_queries x
 *                          (QSEP key value): each query key sits right before its value, as in
 *                          Zoology's MQAR (Arora et al. 2023), and the query keys are given
 *                          (teacher-forced), not predicted: la_task_batch scores only the
 *                          QSEPs, the values and EOS. LA_MQ_ECHO keeps the paper's source
 *                          and makes the target n_queries x (QSEP key value), every token
 *                          scored: the model first copies the query key from the source,
 *                          then looks up its value (a recall "chain of thought" that
 *                          supervises each of the two hops on its own).
 *                          Content ids: SPACE 0, KVSEP 1, QSEP 2, alphabet 3 .. 3+n_symbols-1.
 *                          A key is k_len alphabet tokens, a value v_len. The region holds
 *                          n_kv = min(floor(L*kv_frac/(k_len+v_len+2)), n_symbols^k_len,
 *                          n_symbols^v_len) pairs "key KVSEP value" with distinct keys and
 *                          distinct values, each at a random offset inside its own block of
 *                          ~L/n_kv tokens padded by SPACE (always >= 1 SPACE after a value);
 *                          queries pick keys of the region uniformly with replacement.
 *   flipflop               P = L/2 (command, bit) pairs: commands WRITE 2 (the first),
 *                          WRITE with probability write_prob or IGNORE 3 (the middle ones),
 *                          READ 4 (the last); bits 0/1. Source: the 2P-1 tokens of the pairs
 *                          without the READ's bit; target: the bit of the last WRITE (1 token).
 * Generation is deterministic: example `index` of stream `seed` is the same on every
 * machine and independent of which other examples are drawn. */
typedef enum {
    LA_TASK_MQMTAR = 0, /* multi-query multi-token associative recall */
    LA_TASK_COPY,
    LA_TASK_REVERSE,
    LA_TASK_SORT,
    LA_TASK_FLIPFLOP,
    LA_TASK_COUNT_      /* number of tasks (not a task) */
} la_task;

/* Where MQMTAR puts its queries (see above). */
typedef enum {
    LA_MQ_PAPER = 0,  /* queries at the end of the source, values in the target (the paper) */
    LA_MQ_INLINE = 1, /* QSEP key value per query in the target; keys given, not scored */
    LA_MQ_ECHO = 2    /* queries as in the paper; the target repeats each query key before
                         its value (QSEP key value), all scored */
} la_mq_layout;

typedef struct {
    la_task task;
    int n_symbols;     /* copy/reverse/sort: token range; mqmtar: key/value alphabet size */
    int min_len;       /* training content length range, inclusive (default 32 .. 64) */
    int max_len;
    int k_len, v_len;  /* mqmtar tokens per key / value (default 2, 2) */
    double kv_frac;    /* mqmtar share of the region given to pairs, (0, 1] (default 0.8) */
    int n_queries;     /* mqmtar queries per example (default 4) */
    double write_prob; /* flipflop probability of a middle WRITE, (0, 1) (default 0.1) */
    la_mq_layout mq_layout; /* mqmtar query placement (default LA_MQ_PAPER) */
} la_task_params;

/* Token ids of a task's vocabulary; vocab_size = n_content + 4. */
typedef struct {
    int n_content, pad, bos, eos, sep, vocab_size;
} la_task_vocab;

/* Where the parts of one generated example sit in its token buffer. */
typedef struct {
    int n_tokens;   /* total tokens: 1 + src_len + 1 + tgt_len + 1 */
    int content_len;/* the L it was generated at */
    int src_start;  /* = 1 (after BOS) */
    int src_len;
    int sep;        /* index of SEP = 1 + src_len */
    int tgt_start;  /* = sep + 1 */
    int tgt_len;
    int eos;        /* index of EOS = tgt_start + tgt_len = n_tokens - 1 */
} la_task_example;

/* Defaults for a task (n_symbols 16: copy/reverse/sort token range 16; mqmtar alphabet
 * 16, i.e. 256 possible keys of 2 tokens). */
LA_API la_task_params la_task_params_default(la_task task);

/* "mqmtar", "copy", "reverse", "sort", "flipflop" (also "flip-flop").
 * Errors: LA_EINVAL naming the bad name and the valid ones. */
LA_API la_status la_task_from_name(const char *name, la_task *out);
LA_API const char *la_task_name(la_task task); /* "?" for an unknown value */

/* Check params (ranges above; mqmtar: min_len must hold >= n_queries pairs).
 * Errors: LA_EINVAL naming the field and its valid range. */
LA_API la_status la_task_validate(const la_task_params *p);

LA_API la_status la_task_get_vocab(const la_task_params *p, la_task_vocab *v);

/* Tokens of an example at content length L (every example at L has exactly this many).
 * Errors: LA_EINVAL (bad params, L < 4 or L too large for int). */
LA_API la_status la_task_tokens_at(const la_task_params *p, int content_len, int *n_tokens);

/* Generate example `index` of stream `seed` into tokens[0 .. cap). content_len 0 draws L
 * uniformly from [min_len, max_len]; > 0 uses that L (evaluation). ex may be NULL.
 * Errors: LA_EINVAL (bad params/L, NULL tokens), LA_ESHAPE (cap too small). */
LA_API la_status la_task_sample(const la_task_params *p, int content_len, uint64_t seed,
                                uint64_t index, int32_t *tokens, int cap, la_task_example *ex);

/* Pack examples first_index .. first_index+B-1 of stream `seed` for next-token training,
 * in the convention of la_model_forward / la_trainer_step_batch:
 *   inputs:  (B, T) row b holds example tokens[0 .. n-2], right-padded with PAD;
 *   targets: (B, T) tokens[1 .. n-1] where the loss applies -- the positions predicting a
 *            target token or EOS (t >= sep) -- and -1 elsewhere (source, the SEP
 *            prediction, padding): the loss is on the target only (LA_MQ_INLINE: also -1
 *            where the next token is a given query key);
 *   ex:      (B) example layouts, or NULL.
 * T must be >= the longest example's n_tokens - 1 (la_task_tokens_at(max L) - 1).
 * content_len as in la_task_sample. Errors: LA_EINVAL, LA_ESHAPE (T too small). */
LA_API la_status la_task_batch(const la_task_params *p, int content_len, uint64_t seed,
                               uint64_t first_index, int B, int T, int32_t *inputs,
                               int32_t *targets, la_task_example *ex);

/* Exact match of one packed row: 1 if pred[t] == targets[t] at every t with
 * targets[t] >= 0, else 0. pred, targets: (T). With teacher forcing this equals greedy
 * decoding exact match: if every forced prediction is right, greedy decoding feeds back
 * exactly the forced inputs; at the first wrong forced prediction greedy decoding emits
 * that wrong token. */
LA_API int la_task_exact_match(const int32_t *pred, const int32_t *targets, int T);

/* Exact-match accuracy of model m on examples 0 .. n-1 of stream `seed` of task p at
 * content length L (> 0): one no-grad pass (la_model_eval) per batch of examples,
 * greedy answers read as the teacher-forced argmax at the target and EOS positions
 * (la_task_exact_match), batched so that batch x tokens <= max_batch_tokens (at least one
 * example per batch). *n_correct gets the number of exactly right answers.
 * Errors: LA_EINVAL (bad params/L/n, model vocabulary smaller than the task's),
 * LA_ENOMEM, model errors. */
LA_API la_status la_task_eval(la_model *m, const la_task_params *p, int content_len, int n,
                              uint64_t seed, int64_t max_batch_tokens, int *n_correct);

/* ======================================================================== */
/* Critical-scaling simulation (SPEC 8)                                     */
/* ======================================================================== */

/* The model of Chen, Lin, Polyanskiy & Rigollet, "Critical attention scaling in
 * long-context transformers" (arXiv 2025; seeds/001): tokens on the unit sphere,
 * K = Q = V = I, one self-attention step with scores beta <x_i, x_j> (self included)
 * and beta = gamma * log n, outputs normalised back to the sphere:
 *     y_i = sum_j softmax_j(beta <x_i, x_j>) x_j,   y_i <- y_i / |y_i|.
 * For tokens with pairwise inner product rho the phase transition is at
 * gamma = 1 / (1 - rho): below it the tokens collapse to one direction, above it attention
 * is the identity. All arrays are double, row-major. */

/* One attention step. x: (n, d) unit rows; y: (n, d) output rows (unit; a zero row stays
 * zero). Streams over blocks of query rows (BLAS dgemm), memory O(n*d + 256*n), no n x n
 * buffer. Errors: LA_EINVAL (NULL, n or d < 1, beta not finite, x == y), LA_ENOMEM. */
LA_API la_status la_critical_attend(const double *x, int n, int d, double beta, double *y);

/* Mean over the n(n-1)/2 pairs i < j of the angle acos(<x_i, x_j>) (radians, inner
 * products clamped to [-1, 1]) and of the inner product <x_i, x_j>. x: (n, d), n >= 2.
 * Either output may be NULL. Errors: LA_EINVAL, LA_ENOMEM. */
LA_API la_status la_critical_pair_stats(const double *x, int n, int d, double *mean_angle,
                                        double *mean_ip);

/* The paper's Gaussian model (its eq. 3.1): x_i = sqrt(rho) z_0 + sqrt(1-rho) z_i with
 * z_0, z_i i.i.d. standard Gaussian in R^d (la_rng seeded with seed), each row then
 * normalised to the unit sphere. x: (n, d). rho in [0, 1]. Errors: LA_EINVAL. */
LA_API la_status la_critical_gaussian_tokens(int n, int d, double rho, uint64_t seed, double *x);

/* The equal-angle (regular simplex) configuration of the theorem's Assumption 1, built
 * exactly: x_i = sqrt(rho) e_0 + sqrt(1-rho) e_{i+1}, so |x_i| = 1 and <x_i, x_j> = rho
 * (i != j) up to rounding. x: (n, n+1), i.e. d = n + 1. rho in [0, 1).
 * Errors: LA_EINVAL. */
LA_API la_status la_critical_simplex_tokens(int n, double rho, double *x);

/* Inner product <y_i, y_j> (i != j) after one step on the equal-angle configuration of n
 * tokens, in closed form: by symmetry every token puts weight w_s = 1/(1+u) on itself and
 * w_o = u/(1+u) spread evenly on the m = n-1 others, u = m exp(beta (rho - 1)), so
 * y_i ~ w_s x_i + w_o o_i with o_i the mean of the other tokens, whose inner products are
 * exact functions of rho and m (derivation in src/tasks/critical.c). O(1) work, any
 * n >= 2 (n is a double so that n = 1e12 works). beta = gamma * log n.
 * Errors: LA_EINVAL (n < 2, rho outside [0, 1), gamma not finite or < 0). */
LA_API la_status la_critical_simplex_ip(double n, double rho, double gamma, double *ip);

/* The theorem's n -> infinity limit of la_critical_simplex_ip (Chen et al. Thm 2.1 with
 * the simplex assumption): 1 for gamma < 1/(1-rho) (collapse), 4 rho / (1 + 3 rho) at
 * gamma = 1/(1-rho) (|gamma (1-rho) - 1| <= 1e-12), rho above (identity). */
LA_API double la_critical_simplex_limit(double rho, double gamma);

/* One grid cell of the Gaussian-model simulation. Angles in radians. */
typedef struct {
    double rho, gamma;
    double gamma_crit;     /* 1 / (1 - rho) */
    double beta;           /* gamma * log n */
    double angle_before, angle_after; /* mean pairwise angles, averaged over draws */
    double angle_ratio;    /* angle_after / angle_before (the paper's lambda) */
    double ip_before, ip_after;       /* mean pairwise inner products */
    double simplex_ip;     /* la_critical_simplex_ip at the same n, rho, gamma */
} la_critical_cell;

typedef struct {
    int n, d;           /* tokens and dimension. default 1024, 256 */
    int draws;          /* independent token sets per rho, averaged. default 1 */
    uint64_t seed;      /* default 1 */
    int n_threads;      /* unused by the BLAS path; reserved. default 0 */
} la_critical_params;

LA_API la_critical_params la_critical_params_default(void);

/* Run the grid: for each rho (n_rho values in [0, 1)) draw `draws` Gaussian token sets
 * and for each gamma (n_gamma values >= 0) attend once with beta = gamma log n.
 * cells: (n_rho, n_gamma) row-major. Cost O(n_rho * draws * n_gamma * n^2 * d).
 * Errors: LA_EINVAL (bad params or grid value, named), LA_ENOMEM. */
LA_API la_status la_critical_grid(const la_critical_params *p, const double *rhos, int n_rho,
                                  const double *gammas, int n_gamma, la_critical_cell *cells);

/* The experiment behind `longattn critical` (src/runner/critical_run.c): la_critical_grid,
 * then into folder out (created) critical.csv (one row per cell), simplex.csv (the closed
 * form at n = 1e3..1e12 against the theorem's limit, per rho) and critical.gp (heat map
 * script); with plot, gnuplot draws critical.png: *gnuplot_exit (may be NULL) receives its
 * exit status (0 drawn; the files stay written otherwise), -1 when not run. cells:
 * (n_rho, n_gamma) as la_critical_grid. Prints nothing. Errors: la_critical_grid's, LA_EIO
 * (folder or files). */
LA_API la_status la_critical_run(const la_critical_params *p, const double *rhos, int n_rho,
                                 const double *gammas, int n_gamma, const char *out, int plot,
                                 la_critical_cell *cells, int *gnuplot_exit);

/* ======================================================================== */
/* Scale-invariance diagnostics under the Gaussian model (SPEC 8)           */
/* ======================================================================== */

/* The scale-invariance check under the paper's Gaussian model (Anson et al. sec. 3):
 * one query at position N sees keys at distances t = 0..N whose base logits S_t are
 * i.i.d. N(0, 1) (la_rng seeded with seed); the spec's transform gives L_t (SPEC 4):
 * none / temp: temp*S; sinv: a_t S + m_t; logn: s log(N+1) S (s = logn_s, or
 * 1/log(train_len)); qwen-logn: max(1, log(N+1)/log(train_len)) S; critical:
 * gamma log(N+1) S. Each of `draws` rows is normalised by softmax (log-sum-exp over its
 * N+1 keys, O(N) memory, no N x N buffer) and streamed into d, slot 0, in key tiles.
 * The spec must be softmax with the causal pattern; position encodings do not enter the
 * model. Errors: LA_EINVAL (NULL, N < 1, draws < 1, d's max_dist < N, logn without s or
 * train), LA_EUNSUPPORTED (other normaliser or pattern, alibi/nape), LA_ENOMEM. */
/* src/tasks/diag_gaussian.c */
LA_API la_status la_diag_gaussian(const la_spec *spec, int64_t N, int draws, uint64_t seed, la_diag *d);

/* ======================================================================== */
/* Experiment runners: synthetic tasks, KV-cache policies, diagnostics       */
/* (library calls behind `longattn synth`, `kv-eval`, `diagnose`: they      */
/* write their files, report through callbacks and never print)             */
/* ======================================================================== */

/* ---- synthetic tasks (src/runner/synth_run.c) ---- */

/* One train-then-evaluate grid: a small GPT per task x attention spec, trained at content
 * lengths min_len..max_len, then exact-match accuracy at 1x, 2x, 4x, ... max_mult x
 * max_len (ASEntmax paper's synthetic-task table). Zero / empty fields take the task's or
 * the model's defaults where noted. */
typedef struct {
    char tasks[256];     /* comma list of task names (la_task_from_name), at most 8 */
    char specs[1024];    /* ';' list of attention specs, at most 16 */
    char out[1024];      /* output folder (created) */
    int steps, batch, warmup;       /* optimizer steps per run, sequences per step, warm-up */
    int layers, heads, d_model, d_ff; /* model size; d_ff 0: 4 d_model */
    double lr, muon_lr;  /* peak learning rates (cosine to a tenth) */
    la_optimizer optimizer;
    double qk_gain;      /* initial QK-norm gain */
    double init_std;     /* weight init std; 0: the model's default */
    int n_symbols;       /* 0: the task's */
    int min_len, max_len;
    int queries, k_len, v_len; /* mqmtar; 0: the task's */
    la_mq_layout mq_layout;    /* evaluated (and last trained) mqmtar layout */
    double inline_share, echo_share; /* mqmtar layout curriculum: shares of the steps first
                                        trained on the inline, then the echo layout */
    double kv_frac;      /* mqmtar share of the region given to pairs; 0: the task's */
    int eval_n;          /* examples per evaluation length (fewer above 16x) */
    int max_mult;        /* largest length multiplier, a power of two <= 1024 */
    long max_eval_tokens; /* lengths whose sequences exceed this are skipped */
    int threads;         /* attention threads, 0: OpenMP default */
    int curriculum;      /* start length of the length curriculum; 0: off */
    double ramp;         /* share of the steps the curriculum ramps over */
    uint64_t seed;
    int quick;           /* set by la_synth_opts_quick (mqmtar then uses one query) */
    int resume;          /* 1: keep the task x spec runs an interrupted run with the same options
                            finished in out (out/cells/); refused (LA_EINVAL naming the option)
                            when the options differ. 0: start afresh */
    int seeds;           /* runs per task x spec, with seeds seed, seed+1, ... (1..LA_SYNTH_MAX_SEEDS);
                            above 1 the tables add, per task x spec, how many seeds learned the
                            task (exact match >= 0.5 at 1x) and the mean +- std over those */
    la_dtype precision;  /* LA_DTYPE_F32 (default) or LA_DTYPE_BF16 (la_train_config.precision) */
} la_synth_opts;

#define LA_SYNTH_MAX_SEEDS 16

/* The defaults of `longattn synth` (see docs/synthetic.md, "Synthetic tasks"). */
LA_API la_synth_opts la_synth_opts_default(void);
/* The tiny CI configuration over o (`--quick`): flipflop,copy; two softmax specs; lengths
 * 8-16; 40 steps; 16 examples at 1x-4x. */
LA_API void la_synth_opts_quick(la_synth_opts *o);
/* A named configuration over o (`--preset NAME`; later options override it). "mq-contrast":
 * the MQMTAR contrast of ASEntmax and softmax (docs/study.md, "Synthetic contrast"): inline
 * layout, 2 queries, 1-token keys and values, 8 symbols, 2 layers x 64 with 4 heads,
 * init std 0.07, curriculum from 12 over 60 % of 12000 steps, p-RoPE(0.25) with each
 * normaliser, 3 seeds from 1, 50 examples per length up to 64x, out runs/mq-contrast.
 * LA_EINVAL for an unknown name (the message lists the known ones). */
LA_API la_status la_synth_opts_preset(la_synth_opts *o, const char *name);

/* Progress of la_synth_run, for the caller to show (the runner prints nothing). */
typedef enum {
    LA_SYNTH_TRAINING = 0, /* every 50 steps and the last: step, steps, loss (EMA), elapsed_s */
    LA_SYNTH_EVALUATED,    /* one evaluation length done: mult, content_len, tokens, correct, n */
    LA_SYNTH_SKIPPED,      /* a spec this build cannot run (LA_EUNSUPPORTED): message says why */
} la_synth_event;

typedef struct {
    la_synth_event event;
    la_task task;
    const char *spec;
    int step, steps;
    double loss, elapsed_s;
    int mult, content_len, tokens, correct, n;
    const char *message;
    uint64_t seed;         /* the run's seed (o->seed + its index when o->seeds > 1) */
} la_synth_progress;

typedef void (*la_synth_progress_fn)(void *user, const la_synth_progress *p);

/* Checks every field, task name and spec of o without training: LA_EINVAL naming the
 * problem (unknown task, bad spec, invalid task parameters, heads not dividing d_model,
 * max_mult not a power of two, ...). */
LA_API la_status la_synth_validate(const la_synth_opts *o);

/* Runs the grid, saving each finished task x spec run in out/cells/ (o->resume: those of
 * an interrupted run are kept, not rerun) and writing (atomically, rewritten after every
 * run so that partial results survive an interruption) results.csv, results.md, results.json, then per task
 * synth_<task>.dat, .gp and .png (gnuplot) into o->out. Specs whose normaliser this build
 * lacks are skipped and listed in results.md/json. progress may be NULL. *n_runs (may be
 * NULL): runs completed. Errors: la_synth_validate's, LA_EIO (folder, files, or gnuplot
 * failed: the tables are then written and the message quotes gnuplot), errors of the
 * model, trainer or tasks (the message names the task and spec). */
LA_API la_status la_synth_run(const la_synth_opts *o, la_synth_progress_fn progress, void *user,
                       int *n_runs);

/* ---- KV-cache policy evaluation (src/runner/kv_eval_run.c) ---- */

#define LA_KV_EVAL_MAX_LENS 12
#define LA_KV_EVAL_MAX_POLICIES 12

/* A byte-level checkpoint decoded through the KV cache under several policies: validation
 * loss (bits per byte, la_eval_loss over the decoder) and passkey accuracy at each length,
 * with the cache size. */
typedef struct {
    const char *ckpt;         /* model weights (required) */
    const char *passkey_ckpt; /* passkey scored with these weights (same model); NULL: ckpt */
    const char *data;         /* documents; data/val is used when it exists (required) */
    const char *out;          /* output folder (created) */
    int lens[LA_KV_EVAL_MAX_LENS]; /* increasing context lengths >= 2 */
    int n_lens;               /* 0: L, 2L, 4L, 8L, 16L (L = the model's train_len) */
    const char *policies;     /* ';' list of la_kv_policy_parse texts; NULL: full; window(L);
                                 sinks(4,L-4); h2o(L/2,L/2); int8; sinks(4,L-4)+int8 */
    int windows;              /* validation windows per length (>= 1) */
    int trials;               /* passkey examples per length (0: off) */
    int chunk;                /* tokens per decoding step under evicting policies (>= 1) */
    uint64_t seed;            /* windows and passkeys */
    const char *kv_type;      /* element type (la_kv_type_parse) of policies that name none; NULL: f32 */
} la_kv_eval_opts;

/* The defaults of `longattn kv-eval` (out runs/kv-eval, 4 windows, 6 trials, chunk 1,
 * seed 1; ckpt and data NULL). */
LA_API la_kv_eval_opts la_kv_eval_opts_default(void);

typedef enum {
    LA_KV_EVAL_POINT = 0, /* one (policy, length) done: the fields below */
    LA_KV_EVAL_NOTE,      /* something the caller should tell the user: message */
} la_kv_eval_event;

typedef struct {
    la_kv_eval_event event;
    const char *policy;
    int len;
    double bits;                    /* validation bits per byte */
    int hits, n_passkey;            /* whole keys right of n_passkey examples */
    int digit_hits, n_digits;       /* digits right of n_digits */
    int64_t cache_tokens;           /* tokens the cache holds at this length */
    double elapsed_s;
    const char *message;            /* LA_KV_EVAL_NOTE */
} la_kv_eval_progress;

typedef void (*la_kv_eval_progress_fn)(void *user, const la_kv_eval_progress *p);

/* Runs the evaluation and writes kv_eval.csv, kv_eval.md, kv_eval.dat, kv_eval.gp and
 * kv_eval.png (atomically) into o->out. Without gnuplot the PNG is missing and a NOTE
 * says so (the status stays LA_OK); documents that are not byte-level turn the passkey off
 * with a NOTE. The runner prints nothing. Errors: LA_EINVAL (missing ckpt/data, bad
 * lengths or counts, passkey_ckpt of another model: the message names both), LA_ESPEC (a
 * policy that does not parse, or an empty policy list), errors of loading the model or
 * documents (the message names the file), LA_EIO (output files), LA_ENOMEM. */
LA_API la_status la_kv_eval_run(const la_kv_eval_opts *o, la_kv_eval_progress_fn progress, void *user);

/* ---- attention diagnostics (src/runner/diagnose_run.c) ---- */

/* ---- checkpoint mode: la_model_diagnose of a byte-level model on N bytes of a text ---- */
typedef struct {
    const char *ckpt;   /* model weights (vocab 256) */
    const char *text;   /* a text file, or a folder: its first regular non-hidden file (name
                           order) with at least offset + N bytes */
    const char *out;    /* output folder (created) */
    int64_t N;          /* bytes of context, 2..65536 */
    int64_t offset;     /* bytes skipped at the start of the text */
    double delta;       /* range ratio (> 1) */
    int threads;        /* attention threads, 0: OpenMP default */
    int plot;           /* run gnuplot on diagnose.gp */
} la_diagnose_ckpt_opts;

typedef struct {
    char text_path[4352];     /* the file read */
    la_model_config config;   /* the checkpoint's */
    la_diag **diag;           /* (n_layer * n_head) accumulators, layer-major */
    double seconds;           /* time of la_model_diagnose */
    int gnuplot_exit;         /* gnuplot's exit status, -1 when not run */
} la_diagnose_ckpt_result;

/* Called once the model and text are chosen, before the (long) diagnosis: r->config and
 * r->text_path are set. */
typedef void (*la_diagnose_start_fn)(void *user, const la_diagnose_ckpt_result *r);

/* Loads the checkpoint, reads N bytes of the text, runs la_model_diagnose and writes into
 * o->out diagnose.csv (layer, head, range, rows, keys, mass and entropy with standard
 * errors), summary.csv (per layer and head: mass max/min and entropy slope over the
 * complete ranges with t >= delta, la_diag_summary) and diagnose.gp, then gnuplot draws
 * diagnose.png when o->plot. Prints nothing; r (zeroed first) holds the accumulators for
 * the caller to show: free with la_diagnose_ckpt_free. Errors: LA_EINVAL (N outside
 * 2..65536, delta <= 1, a model that is not byte-level, a text shorter than offset + N:
 * the message names the file and sizes), the model loader's, LA_EIO (text, output files),
 * LA_ENOMEM. */
LA_API la_status la_diagnose_ckpt_run(const la_diagnose_ckpt_opts *o, la_diagnose_start_fn on_start,
                                      void *user, la_diagnose_ckpt_result *r);
LA_API void la_diagnose_ckpt_free(la_diagnose_ckpt_result *r);

/* ---- passkey mode: where the answer rows of the study's passkey examples attend ---- */
typedef struct {
    const char *ckpt;      /* model weights (vocab 256), e.g. a study's passkey_<i>_<spec>.safetensors */
    const char *data;      /* corpus folder holding val/ (the study's "data"): the haystacks */
    const char *out;       /* output folder (created) */
    int lens[LA_STUDY_MAX_LENS];     /* example lengths T (>= la_passkey_min_len()) */
    int n_lens;                      /* >= 1 */
    double depths[LA_STUDY_MAX_DEPTHS]; /* needle depths in [0, 1] */
    int n_depths;                    /* >= 1 */
    int trials;            /* examples per (length, depth), >= 1 */
    uint64_t seed;         /* the study cell's seed: with the study's lens and depths (same
                              order) the examples are the ones it scored (la_study_passkey_seed) */
    int threads;           /* attention threads, 0: OpenMP default */
} la_diagnose_passkey_opts;

/* Query rows per example: the five rows whose next-token predictions are the answer
 * digits (answer_pos - 1 .. answer_pos + 3; the first is the question's last byte). */
#define LA_DIAG_PK_ROWS LA_PASSKEY_DIGITS

typedef struct {
    la_model_config config;  /* the checkpoint's */
    int64_t val_docs, val_tokens; /* the haystack corpus read */
    int n_examples;          /* n_lens * n_depths * trials */
    /* per length li and (layer, head) i = l * n_head + h, means over that length's examples:
     * index [li * n_layer * n_head + i] */
    double *digits_ans;      /* mass of the 5 answer rows (their mean) on the needle's key
                                digits (both occurrences, 10 keys) */
    double *target_ans;      /* ... on the one digit each row has to output, at its two
                                places in the needle (2 keys per row) */
    double *needle_ans;      /* ... on the whole needle sentence */
    double *digits_q;        /* mass of the question's last row alone on the digits */
    double *needle_q;        /* ... on the needle sentence */
    double *digits_right, *digits_wrong; /* digits_ans over the examples answered right /
                                            wrong (NaN when there are none) */
    /* per length li: */
    int correct[LA_STUDY_MAX_LENS];     /* exact matches out of n_depths * trials */
    double uniform_digits[LA_STUDY_MAX_LENS]; /* mean over examples and answer rows of
                                                 10 / visible keys (uniform attention) */
    double uniform_target[LA_STUDY_MAX_LENS]; /* 2 / visible keys */
    double uniform_needle[LA_STUDY_MAX_LENS]; /* needle_len / visible keys */
    double seconds;          /* evaluation + diagnostics */
} la_diagnose_passkey_result;

/* For each (length, depth, trial) of o's grid: builds the passkey example exactly as
 * la_study_run's grid (haystack from <data>/val, seed la_study_passkey_seed(o->seed, li, di,
 * k)), scores it (greedy exact match, la_passkey_exact) and runs la_model_diagnose_rows on
 * the five answer rows with key spans for every digit place of the needle (the key is
 * stated twice) and for the whole needle, per layer and head. Writes into o->out, atomically:
 *   passkey_needle.csv   one line per example, layer, head and answer row: length, depth
 *                        (asked, realised), trial, key, needle_pos, needle_len, answer_pos,
 *                        correct, layer, head, row (0 = the question's last byte), visible
 *                        keys, mass on the 10 digit places, on the row's own digit (2
 *                        places), on the needle, and the uniform baselines of the three
 *   passkey_summary.csv  per length, layer and head: accuracy, the means of r above, the
 *                        uniform baselines
 * Prints nothing; r (zeroed first) holds the means: free with la_diagnose_passkey_free.
 * Errors: LA_EINVAL (NULL, empty grid, a length below la_passkey_min_len(), a depth outside
 * [0, 1], trials < 1, a model that is not byte-level), the model and corpus loaders' (the
 * message names the file), la_passkey_make's, LA_EIO (output files), LA_ENOMEM. */
LA_API la_status la_diagnose_passkey_run(const la_diagnose_passkey_opts *o, la_diagnose_passkey_result *r);
LA_API void la_diagnose_passkey_free(la_diagnose_passkey_result *r);

/* ---- Gaussian-model mode: la_diag_gaussian for each spec ---- */
/* For each of the n_specs spec texts: la_diag_gaussian at position N with `draws` rows,
 * into diag[k] (created here; free each with la_diag_free). Writes into out (created)
 * gaussian.csv (spec_id, spec, range, complete, rows, keys, mass, entropy, log keys) and
 * gaussian.gp, then gnuplot draws gaussian.png when plot: *gnuplot_exit (may be NULL)
 * receives its status, -1 when not run. Prints nothing. Errors: LA_EINVAL/LA_ESPEC (bad
 * spec, N, draws or delta: the message names the spec), la_diag_gaussian's
 * (LA_EUNSUPPORTED), LA_EIO, LA_ENOMEM; on error no diag is left allocated. */
LA_API la_status la_diagnose_gaussian_run(const char *const *specs, int n_specs, int64_t N, int draws,
                                          double delta, uint64_t seed, const char *out, int plot,
                                          la_diag **diag, int *gnuplot_exit);


/* ---- deprecated names: kept so existing programs compile (with a warning naming
 * the replacement); see the naming rule in longattn.h ---- */

LA_DEPRECATED("use la_study_opts_default") static inline la_study_opts la_study_default_opts(void) {
    return la_study_opts_default();
}
LA_DEPRECATED("use la_task_params_default") static inline la_task_params la_task_default_params(la_task task) {
    return la_task_params_default(task);
}
LA_DEPRECATED("use la_task_get_vocab") static inline la_status la_task_vocab_of(const la_task_params *p, la_task_vocab *v) {
    return la_task_get_vocab(p, v);
}
LA_DEPRECATED("use la_critical_params_default") static inline la_critical_params la_critical_default_params(void) {
    return la_critical_params_default();
}

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_EXPERIMENTS_H */
