/* grid.h -- the collective steps every experiment grid runner shares (study, synth,
 * longeval; issue 32): open the resumable cell store on every rank, gather the cells the
 * ranks ran to rank 0 in cell order, and the ETA from the work done so far. The cells
 * themselves are stored by runner/cells.h; cells are assigned to ranks by la_dist_assign
 * (core/dist.h). Not public. */
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

#endif
