/* grid.c -- the collective steps of the experiment grid runners (grid.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dist.h"
#include "core/internal.h"
#include "runner/grid.h"

la_status la_grid_open(la_cells *c, const char *out_dir, const char *what, const cJSON *fingerprint, int resume) {
    const int me = la_dist_rank();
    la_status s = me == 0 ? la_cells_open(c, out_dir, what, fingerprint, resume) : LA_OK;
    if (la_dist_size() == 1) return s;
    if ((s = la_dist_agree(s)) == LA_OK && me != 0) s = la_cells_open(c, out_dir, what, fingerprint, 1);
    return la_dist_agree(s);
}

la_status la_grid_gather(void *cells, size_t cell_size, const int *owner, int nc, int to_all, const char *what) {
    const int N = la_dist_size(), me = la_dist_rank();
    if (N == 1) return LA_OK;
    int mine = 0;
    for (int i = 0; i < nc; i++) mine += owner[i] == me;
    char *all = cells;
    size_t *counts = la_calloc((size_t)N, sizeof *counts);
    char *send = la_malloc((size_t)(mine ? mine : 1) * cell_size);
    char *recv = me == 0 ? la_malloc((size_t)(nc ? nc : 1) * cell_size) : NULL;
    la_status s = counts && send && (me != 0 || recv) ? LA_OK : la_fail(LA_ENOMEM, "%s: out of memory (gather)", what);
    s = la_dist_agree(s);
    if (s == LA_OK) {
        for (int i = 0, k = 0; i < nc; i++) {
            counts[owner[i]] += cell_size;
            if (owner[i] == me) memcpy(send + cell_size * (size_t)k++, all + cell_size * (size_t)i, cell_size);
        }
        s = la_dist_agree(la_dist_gatherv_bytes(send, recv, counts, 0));
    }
    if (s == LA_OK && me == 0) { /* rank r's cells arrive in cell order, ranks in order */
        size_t k = 0;
        for (int r = 0; r < N; r++)
            for (int i = 0; i < nc; i++)
                if (owner[i] == r) memcpy(all + cell_size * (size_t)i, recv + cell_size * k++, cell_size);
    }
    if (s == LA_OK && to_all) s = la_dist_agree(la_dist_bcast(cells, (size_t)nc * cell_size, 0));
    free(counts);
    free(send);
    free(recv);
    return s;
}

double la_grid_eta(double elapsed, double done, double total) {
    return done > 0 ? elapsed / done * fmax(0.0, total - done) : NAN;
}
