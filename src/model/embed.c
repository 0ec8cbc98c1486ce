/* embed.c -- token embedding lookup and the softmax cross-entropy of the LM head. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/prof.h"
#include "model/layers.h"

void la_embed_forward(float *x, const int32_t *tokens, const float *wte, int N, int C) {
    LA_PROF_LAP(LA_PROF_OTHER);
#pragma omp parallel for schedule(static) if ((size_t)N * C >= LA_PAR_MIN)
    for (int n = 0; n < N; n++)
        memcpy(x + (size_t)n * C, wte + (size_t)tokens[n] * C, sizeof(float) * C);  // F1
    LA_PROF_LAP(LA_PROF_EMBED);
}

void la_embed_backward(float *dwte, const float *dx, const int32_t *tokens, int N, int C) {
    LA_PROF_LAP(LA_PROF_OTHER);
    /* F1: rows with the same token add up, in row order for every column (a fixed order);
     * threads own column ranges */
#pragma omp parallel if ((size_t)N * C >= LA_PAR_MIN)
    {
        int me = omp_get_thread_num(), nt = omp_get_num_threads();
        int c0 = (int)((long)C * me / nt), c1 = (int)((long)C * (me + 1) / nt);
        for (int n = 0; n < N; n++) {
            float *dr = dwte + (size_t)tokens[n] * C;
            const float *g = dx + (size_t)n * C;
            for (int c = c0; c < c1; c++) dr[c] += g[c];
        }
    }
    LA_PROF_LAP(LA_PROF_EMBED);
}

int64_t la_xent_forward(float *loss, float *lse, const float *logits, const int32_t *targets, int N,
                     int V, double *sum_loss) {
    LA_PROF_LAP(LA_PROF_OTHER);
#pragma omp parallel for schedule(static) if ((size_t)N * V >= LA_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;  // (V)
        float mx = z[0];
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        double s = 0;
        for (int v = 0; v < V; v++) s += exp((double)(z[v] - mx));
        float l = mx + (float)log(s);                          // F1: lse = log sum exp z
        lse[n] = l;
        if (loss) loss[n] = targets && targets[n] >= 0 ? l - z[targets[n]] : 0.0f;  // F2
    }
    /* serial sum in double: the mean does not depend on the thread count */
    double s = 0;
    int64_t cnt = 0;
    if (targets && loss)
        for (int n = 0; n < N; n++)
            if (targets[n] >= 0) {
                s += loss[n];
                cnt++;
            }
    *sum_loss = s;
    LA_PROF_LAP(LA_PROF_XENT);
    return cnt;
}

void la_xent_backward(float *z, const float *lse, const int32_t *targets, int N, int V, float scale) {
    LA_PROF_LAP(LA_PROF_OTHER);
#pragma omp parallel for schedule(static) if ((size_t)N * V >= LA_PAR_MIN)
    for (int n = 0; n < N; n++) {
        float *zr = z + (size_t)n * V;
        if (targets[n] < 0) {
            memset(zr, 0, sizeof(float) * V);
            continue;
        }
        /* F1, F2: d(lse - z[y])/dz = softmax(z) - onehot(y) */
        float l = lse[n];
        for (int v = 0; v < V; v++) zr[v] = scale * expf(zr[v] - l);
        zr[targets[n]] -= scale;
    }
    LA_PROF_LAP(LA_PROF_XENT);
}
