/* test_grid.c -- the grid runner (src/runner/grid.c) in one process: the cell loop
 * la_grid_run (assignment to units, run and store, resume without rerunning, failures and
 * the loop's stop), the cell store opened fresh and resumed through la_grid_open,
 * la_grid_gather leaving a one-process table as it is, and the ETA. The multi-rank paths (rank 0 opening first, the
 * gather in cell order) are run by tests/mpi.sh: study, synth, synth-resume and longeval
 * on 2 and 3 ranks give the one-process outputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <math.h>
#include <cmocka.h>

#include "core/internal.h"
#include "runner/grid.h"

static void test_open_fresh_then_resume(void **state) {
    (void)state;
    char dir[] = "/tmp/la_grid_XXXXXX";
    assert_non_null(mkdtemp(dir));
    cJSON *fp = cJSON_CreateObject();
    cJSON_AddNumberToObject(fp, "steps", 40);
    la_cells c;
    assert_int_equal(la_grid_open(&c, dir, "grid-test", fp, 0), LA_OK);
    cJSON *r = cJSON_CreateObject();
    la_json_put(r, "x", la_cells_num(0.1));
    assert_int_equal(la_cells_save(&c, "cell_1", r), LA_OK);
    cJSON_Delete(r);
    /* resumed with the same settings: the finished cell is there */
    assert_int_equal(la_grid_open(&c, dir, "grid-test", fp, 1), LA_OK);
    cJSON *got = NULL;
    assert_int_equal(la_cells_load(&c, "cell_1", &got), LA_OK);
    assert_non_null(got);
    assert_true(la_cells_get_num(got, "x") == 0.1);
    cJSON_Delete(got);
    /* other settings: refused, naming the setting */
    cJSON_ReplaceItemInObject(fp, "steps", cJSON_CreateNumber(60));
    assert_int_equal(la_grid_open(&c, dir, "grid-test", fp, 1), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "steps"));
    /* a fresh run empties the store */
    assert_int_equal(la_grid_open(&c, dir, "grid-test", fp, 0), LA_OK);
    assert_int_equal(la_cells_load(&c, "cell_1", &got), LA_OK);
    assert_null(got);
    cJSON_Delete(fp);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_gather_one_process(void **state) {
    (void)state;
    struct { int a; double b; } cells[3] = {{1, 0.5}, {2, 1.5}, {3, 2.5}}, want[3];
    memcpy(want, cells, sizeof cells);
    int owner[3] = {0, 0, 0};
    for (int to_all = 0; to_all < 2; to_all++) {
        assert_int_equal(la_grid_gather(cells, sizeof cells[0], owner, 3, to_all, "grid-test"), LA_OK);
        assert_memory_equal(cells, want, sizeof cells);
    }
}

/* ---- la_grid_run: a toy grid whose cell c computes c * c (cell 3 fails when asked) ---- */
typedef struct {
    double value[6];
    int runs, restores, stored, done, fail_at, stop_at, failed;
    char order[64]; /* callbacks in order: b(egin) r(un) R(estore) s(tored) d(one) */
} toy;

static void toy_note(toy *t, char ch) {
    size_t n = strlen(t->order);
    if (n + 1 < sizeof t->order) t->order[n] = ch, t->order[n + 1] = 0;
}
static void toy_begin(void *u, int c, char *key, size_t n) {
    toy_note(u, 'b');
    snprintf(key, n, "cell_%d", c);
}
static la_status toy_restore(void *u, int c, const cJSON *saved, const char *key) {
    toy *t = u;
    toy_note(t, 'R');
    t->restores++;
    t->value[c] = la_cells_get_num(saved, "v");
    return LA_OK;
}
static la_status toy_run(void *u, int c, const char *key) {
    toy *t = u;
    toy_note(t, 'r');
    t->runs++;
    if (c == t->fail_at) return la_fail(LA_EIO, "cell %d failed", c);
    t->value[c] = (double)c * c;
    return LA_OK;
}
static cJSON *toy_to_json(void *u, int c) {
    cJSON *o = cJSON_CreateObject();
    la_json_put(o, "v", la_cells_num(((toy *)u)->value[c]));
    return o;
}
static void toy_stored(void *u, int c, const char *key) {
    toy_note(u, 's');
    ((toy *)u)->stored++;
}
static la_status toy_done(void *u, int c, const char *key, la_status cs, int restored) {
    toy *t = u;
    toy_note(t, 'd');
    t->done++;
    t->failed += cs != LA_OK;
    return c == t->stop_at ? la_fail(LA_EIO, "stop after cell %d", c) : LA_OK; /* failures are recorded, not fatal */
}

