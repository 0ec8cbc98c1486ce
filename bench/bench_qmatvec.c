/* bench_qmatvec.c -- `longattn bench qmatvec`: the decode path's quantized matrix x vector
 * (la_qmatvec) for every supported type, as GB/s of weight bytes streamed, next to the
 * memory bandwidth measured in the same run (memcpy of a buffer as large as the weights,
 * counted as bytes read) and to OpenBLAS sgemv on the same matrix in float32. Decode is
 * memory-bound: a kernel near the memcpy figure is limited by memory, not by decoding.
 * Each matrix is sized to hold about --mb MiB of weights (far beyond the caches); the same
 * kernel is also timed on a 256 KiB slice that stays in cache (billions of weights decoded
 * per second: the compute ceiling). Times are the best of --reps runs. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli/cli.h"
#include "core/internal.h"
#include "longattn.h"

static const cli_doc DOC = {
    "longattn bench qmatvec [options]",
    "Quantized matrix x vector (the decode path): GB/s of weights against memcpy bandwidth.",
    "OMP_NUM_THREADS sets the threads (rows are split over them).",
    0,
};

/* Best of reps (after a warm-up that pages in and starts the threads): on a shared machine
 * other processes only ever add time, so the minimum is the most repeatable figure. */
static double best_time(la_status (*run)(void *), void *ctx, int reps) {
    double best = 1e30;
    run(ctx);
    for (int i = 0; i < reps; i++) {
        double t0 = cli_now();
        run(ctx);
        double t = cli_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

typedef struct {
    uint32_t type;
    const void *w;
    void *dst;
    int64_t rows, cols;
    size_t bytes;
    const float *x;
    float *y;
    int q8x; /* la_qmatvec_q8x (x rounded to 8 bits) instead of la_qmatvec */
} job;

static la_status run_qmv(void *p) {
    job *j = p;
    return (j->q8x ? la_qmatvec_q8x : la_qmatvec)(j->type, j->w, j->rows, j->cols, j->x, j->y);
}

static la_status run_memcpy(void *p) {
    job *j = p;
    memcpy(j->dst, j->w, j->bytes);
    return LA_OK;
}

static la_status run_sgemv(void *p) {
    job *j = p;
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)j->rows, (int)j->cols, 1.0f, j->w, (int)j->cols,
                j->x, 1, 0.0f, j->y, 1);
    return LA_OK;
}

