/* test_grid.c -- the grid runner's shared steps (src/runner/grid.c) in one process: the
 * cell store opened fresh and resumed through la_grid_open, la_grid_gather leaving a
 * one-process table as it is, and the ETA. The multi-rank paths (rank 0 opening first, the
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
        cmocka_unit_test(test_eta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
