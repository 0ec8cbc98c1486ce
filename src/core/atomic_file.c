/* atomic_file.c -- write-to-temp, fsync, rename: files are replaced whole or not at all. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"

/* ---- failure injection (tests only, see internal.h) ---- */
static la_afile_step g_fail_step;
static int g_fail_nth;

void la_afile_fail_at(la_afile_step step, int nth) {
    g_fail_step = nth > 0 ? step : LA_AFILE_STEP_NONE;
    g_fail_nth = nth;
}

/* 1 if this occurrence of step is the one to fail (then disarmed). */
static int inject(la_afile_step step) {
    if (g_fail_step != step || --g_fail_nth > 0) return 0;
    g_fail_step = LA_AFILE_STEP_NONE;
    return 1;
}

/* 1 if st is this process's standard output or error: "--out /dev/stdout" with stdout sent
 * to a file resolves to that file, which the shell opened and may be appending to */
static int is_std_stream(const struct stat *st) {
    struct stat o;
    for (int fd = 1; fd <= 2; fd++)
        if (fstat(fd, &o) == 0 && o.st_dev == st->st_dev && o.st_ino == st->st_ino) return 1;
    return 0;
}

la_status la_afile_open(la_afile *af, const char *path) {
    if (!af || !path || !*path) return la_fail(LA_EINVAL, "atomic write: empty path");
    af->f = NULL;
    if (strlen(path) >= sizeof af->final_path)
        return la_fail(LA_EINVAL, "atomic write: path too long (%zu bytes)", strlen(path));
    strcpy(af->final_path, path);
    af->tmp_path[0] = '\0';
    struct stat st;
    char real[PATH_MAX];
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && realpath(path, real) && strlen(real) < sizeof af->final_path)
        strcpy(af->final_path, real); /* a dangling link is replaced like a missing file */
    if (stat(af->final_path, &st) == 0 && (!S_ISREG(st.st_mode) || is_std_stream(&st))) {
        if (S_ISDIR(st.st_mode)) return la_fail(LA_EINVAL, "cannot write '%s': it is a folder; give a file name", path);
        /* a device, a pipe or the redirected standard output: in place, appended (truncating
         * would cut what the shell's >> kept or what was printed before) */
        af->f = fopen(af->final_path, "ab");
        return af->f ? LA_OK : la_fail(LA_EIO, "cannot open '%s' for writing: %s", path, strerror(errno));
    }
    static unsigned serial; /* temp names of one process's files written at once differ */
    const char *base = strrchr(af->final_path, '/');
    if (strlen(base ? base + 1 : af->final_path) + 32 <= NAME_MAX) {
        snprintf(af->tmp_path, sizeof af->tmp_path, "%s.tmp.%ld", af->final_path, (long)getpid());
    } else { /* a name near the 255-byte limit: a short hidden temp name beside it */
        int dir = base ? (int)(base - af->final_path) : 1;
        snprintf(af->tmp_path, sizeof af->tmp_path, "%.*s/.tmp.%ld.%u", dir, base ? af->final_path : ".",
                 (long)getpid(), serial++);
    }
    af->f = inject(LA_AFILE_STEP_OPEN) ? (errno = EACCES, NULL) : fopen(af->tmp_path, "wb");
    if (!af->f)
        return la_fail(LA_EIO, "cannot create '%s': %s (check that the folder exists and is writable)",
                       af->tmp_path, strerror(errno));
    if (inject(LA_AFILE_STEP_WRITE)) {
        /* the temp file exists (so the error path must remove it), the data goes nowhere */
        FILE *full = fopen("/dev/full", "wb");
        if (full) {
            fclose(af->f);
            af->f = full;
        }
    }
    return LA_OK;
}

void la_afile_abort(la_afile *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    if (af->tmp_path[0]) unlink(af->tmp_path);
}

void la_fsync_parent_dir(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

la_status la_afile_sync(la_afile *af) {
    int err = 0;
    errno = 0;
    if (fflush(af->f) != 0 || ferror(af->f)) err = errno ? errno : EIO;
    /* a device written in place is not synced (fsync fails with EINVAL on /dev/null) */
    if (!err && af->tmp_path[0] && (inject(LA_AFILE_STEP_FSYNC) ? (errno = EIO, -1) : fsync(fileno(af->f))) != 0)
        err = errno;
    int cl = fclose(af->f);
    if (!err && (cl != 0 || inject(LA_AFILE_STEP_CLOSE))) err = cl != 0 && errno ? errno : EIO;
    af->f = NULL;
    if (err) {
        if (af->tmp_path[0]) unlink(af->tmp_path);
        return la_fail(LA_EIO, "writing '%s' failed: %s (is the disk full?)%s", af->final_path, strerror(err),
                       af->tmp_path[0] ? "; the previous file is untouched" : "");
    }
    return LA_OK;
}

la_status la_afile_publish(la_afile *af) {
    if (!af->tmp_path[0]) return LA_OK; /* written in place */
    if ((inject(LA_AFILE_STEP_RENAME) ? (errno = EIO, -1) : rename(af->tmp_path, af->final_path)) != 0) {
        int err = errno;
        unlink(af->tmp_path);
        return la_fail(LA_EIO, "cannot rename '%s' to '%s': %s; the previous file is untouched",
                       af->tmp_path, af->final_path, strerror(err));
    }
    la_fsync_parent_dir(af->final_path);
    return LA_OK;
}

la_status la_afile_commit(la_afile *af) {
    LA_TRY(la_afile_sync(af));
    return la_afile_publish(af);
}
