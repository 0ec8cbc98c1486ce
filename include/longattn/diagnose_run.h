/* longattn/diagnose_run.h -- the attention-diagnostics experiments (layer experiments,
 * src/tasks/diagnose_run.c; `longattn diagnose` is their command line): mass and entropy
 * per distance range [t, t*delta) of a checkpoint on a text, or of the Gaussian model.
 * Included by longattn.h. */
#ifndef LONGATTN_DIAGNOSE_RUN_H
#define LONGATTN_DIAGNOSE_RUN_H

#include "longattn.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_DIAGNOSE_RUN_H */
