/* diagnose_run.c -- the attention-diagnostics experiments (`longattn diagnose`):
 * la_diagnose_ckpt_run (a checkpoint's own attention on a text, la_model_diagnose) and
 * la_diagnose_gaussian_run (the Gaussian model of Anson et al. 2025, la_diag_gaussian),
 * each writing CSV files and a gnuplot script, then running gnuplot. Prints nothing: the
 * accumulators go back to the caller. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "io/files.h"
#include "runner/diagnose_internal.h"
#include "runner/grid.h"
#include "runner/report.h"

/* The text file to read: path itself, or the first regular non-hidden file of the folder
 * path (name order) with at least need bytes, into chosen. */
static la_status pick_text(const char *path, long long need, char *chosen, size_t cap) {
    struct stat sb;
    if (stat(path, &sb)) return la_fail(LA_EIO, "text %s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        if ((long long)sb.st_size < need)
            return la_fail(LA_EINVAL, "text %s has %lld bytes, fewer than offset + N = %lld; use a smaller --n or "
                           "--offset, or a longer text", path, (long long)sb.st_size, need);
        snprintf(chosen, cap, "%s", path);
        return LA_OK;
    }
    char **names = NULL;
    int n = 0;
    LA_TRY(la_list_files(path, &names, &n)); /* sorted regular non-hidden files */
    long long longest = -1;
    chosen[0] = '\0';
    for (int i = 0; i < n && !chosen[0]; i++) {
        if (stat(names[i], &sb) != 0) continue;
        if ((long long)sb.st_size >= need) snprintf(chosen, cap, "%s", names[i]);
        else if ((long long)sb.st_size > longest) longest = (long long)sb.st_size;
    }
    la_free_paths(names, n);
    if (chosen[0]) return LA_OK;
    if (longest < 0)
        return la_fail(LA_EINVAL, "text %s: the folder holds no regular files (text files are read directly, not "
                       "from subfolders)", path);
    return la_fail(LA_EINVAL, "text %s: no file has offset + N = %lld bytes (the longest has %lld); use a smaller "
                   "--n or --offset", path, need, longest);
}

void la_diagnose_ckpt_free(la_diagnose_ckpt_result *r) {
    if (!r) return;
    const int LH = r->config.n_layer * r->config.n_head;
    for (int i = 0; r->diag && i < LH; i++) la_diag_free(r->diag[i]);
    free(r->diag);
    r->diag = NULL;
}

