/* attn_run.c -- runs one attention shape forward (+ backward) a given number of times, for
 * profiling (valgrind --tool=callgrind, perf) and for old-vs-new timing of two builds run
 * alternately (docs/benchmarks.md: "where the backward's time goes").
 *   usage: attn_run SPEC T [reps] [threads] [fwd|fwdbwd]
 * B = 1, H = Hkv = 8, D = 64, S = T, bottom-right alignment, inputs as in `bench attn`.
 * Prints the best wall time of the reps (seconds), a checksum and a hash of the outputs
 * bytes (so two builds can be checked to compute the same thing, bitwise), and the best
 * process CPU time of the reps (seconds, all threads).
 * Built with -DLA_PROFILE and linked with a src/attn/softmax.c compiled with -DLA_PROFILE
 * (scripts/profile_attn.sh), it also prints the softmax kernel's time per phase. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "longattn.h"

#ifdef LA_PROFILE
extern unsigned long long la_softmax_prof[]; /* [64 threads][phases], row-major */
extern const char *const la_softmax_prof_names[];
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* CPU seconds of the whole process (all threads): on a shared machine far steadier than
 * wall time, provided idle threads do not spin (run with OMP_WAIT_POLICY=passive) */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* uniform in [-scale, scale) from a 64-bit LCG (deterministic, no library state) */
static void fill(float *x, size_t n, uint64_t *r, float scale) {
    for (size_t i = 0; i < n; i++) {
        *r = *r * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = scale * (float)(2.0 * (double)(*r >> 11) / 9007199254740992.0 - 1.0);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: attn_run SPEC T [reps] [threads] [fwd|fwdbwd]\n");
        return 2;
    }
    int T = atoi(argv[2]), reps = argc > 3 ? atoi(argv[3]) : 1, threads = argc > 4 ? atoi(argv[4]) : 1;
    int bwd = argc > 5 ? strcmp(argv[5], "fwd") != 0 : 1;
    if (T < 1 || reps < 1 || threads < 1) {
        fprintf(stderr, "attn_run: T, reps and threads must be positive\n");
        return 2;
    }
    la_spec sp;
    if (la_spec_parse(argv[1], &sp) != LA_OK) {
        fprintf(stderr, "attn_run: %s\n", la_errmsg());
        return 2;
    }
    const int H = 8, D = 64;
    la_shape sh = {.B = 1, .H = H, .Hkv = H, .T = T, .S = T, .D = D, .pos0 = LA_POS0_AUTO};
    size_t n = (size_t)H * T * D;
    float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4), *g = malloc(n * 4);
    float *dq = malloc(n * 4), *dk = malloc(n * 4), *dv = malloc(n * 4), *lse = malloc((size_t)H * T * 4);
    if (!q || !k || !v || !o || !g || !dq || !dk || !dv || !lse) return 1;
    uint64_t r = (uint64_t)T;
    fill(q, n, &r, 1.7f), fill(k, n, &r, 1.7f), fill(v, n, &r, 1.0f), fill(g, n, &r, 1.0f);
    la_workspace *ws = la_workspace_new();
    la_attn_opts opt = la_attn_opts_default();
    opt.n_threads = threads;
    opt.ws = ws;
    double best = INFINITY, best_cpu = INFINITY;
    for (int i = 0; i < reps; i++) {
        double t0 = now(), c0 = cpu_now();
        la_status s = la_attn_forward(&sp, &sh, q, k, v, o, lse, &opt);
        if (s == LA_OK && bwd) s = la_attn_backward(&sp, &sh, q, k, v, o, lse, g, dq, dk, dv, &opt);
        double dt = now() - t0, dc = cpu_now() - c0;
        if (s != LA_OK) {
            fprintf(stderr, "attn_run: %s\n", la_errmsg());
            return 1;
        }
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    double cs = 0;
    for (size_t i = 0; i < n; i++) cs += o[i] + (bwd ? dq[i] + dk[i] + dv[i] : 0.0f);
    /* FNV-1a over the bytes of out (and dq, dk, dv): equal hashes = bitwise equal outputs */
    uint64_t hsh = 1469598103934665603ULL;
    const float *outs[4] = {o, dq, dk, dv};
    for (int a = 0; a < (bwd ? 4 : 1); a++) {
        const unsigned char *bytes = (const unsigned char *)outs[a];
        for (size_t i = 0; i < n * sizeof(float); i++) hsh = (hsh ^ bytes[i]) * 1099511628211ULL;
    }
    printf("%.6f %.9g %016llx %.6f\n", best, cs, (unsigned long long)hsh, best_cpu);
#ifdef LA_PROFILE
    /* ticks summed over threads and reps; shares of the sum of the item phases */
    int np = 0;
    while (la_softmax_prof_names[np]) np++;
    unsigned long long tot[64] = {0}, items = 0;
    for (int t = 0; t < 64; t++)
        for (int p = 0; p < np; p++) tot[p] += la_softmax_prof[(size_t)t * np + p];
    for (int p = 0; p < np; p++) /* the item phases: not the prepasses, not the whole loops */
        if (!strstr(la_softmax_prof_names[p], "prepare") && !strstr(la_softmax_prof_names[p], "whole"))
            items += tot[p];
    for (int p = 0; p < np; p++)
        printf("%-44s %14llu ticks %6.2f%%\n", la_softmax_prof_names[p], tot[p], 100.0 * tot[p] / items);
#endif
    la_workspace_free(ws);
    free(q), free(k), free(v), free(o), free(g), free(dq), free(dk), free(dv), free(lse);
    return 0;
}
