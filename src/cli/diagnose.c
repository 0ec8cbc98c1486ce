/* diagnose.c -- `longattn diagnose`: attention mass and entropy per distance range
 * [t, t*delta) (library: src/attn/diag_stats.c).
 *   --gaussian   the scale-invariance check under the Gaussian model of Anson et al. 2025:
 *                logits N(0,1) i.i.d. per key for a query at position N, transformed by each
 *                spec (default: plain softmax, logn, sinv), averaged over draws.
 *   --ckpt       a trained model on a text: per layer and head, mass and entropy per range
 *                of the model's own attention on N bytes of the text (la_model_diagnose:
 *                probabilities recomputed tile by tile, no N x N buffer). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <omp.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "io/files.h"
#include "io/gnuplot.h"
#include "core/internal.h"
#include "longattn.h"

#define MAX_SPECS 16

static const char *DEFAULT_SPECS[] = {"softmax+causal", "softmax+logn(train=4096)+causal", "softmax+sinv(tau=10)+causal"};

static void usage(FILE *f) {
    fprintf(f,
            "usage: longattn diagnose --ckpt MODEL --text FILE|DIR [options]\n"
            "       longattn diagnose --gaussian [options]\n"
            "\n"
            "Attention mass and entropy (renormalised within the range) per distance range\n"
            "[t, t*delta) (Anson et al. 2025, scale-invariant attention: total attention per\n"
            "range roughly constant and entropy growing slower than log t).\n"
            "\n"
            "checkpoint mode (per layer and head of a trained byte-level model):\n"
            "  --ckpt PATH    model.safetensors written by `longattn train` or `longattn study`\n"
            "  --text PATH    text file, or a folder: the first file (name order, non-hidden) with\n"
            "                 at least offset + N bytes\n"
            "  --n N          tokens (bytes) of context (default 16384, at most 65536)\n"
            "  --offset K     skip the first K bytes of the text (default 0)\n"
            "  --delta X      range ratio (default 10)\n"
            "  --threads N    attention threads (default: OpenMP default)\n"
            "  --out DIR      output folder (default runs/diagnose): diagnose.csv (layer, head,\n"
            "                 range_lo, range_hi, rows, keys, mass, mass_se, entropy, entropy_se),\n"
            "                 summary.csv (per layer and head: mass ratio, entropy slope),\n"
            "                 diagnose.gp, diagnose.png\n"
            "  --no-plot      do not run gnuplot\n"
            "  The summary uses the complete ranges with t >= delta: mass max/min and the slope of\n"
            "  entropy against log t (uniform attention: 1).\n"
            "\n"
            "Gaussian-model mode (no checkpoint): a query at position N whose base logits are\n"
            "i.i.d. N(0,1), under each spec's logit transform:\n"
            "  --gaussian     select this mode\n"
            "  --n N          query position / context (default 65536; keys at distances 0..N)\n"
            "  --draws K      independent rows averaged (default 1000)\n"
            "  --delta X      range ratio (default 10)\n"
            "  --seed S       (default 1)\n"
            "  --spec SPEC    a spec to diagnose (repeatable; default: softmax+causal,\n"
            "                 softmax+logn(train=4096)+causal, softmax+sinv(tau=10)+causal)\n"
            "  --out DIR      output folder (default runs/diagnose): gaussian.csv, gaussian.gp,\n"
            "                 gaussian.png\n"
            "  --no-plot      do not run gnuplot\n"
            "  Checks, over the complete ranges with t >= delta: total attention per range\n"
            "  roughly constant (max/min <= 2) and entropy growing slower than log t (slope of\n"
            "  entropy against log t <= 0.5; uniform attention has slope 1).\n");
}

/* ---- checkpoint mode ----------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The text file to read: path itself, or the first regular non-hidden file of the folder
 * path (name order) with at least need bytes. 0 on success (*chosen malloc'ed), else 1 with
 * the message printed. */
