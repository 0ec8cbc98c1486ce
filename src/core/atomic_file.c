/* atomic_file.c -- write-to-temp, fsync, rename: files are replaced whole or not at all. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"

la_status la_afile_open(la_afile *af, const char *path) {
    if (!af || !path || !*path) return la_fail(LA_EINVAL, "atomic write: empty path");
    if (strlen(path) >= sizeof af->final_path)
        return la_fail(LA_EINVAL, "atomic write: path too long (%zu bytes)", strlen(path));
    strcpy(af->final_path, path);
    snprintf(af->tmp_path, sizeof af->tmp_path, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp_path, "wb");
    if (!af->f)
        return la_fail(LA_EIO, "cannot create '%s': %s (check that the folder exists and is writable)",
                       af->tmp_path, strerror(errno));
    return LA_OK;
}

void la_afile_abort(la_afile *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    unlink(af->tmp_path);
}

static void fsync_parent_dir(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

la_status la_afile_commit(la_afile *af) {
    int err = 0;
    if (fflush(af->f) != 0 || ferror(af->f)) err = errno ? errno : EIO;
    if (!err && fsync(fileno(af->f)) != 0) err = errno;
    if (fclose(af->f) != 0 && !err) err = errno ? errno : EIO;
    af->f = NULL;
    if (err) {
        unlink(af->tmp_path);
        return la_fail(LA_EIO, "writing '%s' failed: %s (is the disk full?); the previous file is untouched",
                       af->final_path, strerror(err));
    }
    if (rename(af->tmp_path, af->final_path) != 0) {
        err = errno;
        unlink(af->tmp_path);
        return la_fail(LA_EIO, "cannot rename '%s' to '%s': %s", af->tmp_path, af->final_path, strerror(err));
    }
    fsync_parent_dir(af->final_path);
    return LA_OK;
}
