/* matmul.c -- the model's matrix products through OpenBLAS, with a wall-clock counter so
 * `longattn bench train` can report the share of step time spent in them.
 *
 * Threading: when OpenBLAS itself runs on one thread (OPENBLAS_NUM_THREADS=1, as the CLI
 * sets it), large products are split into row blocks over OpenMP threads, each block one
 * single-threaded sgemm. Then one thread pool (OpenMP's, shared with the attention kernels)
 * does all the work instead of two pools spinning against each other, which on a 2-core
 * machine shared with other jobs made a training step 2-4x slower. With a multi-threaded
 * OpenBLAS the products are left to it.
 *
 * bf16 mode (mm->buf set, issue 29): each operand is copied rounded to bf16 into mm->buf
 * and the same sgemm calls run on the copies. No bf16 GEMM here: Debian's OpenBLAS 0.3.21
 * has no sbgemm, and the CPUs this was written on have no bf16 dot product; the rounding is
 * elementwise, so results stay bitwise the same for any thread count (with the row
 * blocks of la_mm_row_block). */
#include <cblas.h>
#include <omp.h>

#include <assert.h>
#include <string.h>

#include "attn/ring.h"
#include "core/half.h"
#include "core/internal.h"
#include "core/prof.h"
#include "model/layers.h"

/* Products below this many multiply-adds run as one call. */
#define MM_SPLIT_MIN 4000000.0

static int mm_threads(double macs) {
    if (macs < MM_SPLIT_MIN || openblas_get_num_threads() > 1 || omp_in_parallel()) return 1;
    return omp_get_max_threads();
}

size_t la_mm_bf16_floats(size_t N, size_t in, size_t out) {
    return N * in + in * out + N * out + 3 * 16; /* x, W, dy copies, each 64-byte aligned */
}

/* dst (n) = src rounded to bf16, over the team when n is large (elementwise: any split
 * gives the same bits). */
static void round_copy(float *dst, const float *src, size_t n) {
    const size_t chunk = (size_t)1 << 15;
    long nch = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) if (n >= LA_PAR_MIN && !omp_in_parallel())
    for (long c = 0; c < nch; c++) {
        size_t i0 = (size_t)c * chunk, m = n - i0 < chunk ? n - i0 : chunk;
        memcpy(dst + i0, src + i0, m * sizeof(float));
        la_round_bf16(dst + i0, m);
    }
}

void la_mm_row_block(long N, int t, int nt, int *r0, int *r1) {
    /* each bound rounded to the nearest multiple of LA_MM_ROW_ALIGN; the last is N */
    long a = LA_MM_ROW_ALIGN;
    long b0 = (N * t / nt + a / 2) / a * a, b1 = (N * (t + 1) / nt + a / 2) / a * a;
    if (b0 > N) b0 = N;
    if (b1 > N || t == nt - 1) b1 = N;
    *r0 = (int)b0, *r1 = (int)b1;
}

void la_mm_sgemm_rows(float *y, int ldy, const float *x, const float *W, int N, int in, int out, float beta) {
    int nt = mm_threads((double)N * in * out);
    /* y (N, out) = x (N, in) . W^T (in, out), rows of y split across threads */
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int t = 0; t < nt; t++) {
        int n0, n1;
        la_mm_row_block(N, t, nt, &n0, &n1);
        if (n1 > n0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n1 - n0, out, in, 1.0f,
                        x + (size_t)n0 * in, in, W, in, beta, y + (size_t)n0 * ldy, ldy);
    }
}

/* Next 64-byte aligned block of n floats in buf after *at. */
static float *take(const la_mm_ctx *mm, size_t *at, size_t n) {
    float *p = mm->buf + *at;
    *at += (n + 15) & ~(size_t)15;
    assert(*at <= mm->cap); /* the model reserves la_mm_bf16_floats of its largest product */
    return p;
}

void la_mm_forward(const la_mm_ctx *mm, float *y, const float *x, const float *W, int N, int in,
                   int out, int accumulate) {
    LA_PROF_LAP(LA_PROF_OTHER);
    double t0 = omp_get_wtime();
    float beta = accumulate ? 1.0f : 0.0f;
    if (mm->buf) { /* bf16: x (N, in) and W (out, in) rounded copies */
        size_t at = 0;
        float *xr = take(mm, &at, (size_t)N * in), *wr = take(mm, &at, (size_t)out * in);
        round_copy(xr, x, (size_t)N * in);
        round_copy(wr, W, (size_t)out * in);
        x = xr, W = wr;
    }
    la_mm_sgemm_rows(y, out, x, W, N, in, out, beta);
    *mm->timer += omp_get_wtime() - t0;
    LA_PROF_LAP(LA_PROF_MATMUL);
}

