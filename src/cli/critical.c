/* critical.c -- `longattn critical`: the critical attention scaling simulation of Chen et
 * al. 2025 (library: src/tasks/critical.c). Writes a CSV of the (rho, gamma) grid and a
 * gnuplot heatmap of the angle ratio with the curve gamma = 1/(1-rho), and prints the
 * equal-angle (simplex) closed form against the theorem's limits. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "core/internal.h"
#include "longattn.h"

#define MAX_GRID 512

/* "a,b,c" or "lo:hi:step" (inclusive of hi up to rounding). Returns count or -1. */
static int parse_grid(const char *s, double *out, int cap) {
    char *end;
    if (strchr(s, ':')) {
        double lo = strtod(s, &end);
        if (*end != ':') return -1;
        double hi = strtod(end + 1, &end);
        if (*end != ':') return -1;
        double step = strtod(end + 1, &end);
        if (*end || !(step > 0) || !(hi >= lo) || !isfinite(lo) || !isfinite(hi)) return -1;
        int n = (int)floor((hi - lo) / step + 1e-9) + 1;
        if (n > cap) return -1;
        for (int i = 0; i < n; i++) out[i] = lo + i * step;
        return n;
    }
    int n = 0;
    const char *p = s;
    while (*p) {
        if (n == cap) return -1;
        out[n++] = strtod(p, &end);
        if (end == p || !isfinite(out[n - 1])) return -1;
        if (*end == ',') end++;
        else if (*end) return -1;
        p = end;
    }
    return n;
}

static int parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end || errno || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
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

static void usage(FILE *f) {
    fprintf(f,
            "usage: longattn critical [options]\n"
            "  One attention step on unit tokens x_i = sqrt(rho) z_0 + sqrt(1-rho) z_i (Gaussian,\n"
            "  normalised), scores beta <x_i,x_j> with beta = gamma log n (Chen et al. 2025); reports\n"
            "  the mean pairwise angle after/before over a (rho, gamma) grid.\n"
            "  --n N          tokens (default 1024)\n"
            "  --d D          dimension (default 256)\n"
            "  --draws K      token sets averaged per rho (default 1)\n"
            "  --seed S       (default 1)\n"
            "  --rho LIST     values in [0,1): a,b,c or lo:hi:step (default 0.1:0.9:0.1)\n"
            "  --gamma LIST   values >= 0 (default 0.25:10:0.25)\n"
            "  --out DIR      output folder (default runs/critical): critical.csv, critical.gp,\n"
            "                 critical.png (needs gnuplot), simplex.csv\n"
            "  --no-plot      write the CSV and the gnuplot script but do not run gnuplot\n");
}

/* simplex.csv: closed form at growing n against the theorem's limits */
static int write_simplex(const char *path, const double *rhos, int n_rho) {
    la_afile af;
    if (la_afile_open(&af, path) != LA_OK) return -1;
    fprintf(af.f, "rho,gamma_over_crit,gamma,n,inner_product,limit\n");
    static const double kappas[] = {0.5, 0.9, 1.0, 1.1, 1.5}, ns[] = {1e3, 1e6, 1e9, 1e12};
    for (int a = 0; a < n_rho; a++)
        for (int k = 0; k < 5; k++)
            for (int j = 0; j < 4; j++) {
                double g = kappas[k] / (1 - rhos[a]), ip;
                if (la_critical_simplex_ip(ns[j], rhos[a], g, &ip) != LA_OK) {
                    la_afile_abort(&af);
                    return -1;
                }
                fprintf(af.f, "%.4g,%.2f,%.17g,%.0f,%.17g,%.17g\n", rhos[a], kappas[k], g, ns[j], ip,
                        la_critical_simplex_limit(rhos[a], g));
            }
    return la_afile_commit(&af) == LA_OK ? 0 : -1;
}

