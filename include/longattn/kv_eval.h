/* longattn/kv_eval.h -- the KV-cache policy evaluation runner (layer experiments,
 * src/tasks/kv_eval_run.c; `longattn kv-eval` is its command line). Included by
 * longattn.h. */
#ifndef LONGATTN_KV_EVAL_H
#define LONGATTN_KV_EVAL_H

#include "longattn.h"

#ifdef __cplusplus
extern "C" {
#endif

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
} la_kv_eval_opts;

/* The defaults of `longattn kv-eval` (out runs/kv-eval, 4 windows, 6 trials, chunk 1,
 * seed 1; ckpt and data NULL). */
LA_API la_kv_eval_opts la_kv_eval_default_opts(void);

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

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_KV_EVAL_H */
