/* bench.h -- `longattn bench <name>`: the table of benchmarks and the helpers they share.
 *
 * To add a benchmark: write bench/bench_<name>.c with `int bench_<name>(int argc, char **argv)`
 * (argv[0] is "<name>"; return 0 ok, 1 runtime failure, 2 bad usage), declare it below and
 * add one row to la_benches[]. bench/bench_main.c dispatches on the table and lists it in
 * `longattn bench --help`. Benchmarks print figures, never assert them: speed is reported
 * as ratios measured in one run (PROTOCOL), not checked by timed unit tests. */
#ifndef LA_BENCH_H
#define LA_BENCH_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "longattn.h"

typedef struct {
    const char *name;    /* `longattn bench <name>` */
    const char *summary; /* one line for the listing */
    int (*fn)(int argc, char **argv);
} la_bench_entry;

int bench_attn(int argc, char **argv);  /* bench/bench_attn.c */
int bench_train(int argc, char **argv); /* bench/bench_train.c */
int bench_qmatvec(int argc, char **argv); /* bench/bench_qmatvec.c */
int bench_model(int argc, char **argv);   /* bench/bench_model.c */

/* The benchmarks, terminated by a NULL row. Add your row above the terminator. */
static const la_bench_entry la_benches[] = {
    {"attn", "attention kernel GFLOP/s vs sgemm, sinv overhead, window cost, extra memory", bench_attn},
    {"train", "GPT training throughput and attention vs matmul share", bench_train},
    {"qmatvec", "quantized matrix x vector (decode path): GB/s of weights vs memcpy bandwidth", bench_qmatvec},
    {"model", "pretrained GGUF model: prefill / decode tok/s, peak memory, vs llama.cpp", bench_model},
    {NULL, NULL, NULL},
};

/* ---- helpers (bench/bench_util.c) ---- */

/* Monotonic wall clock in seconds: cli_now (src/cli/cli_util.c). */

/* Median of n values (sorts v in place). n >= 1. */
double bench_median(double *v, int n);

/* Peak-memory probe of this process (Linux /proc). bench_mem_reset() resets the
 * high-water mark VmHWM to the current resident size (`echo 5 > /proc/self/clear_refs`)
 * and returns that size in bytes; bench_mem_peak() returns VmHWM in bytes. So
 *     base = bench_mem_reset(); run(); extra = bench_mem_peak() - base;
 * is the resident memory run() added at its peak. Both return -1 when /proc is not
 * available or the reset is refused (extra memory is then reported as unknown). */
int64_t bench_mem_reset(void);

/* Measured single-precision FMA peak in GFLOP/s of `threads` threads running independent
 * vector FMA chains for `seconds` of wall time (bench/bench_peak.c); *lanes (may be NULL)
 * gets the vector width used (16: AVX-512, 8: AVX2+FMA, 1: scalar). -1 on failure. */
double bench_fma_peak(int threads, double seconds, int *lanes);
int64_t bench_mem_peak(void);

/* Streaming read bandwidth in GB/s (bytes read / s) of `threads` OpenMP threads summing a
 * buffer of `bytes` (far larger than the caches) with independent vector accumulators,
 * each thread its contiguous share; the best of `reps` passes after one warm-up pass
 * (bench/bench_util.c). What a memory-bound decode step can read at most. -1 on failure. */
double bench_read_bandwidth(int threads, size_t bytes, int reps);

/* Visible (query, key) pairs of one attention head under sp's pattern, for query positions
 * pos0 .. pos0+T-1 and keys 0 .. S-1, counted exactly (SPEC 2); -1 for a pattern it does
 * not count (global). */
double bench_count_pairs(const la_spec *sp, int T, int S, int64_t pos0);


/* A helper process spoken to by lines (the PyTorch peers of `bench train` and `bench attn
 * --peers`): its stdin and stdout are pipes, its stderr goes to a temporary file whose last
 * line is the reason given when it fails. */
typedef struct {
    int pid;
    FILE *to, *from;
    char errpath[80];
} bench_peer;
/* Starts argv (argv[0] looked up in PATH) and reads its first line into line (newline
 * removed). 0 on success; else -1, the reason in why, nothing left running. */
int bench_peer_start(bench_peer *p, char *const argv[], char *line, size_t n, char *why, size_t wn);
/* Sends one line, reads one line back (newline removed). 0 on success. */
int bench_peer_ask(bench_peer *p, const char *cmd, char *line, size_t n);
/* The last non-empty line the process wrote to stderr. */
void bench_peer_reason(const bench_peer *p, char *why, size_t n);
/* Sends "quit", closes the pipes, waits for it, removes its stderr file. */
void bench_peer_stop(bench_peer *p);
/* bench/<name> next to the build (build/longattn -> ../bench/<name>), else ./bench/<name>;
 * path[0] == 0 when neither is readable. */
void bench_find_script(const char *name, char *path, size_t n);

#endif
