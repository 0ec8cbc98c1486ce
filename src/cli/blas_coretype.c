/* blas_coretype.c -- the CLI's thread and BLAS environment, fixed once at start-up.
 *
 * Three settings are read by the OpenMP and OpenBLAS runtimes only when the program is
 * loaded, so when one of them needs setting we set it and re-execute the program once
 * (LA_ENV_TUNED guards against a loop). A variable the user has set is never changed.
 *
 *  - OPENBLAS_CORETYPE: Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks kernels from the
 *    CPU model number; on CPUs it does not know (this project's AVX-512 virtual machines
 *    report "Prescott") it falls back to SSE3 kernels and sgemm runs 4-5x slower (8 vs
 *    37 GFLOP/s on one core). When that fallback is detected on an AVX2/AVX-512 CPU we ask
 *    for Haswell/SkylakeX kernels.
 *  - OPENBLAS_NUM_THREADS=1: the model splits its large products over OpenMP threads itself
 *    (src/model/matmul.c), so one thread pool does all the work; OpenBLAS's own pool
 *    spinning next to OpenMP's made a training step 2-4x slower on the shared 2-core machine.
 *  - OMP_WAIT_POLICY=passive: idle OpenMP threads sleep instead of spinning. With other jobs
 *    on the machine a spinning team starves the thread it waits for: a training step took
 *    2.45 s with spinning and 0.68 s passive (load average 13 on 2 cores); on an idle
 *    machine the cost is a futex wake-up per parallel region (microseconds). */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static const char *wanted_coretype(void) {
    const char *core = openblas_get_corename();
    if (!core || strcmp(core, "Prescott") != 0) return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
}

void cli_blas_fix_coretype(char **argv) {
    if (getenv("LA_ENV_TUNED")) return;
    int changed = 0;
    if (!getenv("OPENBLAS_CORETYPE")) {
        const char *want = wanted_coretype();
        if (want) {
            setenv("OPENBLAS_CORETYPE", want, 1);
            changed = 1;
        }
    }
    if (!getenv("OPENBLAS_NUM_THREADS") && openblas_get_num_threads() > 1) {
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        changed = 1;
    }
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        changed = 1;
    }
    if (!changed) return;
    setenv("LA_ENV_TUNED", "1", 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the runtimes as they are */
}