static la_status write_ckpt_files(const la_diagnose_ckpt_opts *o, la_diagnose_ckpt_result *r) {
    const int L = r->config.n_layer, H = r->config.n_head, N = (int)o->N;
    la_diag **d = r->diag;
    char csv[4200], gp[4200], png[4200];
    snprintf(csv, sizeof csv, "%s/diagnose.csv", o->out);
    snprintf(gp, sizeof gp, "%s/diagnose.gp", o->out);
    snprintf(png, sizeof png, "%s/diagnose.png", o->out);
    la_afile af;
    la_table t;
    LA_TRY(la_table_begin(&t, "layer,head,range_lo,range_hi,rows,keys,mass,mass_se,entropy,entropy_se", NULL));
    for (int i = 0; i < L * H; i++)
        for (int rg = 0; rg < la_diag_num_ranges(d[i]); rg++) {
            la_diag_result res;
            la_diag_get(d[i], rg, &res);
            if (!res.rows) continue;
            la_table_row(&t, "%d\t%d\t%lld\t%lld\t%lld\t%.6g\t%.8g\t%.4g\t%.8g\t%.4g", i / H, i % H, (long long)res.lo,
                         (long long)res.hi, (long long)res.rows, res.keys, res.mass, res.mass_se,
                         res.entropy_rows ? res.entropy : NAN, res.entropy_rows ? res.entropy_se : NAN);
        }
    LA_TRY(la_table_write_csv(&t, NULL, csv));
    /* issue 31: a softmax+sink model's sink mass per layer and head, by the span of the rows
     * (how far back they see: the query position under causal patterns); no file when no row had a sink */
    LA_TRY(la_table_begin(&t, "layer,head,span_lo,span_hi,rows,sink_mass,sink_mass_se", NULL));
    int sink_rows = 0;
    for (int i = 0; i < L * H; i++)
        for (int rg = 0; rg < la_diag_num_ranges(d[i]); rg++) {
            int64_t n = 0, lo, hi;
            double m, se;
            la_diag_get_sink(d[i], rg, &n, &m, &se);
            if (!n) continue;
            la_diag_get_range_edges(d[i], rg, &lo, &hi);
            la_table_row(&t, "%d\t%d\t%lld\t%lld\t%lld\t%.8g\t%.4g", i / H, i % H, (long long)lo, (long long)hi,
                         (long long)n, m, se);
            sink_rows++;
        }
    if (sink_rows) LA_TRY(la_table_write_csv(&t, o->out, "sinks.csv"));
    else la_table_free(&t);
    const int64_t lo_min = (int64_t)ceil(o->delta);
    LA_TRY(la_table_begin(&t, "layer,head,mass_ratio,entropy_slope,ranges_used", NULL));
    for (int i = 0; i < L * H; i++) {
        double ratio, slope;
        int used = 0;
        la_diag_summary(d[i], lo_min, &ratio, &slope, &used);
        la_table_row(&t, "%d\t%d\t%.6g\t%.6g\t%d", i / H, i % H, ratio, slope, used);
    }
    LA_TRY(la_table_write_csv(&t, o->out, "summary.csv"));
    LA_TRY(la_afile_open(&af, gp));
    /* two rows of panels (mass, entropy), one column per layer, one line per head */
    fprintf(af.f,
            "# gnuplot script written by `longattn diagnose --ckpt`; paths relative to where it ran\n"
            "set terminal pngcairo size %d,640\nset output '%s'\nset datafile separator ','\n"
            "set multiplot layout 2,%d title \"%s on %d bytes: attention per distance range [t, %gt)\" noenhanced\n"
            "set logscale x\nset grid\nset key top left font ',8' samplen 2\n",
            260 + 300 * L, png, L, r->config.spec, N, o->delta);
    for (int l = 0; l < L; l++)
        fprintf(af.f,
                "set title 'layer %d'\nset logscale y\nset ylabel 'total attention in range'\nset xlabel ''\n"
                "plot for [h=0:%d] '%s' skip 1 using ($1==%d && $2==h && $3>0 ? $3 : NaN):7 with linespoints lw 2 "
                "title sprintf('head %%d', h)\n",
                l, H - 1, csv, l);
    for (int l = 0; l < L; l++)
        fprintf(af.f,
                "set title 'layer %d'\nunset logscale y\nset ylabel 'entropy within range (nats)'\nset key bottom right\n"
                "set xlabel 'range start t'\n"
                "plot for [h=0:%d] '%s' skip 1 using ($1==%d && $2==h && $3>0 ? $3 : NaN):9 with linespoints lw 2 "
                "title sprintf('head %%d', h), '%s' skip 1 using ($1==%d && $2==0 && $3>0 ? $3 : NaN):(log($6)) "
                "with lines dt 2 lc rgb 'gray' title 'log(keys) (uniform)'\n",
                l, H - 1, csv, l, csv, l);
    fprintf(af.f, "unset multiplot\n");
    LA_TRY(la_afile_commit(&af));
    if (o->plot) r->gnuplot_exit = la_report_plot(NULL, NULL, gp, NULL, NULL, 0, NULL, NULL, 0);
    return LA_OK;
}

la_status la_diag_load_byte_model(const char *ckpt, const char *why, la_model **out) {
    *out = NULL;
    la_model *m = NULL;
    la_status st = la_model_load(ckpt, &m);
    if (st != LA_OK) return la_fail(st, "--ckpt %s: %s: %s", ckpt, la_status_name(st), la_errmsg());
    int vocab = la_model_get_config(m)->vocab;
    if (vocab != 256) {
        la_model_free(m);
        return la_fail(LA_EINVAL, "--ckpt %s has vocab %d; %s, so it needs a byte-level model (vocab 256)", ckpt,
                       vocab, why);
    }
    *out = m;
    return LA_OK;
}

