/* blas_coretype.c -- work around OpenBLAS mis-detecting the CPU.
 *
 * Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels from the CPU model number.
 * On CPUs it does not know (seen on the project's virtual machines: an AVX-512 Xeon
 * reported as "Prescott") it falls back to the SSE3 kernels, and sgemm runs 4-5x slower
 * (8 vs 37 GFLOP/s on one core here). The core type can only be chosen through the
 * OPENBLAS_CORETYPE environment variable, read when the library is loaded, so when the
 * fallback is detected and the CPU has AVX2/AVX-512 we set the variable and re-execute the
 * program once. A user-set OPENBLAS_CORETYPE is always respected. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

void cli_blas_fix_coretype(char **argv) {
    if (getenv("OPENBLAS_CORETYPE")) return;  // user's choice, or already re-executed
    const char *core = openblas_get_corename();
    if (!core || strcmp(core, "Prescott") != 0) return;
    __builtin_cpu_init();
    const char *want = NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512cd"))
        want = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        want = "Haswell";
    if (!want) return;
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the slow kernels */
}
