/* read_file.c -- a whole file into memory, and the monotonic clock: the helpers every
 * experiment runner, study-file reader and CLI command used to carry a copy of. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"

double la_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

FILE *la_fopen_regular(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        la_fail(LA_EIO, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    FILE *f = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 ||
        !(f = fdopen(fd, "rb"))) {
        close(fd);
        la_fail(LA_EIO, "%s is not a regular file", path);
    }
    return f;
}

la_status la_read_file(const char *path, size_t max_bytes, char **out, size_t *len) {
    if (!path || !out) return la_fail(LA_EINVAL, "la_read_file: NULL argument");
    *out = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        la_status s = la_fail(LA_EIO, "cannot open '%s': %s", path, strerror(e));
        errno = e;
        return s;
    }
    /* grow by doubling instead of asking the size: pipes and /dev/stdin have none */
    size_t cap = 1 << 14, n = 0;
    char *buf = la_malloc(cap);
    la_status st = LA_OK;
    for (;;) {
        if (!buf) {
            st = la_fail(LA_ENOMEM, "reading '%s': out of memory", path);
            break;
        }
        n += fread(buf + n, 1, cap - n - 1, f); /* one byte kept for the NUL */
        if (ferror(f)) {
            st = la_fail(LA_EIO, "reading '%s' failed: %s", path, strerror(errno));
            break;
        }
        if (max_bytes && n > max_bytes) {
            st = la_fail(LA_EINVAL, "'%s' is larger than %zu bytes", path, max_bytes);
            break;
        }
        if (feof(f)) break;
        char *nb = la_realloc(buf, cap *= 2);
        if (!nb) free(buf);
        buf = nb;
    }
    fclose(f);
    if (st != LA_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return LA_OK;
}
