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

la_status la_grid_init(la_grid *g, const char *what, const double *cost, int n_cells, int n_units, int unit) {
    memset(g, 0, sizeof *g);
    g->what = what;
    g->n_cells = n_cells;
    g->n_units = n_units;
    g->unit = unit;
    g->owner = la_calloc((size_t)(n_cells ? n_cells : 1), sizeof *g->owner);
    g->cost = la_calloc((size_t)(n_cells ? n_cells : 1), sizeof *g->cost);
    if (!g->owner || !g->cost) {
        la_grid_free(g);
        return la_fail(LA_ENOMEM, "%s: out of memory", what);
    }
    for (int c = 0; c < n_cells; c++) g->cost[c] = cost ? cost[c] : 1.0;
    la_dist_assign(g->cost, n_cells, n_units, g->owner);
    for (int c = 0; c < n_cells; c++)
        if (g->owner[c] == unit) g->total += g->cost[c];
    return LA_OK;
}

void la_grid_free(la_grid *g) {
    free(g->owner);
    free(g->cost);
    g->owner = NULL;
    g->cost = NULL;
}

la_status la_grid_run(la_grid *g, const la_grid_fns *f, void *user) {
    /* a collective unit agrees every step over its ranks; rank 0 of the unit writes */
    const int leader = !g->collective || la_dist_rank() == 0;
#define AGREE(x) (g->collective ? la_dist_agree(x) : (x))
    la_status s = LA_OK;
    for (int c = 0; c < g->n_cells && s == LA_OK; c++) {
        if (g->owner[c] != g->unit) continue;
        char key[512] = "";
        if (f->begin) f->begin(user, c, key, sizeof key);
        cJSON *saved = NULL;
        if (g->store && (s = AGREE(la_cells_load(g->store, key, &saved))) != LA_OK) break;
        la_status cs;
        const int restored = saved != NULL;
        if (restored) { /* finished before the interruption: its numbers, not a rerun */
            s = AGREE(f->restore ? f->restore(user, c, saved, key) : LA_OK);
            cJSON_Delete(saved);
            if (s != LA_OK) break;
            cs = LA_OK;
        } else {
            cs = f->run(user, c, key);
            if (cs == LA_OK && g->store) { /* persisted as it finishes */
                cJSON *j = leader && f->to_json ? f->to_json(user, c) : NULL;
                s = j || !leader || !f->to_json ? LA_OK : la_fail(LA_ENOMEM, "%s: out of memory", g->what);
                if (s == LA_OK && j) s = la_cells_save(g->store, key, j);
                cJSON_Delete(j);
                if ((s = AGREE(s)) != LA_OK) break;
                if (f->stored) f->stored(user, c, key);
                if (g->test_point) la_test_point(g->test_point);
            }
        }
        g->done += g->cost[c];
        s = f->done ? f->done(user, c, key, cs, restored) : cs;
    }
#undef AGREE
    return s;
}
