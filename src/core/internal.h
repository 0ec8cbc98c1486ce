/* internal.h -- helpers shared by the library's source files (not public). */
#ifndef LA_INTERNAL_H
#define LA_INTERNAL_H

#include "longattn.h"

/* Record a formatted error message for la_errmsg() and return status s, so that a
 * failing path reads `return la_fail(LA_ESHAPE, "q has %d heads ...", h);`. */
la_status la_fail(la_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clear the thread's error message. */
void la_clear_error(void);

/* Propagate a failing status without touching its message. */
#define LA_TRY(expr)                      \
    do {                                  \
        la_status la_try_s_ = (expr);     \
        if (la_try_s_ != LA_OK) return la_try_s_; \
    } while (0)

#endif

/* ---- atomic file writes (src/core/atomic_file.c) ----
 * Writes go to "<path>.tmp.<pid>", are fsync'ed, then renamed over path, and the
 * directory is fsync'ed: a reader sees the old file or the new one, never a torn one. */
#include <stdio.h>
typedef struct {
    FILE *f;
    char final_path[4096];
    char tmp_path[4096 + 32];
} la_afile;
/* Open a temp file next to path for writing. Errors: LA_EIO. */
la_status la_afile_open(la_afile *af, const char *path);
/* Flush, fsync, close and rename onto the final path. On failure the temp file is
 * removed and the old file (if any) is untouched. */
la_status la_afile_commit(la_afile *af);
/* Close and remove the temp file (error paths). */
void la_afile_abort(la_afile *af);

/* ---- deterministic random numbers (src/core/rng.c) ----
 * xoshiro256** seeded through splitmix64: same seed, same stream on every machine. */
typedef struct { uint64_t s[4]; } la_rng;
void la_rng_seed(la_rng *r, uint64_t seed);
uint64_t la_rng_u64(la_rng *r);
double la_rng_uniform(la_rng *r);             /* [0, 1) with 53 random bits */
double la_rng_normal(la_rng *r);              /* standard normal (Box-Muller, no cached spare) */
uint64_t la_rng_below(la_rng *r, uint64_t n); /* uniform integer in [0, n), unbiased */
