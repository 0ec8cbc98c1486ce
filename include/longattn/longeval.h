/*
 * longattn/longeval.h -- long-context evaluation of pretrained Llama-family models
 * (experiments layer, src/tasks/longeval.c, src/runner/longeval_run.c; issue #15, SPEC 9). Included by longattn.h.
 *
 * For every method (one line of text) and every length L (a multiple of the model's
 * trained context C, from the file's <arch>.context_length) one independent,
 * deterministic cell:
 *   perplexity by position: the first L tokens of a long real-text stream (validation
 *     documents joined by blank lines, in name order from a seeded document, wrapping
 *     around), bits per token and per byte in `buckets` equal position buckets;
 *   passkey: for each depth and trial, a haystack of real text (the same stream, a seeded
 *     offset) with "The pass key is K. Remember it. K is the pass key." at that depth and
 *     "What is the pass key? The pass key is" at the end; exact match of the greedy digits;
 *   multi-key (RULER): `distractors` + 1 needles "One of the special magic numbers for W is:
 *     N." (words and numbers all different), the asked one at the depth, the others at
 *     seeded depths; question "What is the special magic number for W mentioned in the
 *     provided text? The special magic number for W mentioned in the provided text is".
 * Haystacks, needles and depths depend on (seed, L, depth, trial) only, never on the method.
 *
 * Method text: "SPEC" or "SPEC | KVPOLICY" (la_kv_policy_parse: sinks(n,w), h2o(...),
 * window(w), +TYPE; without a type term the cell's cache has kv_type's element type). "as-trained" stands for the model's own RoPE. Before parsing, "{s}" is
 * replaced by max(1, L/C), "{C}" by C, "{L}" by L and "{g}" by 1/ln C (so that
 * "critical({g})" scales logits by ln(n)/ln(C), 1 at the trained context), so
 * "yarn({s},{C})" is one line for every length. A spec with no theta takes the file's RoPE base (la_llama_spec_parse).
 * Full-cache methods prefill through the session in chunks of `chunk` tokens (exact: the
 * same logits as one forward). window / sinks policies with a spec la_kv_stream_exact
 * accepts prefill in chunks of min(chunk, w), EXACTLY as token-by-token streaming. Other
 * evicting cells (h2o, or a spec it rejects) prefill in chunks of at most
 * min(chunk, la_kv_max_chunk / 4): APPROXIMATE streaming -- a query inside a chunk sees
 * the cache as evicted before the chunk, i.e. between w - chunk + 1 and w recent tokens
 * where token-by-token streaming sees w; `exact_stream` = 1 steps one token at a time.
 */
#ifndef LONGATTN_LONGEVAL_H
#define LONGATTN_LONGEVAL_H

#include <stdint.h>

#include "core.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LA_LONGEVAL_MAX 64 /* methods, lengths, depths, buckets */
#define LA_LONGEVAL_MAX_DOCS 16 /* documents scored per cell */
#define LA_LONGEVAL_MAX_EX 2048 /* retrieval examples of one kind per cell (documents x depths x trials) */

