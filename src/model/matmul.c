/* matmul.c -- the model's matrix products through OpenBLAS, with a wall-clock counter so
 * `longattn bench train` can report the share of step time spent in them. */
#include <cblas.h>
#include <omp.h>

#include "model/layers.h"

void mm_forward(double *timer, float *y, const float *x, const float *W, int N, int in, int out,
                int accumulate) {
    double t0 = omp_get_wtime();
    /* y (N, out) = x (N, in) . W^T (in, out) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, out, in, 1.0f, x, in, W, in,
                accumulate ? 1.0f : 0.0f, y, out);
    *timer += omp_get_wtime() - t0;
}

void mm_backward(double *timer, float *dx, float *dW, const float *dy, const float *x,
                 const float *W, int N, int in, int out, int accumulate_dx) {
    double t0 = omp_get_wtime();
    /* backward of y = x W^T:  dx (N, in) = dy (N, out) . W (out, in) */
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, in, out, 1.0f, dy, out, W, in,
                    accumulate_dx ? 1.0f : 0.0f, dx, in);
    /* dW (out, in) += dy^T (out, N) . x (N, in) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, N, 1.0f, dy, out, x, in, 1.0f,
                dW, in);
    *timer += omp_get_wtime() - t0;
}
