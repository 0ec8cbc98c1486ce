/* bench_peak.c -- the machine's measured single-precision FMA peak (issue 20, "benchmark
 * output a reader trusts"): each thread runs NCHAIN independent multiply-add chains on
 * vector registers (a = a * m + e, which stays finite and away from denormals; without
 * -ffast-math the compiler must do every one) in bursts of INNER rounds for a given wall
 * time, and keeps its fastest burst; the peak is the sum of the threads' best burst rates.
 * Best-of-bursts is the footing of the sgemm figure next to it (best of 5 calls): on a
 * shared machine an average over the whole time would measure the other processes' share
 * of the cores, not the FMA units. 2 flops per lane per FMA. */
#include <math.h>
#include <omp.h>
#include <time.h>

#include "bench.h"
#include "cli/cli.h"

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec;
#define LANES 16
#define VSET(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VSUM(v) _mm512_reduce_add_ps(v)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
#define LANES 8
#define VSET(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
static float vsum8(__m256 v) {
    float t[8];
    _mm256_storeu_ps(t, v);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#define VSUM(v) vsum8(v)
#else
typedef float vec;
#define LANES 1
#define VSET(x) (x)
#define VFMA(a, b, c) fmaf(a, b, c)
#define VSUM(v) (v)
#endif

/* 12 chains: enough to cover 2 FMA ports x 4-6 cycles latency on current x86 cores */
#define NCHAIN 12
#define INNER 16384 /* FMA rounds per timed burst (tens of microseconds) */

/* Runs bursts of INNER rounds of NCHAIN FMAs until `seconds` have passed; returns the best
 * burst's rounds per second, and in *sink a value depending on every chain (so the
 * compiler keeps them). */
static double fma_chains(double seconds, float *sink) {
    vec a[NCHAIN];
    for (int i = 0; i < NCHAIN; i++) a[i] = VSET(1.0f + 0.01f * (float)i);
    const vec m = VSET(0.999999f), e = VSET(1e-6f);
    double best = INFINITY, t0 = cli_now(), t = t0;
    do {
        for (int r = 0; r < INNER; r++)
            for (int i = 0; i < NCHAIN; i++) a[i] = VFMA(a[i], m, e);
        double t1 = cli_now();
        if (t1 - t < best) best = t1 - t;
        t = t1;
    } while (t - t0 < seconds);
    float s = 0.0f;
    for (int i = 0; i < NCHAIN; i++) s += VSUM(a[i]);
    *sink = s;
    return INNER / best;
}

double bench_fma_peak(int threads, double seconds, int *lanes) {
    double rate = 0.0;
    float sink = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : rate, sink)
    {
        float s;
        rate += fma_chains(seconds, &s);
        sink += s;
    }
    if (lanes) *lanes = LANES;
    if (!(sink == sink)) return -1; /* NaN: never, but it makes the sum observable */
    return rate * NCHAIN * LANES * 2.0 / 1e9;
}
