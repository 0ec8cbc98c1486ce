/* internal.h -- helpers shared by the library's source files (not public). */
#ifndef LA_INTERNAL_H
#define LA_INTERNAL_H

#include "longattn/core.h"

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
/* For a function with a `la_status st` and a `done:` label that releases what it holds:
 * st = la_fail(code, ...), then go there. */
#define LA_FAIL_DONE(code, ...)           \
    do {                                  \
        st = la_fail(code, __VA_ARGS__);  \
        goto done;                        \
    } while (0)

/* ---- atomic file writes (src/core/atomic_file.c) ----
 * Writes go to "<path>.tmp.<pid>", are fsync'ed, then renamed over path, and the
 * directory is fsync'ed: a reader sees the old file or the new one, never a torn one.
 * A symbolic link is followed (the file it names is replaced, the link stays). A path that
 * is a device or a pipe (/dev/null, /dev/stdout, a FIFO) is written in place: renaming a
 * file over it would replace the device itself. */
#include <stdio.h>
typedef struct {
    FILE *f;
    char final_path[4096];
    char tmp_path[4096 + 32]; /* "" when written in place */
} la_afile;
/* Open a temp file next to path for writing. Errors: LA_EIO; LA_EINVAL for a folder. */
la_status la_afile_open(la_afile *af, const char *path);
/* Flush, fsync, close and rename onto the final path. On failure the temp file is
 * removed and the old file (if any) is untouched. = la_afile_sync + la_afile_publish. */
la_status la_afile_commit(la_afile *af);
/* The two halves of la_afile_commit, for writers that replace several files together
 * (trainer checkpoints: sync every file first, then publish them, so that an I/O error
 * while writing any of them leaves every previous file in place).
 * la_afile_sync: flush, fsync and close the temp file (on failure it is removed);
 * la_afile_publish: rename it onto the final path and fsync the folder (on failure the
 * temp file is removed). Errors: LA_EIO naming the final path and the system error. */
la_status la_afile_sync(la_afile *af);
la_status la_afile_publish(la_afile *af);
/* Close and remove the temp file (error paths; also after la_afile_sync). */
void la_afile_abort(la_afile *af);
/* fsync the folder holding path, so that a rename into it is durable; errors ignored. */
void la_fsync_parent_dir(const char *path);

/* ---- allocation hook (src/core/alloc.c) ----
 * Every library allocation: malloc / calloc / realloc / strdup semantics, memory from the
 * C allocator (release it with free()). */
void *la_malloc(size_t n);
void *la_calloc(size_t n, size_t size);
void *la_realloc(void *p, size_t n);
char *la_strdup(const char *s);
/* posix_memalign through the hook: n bytes aligned to align (a power of two, a multiple of
 * sizeof(void *)); NULL when out of memory; release with free(). */
void *la_aligned_alloc(size_t align, size_t n);
/* Building JSON with cJSON: a failed allocation inside cJSON_Add* / cJSON_Create* drops the
 * item silently (cJSON_AddItemToArray(a, cJSON_CreateNumber(x)) with a NULL item, an object
 * without its key), which would save an incomplete file as a success. A function that builds
 * a tree brackets the calls:
 *     int saved = la_json_begin();  ...cJSON calls...  return la_json_end(saved, tree);
 * la_json_end returns the tree, or deletes it and returns NULL (report LA_ENOMEM) when an
 * allocation failed in between: malloc and the test hook set errno to ENOMEM, and errno is
 * per thread. Brackets nest (an inner failure stays visible to the outer one). */
int la_json_begin(void);
struct cJSON *la_json_end(int saved, struct cJSON *tree);
/* cJSON_AddItemToObject / cJSON_AddItemToArray that free item when it cannot be added (a
 * NULL parent, or the key's copy failed: cJSON leaves it to the caller, and builders that
 * ignore the result leaked it); errno is then ENOMEM for la_json_end. Returns 1 if added. */
int la_json_put(struct cJSON *obj, const char *key, struct cJSON *item);
int la_json_push(struct cJSON *arr, struct cJSON *item);
/* Tests only (issue 17): after la_alloc_fail_at(n), n >= 1, the n-th allocation through the
 * hook (counting from this call, all threads) returns NULL with errno ENOMEM; 0 disarms.
 * la_alloc_count: allocations since the last la_alloc_fail_at. */