typedef struct {
    const char *model;      /* GGUF file (required) */
    const char *docs;       /* folder of text documents (default data/longdocs, the long documents of
                               scripts/prepare_longdocs.sh; data/pydoc/val when that folder is absent) */
    const char *out_dir;    /* NULL: no files */
    int n_methods;
    const char *methods[LA_LONGEVAL_MAX];
    int n_lengths;
    double lengths[LA_LONGEVAL_MAX]; /* multiples of C */
    int n_depths;
    double depths[LA_LONGEVAL_MAX];  /* needle depths in [0, 1] */
    int trials;             /* passkey and multi-key examples per depth (0: off) */
    int distractors;        /* multi-key distractor needles (default 3; -1: multi-key off) */
    int buckets;            /* perplexity position buckets (default 8) */
    int chunk;              /* prefill chunk (default 512) */
    int exact_stream;       /* 1: evicting policies step token by token (slow, exact) */
    int threads;            /* OpenMP threads (0: leave as is) */
    int64_t train_ctx;      /* C; 0: from the file */
    int resume;             /* skip cells whose file exists in out_dir/cells */
    int filler;             /* 1: retrieval haystacks of Mohtashami & Jaggi's repeated filler
                               ("The grass is green. The sky is blue. ...") instead of real text */
    uint64_t seed;
    char *owned;            /* strings read by la_longeval_load (free with la_longeval_opts_release) */
    int n_docs;             /* documents scored and used as haystacks (0: every document of the folder, at
                               most LA_LONGEVAL_MAX_DOCS; default 6, the six long documents) */
    int no_share;           /* 1: every example prefilled from its first token (the unshared computation;
                               same results, for checking and timing the shared-prefix path) */
    int resamples;          /* bootstrap resamples of the perplexity differences (default 2000) */
    const char *kv_type;    /* KV element type of every cell whose method names none (la_kv_type_parse:
                               f32, f16, bf16, int8, int8(group=g)); NULL: la_llama_default_kv_type() */
    int seq_parallel;       /* 1 (issue 30): under mpirun every rank runs every cell together and each
                               prefill of L tokens is one pass split over the ranks (la_session_prefill_sp):
                               no shared prefixes; methods with an evicting KV policy or a position
                               regime are refused. Results bitwise the same for any number of ranks,
                               not bitwise those of the chunked prefill */
} la_longeval_opts;

/* As studies/longeval.json: docs data/longdocs (data/pydoc/val when absent), 6 documents,
 * methods as-trained, yarn({s},{C}), dynamic-ntk({s},{C}), selfextend(8,1024),
 * as-trained | sinks(4,2044), lengths 0.5C and 2C, depths {0.1, 0.3, 0.5, 0.7, 0.9},
 * trials 1, distractors -1 (no multi-key), buckets 8, chunk 512, seed 1, 2000 bootstrap
 * resamples, text haystacks. */
LA_API la_longeval_opts la_longeval_opts_default(void);

/* Fill *o from a JSON study file {"methods": [...], "lengths": [...], "depths": [...],
 * "trials", "distractors", "buckets", "chunk", "seed", "docs", "kv_type"}; keys absent keep *o's
 * values. The strings read are copied into one block o->owned (a previous block is kept
 * alive until la_longeval_opts_release, which frees every block). Errors: LA_EIO,
 * LA_EFORMAT (bad JSON or a bad value: named). */
LA_API la_status la_longeval_load(const char *path, la_longeval_opts *o);
LA_API void la_longeval_opts_release(la_longeval_opts *o);

typedef struct {
    int method, length;     /* indices into the options */
    char method_text[256];  /* as given */
    char spec[256];         /* canonical spec at this length */
    char kv[96];            /* canonical KV policy ("full" when none) */
    int64_t L;              /* tokens */
    double ppl_bits_token, ppl_bits_byte; /* over all L-1 predicted tokens */
    int n_buckets;
    double bucket_bits_token[LA_LONGEVAL_MAX], bucket_bits_byte[LA_LONGEVAL_MAX];
    int passkey_hits, passkey_n, multikey_hits, multikey_n;
    int depth_hits[LA_LONGEVAL_MAX];  /* passkey hits per depth */
    int depth_mk_hits[LA_LONGEVAL_MAX];
    double seconds;
    int resumed;            /* 1: read back from a finished cell file */
    /* issue #28: per document and position bucket, and per retrieval example */
    int n_docs;             /* documents scored (perplexity) and used as haystacks */
    double doc_bits[LA_LONGEVAL_MAX_DOCS][LA_LONGEVAL_MAX];  /* summed bits of the bucket's predictions */
    double doc_bytes[LA_LONGEVAL_MAX_DOCS][LA_LONGEVAL_MAX]; /* UTF-8 bytes of the predicted tokens */
    int64_t doc_n[LA_LONGEVAL_MAX_DOCS][LA_LONGEVAL_MAX];    /* predictions */
    int n_ex;               /* examples per kind: index ((doc * n_depths) + depth) * trials + trial */
    unsigned char pk_hit[LA_LONGEVAL_MAX_EX], mk_hit[LA_LONGEVAL_MAX_EX];
    float pk_top[LA_LONGEVAL_MAX_EX], mk_top[LA_LONGEVAL_MAX_EX]; /* the greedy first token's logit */
    double prefill_tokens;  /* tokens pushed through the model (prefills and greedy steps) */
    int shared;             /* 1: retrieval examples continued from forks of a shared prefix */
} la_longeval_cell;

