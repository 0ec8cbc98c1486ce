/* longattn/synth_run.h -- the synthetic-task experiment runner (layer experiments,
 * src/tasks/synth_run.c; `longattn synth` is its command line). Included by longattn.h. */
#ifndef LONGATTN_SYNTH_RUN_H
#define LONGATTN_SYNTH_RUN_H

#include "longattn.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    int quick;           /* set by la_synth_quick_opts (mqmtar then uses one query) */
} la_synth_opts;

/* The defaults of `longattn synth` (see the README section "Synthetic tasks"). */
LA_API la_synth_opts la_synth_default_opts(void);
/* The tiny CI configuration over o (`--quick`): flipflop,copy; two softmax specs; lengths
 * 8-16; 40 steps; 16 examples at 1x-4x. */
LA_API void la_synth_quick_opts(la_synth_opts *o);

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
} la_synth_progress;

typedef void (*la_synth_progress_fn)(void *user, const la_synth_progress *p);

/* Checks every field, task name and spec of o without training: LA_EINVAL naming the
 * problem (unknown task, bad spec, invalid task parameters, heads not dividing d_model,
 * max_mult not a power of two, ...). */
LA_API la_status la_synth_validate(const la_synth_opts *o);

/* Runs the grid, writing (atomically, rewritten after every run so that partial results
 * survive an interruption) results.csv, results.md, results.json, then per task
 * synth_<task>.dat, .gp and .png (gnuplot) into o->out. Specs whose normaliser this build
 * lacks are skipped and listed in results.md/json. progress may be NULL. *n_runs (may be
 * NULL): runs completed. Errors: la_synth_validate's, LA_EIO (folder, files, or gnuplot
 * failed: the tables are then written and the message quotes gnuplot), errors of the
 * model, trainer or tasks (the message names the task and spec). */
LA_API la_status la_synth_run(const la_synth_opts *o, la_synth_progress_fn progress, void *user,
                       int *n_runs);

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_SYNTH_RUN_H */