void la_mm_backward(const la_mm_ctx *mm, float *dx, float *dW, const float *dy, const float *x,
                    const float *W, int N, int in, int out, int accumulate_dx) {
    LA_PROF_LAP(LA_PROF_OTHER);
    double t0 = omp_get_wtime();
    float beta = accumulate_dx ? 1.0f : 0.0f;
    if (mm->buf) { /* bf16: dy (N, out), x (N, in) and (for dx) W (out, in) rounded copies */
        size_t at = 0;
        float *dyr = take(mm, &at, (size_t)N * out), *xr = take(mm, &at, (size_t)N * in);
        round_copy(dyr, dy, (size_t)N * out);
        if (dW) round_copy(xr, x, (size_t)N * in);
        if (dx) {
            float *wr = take(mm, &at, (size_t)out * in);
            round_copy(wr, W, (size_t)out * in);
            W = wr;
        }
        dy = dyr, x = dW ? xr : x;
    }
    int nt = mm_threads((double)N * in * out);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        /* backward of y = x W^T:  dx (N, in) = dy (N, out) . W (out, in), split over rows of dx */
        int n0, n1;
        la_mm_row_block(N, t, T, &n0, &n1);
        if (dx && n1 > n0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n1 - n0, in, out, 1.0f,
                        dy + (size_t)n0 * out, out, W, in, beta, dx + (size_t)n0 * in, in);
        /* dW (out, in) += dy^T (out, N) . x (N, in), split over rows of dW (no reduction
         * across threads: each thread owns its rows) */
        int o0, o1;
        la_mm_row_block(out, t, T, &o0, &o1);
        if (dW && o1 > o0)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o1 - o0, in, N, 1.0f, dy + o0, out,
                        x, in, 1.0f, dW + (size_t)o0 * in, in);
    }
    *mm->timer += omp_get_wtime() - t0;
    LA_PROF_LAP(LA_PROF_MATMUL);
}

/* ---- sequence parallelism (issue 30): products over this rank's rows only ---- */

int la_sp_range(const la_sp_part *p, int i, int *n0) {
    int b = i / 2, j = i % 2;
    *n0 = b * p->T + p->rows[2 * j];
    return p->rows[2 * j + 1] - p->rows[2 * j];
}

la_status la_sp_gather_all(int n, float *const *x, const int *heads, int T, const int *width) {
    for (int i = 0; i < n; i++) LA_TRY(la_attn_sp_gather(x[i], heads[i], T, width[i], NULL));
    return LA_OK;
}

int la_sp_wide_range(const la_sp_part *p, int *i, int *n0) {
    const int N = p->B * p->T;
    int a = -1, b = -1;
    while (*i < 2 * p->B) { /* the ranges come in increasing row order */
        int s, n = la_sp_range(p, *i, &s);
        int wa = s / 24 * 24, wb = (s + n + 23) / 24 * 24 < N ? (s + n + 23) / 24 * 24 : N;
        if (n > 0 && a >= 0 && wa > b) break; /* a gap: the next call starts there */
        (*i)++;
        if (n <= 0) continue;
        if (a < 0) a = wa, b = wb;
        else if (wb > b) b = wb;
    }
    *n0 = a;
    return a < 0 ? 0 : b - a;
}

void la_mm_forward_rows(const la_sp_part *p, const la_mm_ctx *mm, float *y, const float *x, const float *W,
                        int in, int out, int accumulate) {
    for (int i = 0, n0, n; (n = la_sp_wide_range(p, &i, &n0)) > 0;)
        la_mm_forward(mm, y + (size_t)n0 * out, x + (size_t)n0 * in, W, n, in, out, accumulate);
}

void la_mm_dx_rows(const la_sp_part *p, const la_mm_ctx *mm, float *dx, const float *dy, const float *W, int in,
                   int out, int accumulate) {
    for (int i = 0, n0, n; (n = la_sp_wide_range(p, &i, &n0)) > 0;)
        la_mm_backward(mm, dx + (size_t)n0 * in, NULL, dy + (size_t)n0 * out, NULL, W, n, in, out, accumulate);
}
