/* test_point.c -- named stop points for tests that interrupt a run (issue 26).
 *
 * A test that must signal a run at a known moment (SIGINT or SIGKILL after the first
 * finished cell, in the middle of a checkpoint write, ...) used to poll the output folder
 * and hope that the run was still going when its signal arrived: on a fast machine it had
 * already finished, on a loaded one the poll came late. Instead the test starts the run
 * with LA_TEST_STOP_AT=NAME or NAME:N; the N-th time (default 1) that the process passes
 * la_test_point(NAME), it stops itself with SIGSTOP. The test waits for the stop
 * (waitpid with WUNTRACED), sends its signal and SIGCONT. Nothing else changes: without
 * the variable (every normal run) a point costs one getenv, and points sit where a run
 * saves something (a step's log row, a checkpoint, a cell), never in a kernel. Prints
 * nothing. Under mpirun every rank counts its own passes. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

static long g_passes; /* passes of the point named in LA_TEST_STOP_AT, all threads */

void la_test_point(const char *name) {
    const char *want = getenv("LA_TEST_STOP_AT");
    if (!want || !name) return;
    size_t n = strlen(name);
    if (strncmp(want, name, n) != 0 || (want[n] != '\0' && want[n] != ':')) return;
    long nth = want[n] == ':' ? strtol(want + n + 1, NULL, 10) : 1;
    if (__atomic_add_fetch(&g_passes, 1, __ATOMIC_SEQ_CST) == nth) raise(SIGSTOP);
}
