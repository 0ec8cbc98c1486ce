/* gnuplot.h -- the one gnuplot runner (io layer, internal to the library and the CLI). */
#ifndef LA_IO_GNUPLOT_H
#define LA_IO_GNUPLOT_H

/* Runs `prog script` (prog NULL: "gnuplot", found on PATH; no shell, so the script path
 * is one argument whatever characters it holds) inside folder dir (NULL: the current
 * folder), with its stdout and stderr sent to the file log (relative to dir; NULL: left
 * as they are), and waits for it. Returns gnuplot's exit status: 0 success, 127 when it
 * could not be started (not installed, dir missing, fork failed), 126 when it died on a
 * signal. */
int la_gnuplot_run(const char *prog, const char *dir, const char *script, const char *log);

#endif
