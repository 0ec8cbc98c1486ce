/* cells.h -- per-cell result persistence for resumable experiment runs (study variants,
 * synth task x spec cells, longeval method x length cells). Not public.
 *
 * A run folder DIR holds DIR/cells/run.json, the fingerprint of the run's settings (a JSON
 * object made by the runner from everything that decides its results), and one
 * DIR/cells/<key>.json per finished cell, each written atomically (la_afile) as the cell
 * finishes. A resumed run loads the finished cells instead of recomputing them and builds
 * its tables from them, so its outputs are those of an uninterrupted run (timings aside).
 * A cell interrupted half-way has no file and is run again from its start.
 *
 * Use: la_cells_open once (fresh or resume), then per cell la_cells_load; if it gave NULL,
 * compute the cell and la_cells_save it. Doubles go through la_cells_num / la_cells_get_num
 * (NaN and infinities survive as null / strings; finite values round-trip exactly because
 * cJSON prints 17 significant digits when 15 do not read back the same). */
#ifndef LA_RUNNER_CELLS_H
#define LA_RUNNER_CELLS_H

#include <cjson/cJSON.h>

#include "longattn/core.h" /* la_status: the one module header it needs (issue 32: not the umbrella) */

typedef struct {
    char dir[2048];  /* DIR/cells */
    int n_loaded;    /* cells la_cells_load found (finished by an earlier run) */
} la_cells;

/* Open the cell store of out_dir for a run whose settings are fingerprint (a JSON object,
 * not consumed). what names the command in messages ("study", "synth").
 * resume = 0: a fresh run: every file in DIR/cells but run.json is removed (results and
 * whatever else a runner kept there, e.g. checkpoints) and run.json is written.
 * resume = 1: the cells of the interrupted run are kept; its run.json must hold the same
 * fingerprint, else LA_EINVAL naming the first setting that differs ("key \"steps\": 60
 * in the interrupted run, 40 now; ..."). A folder without run.json starts fresh.
 * fingerprint NULL: no run.json (written or compared); the runner checks each cell it
 * loads itself (longeval: the cell's method, L and --seq-parallel).
 * Errors: LA_EIO (folder, files), LA_EFORMAT (a corrupt run.json), LA_EINVAL. */
la_status la_cells_open(la_cells *c, const char *out_dir, const char *what, const cJSON *fingerprint, int resume);

/* The saved result of cell key (letters, digits, '.', '-', '_'; other bytes become '_'):
 * *out = the parsed object (caller cJSON_Delete's it), or NULL when the cell is not
 * finished. Errors: LA_EFORMAT (a cell file that does not parse), LA_ENOMEM. */
la_status la_cells_load(la_cells *c, const char *key, cJSON **out);

/* Save the result of cell key atomically. Errors: LA_ENOMEM, LA_EIO. */
la_status la_cells_save(const la_cells *c, const char *key, const cJSON *result);

/* A double as JSON: a number (exact round trip), null for NaN, "inf" / "-inf". */
cJSON *la_cells_num(double x);
/* A uint64 (a seed) as JSON: its decimal string, all 64 bits (a JSON number holds 53). */
cJSON *la_cells_u64(uint64_t x);
/* Member name of obj read back by la_cells_num's rules; NAN when missing. */
double la_cells_get_num(const cJSON *obj, const char *name);
/* An element of an array read back the same way. */
double la_cells_num_value(const cJSON *item);
/* obj printed to path, one JSON text and (newline) a newline, written atomically (la_afile);
 * obj NULL fails with LA_ENOMEM, as a failed print does: the cell store's writer (with the
 * newline), also the report writer's for results.json (la_report_write_json). */
la_status la_json_write_atomic(const char *path, const cJSON *obj, int newline);

#endif