la_status la_diagnose_ckpt_run(const la_diagnose_ckpt_opts *o, la_diagnose_start_fn on_start, void *user,
                               la_diagnose_ckpt_result *r) {
    if (!o || !r || !o->ckpt || !o->text || !o->out)
        return la_fail(LA_EINVAL, "la_diagnose_ckpt_run: NULL options, result, ckpt, text or out");
    memset(r, 0, sizeof *r);
    r->gnuplot_exit = -1;
    if (o->N > 65536) return la_fail(LA_EINVAL, "--n %lld: the checkpoint mode takes at most 65536 tokens", (long long)o->N);
    if (o->N < 2) return la_fail(LA_EINVAL, "--n %lld: the checkpoint mode needs at least 2 tokens", (long long)o->N);
    if (o->offset < 0) return la_fail(LA_EINVAL, "offset %lld must be >= 0", (long long)o->offset);
    if (!(o->delta > 1) || !isfinite(o->delta)) return la_fail(LA_EINVAL, "delta %g must be a finite number > 1", o->delta);
    la_model *m = NULL;
    la_status st;
    LA_TRY(la_diag_load_byte_model(o->ckpt, "--text feeds bytes", &m));
    r->config = *la_model_get_config(m);
    if ((st = pick_text(o->text, (long long)(o->offset + o->N), r->text_path, sizeof r->text_path)) != LA_OK) {
        la_model_free(m);
        return st;
    }
    const int N = (int)o->N, L = r->config.n_layer, H = r->config.n_head;
    int32_t *tok = la_malloc(sizeof(int32_t) * (size_t)N);
    unsigned char *buf = la_malloc((size_t)N);
    r->diag = la_calloc((size_t)L * H, sizeof *r->diag);
    FILE *f = fopen(r->text_path, "rb");
    if (!tok || !buf || !r->diag) {
        st = la_fail(LA_ENOMEM, "la_diagnose_ckpt_run: out of memory");
    } else if (!f || fseeko(f, (off_t)o->offset, SEEK_SET) || fread(buf, 1, (size_t)N, f) != (size_t)N) {
        st = la_fail(LA_EIO, "cannot read %d bytes at offset %lld of %s: %s", N, (long long)o->offset, r->text_path,
                     f ? (ferror(f) ? strerror(errno) : "file too short") : strerror(errno));
    }
    if (f) fclose(f);
    for (int i = 0; i < L * H && st == LA_OK; i++) st = la_diag_new(N - 1, o->delta, 1, &r->diag[i]);
    if (st == LA_OK) {
        for (int i = 0; i < N; i++) tok[i] = buf[i];
        if (o->threads > 0) la_model_set_threads(m, o->threads);
        if (on_start) on_start(user, r);
        double t0 = omp_get_wtime();
        st = la_model_diagnose(m, tok, N, r->diag);
        r->seconds = omp_get_wtime() - t0;
    }
    if (st == LA_OK) st = la_mkdir_p(o->out);
    if (st == LA_OK) st = write_ckpt_files(o, r);
    free(tok);
    free(buf);
    la_model_free(m);
    if (st != LA_OK) la_diagnose_ckpt_free(r);
    return st;
}

/* The Gaussian model's cells (la_grid_run): spec k is cell k. */
typedef struct {
    const char *const *specs;
    const la_spec *parsed;
    int64_t N;
    int draws;
    double delta;
    uint64_t seed;
    la_diag **diag;
} gauss_grid;

static la_status gauss_cell(void *user, int k, const char *key) {
    gauss_grid *G = user;
    la_status st = la_diag_new(G->N, G->delta, 1, &G->diag[k]);
    if (st == LA_OK) st = la_diag_gaussian(&G->parsed[k], G->N, G->draws, G->seed, G->diag[k]);
    if (st != LA_OK) st = la_fail(st, "%s: %s: %s", G->specs[k], la_status_name(st), la_errmsg());
    return st;
}

