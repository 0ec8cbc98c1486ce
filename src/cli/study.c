/* study.c -- `longattn study`: the main job, a length-generalisation study on real text
 * (train each attention variant at L, evaluate at L..16L, passkey retrieval). */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/dist.h"
#include "core/internal.h"
#include "longattn.h"

static const cli_doc DOC = {
    "longattn study [STUDY_FILE] [--quick] [--out DIR] [--threads N] [--data DIR] [--no-plots] [--resume]\n"
    "               [--ranks-per-variant K] [--seq-parallel K] [--seeds N]",
    "Train every attention variant of STUDY_FILE (default studies/default.json) at the same\n"
    "length L with the same data and seed, then report validation loss at each evaluation length\n"
    "(L, 4L, 16L by default) and passkey retrieval accuracy after a short fine-tune at L.",
    "The default corpus data/pydoc is built by scripts/setup.sh (scripts/prepare_corpus.sh).",
    0,
};

static void fmt_time(double s, char *buf, size_t n) {
    if (!(s >= 0) || isinf(s)) { snprintf(buf, n, "?"); return; }
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%dh%02dm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, n, "%dm%02ds", t / 60, t % 60);
    else snprintf(buf, n, "%ds", t);
}

typedef struct {
    int tty;
    const char *last_phase;
    int last_spec;
    double last_print;
} progress_state;


static void on_progress(void *user, const la_study_progress *p) {
    progress_state *ps = user;
    char el[32], eta[32], line[512];
    fmt_time(p->elapsed_s, el, sizeof el);
    fmt_time(p->eta_s, eta, sizeof eta);
    int k = snprintf(line, sizeof line, "[%d/%d %s", p->spec_index + 1, p->n_specs, p->spec ? p->spec : "");
    if (p->n_seeds > 1)
        k += snprintf(line + k, sizeof line - (size_t)k, " seed %llu (%d/%d)", (unsigned long long)p->seed,
                      p->seed_index + 1, p->n_seeds);
    k += snprintf(line + k, sizeof line - (size_t)k, "] %-8s %d/%d", p->phase, p->done, p->total);
    if (!isnan(p->loss) && (!strcmp(p->phase, "train") || !strcmp(p->phase, "finetune")))
        k += snprintf(line + k, sizeof line - (size_t)k, "  loss %.3f", p->loss);
    if (!isnan(p->val_loss) && !strcmp(p->phase, "train"))
        k += snprintf(line + k, sizeof line - (size_t)k, "  val %.3f", p->val_loss);
    snprintf(line + k, sizeof line - (size_t)k, "  | %s elapsed, ETA %s", el, eta);
    int cell = p->spec_index * (p->n_seeds > 0 ? p->n_seeds : 1) + p->seed_index;
    int new_phase = p->phase != ps->last_phase || cell != ps->last_spec;
    double now = cli_now();
    if (ps->tty) {
        if (new_phase && ps->last_phase) fputc('\n', stderr); /* keep one line per finished phase */
        fprintf(stderr, "\r%s\033[K", line);
        fflush(stderr);
    } else if (new_phase || now - ps->last_print >= 10.0 || (p->total > 0 && p->done == p->total)) {
        fprintf(stderr, "%s\n", line);
        ps->last_print = now;
    }
    ps->last_phase = p->phase;
    ps->last_spec = cell;
}

/* studies/<name>.json from the current folder, else next to the program (../studies). */
static void find_preset(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "studies/%s.json", name);
    if (access(buf, R_OK) == 0) return;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char alt[PATH_MAX + 64];
            snprintf(alt, sizeof alt, "%s/../studies/%s.json", exe, name);
            if (access(alt, R_OK) == 0) { snprintf(buf, n, "%s", alt); return; }
        }
    }
}