static void test_run_resume(void **state) {
    (void)state;
    char dir[] = "/tmp/la_grid_XXXXXX";
    assert_non_null(mkdtemp(dir));
    cJSON *fp = cJSON_CreateObject();
    cJSON_AddNumberToObject(fp, "cells", 6);
    const la_grid_fns fns = {toy_begin, toy_restore, toy_run, toy_to_json, toy_stored, toy_done};
    la_cells store;
    la_grid g;
    /* one unit, fresh: every cell runs and is stored, cell 3 fails (not stored) and the loop
     * goes on; done is called after every cell with its cost counted */
    toy t = {.fail_at = 3, .stop_at = -1};
    assert_int_equal(la_grid_open(&store, dir, "grid-test", fp, 0), LA_OK);
    assert_int_equal(la_grid_init(&g, "grid-test", NULL, 6, 1, 0), LA_OK);
    g.store = &store;
    assert_int_equal(la_grid_run(&g, &fns, &t), LA_OK);
    assert_int_equal(t.runs, 6);
    assert_int_equal(t.stored, 5);
    assert_int_equal(t.failed, 1);
    assert_string_equal(t.order, "brsdbrsdbrsdbrdbrsdbrsd");
    assert_true(g.done == 6.0 && g.total == 6.0);
    la_grid_free(&g);
    /* resumed: the five stored cells are restored, not rerun; the failed one runs again */
    toy u = {.fail_at = -1, .stop_at = -1};
    assert_int_equal(la_grid_open(&store, dir, "grid-test", fp, 1), LA_OK);
    assert_int_equal(la_grid_init(&g, "grid-test", NULL, 6, 1, 0), LA_OK);
    g.store = &store;
    assert_int_equal(la_grid_run(&g, &fns, &u), LA_OK);
    assert_int_equal(u.restores, 5);
    assert_int_equal(u.runs, 1);
    for (int c = 0; c < 6; c++) assert_true(u.value[c] == (double)c * c);
    la_grid_free(&g);
    /* done's status stops the loop: cells after it are not begun */
    toy v = {.fail_at = -1, .stop_at = 1};
    assert_int_equal(la_grid_init(&g, "grid-test", NULL, 6, 1, 0), LA_OK);
    g.store = &store;
    assert_int_equal(la_grid_run(&g, &fns, &v), LA_EIO);
    assert_string_equal(v.order, "bRdbRd");
    la_grid_free(&g);
    /* two units by cost: each runs only its own cells, and their costs add up to the total */
    const double cost[6] = {5, 1, 1, 1, 1, 1};
    la_grid g0, g1;
    assert_int_equal(la_grid_init(&g0, "grid-test", cost, 6, 2, 0), LA_OK);
    assert_int_equal(la_grid_init(&g1, "grid-test", cost, 6, 2, 1), LA_OK);
    assert_true(g0.total + g1.total == 10.0);
    toy w0 = {.fail_at = -1, .stop_at = -1}, w1 = w0;
    assert_int_equal(la_grid_run(&g0, &fns, &w0), LA_OK); /* no store: run only */
    assert_int_equal(la_grid_run(&g1, &fns, &w1), LA_OK);
    assert_int_equal(w0.runs + w1.runs, 6);
    assert_int_equal(w0.stored + w1.stored, 0);
    for (int c = 0; c < 6; c++) assert_true((g0.owner[c] == 0 ? w0.value[c] : w1.value[c]) == (double)c * c);
    la_grid_free(&g0);
    la_grid_free(&g1);
    cJSON_Delete(fp);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_eta(void **state) {
    (void)state;
    assert_true(isnan(la_grid_eta(3.0, 0, 10)));  /* nothing done: no rate */
    assert_true(la_grid_eta(3.0, 1, 10) == 27.0); /* 3 s per unit, 9 units left */
    assert_true(la_grid_eta(3.0, 10, 10) == 0.0);
    assert_true(la_grid_eta(3.0, 12, 10) == 0.0); /* a cost model that undercounted: never negative */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_fresh_then_resume),
        cmocka_unit_test(test_gather_one_process),
        cmocka_unit_test(test_run_resume),
        cmocka_unit_test(test_eta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