void la_alloc_fail_at(long n);
long la_alloc_count(void);

/* Failure injection for tests (issue 17): make the nth next occurrence (1 = the next one)
 * of a step fail as the system call would (open: EACCES; write: the data goes to /dev/full,
 * so fwrite/fflush fail with ENOSPC; fsync, close, rename: EIO), then disarm.
 * LA_AFILE_STEP_NONE disarms. Process-wide, not thread-safe: tests only. */
typedef enum {
    LA_AFILE_STEP_NONE = 0,
    LA_AFILE_STEP_OPEN,
    LA_AFILE_STEP_WRITE,
    LA_AFILE_STEP_FSYNC,
    LA_AFILE_STEP_CLOSE,
    LA_AFILE_STEP_RENAME
} la_afile_step;
void la_afile_fail_at(la_afile_step step, int nth);

/* ---- stop points for tests (src/core/test_point.c) ----
 * With the environment variable LA_TEST_STOP_AT=NAME (or NAME:N), the N-th call (default
 * the 1st) of la_test_point(NAME) stops the process with SIGSTOP, so that a test can send a
 * signal at that exact point of a run; without it, nothing happens. Points in use:
 * "train-step" (a trainer step's log row is written), "ckpt-weights" / "ckpt-state" (a
 * trainer checkpoint's weights / state temp file is written, not yet published),
 * "ckpt-rename" (weights and <path>.state.new published, .state.new not yet renamed),
 * "study-ckpt" (a study variant's pre-training checkpoint saved), "study-cell" (a study
 * variant's result saved), "synth-cell", "longeval-cell" (a cell's result saved). */
void la_test_point(const char *name);

/* ---- whole files and the clock (src/core/read_file.c) ----
 * la_read_file: the whole of path (a regular file, a pipe or /dev/stdin) in *out, with a
 * NUL after the last byte (not counted in *len; len may be NULL); release with free().
 * max_bytes > 0 refuses a longer file (LA_EINVAL "'path' is larger than N bytes"); 0: no
 * limit. Errors: LA_EIO "cannot open 'path': <system error>" (errno kept from fopen),
 * LA_EIO on a read error, LA_ENOMEM; *out is then NULL.
 * la_now_s: CLOCK_MONOTONIC in seconds (wall-clock durations, progress and ETA). */
la_status la_read_file(const char *path, size_t max_bytes, char **out, size_t *len);
/* fopen(path, "rb") of a regular file only, for readers that seek or need its size (npy,
 * safetensors, shards): opened O_NONBLOCK first, since opening a FIFO without a writer would
 * block forever. NULL with LA_EIO set: "cannot open PATH: <system error>" or "PATH is not a
 * regular file". */
FILE *la_fopen_regular(const char *path);
double la_now_s(void);

/* FNV-1a over n bytes, chained from h (LA_FNV0 to start): the one hash of the checkpoint's
 * weights and optimiser state, the name tables and the MPI command-line check. Not
 * cryptographic: it finds flipped bits and differing text, not tampering. */
#define LA_FNV0 0xcbf29ce484222325ULL
static inline uint64_t la_fnv1a(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ULL;
    return h;
}

/* ---- deterministic random numbers (src/core/rng.c) ----
 * xoshiro256** seeded through splitmix64: same seed, same stream on every machine. */
typedef struct { uint64_t s[4]; } la_rng;
void la_rng_seed(la_rng *r, uint64_t seed);
uint64_t la_rng_u64(la_rng *r);
double la_rng_uniform(la_rng *r);             /* [0, 1) with 53 random bits */
double la_rng_normal(la_rng *r);              /* standard normal (Box-Muller, no cached spare) */
uint64_t la_rng_below(la_rng *r, uint64_t n); /* uniform integer in [0, n), unbiased */

/* ---- growable string (src/core/sbuf.c) ----
 * la_sbuf b = {0}; la_sbuf_printf(&b, ...); b.s holds the text (NULL while empty); free(b.s).
 * Once an allocation fails, oom is set and later calls do nothing. */
typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} la_sbuf;
void la_sbuf_printf(la_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* LA_INTERNAL_H (the guard covers the whole header) */
