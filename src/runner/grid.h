/* grid.h -- the one cell loop of the experiment runners and the collective steps they
 * share (issue 32): la_grid_run assigns the cells to ranks, loads the stored ones when
 * resuming, runs and stores the others, keeps the ETA and stops at the test points; a
 * runner (study, synth, longeval, kv-eval, diagnose) gives it the cell list and callbacks
 * per cell. Also: open the
 * resumable cell store on every rank, gather the cells the ranks ran to rank 0 in cell
 * order, and the ETA from the work done so far. The cells themselves are stored by
 * runner/cells.h. Not public. */
#ifndef LA_RUNNER_GRID_H
#define LA_RUNNER_GRID_H

#include <stddef.h>

#include "runner/cells.h"

/* Collective: la_cells_open on every rank. Rank 0 opens first (a fresh run empties
 * cells/), then the others join in resume mode, which only checks the fingerprint: no rank
 * deletes a cell another one has saved. One process: la_cells_open itself. A rank that
 * fails stops every rank with its message (la_dist_agree). */
la_status la_grid_open(la_cells *c, const char *out_dir, const char *what, const cJSON *fingerprint, int resume);

/* Collective: cells is an array of nc plain-data records of cell_size bytes (no pointers),
 * record i filled on rank owner[i]; afterwards rank 0 holds every record (to_all = 1: every
 * rank does). what names the runner in the out-of-memory message. One process: nothing to
 * do. */
la_status la_grid_gather(void *cells, size_t cell_size, const int *owner, int nc, int to_all, const char *what);

/* Seconds left when `done` of `total` units of work took `elapsed` seconds, at that rate;
 * NAN when nothing is done yet (no rate). */
double la_grid_eta(double elapsed, double done, double total);

/* ---- the cell loop ----
 * A grid of n_cells cells, each run by one unit: a rank, or a group of ranks that runs its
 * cells together (the study's ranks_per_variant, all ranks in longeval --seq-parallel;
 * `collective`: every load and save is agreed over the group, whose rank 0 alone writes). Cells go to units by their estimated
 * cost (la_dist_assign); the ETA counts that cost. */
typedef struct {
    const char *what;       /* the runner, in messages ("study", "synth", "longeval") */
    int n_cells, n_units, unit; /* this process runs the cells with owner[c] == unit */
    int *owner;             /* (n_cells) unit of each cell */
    double *cost;           /* (n_cells) estimated cost of each cell */
    double total, done;     /* this unit's cost: of all its cells, of those finished */
    la_cells *store;        /* finished cells (NULL: nothing stored, nothing resumed) */
    int collective;         /* a unit is a group of ranks (see above) */
    const char *test_point; /* la_test_point name after each stored cell (NULL: none) */
} la_grid;

/* Per-cell callbacks of la_grid_run; user is the runner's state. Every one but run may be
 * NULL. For each of this unit's cells c in cell order: */
typedef struct {
    /* first: set up for cell c and write its store key into key (n bytes) */
    void (*begin)(void *user, int c, char *key, size_t n);
    /* the cell was stored by an earlier (interrupted) run: take its result from saved */
    la_status (*restore)(void *user, int c, const cJSON *saved, const char *key);
    /* otherwise compute it; a status other than LA_OK goes to done, nothing is stored */
    la_status (*run)(void *user, int c, const char *key);
    /* the computed cell's result to store (called on the writing rank only; NULL: out of
     * memory) */
    cJSON *(*to_json)(void *user, int c);
    /* after it is stored, before the test point (e.g. remove the cell's checkpoint) */
    void (*stored)(void *user, int c, const char *key);
    /* last, with the run's status (LA_OK when restored); returns the status the loop goes
     * on with: LA_OK continues, anything else stops it and is la_grid_run's */
    la_status (*done)(void *user, int c, const char *key, la_status cs, int restored);
} la_grid_fns;

/* Cells assigned to n_units units by cost (NULL: equal costs); unit is this process's. */
la_status la_grid_init(la_grid *g, const char *what, const double *cost, int n_cells, int n_units, int unit);
void la_grid_free(la_grid *g);
/* The loop (see la_grid_fns). A failing load, restore or store stops it (agreed over a
 * collective unit's ranks) without calling done. g->done grows by each finished cell's
 * cost (restored, computed or failed) before done is called. */
la_status la_grid_run(la_grid *g, const la_grid_fns *f, void *user);

#endif
