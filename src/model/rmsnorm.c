/* rmsnorm.c -- RMSNorm (Zhang & Sennrich 2019): y = x * rstd * g, rstd = 1/sqrt(mean(x^2)+eps).
 * No bias, no mean subtraction. */
#include <math.h>
#include <omp.h>

#include "core/prof.h"
#include "model/layers.h"

void la_rmsnorm_forward(float *y, float *rstd, const float *x, const float *g, int N, int C) {
    LA_PROF_LAP(LA_PROF_OTHER);
#pragma omp parallel for schedule(static) if ((size_t)N * C >= LA_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C; // (C)
        float *yr = y + (size_t)n * C;       // (C)
        float ss = 0;  // float: vectorises; C, D <= a few thousand terms
        #pragma omp simd reduction(+ : ss)
        for (int c = 0; c < C; c++) ss += xr[c] * xr[c];
        float r = 1.0f / sqrtf(ss / C + LA_RMS_EPS);  // F1
        rstd[n] = r;
        for (int c = 0; c < C; c++) yr[c] = xr[c] * r * g[c]; // F2
    }
    LA_PROF_LAP(LA_PROF_NORM);
}

void la_rmsnorm_backward(float *dx, float *dg, const float *dy, const float *x, const float *rstd,
                      const float *g, int N, int C) {
    LA_PROF_LAP(LA_PROF_OTHER);
    /* F2: dg[c] += sum_n dy * x * rstd, in row order for every c (a fixed summation order
     * keeps training bit-reproducible for any thread count); threads own column ranges */
#pragma omp parallel if ((size_t)N * C >= LA_PAR_MIN)
    {
        int me = omp_get_thread_num(), nt = omp_get_num_threads();
        int c0 = (int)((long)C * me / nt), c1 = (int)((long)C * (me + 1) / nt);
        for (int n = 0; n < N; n++) {
            const float *xr = x + (size_t)n * C, *dyr = dy + (size_t)n * C;
            float r = rstd[n];
            for (int c = c0; c < c1; c++) dg[c] += dyr[c] * xr[c] * r;
        }
    }
#pragma omp parallel for schedule(static) if ((size_t)N * C >= LA_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *dyr = dy + (size_t)n * C;
        float *dxr = dx + (size_t)n * C;
        float r = rstd[n];
        /* F1+F2: dx = r*(g*dy) - x * r^3 * mean(g*dy*x) */
        float dot = 0;
        #pragma omp simd reduction(+ : dot)
        for (int c = 0; c < C; c++) dot += g[c] * dyr[c] * xr[c];
        float k = dot / C * r * r * r;
        for (int c = 0; c < C; c++) dxr[c] += r * g[c] * dyr[c] - k * xr[c];
    }
    LA_PROF_LAP(LA_PROF_NORM);
}
