/* cells.c -- per-cell result persistence for resumable runs (API and file layout in
 * cells.h): DIR/cells/run.json (fingerprint) and DIR/cells/<key>.json per finished cell. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/files.h"
#include "core/internal.h"
#include "runner/cells.h"

la_status la_json_write_atomic(const char *path, const cJSON *obj, int newline) {
    char *text = obj ? cJSON_Print(obj) : NULL;
    if (!text) return la_fail(LA_ENOMEM, "out of memory formatting %s", path);
    la_afile af;
    la_status s = la_afile_open(&af, path);
    if (s == LA_OK) {
        fputs(text, af.f);
        if (newline) fputc('\n', af.f);
        s = la_afile_commit(&af);
    }
    free(text);
    return s;
}

/* The file at path parsed; *out NULL when the file does not exist. */
static la_status read_json(const char *path, cJSON **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return LA_OK;
        return la_fail(LA_EIO, "cannot read '%s': %s", path, strerror(errno));
    }
    char *buf = NULL;
    size_t n = 0, cap = 0, k;
    char chunk[8192];
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (n + k + 1 > cap) {
            cap = 2 * (n + k + 1);
            char *nb = la_realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return la_fail(LA_ENOMEM, "out of memory reading '%s'", path);
            }
            buf = nb;
        }
        memcpy(buf + n, chunk, k);
        n += k;
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    cJSON *j = buf ? cJSON_Parse(buf) : NULL;
    free(buf);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return la_fail(LA_EFORMAT, "'%s' is not a JSON object (damaged by hand?); delete it to recompute that "
                       "part, or run without --resume", path);
    }
    *out = j;
    return LA_OK;
}

/* First difference between a (interrupted run) and b (now) under path prefix, into msg;
 * returns 1 if one was found. */
static int first_diff(const cJSON *a, const cJSON *b, const char *prefix, char *msg, size_t n) {
    if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
        for (const cJSON *x = a->child; x; x = x->next) {
            char p[512];
            snprintf(p, sizeof p, "%s%s%s", prefix, *prefix ? "." : "", x->string);
            const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
            if (!y) {
                snprintf(msg, n, "key \"%s\" is set in the interrupted run but not now", p);
                return 1;
            }
            if (first_diff(x, y, p, msg, n)) return 1;
        }
        for (const cJSON *y = b->child; y; y = y->next)
            if (!cJSON_GetObjectItemCaseSensitive(a, y->string)) {
                snprintf(msg, n, "key \"%s%s%s\" is new in this run", prefix, *prefix ? "." : "", y->string);
                return 1;
            }
        return 0;
    }
    if (cJSON_Compare(a, b, 1)) return 0;
    char *ta = cJSON_PrintUnformatted(a), *tb = cJSON_PrintUnformatted(b);
    snprintf(msg, n, "key \"%s\": %.200s in the interrupted run, %.200s now", prefix, ta ? ta : "?", tb ? tb : "?");
    free(ta);
    free(tb);
    return 1;
}

/* everything a runner keeps in cells/ besides run.json (results, checkpoints, temp files) */
static int is_cell_file(const char *name) {
    return strcmp(name, ".") && strcmp(name, "..") && strcmp(name, "run.json");
}

