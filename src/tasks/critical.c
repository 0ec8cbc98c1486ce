/* critical.c -- the critical attention scaling simulation of Chen, Lin, Polyanskiy &
 * Rigollet 2025 ("Critical attention scaling in long-context transformers", seeds/001):
 * unit tokens, K = Q = V = I, one self-attention step with beta = gamma * log n.
 *
 * Closed form for the equal-angle configuration (la_critical_simplex_ip). Take n unit
 * tokens with <x_i, x_j> = rho for i != j and write m = n - 1. Row i of the attention has
 * score beta on itself and beta*rho on each of the m others, so
 *     w_s = e^beta / (e^beta + m e^{beta rho}) = 1 / (1 + u),   u = m e^{beta (rho - 1)},
 * on itself and w_o = u / (1 + u) in total, evenly, on the others:
 *     y_i = w_s x_i + w_o o_i,   o_i = (1/m) sum_{j != i} x_j.
 * Expanding the sums over the Gram matrix (1 on the diagonal, rho off it), for i != k:
 *     <x_i, x_k> = rho
 *     <x_i, o_i> = rho
 *     <x_i, o_k> = (1 + (m-1) rho) / m              = rho + (1-rho)/m
 *     |o_i|^2    = (m + m(m-1) rho) / m^2           = rho + (1-rho)/m
 *     <o_i, o_k> = ((m-1) + (m^2-m+1) rho) / m^2    = rho + (m-1)(1-rho)/m^2
 * (o_i and o_k share the m-1 tokens other than i and k: m-1 diagonal terms, the other
 * m^2 - (m-1) pairs are off-diagonal). Hence
 *     <y_i, y_k> = w_s^2 rho + 2 w_s w_o (rho + (1-rho)/m) + w_o^2 (rho + (m-1)(1-rho)/m^2)
 *     |y_i|^2    = w_s^2 + 2 w_s w_o rho + w_o^2 (rho + (1-rho)/m)
 * and the normalised inner product is their ratio. Every term is O(1) and well
 * conditioned, so n = 1e12 costs nothing. With beta = gamma log n, u ~ n^{1 - gamma(1-rho)}:
 * gamma < 1/(1-rho) gives w_s -> 0 and <y_i, y_k> -> 1; gamma > 1/(1-rho) gives w_s -> 1 and
 * -> rho; at gamma = 1/(1-rho) exactly, u = m/n -> 1, w_s = w_o = 1/2 and
 *     <y_i,y_k> -> (rho/4 + rho/2 + rho/4) / (1/4 + rho/2 + rho/4) = 4 rho / (1 + 3 rho),
 * the three limits of the paper's Theorem 2.1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/internal.h"
#include "longattn/experiments.h"

#define ROW_BLOCK 256

la_critical_params la_critical_params_default(void) {
    la_critical_params p = {.n = 1024, .d = 256, .draws = 1, .seed = 1, .n_threads = 0};
    return p;
}

la_status la_critical_attend(const double *x, int n, int d, double beta, double *y) {
    if (!x || !y) return la_fail(LA_EINVAL, "la_critical_attend: x and y must not be NULL");
    if (x == y) return la_fail(LA_EINVAL, "la_critical_attend: x and y must be different buffers");
    if (n < 1 || d < 1) return la_fail(LA_EINVAL, "la_critical_attend: n and d must be >= 1 (got n=%d d=%d)", n, d);
    if (!isfinite(beta)) return la_fail(LA_EINVAL, "la_critical_attend: beta must be finite (got %g)", beta);
    int bs = n < ROW_BLOCK ? n : ROW_BLOCK;
    double *p = la_malloc(sizeof(double) * (size_t)bs * n); /* (bs, n) scores, then weights */
    if (!p) return la_fail(LA_ENOMEM, "la_critical_attend: out of memory for %d x %d scores", bs, n);
    for (int i0 = 0; i0 < n; i0 += bs) {
        int nb = n - i0 < bs ? n - i0 : bs;
        /* scores: P = beta * X[i0:i0+nb] X^T   (nb, n) */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, n, d, beta, x + (size_t)i0 * d, d, x, d,
                    0.0, p, n);
        /* softmax per row, with the maximum subtracted */
#pragma omp parallel for schedule(static)
        for (int r = 0; r < nb; r++) {
            double *pr = p + (size_t)r * n;
            double mx = pr[0];
            for (int j = 1; j < n; j++) mx = pr[j] > mx ? pr[j] : mx;
            double sum = 0;
            for (int j = 0; j < n; j++) sum += (pr[j] = exp(pr[j] - mx));
            double inv = 1.0 / sum;
            for (int j = 0; j < n; j++) pr[j] *= inv;
        }
        /* Y[i0:i0+nb] = P X   (nb, d) */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, d, n, 1.0, p, n, x, d, 0.0,
                    y + (size_t)i0 * d, d);
    }
    free(p);
    for (int i = 0; i < n; i++) {
        double *yi = y + (size_t)i * d, s = 0;
        for (int c = 0; c < d; c++) s += yi[c] * yi[c];
        if (s > 0) {
            double inv = 1.0 / sqrt(s);
            for (int c = 0; c < d; c++) yi[c] *= inv;
        }
    }
    return LA_OK;
}

