/* rmsnorm.c -- RMSNorm (Zhang & Sennrich 2019): y = x * rstd * g, rstd = 1/sqrt(mean(x^2)+eps).
 * No bias, no mean subtraction. */
#include <math.h>

#include "model/layers.h"

void la_rmsnorm_forward(float *y, float *rstd, const float *x, const float *g, int N, int C) {
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
}

void la_rmsnorm_backward(float *dx, float *dg, const float *dy, const float *x, const float *rstd,
                      const float *g, int N, int C) {
    /* F2: dg[c] += sum_n dy * x * rstd  (serial over n: a fixed summation order keeps
     * training bit-reproducible for any thread count) */
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *dyr = dy + (size_t)n * C;
        float r = rstd[n];
        for (int c = 0; c < C; c++) dg[c] += dyr[c] * xr[c] * r;
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
}