static int pick_text(const char *path, long long need, char **chosen) {
    struct stat sb;
    if (stat(path, &sb)) {
        fprintf(stderr, "longattn diagnose: --text %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        if ((long long)sb.st_size < need) {
            fprintf(stderr, "longattn diagnose: --text %s has %lld bytes, fewer than offset + N = %lld; "
                            "use a smaller --n or --offset, or a longer text\n", path, (long long)sb.st_size, need);
            return 1;
        }
        *chosen = strdup(path);
        return *chosen ? 0 : 1;
    }
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "longattn diagnose: --text %s: cannot open the folder: %s\n", path, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn) break;
            names = nn;
        }
        names[n] = strdup(e->d_name);
        if (names[n]) n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    long long longest = -1;
    char full[4352];
    *chosen = NULL;
    for (size_t i = 0; i < n; i++) {
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        if (!*chosen && !stat(full, &sb) && S_ISREG(sb.st_mode)) {
            if ((long long)sb.st_size >= need) *chosen = strdup(full);
            else if ((long long)sb.st_size > longest) longest = (long long)sb.st_size;
        }
        free(names[i]);
    }
    free(names);
    if (*chosen) return 0;
    if (longest < 0)
        fprintf(stderr, "longattn diagnose: --text %s: the folder holds no regular files (text files are read "
                        "directly, not from subfolders)\n", path);
    else
        fprintf(stderr, "longattn diagnose: --text %s: no file has offset + N = %lld bytes (the longest has %lld); "
                        "use a smaller --n or --offset\n", path, need, longest);
    return 1;
}

typedef struct {
    const char *ckpt, *text, *out;
    long long N, offset;
    double delta;
    int plot, threads;
} ckpt_opts;