la_status la_cells_open(la_cells *c, const char *out_dir, const char *what, const cJSON *fingerprint, int resume) {
    if (!c || !out_dir) return la_fail(LA_EINVAL, "la_cells_open: NULL argument");
    memset(c, 0, sizeof *c);
    int k = snprintf(c->dir, sizeof c->dir, "%s/cells", out_dir);
    if (k < 0 || (size_t)k >= sizeof c->dir) return la_fail(LA_EINVAL, "output folder path too long: %s", out_dir);
    LA_TRY(la_mkdir_p(c->dir));
    char path[2200];
    snprintf(path, sizeof path, "%s/run.json", c->dir);
    if (resume && !fingerprint) return LA_OK; /* the runner checks each cell it loads */
    if (resume) {
        cJSON *old = NULL;
        LA_TRY(read_json(path, &old));
        if (old) {
            /* compared as read back from text, as the old one was (la_cells_num's raw numbers) */
            char *text = cJSON_PrintUnformatted(fingerprint);
            cJSON *now = text ? cJSON_Parse(text) : NULL;
            free(text);
            if (!now) {
                cJSON_Delete(old);
                return la_fail(LA_ENOMEM, "out of memory comparing the settings of %s", out_dir);
            }
            char diff[700] = "";
            const cJSON *fp = cJSON_GetObjectItemCaseSensitive(old, "fingerprint");
            int differs = fp ? first_diff(fp, now, "", diff, sizeof diff) : 1;
            cJSON_Delete(now);
            if (!fp) snprintf(diff, sizeof diff, "cells/run.json has no \"fingerprint\"");
            cJSON_Delete(old);
            if (differs)
                return la_fail(LA_EINVAL, "%s --resume: the settings differ from the interrupted run in %s (%s); "
                               "resume with the same %s, or start afresh without --resume (or with another --out)",
                               what, out_dir, diff, strcmp(what, "study") ? "options" : "study file and options");
            return LA_OK; /* cells kept */
        }
    }
    /* a fresh run: files of an earlier run must not be picked up by a later --resume */
    DIR *d = opendir(c->dir);
    if (!d) return la_fail(LA_EIO, "cannot list '%s': %s", c->dir, strerror(errno));
    struct dirent *e;
    la_status s = LA_OK;
    while ((e = readdir(d)) != NULL) {
        if (!is_cell_file(e->d_name)) continue;
        char p[2600];
        snprintf(p, sizeof p, "%s/%s", c->dir, e->d_name);
        if (unlink(p) != 0 && errno != ENOENT) {
            s = la_fail(LA_EIO, "cannot remove the old cell result '%s': %s", p, strerror(errno));
            break;
        }
    }
    closedir(d);
    if (s != LA_OK || !fingerprint) return s;
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    cJSON *run = cJSON_CreateObject();
    cJSON_AddStringToObject(run, "command", what);
    cJSON *fp = cJSON_Duplicate(fingerprint, 1);
    la_json_put(run, "fingerprint", fp);
    run = la_json_end(saved_json, run);
    if (!run) return la_fail(LA_ENOMEM, "out of memory writing %s", path);
    s = la_json_write_atomic(path, run, 1);
    cJSON_Delete(run);
    return s;
}

static void cell_path(const la_cells *c, const char *key, char *buf, size_t n) {
    static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_";
    char safe[512];
    size_t i = 0;
    for (; key[i] && i + 1 < sizeof safe; i++) safe[i] = strchr(ok, key[i]) ? key[i] : '_';
    safe[i] = '\0';
    if (!strcmp(safe, "run")) snprintf(safe, sizeof safe, "run_");
    snprintf(buf, n, "%s/%s.json", c->dir, safe);
}

la_status la_cells_load(la_cells *c, const char *key, cJSON **out) {
    if (!c || !key || !out) return la_fail(LA_EINVAL, "la_cells_load: NULL argument");
    char path[2600];
    cell_path(c, key, path, sizeof path);
    LA_TRY(read_json(path, out));
    if (*out) c->n_loaded++;
    return LA_OK;
}

la_status la_cells_save(const la_cells *c, const char *key, const cJSON *result) {
    if (!c || !key || !result) return la_fail(LA_EINVAL, "la_cells_save: NULL argument");
    char path[2600];
    cell_path(c, key, path, sizeof path);
    return la_json_write_atomic(path, result, 1);
}

/* cJSON prints 15 significant digits whenever they read back within an epsilon, which loses
 * the last bits (1 ulp) of many doubles: a finite value is stored as raw JSON number text of
 * the fewest digits (15, 16 or 17) that strtod reads back bit for bit. */
cJSON *la_cells_num(double x) {
    if (isnan(x)) return cJSON_CreateNull();
    if (isinf(x)) return cJSON_CreateString(x > 0 ? "inf" : "-inf");
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        double y = strtod(buf, NULL);
        if (!memcmp(&x, &y, sizeof x)) break;
    }
    return cJSON_CreateRaw(buf);
}

cJSON *la_cells_u64(uint64_t x) {
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)x);
    return cJSON_CreateString(buf);
}

double la_cells_num_value(const cJSON *it) {
    if (cJSON_IsNumber(it)) return it->valuedouble;
    if (cJSON_IsString(it)) return !strcmp(it->valuestring, "inf") ? INFINITY : !strcmp(it->valuestring, "-inf") ? -INFINITY : NAN;
    return NAN;
}

double la_cells_get_num(const cJSON *obj, const char *name) {
    return la_cells_num_value(cJSON_GetObjectItemCaseSensitive(obj, name));
}