typedef struct {
    int n_cells, n_done;
    const la_longeval_cell *cell; /* the cell that just finished */
    double elapsed_s, eta_s;
    const char *note;             /* non-NULL: a message instead of a finished cell */
} la_longeval_progress;

typedef void (*la_longeval_progress_fn)(void *user, const la_longeval_progress *p);

/* Run every (method, length) cell in order, writing out_dir/cells/m<i>_l<j>.json as each
 * finishes (atomically), then out_dir/results.json, longeval.csv, longeval.md and the
 * gnuplot PNGs (ppl_by_position.png, passkey_<i>.png heatmaps length x depth). cells:
 * (n_methods * n_lengths), method-major; may be NULL. With resume, a cell whose file
 * exists is read back instead of run (its method text, spec and L must match); without
 * resume the cells of an earlier run in out_dir/cells are removed first, after every
 * method has been set up at every length (with its KV type) and run one token.
 * Errors: LA_EINVAL (options), LA_ESPEC (a method, the KV type or a length under 64
 * tokens, named; found before any file is removed or written), LA_EIO, the model's. */
LA_API la_status la_longeval_run(const la_longeval_opts *o, la_longeval_progress_fn fn, void *user,
                                 la_longeval_cell *cells);

/* The markdown table (rows methods, columns lengths: bits/byte, passkey, multi-key) into
 * buf, snprintf-style. */
LA_API int la_longeval_table(const la_longeval_opts *o, const la_longeval_cell *cells, int64_t C,
                             char *buf, size_t n);

/* ---- task construction (exposed for tests) ---- */

/* Passkey or multi-key example of exactly L tokens built from the token stream
 * (n_stream tokens, wrapped around) with tok: kind 0 passkey, 1 multi-key. Writes the
 * tokens, the answer text (digits) and the token index of the asked needle's start.
 * Errors: LA_ESHAPE (L too short for the needles and question), LA_ENOMEM. */

LA_API la_status la_longeval_example(la_tokenizer *tok, const int32_t *stream, int64_t n_stream,
                                     int kind, int64_t L, double depth, int distractors, uint64_t seed,
                                     int32_t *tokens, char answer[16], int64_t *needle_at);

/* 1 if the decoded greedy continuation text starts (after spaces) with exactly the
 * answer's digits (the next character is not a digit). */
LA_API int la_longeval_match(const char *continuation, const char *answer);


/* ---- statistics of the tables (src/tasks/stats.c; SPEC 10 "Statistics") ---- */

/* Wilson score interval of x hits in n at z (1.96 for 95 %): [*lo, *hi] within [0, 1];
 * n = 0 gives [0, 1]. Errors: LA_EINVAL (x outside [0, n], z <= 0). */
LA_API la_status la_stats_wilson(int x, int n, double z, double *lo, double *hi);
/* Two-sided exact McNemar p-value from the discordant pairs b, c of two methods on the same
 * examples: min(1, 2 BinomCDF(min(b, c); b + c, 1/2)); 1 when b + c = 0; NaN for b or c < 0. */
LA_API double la_stats_mcnemar_exact(int b, int c);
/* Paired percentile bootstrap (95 %) of sum(a - b) / sum(w) over n units resampled with
 * replacement `resamples` times from `seed` (the same seed, the same interval). */
LA_API la_status la_stats_bootstrap_diff(const double *a, const double *b, const double *w, int n, int resamples,
                                         uint64_t seed, double *est, double *lo, double *hi);

#ifdef __cplusplus
}
#endif
#endif
