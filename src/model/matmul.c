/* matmul.c -- the model's matrix products through OpenBLAS, with a wall-clock counter so
 * `longattn bench train` can report the share of step time spent in them.
 *
 * Threading: when OpenBLAS itself runs on one thread (OPENBLAS_NUM_THREADS=1, as the CLI
 * sets it), large products are split into row blocks over OpenMP threads, each block one
 * single-threaded sgemm. Then one thread pool (OpenMP's, shared with the attention kernels)
 * does all the work instead of two pools spinning against each other, which on a 2-core
 * machine shared with other jobs made a training step 2-4x slower. With a multi-threaded
 * OpenBLAS the products are left to it. */
#include <cblas.h>
#include <omp.h>

#include "core/prof.h"
#include "model/layers.h"

/* Products below this many multiply-adds run as one call. */
#define MM_SPLIT_MIN 4000000.0

static int mm_threads(double macs) {
    if (macs < MM_SPLIT_MIN || openblas_get_num_threads() > 1 || omp_in_parallel()) return 1;
    return omp_get_max_threads();
}

void la_mm_forward(double *timer, float *y, const float *x, const float *W, int N, int in, int out,
                int accumulate) {
    LA_PROF_LAP(LA_PROF_OTHER);
    double t0 = omp_get_wtime();
    float beta = accumulate ? 1.0f : 0.0f;
    int nt = mm_threads((double)N * in * out);
    /* y (N, out) = x (N, in) . W^T (in, out), rows of y split across threads */
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int t = 0; t < nt; t++) {
        int n0 = (int)((long)N * t / nt), n1 = (int)((long)N * (t + 1) / nt);
        if (n1 > n0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n1 - n0, out, in, 1.0f,
                        x + (size_t)n0 * in, in, W, in, beta, y + (size_t)n0 * out, out);
    }
    *timer += omp_get_wtime() - t0;
    LA_PROF_LAP(LA_PROF_MATMUL);
}

void la_mm_backward(double *timer, float *dx, float *dW, const float *dy, const float *x,
                 const float *W, int N, int in, int out, int accumulate_dx) {
    LA_PROF_LAP(LA_PROF_OTHER);
    double t0 = omp_get_wtime();
    float beta = accumulate_dx ? 1.0f : 0.0f;
    int nt = mm_threads((double)N * in * out);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        /* backward of y = x W^T:  dx (N, in) = dy (N, out) . W (out, in), split over rows of dx */
        int n0 = (int)((long)N * t / T), n1 = (int)((long)N * (t + 1) / T);
        if (dx && n1 > n0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n1 - n0, in, out, 1.0f,
                        dy + (size_t)n0 * out, out, W, in, beta, dx + (size_t)n0 * in, in);
        /* dW (out, in) += dy^T (out, N) . x (N, in), split over rows of dW (no reduction
         * across threads: each thread owns its rows) */
        int o0 = (int)((long)out * t / T), o1 = (int)((long)out * (t + 1) / T);
        if (o1 > o0)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o1 - o0, in, N, 1.0f, dy + o0, out,
                        x, in, 1.0f, dW + (size_t)o0 * in, in);
    }
    *timer += omp_get_wtime() - t0;
    LA_PROF_LAP(LA_PROF_MATMUL);
}
