/* critical_run.c -- the critical-scaling experiment (`longattn critical`,
 * la_critical_run): the (rho, gamma) grid of la_critical_grid written as CSV files and a
 * gnuplot heat map. Prints nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "io/files.h"
#include "longattn/experiments.h"
#include "runner/report.h"

/* simplex.csv: closed form at growing n against the theorem's limits */
static la_status write_simplex(const char *out, const double *rhos, int n_rho) {
    la_table t;
    LA_TRY(la_table_begin(&t, "rho,gamma_over_crit,gamma,n,inner_product,limit", NULL));
    static const double kappas[] = {0.5, 0.9, 1.0, 1.1, 1.5}, ns[] = {1e3, 1e6, 1e9, 1e12};
    for (int a = 0; a < n_rho; a++)
        for (int k = 0; k < 5; k++)
            for (int j = 0; j < 4; j++) {
                double g = kappas[k] / (1 - rhos[a]), ip;
                la_status s = la_critical_simplex_ip(ns[j], rhos[a], g, &ip);
                if (s != LA_OK) {
                    la_table_free(&t);
                    return s;
                }
                la_table_row(&t, "%.4g\t%.2f\t%.17g\t%.0f\t%.17g\t%.17g", rhos[a], kappas[k], g, ns[j], ip,
                             la_critical_simplex_limit(rhos[a], g));
            }
    return la_table_write_csv(&t, out, "simplex.csv");
}

la_status la_critical_run(const la_critical_params *p, const double *rhos, int n_rho, const double *gammas,
                          int n_gamma, const char *out, int plot, la_critical_cell *cells, int *gnuplot_exit) {
    if (gnuplot_exit) *gnuplot_exit = -1;
    if (!p || !out || !cells) return la_fail(LA_EINVAL, "la_critical_run: NULL params, out or cells");
    LA_TRY(la_mkdir_p(out));
    LA_TRY(la_critical_grid(p, rhos, n_rho, gammas, n_gamma, cells));
    char csv[4200], gp[4200], png[4200];
    snprintf(csv, sizeof csv, "%s/critical.csv", out);
    snprintf(gp, sizeof gp, "%s/critical.gp", out);
    snprintf(png, sizeof png, "%s/critical.png", out);
    la_table t;
    LA_TRY(la_table_begin(&t, "rho,gamma,gamma_crit,beta,angle_before,angle_after,angle_ratio,ip_before,ip_after,"
                              "simplex_ip,simplex_limit", NULL));
    for (int k = 0; k < n_rho * n_gamma; k++) {
        const la_critical_cell *c = &cells[k];
        la_table_row(&t, "%.6g\t%.6g\t%.6g\t%.6g\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f", c->rho, c->gamma,
                     c->gamma_crit, c->beta, c->angle_before, c->angle_after, c->angle_ratio, c->ip_before, c->ip_after,
                     c->simplex_ip, la_critical_simplex_limit(c->rho, c->gamma));
    }
    LA_TRY(la_table_write_csv(&t, NULL, csv));
    LA_TRY(write_simplex(out, rhos, n_rho));
    double rlo = rhos[0], rhi = rhos[n_rho - 1], glo = gammas[0], ghi = gammas[n_gamma - 1];
    double dr = n_rho > 1 ? (rhi - rlo) / (n_rho - 1) : 0.1, dg = n_gamma > 1 ? (ghi - glo) / (n_gamma - 1) : 0.1;
    la_afile af;
    LA_TRY(la_afile_open(&af, gp));
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
            png, p->n, p->d, rlo - dr / 2, rhi + dr / 2, glo - dg / 2, ghi + dg / 2, csv);
    LA_TRY(la_afile_commit(&af));
    const int rc = plot ? la_report_plot(NULL, NULL, gp, NULL, NULL, 0, NULL, NULL, 0) : -1; /* its messages: dropped */
    if (gnuplot_exit) *gnuplot_exit = rc;
    return LA_OK;
}
