/* diagnose.c -- `longattn diagnose`: attention mass and entropy per distance range
 * [t, t*delta) (library: src/tasks/diagnose.c).
 *   --gaussian   the scale-invariance check under the Gaussian model of Anson et al. 2025:
 *                logits N(0,1) i.i.d. per key for a query at position N, transformed by each
 *                spec (default: plain softmax, logn, sinv), averaged over draws.
 * The checkpoint mode (a trained model on a text) is not implemented yet. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "core/internal.h"
#include "longattn.h"

#define MAX_SPECS 16

static const char *DEFAULT_SPECS[] = {"softmax+causal", "softmax+logn(train=4096)+causal", "softmax+sinv(tau=10)+causal"};

static void usage(FILE *f) {
    fprintf(f,
            "usage: longattn diagnose --gaussian [options]\n"
            "  Attention mass and entropy (renormalised within the range) per distance range\n"
            "  [t, t*delta) for a query at position N whose base logits are i.i.d. N(0,1), under\n"
            "  each spec's logit transform (Anson et al. 2025, scale-invariant attention).\n"
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
            "  entropy against log t <= 0.5; uniform attention has slope 1).\n"
            "The checkpoint mode (per layer and head of a trained model) is not implemented yet.\n");
}

static int mkdir_p(const char *dir) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return -1;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0777) && errno != EEXIST) return -1;
            *p = '/';
        }
    return (mkdir(buf, 0777) && errno != EEXIST) ? -1 : 0;
}

int cli_diagnose(int argc, char **argv) {
    int gaussian = 0, plot = 1, draws = 1000, n_specs = 0;
    long long N = 65536;
    double delta = 10;
    unsigned long long seed = 1;
    const char *specs[MAX_SPECS], *out = "runs/diagnose";
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
            N = strtoll(v, &end, 10);
            if (*end || !*v || N < 1 || N > (1LL << 30)) return cli_usage_error("diagnose", "--n wants an integer in 1..2^30, got '%s'", v);
        } else if (!strcmp(a, "--draws")) {
            long k = strtol(v, &end, 10);
            if (*end || !*v || k < 1 || k > 10000000) return cli_usage_error("diagnose", "--draws wants an integer >= 1, got '%s'", v);
            draws = (int)k;
        } else if (!strcmp(a, "--delta")) {
            delta = strtod(v, &end);
            if (*end || !*v || !(delta > 1) || !isfinite(delta)) return cli_usage_error("diagnose", "--delta wants a number > 1, got '%s'", v);
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
    if (!gaussian)
        return cli_usage_error("diagnose", "only the Gaussian-model mode exists so far: pass --gaussian "
                                           "(the checkpoint mode is not implemented yet)");
    if (n_specs == 0) {
        n_specs = 3;
        for (int k = 0; k < 3; k++) specs[k] = DEFAULT_SPECS[k];
    }
    la_spec parsed[MAX_SPECS];
    for (int k = 0; k < n_specs; k++)
        if (la_spec_parse(specs[k], &parsed[k]) != LA_OK) return cli_usage_error("diagnose", "--spec: %s", la_errmsg());
    if (mkdir_p(out)) {
        fprintf(stderr, "longattn diagnose: cannot create folder '%s': %s\n", out, strerror(errno));
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
        printf("  (* partial range)  over %d complete ranges: mass max/min = %.3f, entropy slope = %.3f per e-fold of t\n", used,
               ratio, slope);
        printf("  %s total attention per range roughly constant in t (max/min <= 2)\n", used >= 2 && ratio <= 2 ? "PASS" : "FAIL");
        printf("  %s entropy per range grows slower than log t (slope <= 0.5)\n\n", used >= 2 && slope <= 0.5 ? "PASS" : "FAIL");
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
        int prc = cli_gnuplot(gp);
        if (prc == 0) printf("wrote %s\n", png);
        else fprintf(stderr, "longattn diagnose: gnuplot failed (exit %d); the data is in %s, the script in %s\n", prc, csv, gp);
    }
    return 0;
}