int cli_study(int argc, char **argv) {
    const char *file = NULL, *out = NULL, *data = NULL;
    int quick = 0, threads = 0, no_plots = 0, resume = 0, rpv = 0, seeds = 0, sp = 0;
    cli_pos files = {&file, 1, 0};
    cli_arg args[] = {
        CLI_A_POS("study file", &files),
        CLI_A_FLAG("--quick", "run studies/quick.json instead (a minute or two; what CI runs)", &quick),
        CLI_A_STR("--out DIR", "run folder for results.csv, passkey.csv, training.csv, results.json,\n"
                               "results.md and PNG plots (default runs/<study name>)", &out),
        CLI_A_INT("--threads N", "CPU threads for attention and matrix products (default: all cores)", &threads, 1, 1024),
        CLI_A_STR("--data DIR", "use DIR (holding train/ and val/) instead of the file's \"data\"", &data),
        CLI_A_FLAG("--no-plots", "skip gnuplot", &no_plots),
        CLI_A_INT("--seeds N", "train every variant with N seeds (the file's seed, seed+1, ...; overrides\n"
                               "its \"seeds\"): tables and plots give mean ± sample std and min-max",
                  &seeds, 1, LA_STUDY_MAX_SEEDS),
        CLI_A_FLAG("--resume", "continue an interrupted run in the same --out: variants it finished\n"
                               "(saved in DIR/cells/ as each finishes) are kept, the rest are run;\n"
                               "refused when the study file or options differ from that run's", &resume),
        CLI_A_INT("--ranks-per-variant K", "under mpirun: groups of K ranks train one variant each,\n"
                                           "data-parallel over the study's \"accum\" micro-batches (instead of\n"
                                           "the file's \"ranks_per_variant\"; the numbers do not depend on it)",
                  &rpv, 1, 65536),
        CLI_A_INT("--seq-parallel K", "under mpirun: K ranks of a group share each training sequence\n"
                                      "(instead of the file's \"seq_parallel\"; K divides the group,\n"
                                      "seq_len at least 128 K - 63; the numbers do not depend on it)", &sp, 1, 65536),
        CLI_A_END,
    };
    int prc = cli_parse("study", &DOC, args, argc, argv);
    if (prc >= 0) return prc;
    if (file && quick)
        return cli_usage_error("study", "--quick runs studies/quick.json; do not also name a study file ('%s')", file);
    char preset[PATH_MAX + 128];
    if (!file) {
        find_preset(quick ? "quick" : "default", preset, sizeof preset);
        file = preset;
    }
    la_study st;
    /* under mpirun a file that one rank cannot read stops every rank, with its rank named */
    if (la_dist_agree(la_study_load(file, &st)) != LA_OK) {
        if (la_dist_rank() == 0) fprintf(stderr, "longattn study: %s\n", la_errmsg());
        return 1;
    }
    if (seeds > 0) st.n_seeds = seeds;
    const int rank0 = la_dist_rank() == 0;
    char outbuf[PATH_MAX];
    if (!out) {
        snprintf(outbuf, sizeof outbuf, "runs/%s", st.name[0] ? st.name : "study");
        out = outbuf;
    }
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    if (rank0) {
        fprintf(stderr, "longattn study: %s -> %s (%d variants, %d steps of %d x %d, eval at", file, out, st.n_specs,
                st.steps, st.batch, st.seq_len);
        for (int i = 0; i < st.n_eval_lens; i++) fprintf(stderr, " %d", st.eval_lens[i]);
        if (st.n_seeds > 1)
            fprintf(stderr, ", seeds %llu-%llu", (unsigned long long)st.seed,
                    (unsigned long long)(st.seed + (uint64_t)st.n_seeds - 1));
        fprintf(stderr, ", %d threads", threads > 0 ? threads : omp_get_max_threads());
        int k = rpv > 0 ? rpv : st.ranks_per_variant;
        if (la_dist_size() > 1 && k > 1)
            fprintf(stderr, " per rank, %d ranks (MPI) in groups of %d: each group trains its variants "
                    "data-parallel, variants split over groups by estimated cost; rank 0 shows its own "
                    "progress and writes the results", la_dist_size(), k);
        if (la_dist_size() > 1 && (sp > 0 ? sp : st.seq_parallel) > 1)
            fprintf(stderr, "; %d ranks of a group share each training sequence", sp > 0 ? sp : st.seq_parallel);
        else if (la_dist_size() > 1 && k == 1)
            fprintf(stderr, " per rank, %d ranks (MPI): variants split by estimated cost; rank 0 shows its own "
                    "progress and writes the results", la_dist_size());
        fprintf(stderr, ")\n");
        if (st.precision != LA_DTYPE_F32) fprintf(stderr, "  %s\n", cli_precision_note(st.precision));
    }

    progress_state ps = {isatty(2), NULL, -1, 0};
    la_study_opts opts = la_study_opts_default();
    opts.n_threads = threads;
    opts.progress = rank0 ? on_progress : NULL;
    opts.user = &ps;
    opts.data = data;
    opts.resume = resume;
    opts.ranks_per_variant = rpv;
    opts.seq_parallel = sp;
    if (no_plots) opts.gnuplot = "";
    la_study_summary sum;
    la_status s = la_study_run(&st, out, &opts, &sum);
    if (ps.tty && rank0) fputc('\n', stderr);
    if (!rank0) return s == LA_OK ? 0 : 1; /* the outcome is the same on every rank; rank 0 reports it */
    char err[1024] = "";
    if (s != LA_OK) snprintf(err, sizeof err, "%s", la_errmsg());
    char md[PATH_MAX + 16];
    snprintf(md, sizeof md, "%s/results.md", out);
    char *table = NULL; /* a table only from this run */
    if ((s == LA_OK || sum.wall_s > 0) && la_read_file(md, 0, &table, NULL) == LA_OK) printf("\n%s", table);
    free(table);
    char wall[32];
    fmt_time(sum.wall_s, wall, sizeof wall);
    if (sum.wall_s > 0)
        printf("\nFiles in %s: results.md summary.csv results.csv passkey.csv training.csv finetune.csv results.json%s (%s)\n", out,
           sum.plots_ok ? " and PNG plots" : "", wall);
    if (sum.n_resumed)
        fprintf(stderr, "longattn study: %d finished variant%s of the interrupted run kept (%s/cells)\n", sum.n_resumed,
                sum.n_resumed > 1 ? "s" : "", out);
    if (sum.n_continued)
        fprintf(stderr, "longattn study: %d variant%s continued from the interrupted run's training checkpoint\n",
                sum.n_continued, sum.n_continued > 1 ? "s" : "");
    if (sum.warning[0]) fprintf(stderr, "longattn study: warning: %s\n", sum.warning);
    if (s != LA_OK) {
        fprintf(stderr, "longattn study: %s\n", err);
        return 1;
    }
    return 0;
}