la_status la_diagnose_gaussian_run(const char *const *specs, int n_specs, int64_t N, int draws, double delta,
                                   uint64_t seed, const char *out, int plot, la_diag **diag, int *gnuplot_exit) {
    if (gnuplot_exit) *gnuplot_exit = -1;
    if (!specs || n_specs < 1 || !out || !diag)
        return la_fail(LA_EINVAL, "la_diagnose_gaussian_run: need specs (n_specs >= 1), out and diag");
    for (int k = 0; k < n_specs; k++) diag[k] = NULL;
    la_spec *parsed = la_calloc((size_t)n_specs, sizeof *parsed);
    if (!parsed) return la_fail(LA_ENOMEM, "la_diagnose_gaussian_run: out of memory");
    la_status st = LA_OK;
    for (int k = 0; k < n_specs && st == LA_OK; k++) st = la_spec_parse(specs[k], &parsed[k]);
    if (st == LA_OK) { /* cells: one per spec, in order */
        gauss_grid G = {specs, parsed, N, draws, delta, seed, diag};
        la_grid g;
        if ((st = la_grid_init(&g, "diagnose", NULL, n_specs, 1, 0)) == LA_OK) {
            const la_grid_fns fns = {.run = gauss_cell};
            st = la_grid_run(&g, &fns, &G);
            la_grid_free(&g);
        }
    }
    free(parsed);
    if (st == LA_OK) st = la_mkdir_p(out);
    char csv[4200], gp[4200], png[4200];
    snprintf(csv, sizeof csv, "%s/gaussian.csv", out);
    snprintf(gp, sizeof gp, "%s/gaussian.gp", out);
    snprintf(png, sizeof png, "%s/gaussian.png", out);
    la_afile af;
    la_table t;
    if (st == LA_OK &&
        (st = la_table_begin(&t, "spec_id,spec,lo,hi,complete,rows,keys,mass,mass_se,entropy,entropy_se,log_keys",
                             NULL)) == LA_OK) {
        for (int k = 0; k < n_specs; k++)
            for (int r = 0; r < la_diag_num_ranges(diag[k]); r++) {
                la_diag_result res;
                la_diag_get(diag[k], r, &res);
                int complete = res.hi - 1 <= N;
                la_table_add(&t, "%d", k);
                la_table_add_quoted(&t, specs[k]);
                la_table_row(&t, "%lld\t%lld\t%d\t%lld\t%.0f\t%.8g\t%.4g\t%.8g\t%.4g\t%.8g", (long long)res.lo,
                             (long long)res.hi, complete, (long long)res.rows, res.keys, res.mass, res.mass_se,
                             res.entropy, res.entropy_se, log(res.keys));
            }
        st = la_table_write_csv(&t, NULL, csv);
    }
    if (st == LA_OK && (st = la_afile_open(&af, gp)) == LA_OK) {
        /* line titles: gnuplot's word() splits on spaces, and spec strings have none */
        fprintf(af.f, "# gnuplot script written by `longattn diagnose --gaussian`; paths relative to where it ran\nspecs = \"");
        for (int k = 0; k < n_specs; k++) fprintf(af.f, "%s%s", k ? " " : "", specs[k]);
        fprintf(af.f, "\"\n");
        fprintf(af.f,
                "set terminal pngcairo size 1100,480\nset output '%s'\nset datafile separator ','\n"
                "set multiplot layout 1,2 title 'Gaussian model, query at N=%lld, %d draws: per distance range [t, %gt)'\n"
                "set logscale x\nset xlabel 'range start t'\nset key top left\nset grid\n"
                "set ylabel 'total attention in range'\nset logscale y\n"
                "plot for [k=0:%d] '%s' skip 1 using ($1==k && $3>0 ? $3 : NaN):8 with linespoints lw 2 title word(specs, k+1)\n"
                "unset logscale y\nset ylabel 'entropy within range (nats)'\n"
                "plot for [k=0:%d] '%s' skip 1 using ($1==k && $3>0 ? $3 : NaN):10 with linespoints lw 2 title word(specs, k+1), \\\n"
                "     '%s' skip 1 using ($1==0 && $3>0 ? $3 : NaN):12 with lines dt 2 lc rgb 'gray' title 'log(keys) (uniform)'\n"
                "unset multiplot\n",
                png, (long long)N, draws, delta, n_specs - 1, csv, n_specs - 1, csv, csv);
        st = la_afile_commit(&af);
    }
    if (st != LA_OK) {
        for (int k = 0; k < n_specs; k++) la_diag_free(diag[k]), diag[k] = NULL;
        return st;
    }
    const int rc = plot ? la_report_plot(NULL, NULL, gp, NULL, NULL, 0, NULL, NULL, 0) : -1;
    if (gnuplot_exit) *gnuplot_exit = rc;
    return LA_OK;
}
