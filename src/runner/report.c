/* report.c -- tables as CSV and markdown, and the runners' atomic file writes (report.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/gnuplot.h"
#include "runner/cells.h"
#include "runner/report.h"

la_status la_table_init(la_table *t, int n_cols, const char *const *header, const char *align) {
    memset(t, 0, sizeof *t);
    t->n_cols = n_cols;
    t->align = la_malloc((size_t)n_cols + 1);
    if (!t->align) return la_fail(LA_ENOMEM, "out of memory for a table");
    for (int j = 0; j < n_cols; j++) t->align[j] = align ? align[j] : j ? 'r' : 'l';
    t->align[n_cols] = '\0';
    for (int j = 0; header && j < n_cols; j++) la_table_add(t, "%s", header[j]);
    if (!t->oom) return LA_OK;
    la_table_free(t); /* a failed init leaves nothing to free */
    return la_fail(LA_ENOMEM, "out of memory for a table");
}

la_status la_table_begin(la_table *t, const char *header_csv, const char *align) {
    int n = 1;
    for (const char *p = header_csv; *p; p++) n += *p == ',';
    LA_TRY(la_table_init(t, n, NULL, align));
    for (const char *p = header_csv, *e;; p = e + 1) { /* the header row: the names between the commas */
        e = p + strcspn(p, ",");
        la_table_add(t, "%.*s", (int)(e - p), p);
        if (!*e) break;
    }
    if (!t->oom) return LA_OK;
    la_table_free(t); /* as la_table_init: a failed begin leaves nothing to free */
    return la_fail(LA_ENOMEM, "out of memory for a table");
}

void la_table_free(la_table *t) {
    for (int i = 0; i < t->n_cells; i++) free(t->cell[i]);
    free(t->cell);
    free(t->align);
    memset(t, 0, sizeof *t);
}

static void add_cell(la_table *t, char *s) {
    if (s && t->n_cells == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        char **c = realloc(t->cell, (size_t)cap * sizeof *c);
        if (c) t->cell = c, t->cap = cap;
    }
    if (!s || t->n_cells == t->cap) {
        free(s);
        t->oom = 1;
        return;
    }
    t->cell[t->n_cells++] = s;
}

static char *vformat(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = n >= 0 ? la_malloc((size_t)n + 1) : NULL;
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

void la_table_add(la_table *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    add_cell(t, vformat(fmt, ap));
    va_end(ap);
}

void la_table_row(la_table *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *row = vformat(fmt, ap);
    va_end(ap);
    if (!row) {
        t->oom = 1;
        return;
    }
    for (char *p = row;;) {
        char *e = strchr(p, '\t');
        if (e) *e = '\0';
        la_table_add(t, "%s", p);
        if (!e) break;
        p = e + 1;
    }
    free(row);
}

void la_table_add_quoted(la_table *t, const char *s) {
    la_sbuf b = {0};
    la_sbuf_printf(&b, "\"");
    for (const char *p = s; *p; p++) {
        if (*p == '"') la_sbuf_printf(&b, "\"");
        la_sbuf_printf(&b, "%c", *p);
    }
    la_sbuf_printf(&b, "\"");
    if (b.oom) {
        free(b.s);
        b.s = NULL;
    }
    add_cell(t, b.s);
}

void la_table_csv(const la_table *t, la_sbuf *out) {
    if (t->oom) out->oom = 1;
    for (int i = 0; i < t->n_cells; i++)
        la_sbuf_printf(out, "%s%s", t->cell[i], (i + 1) % t->n_cols ? "," : "\n");
}

void la_table_md(const la_table *t, la_sbuf *out) {
    if (t->oom) out->oom = 1;
    for (int i = 0; i < t->n_cells; i++) {
        la_sbuf_printf(out, "%s%s%s", i % t->n_cols ? " " : "| ", t->cell[i], (i + 1) % t->n_cols ? " |" : " |\n");
        if (i + 1 == t->n_cols) { /* after the header: the alignment row */
            la_sbuf_printf(out, "|");
            for (int j = 0; j < t->n_cols; j++) la_sbuf_printf(out, "%s", t->align[j] == 'r' ? "---:|" : "---|");
            la_sbuf_printf(out, "\n");
        }
    }
}

la_status la_table_write_csv(la_table *t, const char *dir, const char *name) {
    la_sbuf b = {0};
    la_table_csv(t, &b);
    la_table_free(t);
    la_status s = la_report_write(dir, name, &b);
    free(b.s);
    return s;
}

la_status la_report_write(const char *dir, const char *name, const la_sbuf *out) {
    char path[4200];
    snprintf(path, sizeof path, "%s%s%s", dir ? dir : "", dir ? "/" : "", name);
    if (out->oom) return la_fail(LA_ENOMEM, "out of memory formatting %s", path);
    la_afile af;
    LA_TRY(la_afile_open(&af, path));
    fputs(out->s ? out->s : "", af.f);
    return la_afile_commit(&af);
}

la_status la_report_write_json(const char *dir, const char *name, const cJSON *root, int newline) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return la_json_write_atomic(path, root, newline); /* the cell store's writer */
}

static int is_png(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char got[8];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(got, 1, 8, f);
    fclose(f);
    return n == 8 && !memcmp(got, sig, 8);
}

int la_report_plot(const char *prog, const char *dir, const char *script, const char *log, const char *const *png,
                   int n, int *moved, char *said, size_t said_n) {
    char own[4300], path[4400], tmp[4500];
    snprintf(own, sizeof own, "%s.log", script);
    const int rc = la_gnuplot_run(prog, dir, script, log ? log : own);
    if (!log) {
        snprintf(path, sizeof path, "%s%s%s", dir ? dir : "", dir ? "/" : "", own);
        FILE *lf = rc && said && said_n ? fopen(path, "r") : NULL;
        if (lf) { /* its last line breaks and spaces dropped */
            size_t k = fread(said, 1, said_n - 1, lf);
            said[k] = '\0';
            while (k && (said[k - 1] == '\n' || said[k - 1] == ' ')) said[--k] = '\0';
            fclose(lf);
        }
        unlink(path);
    }
    int good = 0;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s%s%s", dir ? dir : "", dir ? "/" : "", png[i]);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        if (rc == 0 && is_png(tmp) && rename(tmp, path) == 0) good++;
        else unlink(tmp);
    }
    if (moved) *moved = good;
    return rc;
}
