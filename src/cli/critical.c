/* critical.c -- `longattn critical`: the critical attention scaling simulation of Chen et
 * al. 2025. The library (la_critical_run, src/runner/critical_run.c) computes the
 * (rho, gamma) grid and writes critical.csv, simplex.csv and the gnuplot heat map; this
 * file parses the options, calls it and prints the per-rho summary. */
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

static const cli_doc DOC = {
    "longattn critical [options]",
    "One attention step on unit tokens x_i = sqrt(rho) z_0 + sqrt(1-rho) z_i (Gaussian,\n"
    "normalised), scores beta <x_i,x_j> with beta = gamma log n (Chen et al. 2025); reports\n"
    "the mean pairwise angle after/before over a (rho, gamma) grid.",
    NULL,
    0,
};

/* --rho / --gamma: a grid (a,b,c or lo:hi:step) into the grid_opt DEST */
typedef struct {
    double *v;
    int *n;
    double lo, hi; /* lo <= v, and v < hi when hi > lo */
} grid_opt;

static int grid_arg(const char *cmd, const char *opt, const char *val, void *dest) {
    const grid_opt *g = dest;
    int n = parse_grid(val, g->v, MAX_GRID);
    if (n < 1) return cli_usage_error(cmd, "%s wants a,b,c or lo:hi:step (at most %d values), got '%s'", opt, MAX_GRID, val);
    for (int k = 0; k < n; k++) {
        if (g->hi > g->lo && !(g->v[k] >= g->lo && g->v[k] < g->hi))
            return cli_usage_error(cmd, "%s values must be in [%g, %g), got %g", opt, g->lo, g->hi, g->v[k]);
        if (!(g->hi > g->lo) && !(g->v[k] >= g->lo))
            return cli_usage_error(cmd, "%s values must be >= %g, got %g", opt, g->lo, g->v[k]);
    }
    *g->n = n;
    return 0;
}

int cli_critical(int argc, char **argv) {
    la_critical_params p = la_critical_params_default();
    static double rhos[MAX_GRID], gammas[MAX_GRID];
    int n_rho = parse_grid("0.1:0.9:0.1", rhos, MAX_GRID);
    int n_gamma = parse_grid("0.25:10:0.25", gammas, MAX_GRID);
    const char *out = "runs/critical";
    int no_plot = 0;
    grid_opt rho_g = {rhos, &n_rho, 0, 1}, gamma_g = {gammas, &n_gamma, 0, 0};
    cli_arg args[] = {
        CLI_A_INT("--n N", "tokens (default 1024)", &p.n, 2, 1 << 16),
        CLI_A_INT("--d D", "dimension (default 256)", &p.d, 1, 1 << 16),
        CLI_A_INT("--draws K", "token sets averaged per rho (default 1)", &p.draws, 1, 10000),
        CLI_A_U64("--seed S", "random seed (default 1)", &p.seed),
        CLI_A_FN("--rho LIST", "values in [0,1): a,b,c or lo:hi:step (default 0.1:0.9:0.1)", grid_arg, &rho_g),
        CLI_A_FN("--gamma LIST", "values >= 0 (default 0.25:10:0.25)", grid_arg, &gamma_g),
        CLI_A_STR("--out DIR", "output folder (default runs/critical): critical.csv, critical.gp,\n"
                               "critical.png (needs gnuplot), simplex.csv", &out),
        CLI_A_FLAG("--no-plot", "write the CSV and the gnuplot script but do not run gnuplot", &no_plot),
        CLI_A_END,
    };
    int rc = cli_parse("critical", &DOC, args, argc, argv);
    if (rc >= 0) return rc;
    const int plot = !no_plot;
    la_critical_cell *cells = calloc((size_t)n_rho * n_gamma, sizeof *cells);
    if (!cells) return 1;
    fprintf(stderr, "longattn critical: n=%d d=%d draws=%d, %d rho x %d gamma ...\n", p.n, p.d, p.draws, n_rho, n_gamma);
    int gp_exit = -1;
    la_status s = la_critical_run(&p, rhos, n_rho, gammas, n_gamma, out, plot, cells, &gp_exit);
    if (s != LA_OK) {
        fprintf(stderr, "longattn critical: %s: %s\n", la_status_name(s), la_errmsg());
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
    free(cells);
    printf("wrote %s/critical.csv, %s/simplex.csv\n", out, out);
    if (plot) {
        if (gp_exit == 0) printf("wrote %s/critical.png\n", out);
        else fprintf(stderr, "longattn critical: gnuplot failed (exit %d); the data is in %s/critical.csv, the script in "
                     "%s/critical.gp\n", gp_exit, out, out);
    }
    return 0;
}
