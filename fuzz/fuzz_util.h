/* fuzz_util.h -- shared helpers of the libFuzzer targets in fuzz/ (not part of the library).
 * Targets that fuzz file readers write the input into a private temporary folder (made
 * once per process with mkdtemp, removed at exit) and call the reader on that path. */
#ifndef LA_FUZZ_UTIL_H
#define LA_FUZZ_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fz_dir[256];

/* Remove everything under path (path itself too; no symlinks are followed). */
static inline void fz_rmtree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        char sub[1024];
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < (int)sizeof sub) fz_rmtree(sub);
        }
        if (d) closedir(d);
    }
    remove(path);
}

static inline void fz_cleanup(void) {
    if (fz_dir[0]) fz_rmtree(fz_dir);
}

/* The private scratch folder of this process. */
static inline const char *fz_tmpdir(void) {
    if (!fz_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(fz_dir, sizeof fz_dir, "%s/la_fuzz.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(fz_dir)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fz_cleanup);
    }
    return fz_dir;
}

/* Write size bytes to path (whole file); aborts on failure (the harness is broken then). */
static inline void fz_write(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* Copy of the input with a terminating NUL (string parsers); caller frees. */
static inline char *fz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* A broken invariant of the library (not a handled error): report and abort so that
 * libFuzzer records the input as a crash. */
#define FZ_CHECK(cond, ...)                                                  \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz invariant failed: %s\n  ", #cond);         \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            abort();                                                         \
        }                                                                    \
    } while (0)

#endif