static int run_ckpt(const ckpt_opts *o) {
    if (o->N > 65536) return cli_usage_error("diagnose", "--n %lld: the checkpoint mode takes at most 65536 tokens", o->N);
    if (o->N < 2) return cli_usage_error("diagnose", "--n %lld: the checkpoint mode needs at least 2 tokens", o->N);
    la_model *m = NULL;
    la_status st = la_model_load(o->ckpt, &m);
    if (st != LA_OK) {
        fprintf(stderr, "longattn diagnose: --ckpt %s: %s: %s\n", o->ckpt, la_status_name(st), la_errmsg());
        return 1;
    }
    const la_model_config *cfg = la_model_get_config(m);
    if (cfg->vocab != 256) {
        fprintf(stderr, "longattn diagnose: --ckpt %s has vocab %d; --text feeds bytes, so it needs a byte-level "
                        "model (vocab 256)\n", o->ckpt, cfg->vocab);
        la_model_free(m);
        return 1;
    }
    char *path = NULL;
    if (pick_text(o->text, o->offset + o->N, &path)) {
        la_model_free(m);
        return 1;
    }
    int N = (int)o->N, L = cfg->n_layer, H = cfg->n_head;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)N);
    unsigned char *buf = malloc((size_t)N);
    la_diag **d = calloc((size_t)L * H, sizeof *d);
    FILE *f = fopen(path, "rb");
    int rc = 0;
    if (!tok || !buf || !d) {
        fprintf(stderr, "longattn diagnose: out of memory\n");
        rc = 1;
    } else if (!f || fseeko(f, (off_t)o->offset, SEEK_SET) || fread(buf, 1, (size_t)N, f) != (size_t)N) {
        fprintf(stderr, "longattn diagnose: cannot read %d bytes at offset %lld of %s: %s\n", N, o->offset, path,
                f ? (ferror(f) ? strerror(errno) : "file too short") : strerror(errno));
        rc = 1;
    }
    if (f) fclose(f);
    for (int i = 0; i < L * H && !rc; i++)
        if (la_diag_new(N - 1, o->delta, 1, &d[i]) != LA_OK) {
            fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
            rc = 1;
        }
    double secs = 0;
    if (!rc) {
        for (int i = 0; i < N; i++) tok[i] = buf[i];
        if (o->threads > 0) la_model_set_threads(m, o->threads);
        printf("model %s: %d layers, %d heads (%d kv), d_model %d, trained at %d, spec %s\n", o->ckpt, L, H,
               cfg->n_kv_head ? cfg->n_kv_head : H, cfg->d_model, cfg->train_len, cfg->spec);
        printf("text %s: %d bytes from offset %lld; ranges [t, %gt)\n", path, N, o->offset, o->delta);
        fflush(stdout);
        double t0 = omp_get_wtime();
        st = la_model_diagnose(m, tok, N, d);
        secs = omp_get_wtime() - t0;
        if (st != LA_OK) {
            fprintf(stderr, "longattn diagnose: %s: %s\n", la_status_name(st), la_errmsg());
            rc = 1;
        }
    }
    char csv[4200], sum[4200], gp[4200], png[4200];
    la_afile af;
    if (!rc && la_mkdir_p(o->out) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        rc = 1;
    }
    if (!rc) {
        snprintf(csv, sizeof csv, "%s/diagnose.csv", o->out);
        snprintf(sum, sizeof sum, "%s/summary.csv", o->out);
        snprintf(gp, sizeof gp, "%s/diagnose.gp", o->out);
        snprintf(png, sizeof png, "%s/diagnose.png", o->out);
        if (la_afile_open(&af, csv) != LA_OK) {
            fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
            rc = 1;
        }
    }
    if (!rc) {
        fprintf(af.f, "layer,head,range_lo,range_hi,rows,keys,mass,mass_se,entropy,entropy_se\n");
        for (int i = 0; i < L * H; i++)
            for (int r = 0; r < la_diag_num_ranges(d[i]); r++) {
                la_diag_result res;
                la_diag_get(d[i], r, &res);
                if (!res.rows) continue;
                fprintf(af.f, "%d,%d,%lld,%lld,%lld,%.6g,%.8g,%.4g,%.8g,%.4g\n", i / H, i % H, (long long)res.lo,
                        (long long)res.hi, (long long)res.rows, res.keys, res.mass, res.mass_se,
                        res.entropy_rows ? res.entropy : NAN, res.entropy_rows ? res.entropy_se : NAN);
            }
        if (la_afile_commit(&af) != LA_OK) {
            fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
            rc = 1;
        }
    }
    if (!rc && la_afile_open(&af, sum) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        rc = 1;
    }
    if (!rc) {
        int64_t lo_min = (int64_t)ceil(o->delta);
        fprintf(af.f, "layer,head,mass_ratio,entropy_slope,ranges_used\n");
        printf("la_model_diagnose: %.1f s (%d layers x %d heads, N = %d)\n\n", secs, L, H, N);
        printf("per layer and head, over the complete ranges with t >= %lld (mass max/min; slope of the\n"
               "entropy against log t, uniform attention = 1):\n", (long long)lo_min);
        printf("  layer head  mass_ratio  entropy_slope  ranges   mass per range [lo..]\n");
        for (int i = 0; i < L * H; i++) {
            double ratio, slope;
            int used = 0;
            la_diag_summary(d[i], lo_min, &ratio, &slope, &used);
            fprintf(af.f, "%d,%d,%.6g,%.6g,%d\n", i / H, i % H, ratio, slope, used);
            if (used >= 2) printf("  %5d %4d  %10.3g  %13.3f  %6d  ", i / H, i % H, ratio, slope, used);
            else printf("  %5d %4d  %10s  %13s  %6d  ", i / H, i % H, "n/a", "n/a", used); /* < 2 ranges */
            for (int r = 0; r < la_diag_num_ranges(d[i]); r++) {
                la_diag_result res;
                la_diag_get(d[i], r, &res);
                if (res.rows) printf(" %.3g", res.mass);
            }
            printf("\n");
        }
        if (la_afile_commit(&af) != LA_OK) {
            fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
            rc = 1;
        } else {
            printf("\nwrote %s\nwrote %s\n", csv, sum);
        }
    }
    if (!rc && la_afile_open(&af, gp) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        rc = 1;
    }
    if (!rc) {
        /* two rows of panels (mass, entropy), one column per layer, one line per head */
        fprintf(af.f,
                "# gnuplot script written by `longattn diagnose --ckpt`; paths relative to where it ran\n"
                "set terminal pngcairo size %d,640\nset output '%s'\nset datafile separator ','\n"
                "set multiplot layout 2,%d title \"%s on %d bytes: attention per distance range [t, %gt)\" noenhanced\n"
                "set logscale x\nset grid\nset key top left font ',8' samplen 2\n",
                260 + 300 * L, png, L, cfg->spec, N, o->delta);
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
        if (la_afile_commit(&af) != LA_OK) {
            fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
            rc = 1;
        }
    }
    if (!rc && o->plot) {
        int prc = la_gnuplot_run(NULL, NULL, gp, NULL);
        if (prc == 0) printf("wrote %s\n", png);
        else fprintf(stderr, "longattn diagnose: gnuplot failed (exit %d); the data is in %s, the script in %s\n", prc, csv, gp);
    }
    for (int i = 0; d && i < L * H; i++) la_diag_free(d[i]);
    free(d), free(tok), free(buf), free(path);
    la_model_free(m);
    return rc;
}