int bench_qmatvec(int argc, char **argv) {
    long cols = 4096, mb = 64;
    int reps = 9, json = 0, quick = 0;
    /* --quick first, so that --mb and --reps change it wherever they stand */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) mb = 8, reps = 3;
    cli_arg args[] = {
        CLI_A_LONG("--cols N", "row length (default 4096; a multiple of 256)", &cols, 256, 1L << 30),
        CLI_A_LONG("--mb N", "MiB of weights per matrix (default 64)", &mb, 1, 1L << 20),
        CLI_A_INT("--reps N", "timed repetitions, the best reported (default 9)", &reps, 1, 64),
        CLI_A_FLAG("--quick", "--mb 8 --reps 3 (a smoke run)", &quick),
        CLI_A_FLAG("--json", "one JSON object per line per type", &json),
        CLI_A_END,
    };
    int prc = cli_parse("bench qmatvec", &DOC, args, argc, argv);
    if (prc >= 0) return prc;
    if (cols % 256) { fprintf(stderr, "longattn bench qmatvec: --cols must be a multiple of 256\n"); return 2; }
    /* every type with la_qmatvec; Q8_0, Q4_0 and Q4_1 again with x rounded to 8 bits
     * (la_qmatvec_q8x: rows "+x8") */
    static const struct {
        uint32_t type;
        int q8x;
    } kinds[] = {{LA_GGML_F32, 0},  {LA_GGML_F16, 0},  {LA_GGML_BF16, 0}, {LA_GGML_Q8_0, 0},
                 {LA_GGML_Q8_0, 1}, {LA_GGML_Q4_0, 0}, {LA_GGML_Q4_0, 1}, {LA_GGML_Q4_1, 0},
                 {LA_GGML_Q4_1, 1}, {LA_GGML_Q5_0, 0}, {LA_GGML_Q5_1, 0}, {LA_GGML_Q4_K, 0},
                 {LA_GGML_Q5_K, 0}, {LA_GGML_Q6_K, 0}};
    const size_t cap = (size_t)mb << 20;
    uint8_t *w = malloc(cap + 4096), *dst = malloc(cap + 4096);
    float *x = malloc((size_t)cols * sizeof *x), *y = malloc((cap / 16 + 1) * sizeof *y);
    if (!w || !dst || !x || !y) {
        fprintf(stderr, "longattn bench qmatvec: out of memory for %lld MiB\n", (long long)mb);
        free(w); free(dst); free(x); free(y);
        return 1;
    }
    la_rng r;
    la_rng_seed(&r, 11);
    /* random bytes; scale fields may be any f16, inf/nan included: timing does not care */
    for (size_t i = 0; i < cap + 4096; i++) w[i] = (uint8_t)la_rng_below(&r, 256);
    memset(dst, 0, cap + 4096);
    for (int64_t c = 0; c < cols; c++) x[c] = (float)la_rng_normal(&r);

    job mj = {0, w, dst, 0, 0, cap, x, y, 0};
    const double t_mem = best_time(run_memcpy, &mj, reps), bw = (double)cap / t_mem / 1e9;
    if (!json)
        printf("qmatvec: %lld-value rows, ~%lld MiB of weights per type, %d threads, best of %d\n"
               "memcpy bandwidth (bytes read): %.2f GB/s\n\n%-7s %8s %10s %10s %10s %12s\n",
               (long long)cols, (long long)mb, omp_get_max_threads(), reps, bw, "type", "rows",
               "ms", "GB/s", "vs memcpy", "Gw/s cache");
    else
        printf("{\"bench\":\"memcpy\",\"gb_per_s\":%.4f}\n", bw);
    int rc = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        const uint32_t t = kinds[k].type;
        const int64_t rb = la_ggml_row_bytes(t, cols), rows = (int64_t)(cap / (size_t)rb);
        job j = {t, w, NULL, rows, cols, (size_t)(rows * rb), x, y, kinds[k].q8x};
        char name[16];
        snprintf(name, sizeof name, "%s%s", la_ggml_type_name(t), j.q8x ? "+x8" : "");
        if (run_qmv(&j) != LA_OK) {
            fprintf(stderr, "longattn bench qmatvec: %s\n", la_errmsg());
            rc = 1;
            break;
        }
        const double s = best_time(run_qmv, &j, reps), gbs = (double)j.bytes / s / 1e9;
        /* the same kernel on a cache-resident slice (256 KiB of weights): decode speed
         * without memory stalls, in weights per second */
        job jc = j;
        jc.rows = (int64_t)((256 << 10) / (size_t)rb);
        if (jc.rows < 1) jc.rows = 1;
        const double sc = best_time(run_qmv, &jc, 20 * reps),
                     gws = (double)jc.rows * (double)cols / sc / 1e9;
        if (json)
            printf("{\"bench\":\"qmatvec\",\"type\":\"%s\",\"x_q8\":%s,\"rows\":%lld,\"cols\":%lld,\"ms\":%.4f,"
                   "\"gb_per_s\":%.4f,\"vs_memcpy\":%.4f,\"gweights_per_s_in_cache\":%.4f}\n",
                   la_ggml_type_name(t), j.q8x ? "true" : "false", (long long)rows, (long long)cols, s * 1e3, gbs, gbs / bw, gws);
        else
            printf("%-7s %8lld %10.3f %10.2f %10.2f %12.2f\n", name, (long long)rows,
                   s * 1e3, gbs, gbs / bw, gws);
    }
    if (rc == 0) { /* OpenBLAS sgemv on the same bytes read as float32 */
        for (size_t i = 0; i < cap / 4; i++) ((float *)(void *)w)[i] = (float)(i % 7) - 3.0f;
        job j = {0, w, NULL, (int64_t)(cap / 4 / (size_t)cols), cols, cap, x, y, 0};
        const double s = best_time(run_sgemv, &j, reps), gbs = (double)cap / s / 1e9;
        if (json) printf("{\"bench\":\"sgemv\",\"gb_per_s\":%.4f,\"vs_memcpy\":%.4f}\n", gbs, gbs / bw);
        else printf("%-7s %8lld %10.3f %10.2f %10.2f   (OpenBLAS sgemv, float32)\n", "sgemv",
                    (long long)j.rows, s * 1e3, gbs, gbs / bw);
    }
    free(w);
    free(dst);
    free(x);
    free(y);
    return rc;
}