int cli_critical(int argc, char **argv) {
    la_critical_params p = la_critical_params_default();
    static double rhos[MAX_GRID], gammas[MAX_GRID];
    int n_rho = parse_grid("0.1:0.9:0.1", rhos, MAX_GRID);
    int n_gamma = parse_grid("0.25:10:0.25", gammas, MAX_GRID);
    const char *out = "runs/critical";
    int plot = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-plot")) {
            plot = 0;
            continue;
        }
        if (!v) return cli_usage_error("critical", "option '%s' needs a value (or is unknown)", a);
        i++;
        if (!strcmp(a, "--n")) {
            if (parse_int(v, 2, 1 << 16, &p.n)) return cli_usage_error("critical", "--n wants an integer in 2..65536, got '%s'", v);
        } else if (!strcmp(a, "--d")) {
            if (parse_int(v, 1, 1 << 16, &p.d)) return cli_usage_error("critical", "--d wants an integer in 1..65536, got '%s'", v);
        } else if (!strcmp(a, "--draws")) {
            if (parse_int(v, 1, 10000, &p.draws)) return cli_usage_error("critical", "--draws wants an integer in 1..10000, got '%s'", v);
        } else if (!strcmp(a, "--seed")) {
            char *end;
            p.seed = strtoull(v, &end, 10);
            if (*end || !*v) return cli_usage_error("critical", "--seed wants a non-negative integer, got '%s'", v);
        } else if (!strcmp(a, "--rho")) {
            n_rho = parse_grid(v, rhos, MAX_GRID);
            if (n_rho < 1) return cli_usage_error("critical", "--rho wants a,b,c or lo:hi:step (at most %d values), got '%s'", MAX_GRID, v);
            for (int k = 0; k < n_rho; k++)
                if (!(rhos[k] >= 0 && rhos[k] < 1)) return cli_usage_error("critical", "--rho values must be in [0, 1), got %g", rhos[k]);
        } else if (!strcmp(a, "--gamma")) {
            n_gamma = parse_grid(v, gammas, MAX_GRID);
            if (n_gamma < 1) return cli_usage_error("critical", "--gamma wants a,b,c or lo:hi:step (at most %d values), got '%s'", MAX_GRID, v);
            for (int k = 0; k < n_gamma; k++)
                if (!(gammas[k] >= 0)) return cli_usage_error("critical", "--gamma values must be >= 0, got %g", gammas[k]);
        } else if (!strcmp(a, "--out")) {
            out = v;
        } else {
            return cli_usage_error("critical", "unknown option '%s'", a);
        }
    }
    if (mkdir_p(out)) {
        fprintf(stderr, "longattn critical: cannot create folder '%s': %s\n", out, strerror(errno));
        return 1;
    }
    la_critical_cell *cells = calloc((size_t)n_rho * n_gamma, sizeof *cells);
    if (!cells) return 1;
    fprintf(stderr, "longattn critical: n=%d d=%d draws=%d, %d rho x %d gamma ...\n", p.n, p.d, p.draws, n_rho, n_gamma);
    la_status s = la_critical_grid(&p, rhos, n_rho, gammas, n_gamma, cells);
    if (s != LA_OK) {
        fprintf(stderr, "longattn critical: %s: %s\n", la_status_name(s), la_errmsg());
        free(cells);
        return 1;
    }
    char csv[4200], gp[4200], png[4200], sx[4200];
    snprintf(csv, sizeof csv, "%s/critical.csv", out);
    snprintf(gp, sizeof gp, "%s/critical.gp", out);
    snprintf(png, sizeof png, "%s/critical.png", out);
    snprintf(sx, sizeof sx, "%s/simplex.csv", out);
    la_afile af;
    if (la_afile_open(&af, csv) != LA_OK) {
        fprintf(stderr, "longattn critical: %s\n", la_errmsg());
        free(cells);
        return 1;
    }
    fprintf(af.f, "rho,gamma,gamma_crit,beta,angle_before,angle_after,angle_ratio,ip_before,ip_after,simplex_ip,simplex_limit\n");
    for (int k = 0; k < n_rho * n_gamma; k++) {
        const la_critical_cell *c = &cells[k];
        fprintf(af.f, "%.6g,%.6g,%.6g,%.6g,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", c->rho, c->gamma, c->gamma_crit, c->beta,
                c->angle_before, c->angle_after, c->angle_ratio, c->ip_before, c->ip_after, c->simplex_ip,
                la_critical_simplex_limit(c->rho, c->gamma));
    }
    if (la_afile_commit(&af) != LA_OK || write_simplex(sx, rhos, n_rho)) {
        fprintf(stderr, "longattn critical: writing results: %s\n", la_errmsg());
        free(cells);
        return 1;
    }
    /* summary: per rho, the gamma where the angle ratio crosses 1/2 (linear interpolation) */
    printf("n=%d d=%d draws=%d   (angle ratio lambda = mean angle after / before)\n", p.n, p.d, p.draws);
    printf("%6s %10s %12s %14s %14s\n", "rho", "1/(1-rho)", "gamma@l=0.5", "lambda@min_g", "lambda@max_g");
    for (int a = 0; a < n_rho; a++) {
        const la_critical_cell *row = &cells[(size_t)a * n_gamma];
        double cross = NAN;
        for (int g = 1; g < n_gamma && isnan(cross); g++) {
            double l0 = row[g - 1].angle_ratio, l1 = row[g].angle_ratio;
            if ((l0 - 0.5) * (l1 - 0.5) <= 0 && l0 != l1)
                cross = row[g - 1].gamma + (0.5 - l0) / (l1 - l0) * (row[g].gamma - row[g - 1].gamma);
        }
        printf("%6.3f %10.3f %12.3f %14.4f %14.4f\n", rhos[a], 1 / (1 - rhos[a]), cross, row[0].angle_ratio,
               row[n_gamma - 1].angle_ratio);
    }
    printf("wrote %s, %s\n", csv, sx);
    double rlo = rhos[0], rhi = rhos[n_rho - 1], glo = gammas[0], ghi = gammas[n_gamma - 1];
    double dr = n_rho > 1 ? (rhi - rlo) / (n_rho - 1) : 0.1, dg = n_gamma > 1 ? (ghi - glo) / (n_gamma - 1) : 0.1;
    if (la_afile_open(&af, gp) != LA_OK) {
        fprintf(stderr, "longattn critical: %s\n", la_errmsg());
        free(cells);
        return 1;
    }
    fprintf(af.f,
            "# gnuplot script written by `longattn critical`; paths are relative to the folder longattn ran in\n"
            "set terminal pngcairo size 900,650\n"
            "set output '%s'\n"
            "set datafile separator ','\n"
            "set title 'Chen et al. critical scaling: angle ratio after/before one attention step (n=%d, d=%d)'\n"
            "set xlabel 'rho (token correlation)'\nset ylabel 'gamma (beta = gamma log n)'\n"
            "set cblabel 'mean angle after / before'\nset cbrange [0:1.05]\n"
            "set palette defined (0 '#2c115f', 0.5 '#d3436e', 1 '#fcfdbf')\n"
            "set xrange [%g:%g]\nset yrange [%g:%g]\n"
            "set samples 400\nset key bottom right box opaque\n"
            "plot '%s' skip 1 using 1:2:7 with image notitle, \\\n"
            "     1/(1-x) with lines lw 3 lc rgb '#00c0ff' title 'gamma = 1/(1-rho)'\n",
            png, p.n, p.d, rlo - dr / 2, rhi + dr / 2, glo - dg / 2, ghi + dg / 2, csv);
    if (la_afile_commit(&af) != LA_OK) {
        fprintf(stderr, "longattn critical: %s\n", la_errmsg());
        free(cells);
        return 1;
    }
    free(cells);
    if (plot) {
        int rc = cli_gnuplot(gp);
        if (rc == 0) printf("wrote %s\n", png);
        else fprintf(stderr, "longattn critical: gnuplot failed (exit %d); the data is in %s, the script in %s\n", rc, csv, gp);
    }
    return 0;
}