la_status la_critical_pair_stats(const double *x, int n, int d, double *mean_angle, double *mean_ip) {
    if (!x) return la_fail(LA_EINVAL, "la_critical_pair_stats: x must not be NULL");
    if (n < 2 || d < 1) return la_fail(LA_EINVAL, "la_critical_pair_stats: need n >= 2 and d >= 1 (got n=%d d=%d)", n, d);
    int bs = n < ROW_BLOCK ? n : ROW_BLOCK;
    /* g (bs, n) Gram block, then per-row partial sums (bs) of angles and inner products,
     * added in row order so the result does not depend on the thread count or schedule */
    double *g = la_malloc(sizeof(double) * ((size_t)bs * n + 2 * (size_t)bs));
    if (!g) return la_fail(LA_ENOMEM, "la_critical_pair_stats: out of memory");
    double *row_a = g + (size_t)bs * n, *row_i = row_a + bs;
    double sum_angle = 0, sum_ip = 0;
    for (int i0 = 0; i0 < n; i0 += bs) {
        int nb = n - i0 < bs ? n - i0 : bs, nc = n - i0;
        /* G = X[i0:i0+nb] X[i0:n]^T   (nb, nc): column c is token i0 + c */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, nc, d, 1.0, x + (size_t)i0 * d, d,
                    x + (size_t)i0 * d, d, 0.0, g, nc);
#pragma omp parallel for schedule(dynamic, 8)
        for (int r = 0; r < nb; r++) {
            const double *gr = g + (size_t)r * nc;
            double sa = 0, si = 0;
            for (int c = r + 1; c < nc; c++) { /* pairs i < j only */
                double ip = gr[c];
                double cl = ip > 1 ? 1 : ip < -1 ? -1 : ip;
                sa += acos(cl);
                si += ip;
            }
            row_a[r] = sa, row_i[r] = si;
        }
        for (int r = 0; r < nb; r++) sum_angle += row_a[r], sum_ip += row_i[r];
    }
    free(g);
    double pairs = 0.5 * (double)n * (double)(n - 1);
    if (mean_angle) *mean_angle = sum_angle / pairs;
    if (mean_ip) *mean_ip = sum_ip / pairs;
    return LA_OK;
}

la_status la_critical_gaussian_tokens(int n, int d, double rho, uint64_t seed, double *x) {
    if (!x) return la_fail(LA_EINVAL, "la_critical_gaussian_tokens: x must not be NULL");
    if (n < 1 || d < 1) return la_fail(LA_EINVAL, "la_critical_gaussian_tokens: n and d must be >= 1 (got n=%d d=%d)", n, d);
    if (!(rho >= 0 && rho <= 1)) return la_fail(LA_EINVAL, "la_critical_gaussian_tokens: rho must be in [0, 1] (got %g)", rho);
    double *z0 = la_malloc(sizeof(double) * (size_t)d);
    if (!z0) return la_fail(LA_ENOMEM, "la_critical_gaussian_tokens: out of memory");
    la_rng r;
    la_rng_seed(&r, seed);
    for (int c = 0; c < d; c++) z0[c] = la_rng_normal(&r);
    double a = sqrt(rho), b = sqrt(1 - rho);
    for (int i = 0; i < n; i++) {
        double *xi = x + (size_t)i * d, s = 0;
        for (int c = 0; c < d; c++) {
            xi[c] = a * z0[c] + b * la_rng_normal(&r);
            s += xi[c] * xi[c];
        }
        double inv = s > 0 ? 1.0 / sqrt(s) : 0;
        for (int c = 0; c < d; c++) xi[c] *= inv;
    }
    free(z0);
    return LA_OK;
}

la_status la_critical_simplex_tokens(int n, double rho, double *x) {
    if (!x) return la_fail(LA_EINVAL, "la_critical_simplex_tokens: x must not be NULL");
    if (n < 1) return la_fail(LA_EINVAL, "la_critical_simplex_tokens: n must be >= 1 (got %d)", n);
    if (!(rho >= 0 && rho < 1)) return la_fail(LA_EINVAL, "la_critical_simplex_tokens: rho must be in [0, 1) (got %g)", rho);
    int d = n + 1;
    memset(x, 0, sizeof(double) * (size_t)n * d);
    double a = sqrt(rho), b = sqrt(1 - rho);
    for (int i = 0; i < n; i++) {
        x[(size_t)i * d] = a;         /* shared direction e_0 */
        x[(size_t)i * d + i + 1] = b; /* own direction e_{i+1} */
    }
    return LA_OK;
}