int cli_diagnose(int argc, char **argv) {
    int gaussian = 0, plot = 1, draws = 1000, n_specs = 0, n_set = 0, threads = 0;
    long long N = 65536, offset = 0;
    double delta = 10;
    unsigned long long seed = 1;
    const char *specs[MAX_SPECS], *out = "runs/diagnose", *ckpt = NULL, *text = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--gaussian")) {
            gaussian = 1;
            continue;
        } else if (!strcmp(a, "--no-plot")) {
            plot = 0;
            continue;
        }
        if (!v) return cli_usage_error("diagnose", "option '%s' needs a value (or is unknown)", a);
        i++;
        if (!strcmp(a, "--n")) {
            if (cli_parse_int(v, 1, 1LL << 30, &N)) return cli_usage_error("diagnose", "--n wants an integer in 1..2^30, got '%s'", v);
            n_set = 1;
        } else if (!strcmp(a, "--offset")) {
            if (cli_parse_int(v, 0, LLONG_MAX, &offset)) return cli_usage_error("diagnose", "--offset wants an integer >= 0, got '%s'", v);
        } else if (!strcmp(a, "--threads")) {
            long long k;
            if (cli_parse_int(v, 1, 4096, &k)) return cli_usage_error("diagnose", "--threads wants an integer >= 1, got '%s'", v);
            threads = (int)k;
        } else if (!strcmp(a, "--ckpt")) {
            ckpt = v;
        } else if (!strcmp(a, "--text")) {
            text = v;
        } else if (!strcmp(a, "--draws")) {
            long long k;
            if (cli_parse_int(v, 1, 10000000, &k)) return cli_usage_error("diagnose", "--draws wants an integer >= 1, got '%s'", v);
            draws = (int)k;
        } else if (!strcmp(a, "--delta")) {
            if (cli_parse_num(v, nextafter(1.0, 2.0), HUGE_VAL, &delta)) return cli_usage_error("diagnose", "--delta wants a number > 1, got '%s'", v);
        } else if (!strcmp(a, "--seed")) {
            seed = strtoull(v, &end, 10);
            if (*end || !*v) return cli_usage_error("diagnose", "--seed wants a non-negative integer, got '%s'", v);
        } else if (!strcmp(a, "--spec")) {
            if (n_specs == MAX_SPECS) return cli_usage_error("diagnose", "at most %d --spec options", MAX_SPECS);
            specs[n_specs++] = v;
        } else if (!strcmp(a, "--out")) {
            out = v;
        } else {
            return cli_usage_error("diagnose", "unknown option '%s'", a);
        }
    }
    if (gaussian && (ckpt || text))
        return cli_usage_error("diagnose", "--gaussian takes no --ckpt/--text (it diagnoses a model of logits, not a checkpoint)");
    if (!gaussian) {
        if (!ckpt || !text)
            return cli_usage_error("diagnose", "pass --ckpt MODEL --text FILE|DIR (checkpoint mode) or --gaussian; "
                                               "see longattn diagnose --help");
        if (n_specs) return cli_usage_error("diagnose", "--spec belongs to --gaussian; a checkpoint carries its own spec");
        ckpt_opts o = {ckpt, text, out, n_set ? N : 16384, offset, delta, plot, threads};
        return run_ckpt(&o);
    }
    if (n_specs == 0) {
        n_specs = 3;
        for (int k = 0; k < 3; k++) specs[k] = DEFAULT_SPECS[k];
    }
    la_spec parsed[MAX_SPECS];
    for (int k = 0; k < n_specs; k++)
        if (la_spec_parse(specs[k], &parsed[k]) != LA_OK) return cli_usage_error("diagnose", "--spec: %s", la_errmsg());
    if (la_mkdir_p(out) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        return 1;
    }
    char csv[4200], gp[4200], png[4200];
    snprintf(csv, sizeof csv, "%s/gaussian.csv", out);
    snprintf(gp, sizeof gp, "%s/gaussian.gp", out);
    snprintf(png, sizeof png, "%s/gaussian.png", out);
    la_afile af;
    if (la_afile_open(&af, csv) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        return 1;
    }
    fprintf(af.f, "spec_id,spec,lo,hi,complete,rows,keys,mass,mass_se,entropy,entropy_se,log_keys\n");
    printf("Gaussian model: query at position N=%lld, base logits N(0,1), %d draws, delta=%g\n", N, draws, delta);
    printf("checks over complete ranges with t >= %g: mass max/min <= 2, entropy slope vs log t <= 0.5\n\n", delta);
    int rc = 0;
    for (int k = 0; k < n_specs && !rc; k++) {
        la_diag *d = NULL;
        la_status s = la_diag_new(N, delta, 1, &d);
        if (s == LA_OK) s = la_diag_gaussian(&parsed[k], N, draws, seed, d);
        if (s != LA_OK) {
            fprintf(stderr, "longattn diagnose: %s: %s: %s\n", specs[k], la_status_name(s), la_errmsg());
            la_diag_free(d);
            rc = 1;
            break;
        }
        printf("%s\n  %-16s %6s %10s %10s %10s %10s\n", specs[k], "range", "keys", "mass", "+-se", "entropy", "log(keys)");
        for (int r = 0; r < la_diag_num_ranges(d); r++) {
            la_diag_result res;
            la_diag_get(d, r, &res);
            int complete = res.hi - 1 <= N;
            char rng[48];
            snprintf(rng, sizeof rng, "[%lld,%lld)%s", (long long)res.lo, (long long)res.hi, complete ? "" : "*");
            printf("  %-16s %6.0f %10.4f %10.4f %10.4f %10.4f\n", rng, res.keys, res.mass, res.mass_se, res.entropy,
                   log(res.keys));
            fprintf(af.f, "%d,\"%s\",%lld,%lld,%d,%lld,%.0f,%.8g,%.4g,%.8g,%.4g,%.8g\n", k, specs[k], (long long)res.lo,
                    (long long)res.hi, complete, (long long)res.rows, res.keys, res.mass, res.mass_se, res.entropy,
                    res.entropy_se, log(res.keys));
        }
        double ratio, slope;
        int used;
        la_diag_summary(d, (int64_t)ceil(delta), &ratio, &slope, &used);
        if (used < 2) {
            /* a check needs two complete ranges: say so instead of printing nan and FAIL */
            printf("  (* partial range)  n/a: only %d complete range(s) with t >= %g at N = %d; the checks need\n"
                   "  two: raise --n to at least %.0f or lower --delta\n\n",
                   used, delta, (int)N, ceil(delta) * delta * delta);
        } else {
            printf("  (* partial range)  over %d complete ranges: mass max/min = %.3f, entropy slope = %.3f per e-fold of t\n",
                   used, ratio, slope);
            printf("  %s total attention per range roughly constant in t (max/min <= 2)\n", ratio <= 2 ? "PASS" : "FAIL");
            printf("  %s entropy per range grows slower than log t (slope <= 0.5)\n\n", slope <= 0.5 ? "PASS" : "FAIL");
        }
        la_diag_free(d);
    }
    if (rc) {
        la_afile_abort(&af);
        return rc;
    }
    if (la_afile_commit(&af) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        return 1;
    }
    printf("wrote %s\n", csv);
    if (la_afile_open(&af, gp) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        return 1;
    }
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
            png, N, draws, delta, n_specs - 1, csv, n_specs - 1, csv, csv);
    if (la_afile_commit(&af) != LA_OK) {
        fprintf(stderr, "longattn diagnose: %s\n", la_errmsg());
        return 1;
    }
    if (plot) {
        int prc = la_gnuplot_run(NULL, NULL, gp, NULL);
        if (prc == 0) printf("wrote %s\n", png);
        else fprintf(stderr, "longattn diagnose: gnuplot failed (exit %d); the data is in %s, the script in %s\n", prc, csv, gp);
    }
    return 0;
}
