/* test_cells.c -- per-cell result persistence (src/runner/cells.c), the base of `study` and
 * `synth` --resume: doubles survive a save/load bit for bit (NaN, infinities, subnormals,
 * random bit patterns), a fresh run forgets old cells, a resume keeps them, and a resume
 * with other settings is refused with a message naming the setting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/internal.h"
#include "runner/cells.h"

static char dir[256];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/la_test_cells_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static cJSON *fingerprint(int steps, const char *spec) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddNumberToObject(f, "steps", steps);
    cJSON *m = cJSON_AddObjectToObject(f, "model");
    cJSON_AddStringToObject(m, "spec", spec);
    return f;
}

static void test_doubles_round_trip_bitwise(void **state) {
    (void)state;
    cJSON *fp = fingerprint(10, "softmax");
    la_cells c;
    assert_int_equal(la_cells_open(&c, dir, "test", fp, 0), LA_OK);
    enum { N = 2000 };
    static double x[N];
    la_rng rng;
    la_rng_seed(&rng, 42);
    const double special[] = {0.0, -0.0, 1.0 / 3, 0.1, 1e308, -4.9e-324, 2.2250738585072014e-308, NAN, INFINITY,
                              -INFINITY};
    int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < N; i++) {
        if (i < ns) x[i] = special[i];
        else {
            uint64_t bits = la_rng_u64(&rng);
            memcpy(&x[i], &bits, sizeof bits);
        }
    }
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "x");
    for (int i = 0; i < N; i++) cJSON_AddItemToArray(a, la_cells_num(x[i]));
    cJSON_AddItemToObject(o, "one", la_cells_num(0.7));
    assert_int_equal(la_cells_save(&c, "cell/1 softmax", o), LA_OK);
    cJSON_Delete(o);
    cJSON *back = NULL;
    assert_int_equal(la_cells_load(&c, "cell/1 softmax", &back), LA_OK);
    assert_non_null(back);
    assert_int_equal(c.n_loaded, 1);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(back, "x");
    assert_int_equal(cJSON_GetArraySize(b), N);
    int i = 0;
    for (const cJSON *it = b->child; it; it = it->next, i++) {
        double y = la_cells_num_value(it);
        if (isnan(x[i])) assert_true(isnan(y)); /* NaN payloads are not results */
        else assert_memory_equal(&x[i], &y, sizeof y); /* bit for bit, -0.0 included */
    }
    assert_true(la_cells_get_num(back, "one") == 0.7);
    assert_true(isnan(la_cells_get_num(back, "missing")));
    cJSON_Delete(back);
    /* a cell never saved */
    assert_int_equal(la_cells_load(&c, "cell/2", &back), LA_OK);
    assert_null(back);
    cJSON_Delete(fp);
}

static void test_fresh_forgets_resume_keeps_and_refuses(void **state) {
    (void)state;
    cJSON *fp = fingerprint(10, "softmax"), *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "v", 1);
    la_cells c;
    assert_int_equal(la_cells_open(&c, dir, "test", fp, 0), LA_OK);
    assert_int_equal(la_cells_save(&c, "a", o), LA_OK);
    /* resume with the same settings: the cell is there */
    cJSON *back = NULL;
    assert_int_equal(la_cells_open(&c, dir, "test", fp, 1), LA_OK);
    assert_int_equal(la_cells_load(&c, "a", &back), LA_OK);
    assert_non_null(back);
    cJSON_Delete(back);
    /* resume with other settings: refused, naming the key and both values */
    cJSON *other = fingerprint(10, "entmax");
    assert_int_equal(la_cells_open(&c, dir, "test", other, 1), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "key \"model.spec\": \"softmax\" in the interrupted run, \"entmax\" now"));
    cJSON_AddNumberToObject(other, "extra", 1);
    cJSON_ReplaceItemInObject(other, "model", cJSON_Duplicate(cJSON_GetObjectItem(fp, "model"), 1));
    assert_int_equal(la_cells_open(&c, dir, "test", other, 1), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "key \"extra\" is new in this run"));
    /* the refused resume left the cell alone; a fresh run removes it */
    assert_int_equal(la_cells_open(&c, dir, "test", fp, 1), LA_OK);
    assert_int_equal(la_cells_load(&c, "a", &back), LA_OK);
    assert_non_null(back);
    cJSON_Delete(back);
    assert_int_equal(la_cells_open(&c, dir, "test", other, 0), LA_OK);
    assert_int_equal(la_cells_load(&c, "a", &back), LA_OK);
    assert_null(back);
    /* a damaged cell file is an error that names the file, not a silent rerun */
    char path[512];
    snprintf(path, sizeof path, "%s/cells/b.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"v\": ", f);
    fclose(f);
    assert_int_equal(la_cells_load(&c, "b", &back), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "b.json"));
    cJSON_Delete(other);
    cJSON_Delete(fp);
    cJSON_Delete(o);
}

/* No fingerprint (longeval: it checks each cell it loads): no run.json is written, a fresh
 * run still forgets old cells, and a resume keeps them whatever run.json says. */
static void test_without_fingerprint(void **state) {
    (void)state;
    cJSON *o = cJSON_CreateObject(), *back = NULL, *fp = fingerprint(10, "softmax");
    cJSON_AddNumberToObject(o, "v", 1);
    la_cells c;
    char path[512];
    snprintf(path, sizeof path, "%s/cells/run.json", dir);
    assert_int_equal(la_cells_open(&c, dir, "test", NULL, 0), LA_OK);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(la_cells_save(&c, "m0_l0", o), LA_OK);
    assert_int_equal(la_cells_open(&c, dir, "test", NULL, 1), LA_OK);
    assert_int_equal(la_cells_load(&c, "m0_l0", &back), LA_OK);
    assert_non_null(back);
    cJSON_Delete(back);
    /* a run.json (here of a run with a fingerprint, which found none and started fresh)
     * does not stop a resume without fingerprint */
    assert_int_equal(la_cells_open(&c, dir, "test", fp, 1), LA_OK);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(la_cells_save(&c, "m0_l0", o), LA_OK);
    assert_int_equal(la_cells_open(&c, dir, "test", NULL, 1), LA_OK);
    assert_int_equal(la_cells_load(&c, "m0_l0", &back), LA_OK);
    assert_non_null(back);
    cJSON_Delete(back);
    /* fresh: the cell goes */
    assert_int_equal(la_cells_open(&c, dir, "test", NULL, 0), LA_OK);
    assert_int_equal(la_cells_load(&c, "m0_l0", &back), LA_OK);
    assert_null(back);
    cJSON_Delete(fp);
    cJSON_Delete(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_doubles_round_trip_bitwise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fresh_forgets_resume_keeps_and_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_fingerprint, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
