/* muon.c -- Muon: momentum orthogonalised by a quintic Newton-Schulz iteration
 * (K. Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural networks";
 * coefficients (3.4445, -4.7750, 2.0315), 5 steps, as in the reference implementation). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "train/optim.h"

void la_muon_newton_schulz5(float *X, int rows, int cols, float *scratch) {
    const float a = 3.4445f, b = -4.7750f, c = 2.0315f;
    /* work on the wide orientation (r <= c) so that A = X X^T is the small Gram matrix */
    int tr = rows > cols;
    int r = tr ? cols : rows, cc = tr ? rows : cols;
    float *Y = scratch;                       // (r, cc)
    float *Yn = Y + (size_t)r * cc;           // (r, cc)
    float *A = Yn + (size_t)r * cc;           // (r, r)
    float *Bm = A + (size_t)r * r;            // (r, r)
    if (tr) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) Y[(size_t)j * cc + i] = X[(size_t)i * cols + j];
    } else {
        memcpy(Y, X, sizeof(float) * (size_t)r * cc);
    }
    double nrm = 0;
    for (size_t i = 0; i < (size_t)r * cc; i++) nrm += (double)Y[i] * Y[i];
    float inv = (float)(1.0 / (sqrt(nrm) + 1e-7));
    for (size_t i = 0; i < (size_t)r * cc; i++) Y[i] *= inv;
    for (int it = 0; it < 5; it++) {
        /* A = Y Y^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, r, cc, 1.0f, Y, cc, Y, cc, 0.0f, A, r);
        /* Bm = b A + c A A */
        memcpy(Bm, A, sizeof(float) * (size_t)r * r);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, r, r, c, A, r, A, r, b, Bm, r);
        /* Yn = a Y + Bm Y */
        memcpy(Yn, Y, sizeof(float) * (size_t)r * cc);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, cc, r, 1.0f, Bm, r, Y, cc, a, Yn, cc);
        float *t = Y;
        Y = Yn;
        Yn = t;
    }
    if (tr) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) X[(size_t)i * cols + j] = Y[(size_t)j * cc + i];
    } else {
        memcpy(X, Y, sizeof(float) * (size_t)r * cc);
    }
}

void la_muon_update(float *p, const float *g, float *mom, int rows, int cols, double lr, double mu,
                 double wd, float *scratch) {
    size_t n = (size_t)rows * cols;
    float *u = scratch;                     // (rows, cols)
    float *ns = scratch + n;                // Newton-Schulz scratch
    float fmu = (float)mu;
    for (size_t i = 0; i < n; i++) {
        mom[i] = fmu * mom[i] + g[i];
        u[i] = g[i] + fmu * mom[i];  // Nesterov
    }
    la_muon_newton_schulz5(u, rows, cols, ns);
    float scale = (float)(lr * sqrt(fmax(1.0, (double)rows / cols)));
    float decay = (float)(1.0 - lr * wd);
    for (size_t i = 0; i < n; i++) p[i] = p[i] * decay - scale * u[i];
}
