/* study_internal.h -- results of a study in memory, shared by the runner (study_run.c)
 * and the writers of its tables and plots (study_report.c). Not public. */
#ifndef LA_STUDY_INTERNAL_H
#define LA_STUDY_INTERNAL_H

#include "core/internal.h"
#include "longattn/experiments.h"

typedef struct {
    int step;           /* optimizer steps done */
    double train_bpb;   /* training loss of that step, bits per token */
    double val_bpb;     /* validation loss at L (NAN when not evaluated at this step) */
    double elapsed_s;   /* since the variant started */
} study_log_row;

/* One cell of a study: one variant (spec) trained with one seed. */
typedef struct {
    char canon[256];            /* canonical spec text (la_spec_format) */
    uint64_t seed;              /* the seed this cell ran with (study seed + seed index) */
    size_t n_params;
    int trained;                /* training and loss evaluation finished */
    int passkey_done;           /* passkey grid finished (or switched off) */
    double train_s, eval_s, passkey_s; /* wall time of the phases */
    double final_train_bpb;     /* mean training loss of the last 10% of steps, bits per token */
    double loss[LA_STUDY_MAX_LENS];        /* (n_eval_lens) bits per token */
    int64_t tokens[LA_STUDY_MAX_LENS];     /* target tokens behind each loss */
    double *bucket[LA_STUDY_MAX_LENS];     /* (n_bucket[i]) bits per token per L positions */
    int64_t *bucket_tokens[LA_STUDY_MAX_LENS];
    int n_bucket[LA_STUDY_MAX_LENS];
    double ft_first_bpb, ft_last_bpb;      /* passkey fine-tune answer loss, first / last step */
    double *ft_curve;           /* (n_ft) answer loss of every fine-tune step, bits per answer digit */
    int n_ft;
    int correct[LA_STUDY_MAX_LENS][LA_STUDY_MAX_DEPTHS]; /* exact matches out of pk_trials */
    study_log_row *log;
    int n_log, cap_log;
    char error[512];            /* why the variant failed, "" if it did not */
    la_status status;           /* its status (LA_OK if it did not fail) */
} study_variant;

typedef struct {
    const la_study *st;
    int is_bytes;               /* 1: units are bits per byte */
    int vocab;
    int64_t train_tokens, val_tokens;
    int train_docs, val_docs;
    int n_threads;
    int seq_parallel;          // ranks sharing each training sequence (la_train_config.seq_parallel)
    /* cells: v[vi * st->n_seeds + k] is spec vi with seed st->seed + k */
    study_variant v[LA_STUDY_MAX_SPECS * LA_STUDY_MAX_SEEDS];
    double wall_s;
} study_results;

static inline int la_study_n_cells(const la_study *st) { return st->n_specs * st->n_seeds; }

/* Passkey accuracy below this at the training length (mean over seeds) marks a variant's
 * retrieval "not learned": its accuracies at longer lengths are then not a measurement of
 * length generalisation and the tables print "not learned" instead. */
#define LA_STUDY_LEARNED_MIN 0.5

/* Tables: results.csv, passkey.csv, training.csv, results.json, results.md (atomic). */
la_status la_study_write_tables(const study_results *r, const char *out_dir);

/* Plots: plots.gp and its .dat files, then gnuplot -> PNG (atomic rename after a PNG
 * signature check). Returns LA_OK with *ok = 0 and a message in warn when gnuplot is
 * missing or fails: plots are not worth losing the numbers for. */
la_status la_study_write_plots(const study_results *r, const char *out_dir, const char *gnuplot,
                            int *ok, char *warn, size_t warn_n);

/* ---- across MPI ranks (study_dist.c) ---- */
/* owner[c]: the rank that ran cell c (la_dist_assign on estimated flops).
 * Collective: rank 0 receives every finished cell of the other ranks into r->v (its
 * buckets and log newly allocated); other ranks' r is unchanged. No-op on one process. */
la_status la_study_gather(study_results *r, const int *owner);

/* File-name-safe form of a spec: letters, digits, '.', '-' kept, runs of others -> '_'. */
void la_study_slug(const char *spec, char *buf, size_t n);

#endif
