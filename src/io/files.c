/* files.c -- output folders (la_mkdir_p) and sorted file lists of a folder (la_list_files),
 * shared by the data readers, the experiment runners and the CLI. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "io/files.h"

la_status la_mkdir_p(const char *dir) {
    if (!dir || !*dir) return la_fail(LA_EINVAL, "la_mkdir_p: empty folder name");
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return la_fail(LA_EINVAL, "output folder path is too long (%zu bytes, at most 4095)", strlen(dir));
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return la_fail(LA_EIO, "cannot create output folder '%s': %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return la_fail(LA_EIO, "output path '%s' exists and is not a folder; choose another --out", dir);
    return LA_OK;
}

void la_free_paths(char **paths, int n) {
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

la_status la_list_files(const char *path, char ***paths, int *n) {
    if (!path || !paths || !n) return la_fail(LA_EINVAL, "la_list_files: NULL argument");
    *paths = NULL;
    *n = 0;
    struct stat st;
    if (stat(path, &st) != 0) return la_fail(LA_EIO, "cannot open %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        *paths = la_malloc(sizeof(char *));
        if (!*paths || !((*paths)[0] = la_strdup(path))) {
            free(*paths);
            *paths = NULL;
            return la_fail(LA_ENOMEM, "out of memory listing %s", path);
        }
        *n = 1;
        return LA_OK;
    }
    DIR *d = opendir(path);
    if (!d) return la_fail(LA_EIO, "cannot open directory %s: %s", path, strerror(errno));
    int cap = 0;
    la_status s = LA_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        size_t pl = strlen(path) + strlen(de->d_name) + 2;
        char *full = la_malloc(pl);
        if (!full) { s = la_fail(LA_ENOMEM, "out of memory listing %s", path); break; }
        snprintf(full, pl, "%s/%s", path, de->d_name);
        struct stat fs;
        if (stat(full, &fs) != 0 || !S_ISREG(fs.st_mode)) {
            free(full);
            continue;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = la_realloc(*paths, (size_t)cap * sizeof(char *));
            if (!nn) {
                free(full);
                s = la_fail(LA_ENOMEM, "out of memory listing %s", path);
                break;
            }
            *paths = nn;
        }
        (*paths)[(*n)++] = full;
    }
    closedir(d);
    if (s != LA_OK) {
        la_free_paths(*paths, *n);
        *paths = NULL;
        *n = 0;
        return s;
    }
    if (*n > 1) qsort(*paths, (size_t)*n, sizeof(char *), cmp_str);
    return LA_OK;
}