la_status la_critical_simplex_ip(double n, double rho, double gamma, double *ip) {
    if (!ip) return la_fail(LA_EINVAL, "la_critical_simplex_ip: ip must not be NULL");
    if (!(n >= 2) || !isfinite(n)) return la_fail(LA_EINVAL, "la_critical_simplex_ip: n must be a finite number >= 2 (got %g)", n);
    if (!(rho >= 0 && rho < 1)) return la_fail(LA_EINVAL, "la_critical_simplex_ip: rho must be in [0, 1) (got %g)", rho);
    if (!(gamma >= 0) || !isfinite(gamma)) return la_fail(LA_EINVAL, "la_critical_simplex_ip: gamma must be finite and >= 0 (got %g)", gamma);
    double m = n - 1, beta = gamma * log(n);
    double lu = log(m) + beta * (rho - 1);     /* log u */
    double ws = 1.0 / (1.0 + exp(lu));        /* self weight 1/(1+u) */
    double wo = 1.0 / (1.0 + exp(-lu));       /* weight on the others u/(1+u) */
    double e1 = (1 - rho) / m;                /* <x_i,o_k> - rho = |o_i|^2 - rho */
    double e2 = (m - 1) * (1 - rho) / (m * m); /* <o_i,o_k> - rho */
    double num = ws * ws * rho + 2 * ws * wo * (rho + e1) + wo * wo * (rho + e2);
    double den = ws * ws + 2 * ws * wo * rho + wo * wo * (rho + e1);
    *ip = num / den;
    return LA_OK;
}

double la_critical_simplex_limit(double rho, double gamma) {
    double k = gamma * (1 - rho);
    if (fabs(k - 1) <= 1e-12) return 4 * rho / (1 + 3 * rho);
    return k < 1 ? 1.0 : rho;
}

la_status la_critical_grid(const la_critical_params *p, const double *rhos, int n_rho, const double *gammas,
                           int n_gamma, la_critical_cell *cells) {
    if (!p || !rhos || !gammas || !cells) return la_fail(LA_EINVAL, "la_critical_grid: NULL argument");
    if (p->n < 2 || p->d < 1) return la_fail(LA_EINVAL, "la_critical_grid: need n >= 2 and d >= 1 (got n=%d d=%d)", p->n, p->d);
    if (p->draws < 1) return la_fail(LA_EINVAL, "la_critical_grid: draws must be >= 1 (got %d)", p->draws);
    if (n_rho < 1 || n_gamma < 1) return la_fail(LA_EINVAL, "la_critical_grid: the grid needs at least one rho and one gamma");
    for (int a = 0; a < n_rho; a++)
        if (!(rhos[a] >= 0 && rhos[a] < 1)) return la_fail(LA_EINVAL, "la_critical_grid: rho must be in [0, 1) (got %g)", rhos[a]);
    for (int g = 0; g < n_gamma; g++)
        if (!(gammas[g] >= 0) || !isfinite(gammas[g]))
            return la_fail(LA_EINVAL, "la_critical_grid: gamma must be finite and >= 0 (got %g)", gammas[g]);
    size_t nd = (size_t)p->n * p->d;
    double *x = la_malloc(sizeof(double) * nd), *y = la_malloc(sizeof(double) * nd);
    if (!x || !y) {
        free(x), free(y);
        return la_fail(LA_ENOMEM, "la_critical_grid: out of memory for %d x %d tokens", p->n, p->d);
    }
    la_status s = LA_OK;
    double logn = log((double)p->n);
    for (int a = 0; a < n_rho && s == LA_OK; a++) {
        for (int g = 0; g < n_gamma; g++) {
            la_critical_cell *c = &cells[(size_t)a * n_gamma + g];
            memset(c, 0, sizeof *c);
            c->rho = rhos[a], c->gamma = gammas[g];
            c->gamma_crit = 1.0 / (1.0 - rhos[a]);
            c->beta = gammas[g] * logn;
            s = la_critical_simplex_ip((double)p->n, rhos[a], gammas[g], &c->simplex_ip);
            if (s != LA_OK) break;
        }
        for (int draw = 0; draw < p->draws && s == LA_OK; draw++) {
            uint64_t seed = p->seed * 0x9E3779B97F4A7C15ull + (uint64_t)a * 1000003u + (uint64_t)draw;
            s = la_critical_gaussian_tokens(p->n, p->d, rhos[a], seed, x);
            double ang0 = 0, ip0 = 0;
            if (s == LA_OK) s = la_critical_pair_stats(x, p->n, p->d, &ang0, &ip0);
            for (int g = 0; g < n_gamma && s == LA_OK; g++) {
                la_critical_cell *c = &cells[(size_t)a * n_gamma + g];
                double ang1 = 0, ip1 = 0;
                s = la_critical_attend(x, p->n, p->d, c->beta, y);
                if (s == LA_OK) s = la_critical_pair_stats(y, p->n, p->d, &ang1, &ip1);
                c->angle_before += ang0 / p->draws, c->ip_before += ip0 / p->draws;
                c->angle_after += ang1 / p->draws, c->ip_after += ip1 / p->draws;
            }
        }
        for (int g = 0; g < n_gamma; g++) {
            la_critical_cell *c = &cells[(size_t)a * n_gamma + g];
            c->angle_ratio = c->angle_before > 0 ? c->angle_after / c->angle_before : NAN;
        }
    }
    free(x), free(y);
    return s;
}
