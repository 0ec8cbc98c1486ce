/* report.h -- the one report writer of the experiment runners (issue 32): a table is a
 * header and rows of cells (text, each formatted once), written as CSV (cells joined by
 * ',', text quoted where it may hold commas) or as a markdown table (one alignment per
 * column); whole files (CSV, markdown, results.json) are written atomically through
 * la_afile; and the runners' gnuplot runs (la_report_plot). Used by study, synth,
 * longeval, kv-eval, diagnose and critical. Not public. */
#ifndef LA_RUNNER_REPORT_H
#define LA_RUNNER_REPORT_H

#include <cjson/cJSON.h>

#include "core/internal.h"

typedef struct {
    int n_cols, n_cells, cap; /* cells so far, header included */
    char **cell;              /* (n_cells): row r, column j at r * n_cols + j; row 0 the header */
    char *align;              /* (n_cols) markdown alignment: 'l' left, 'r' right */
    int oom;                  /* a cell could not be stored: writing fails */
} la_table;

/* A table of n_cols columns named by the header cells (n_cols strings; NULL: the caller
 * adds them as the first row) and aligned by align (n_cols letters 'l' / 'r'; NULL: the
 * first column left, the others right). */
/* On failure (LA_ENOMEM) nothing is left allocated. */
la_status la_table_init(la_table *t, int n_cols, const char *const *header, const char *align);
/* The same with the header as one CSV line ("a,b,c": n_cols from its commas). */
la_status la_table_begin(la_table *t, const char *header_csv, const char *align);
void la_table_free(la_table *t);
/* The next cell, row by row, formatted by fmt. */
void la_table_add(la_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The next cells, formatted by fmt together and split at its tabs ("%d\t%.4f": two
 * cells; the values must hold no tab). */
void la_table_row(la_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The next cell: s as a quoted CSV field (quotes doubled; spec strings hold commas). */
void la_table_add_quoted(la_table *t, const char *s);
/* Append the table to out: as CSV (header line, then one line per row) or as a markdown
 * table ("| a | b |", the alignment row, then the rows). */
void la_table_csv(const la_table *t, la_sbuf *out);
void la_table_md(const la_table *t, la_sbuf *out);
/* Write the table as CSV to dir/name (la_report_write), then free it (also on failure);
 * a table that ran out of memory fails with LA_ENOMEM. */
la_status la_table_write_csv(la_table *t, const char *dir, const char *name);

/* dir/name (dir NULL: the path name) holds out's text (none: the empty file), written
 * atomically; out->oom fails with LA_ENOMEM naming the file. */
la_status la_report_write(const char *dir, const char *name, const la_sbuf *out);
/* dir/name holds root printed by cJSON (a newline after it when newline), atomically. */
la_status la_report_write_json(const char *dir, const char *name, const cJSON *root, int newline);

/* Plots: gnuplot (prog NULL: "gnuplot") on script, run inside dir (NULL: the current
 * folder; script, log and the PNGs are relative to it). Its messages go to log, or (log
 * NULL) to <script>.log, removed afterwards; when gnuplot fails, said (said_n bytes, may
 * be NULL) gets that log's start. The script draws the n PNGs png[i] as png[i].tmp: each
 * is moved into place (atomic) when gnuplot succeeded and it is a PNG, else removed;
 * *moved (may be NULL) counts those moved. Returns gnuplot's exit status (127: it could
 * not be started, la_gnuplot_run). */
int la_report_plot(const char *prog, const char *dir, const char *script, const char *log, const char *const *png,
                   int n, int *moved, char *said, size_t said_n);

#endif
