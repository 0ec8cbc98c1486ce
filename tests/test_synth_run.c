/* test_synth_run.c -- the synthetic-task runner as a library call (la_synth_run,
 * src/runner/synth_run.c): progress arrives through the callback (and the runner writes
 * nothing to stdout), the output files exist, option errors are LA_EINVAL naming the
 * problem before anything is trained, and a missing gnuplot is an LA_EIO that leaves the
 * tables written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "longattn.h"

typedef struct {
    int training, evaluated, skipped, last_step;
} counts;

static void count(void *user, const la_synth_progress *p) {
    counts *c = user;
    assert_non_null(p->spec);
    if (p->event == LA_SYNTH_TRAINING) c->training++, c->last_step = p->step;
    else if (p->event == LA_SYNTH_EVALUATED) c->evaluated++, assert_true(p->correct >= 0 && p->correct <= p->n);
    else c->skipped++;
}

static la_synth_opts tiny(const char *dir) {
    la_synth_opts o = la_synth_opts_default();
    la_synth_opts_quick(&o);
    snprintf(o.tasks, sizeof o.tasks, "copy");
    snprintf(o.specs, sizeof o.specs, "softmax+nape");
    snprintf(o.out, sizeof o.out, "%s/run", dir);
    o.steps = 60; /* progress at step 50 and at the last step */
    o.max_mult = 2;
    o.eval_n = 4;
    return o;
}

static int exists(const char *dir, const char *name) {
    char p[600];
    snprintf(p, sizeof p, "%s/run/%s", dir, name);
    return access(p, F_OK) == 0;
}

static void test_run_reports_through_callback(void **state) {
    (void)state;
    char dir[] = "/tmp/la_synth_run_XXXXXX";
    assert_non_null(mkdtemp(dir));
    la_synth_opts o = tiny(dir);
    counts c = {0};
    int n_runs = -1;
    /* stdout must stay untouched: the library never prints */
    fflush(stdout);
    long before = ftell(stdout);
    la_status s = la_synth_run(&o, count, &c, &n_runs);
    assert_int_equal(s, LA_OK);
    assert_int_equal(ftell(stdout), before);
    assert_int_equal(n_runs, 1);
    assert_int_equal(c.training, 2);
    assert_int_equal(c.last_step, 60);
    assert_int_equal(c.evaluated, 2); /* 1x and 2x */
    assert_int_equal(c.skipped, 0);
    assert_true(exists(dir, "results.csv") && exists(dir, "results.md") && exists(dir, "results.json"));
    assert_true(exists(dir, "synth_copy.dat") && exists(dir, "synth_copy.gp") && exists(dir, "synth_copy.png"));
    assert_false(exists(dir, "synth_copy.gp.log")); /* gnuplot's log is removed */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_missing_gnuplot_is_an_error_after_the_tables(void **state) {
    (void)state;
    char dir[] = "/tmp/la_synth_run_XXXXXX";
    assert_non_null(mkdtemp(dir));
    la_synth_opts o = tiny(dir);
    o.steps = 2;
    o.max_mult = 1;
    char *path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
    setenv("PATH", dir, 1); /* no gnuplot on this PATH */
    la_status s = la_synth_run(&o, NULL, NULL, NULL);
    if (path) setenv("PATH", path, 1), free(path);
    assert_int_equal(s, LA_EIO);
    assert_non_null(strstr(la_errmsg(), "gnuplot"));
    assert_non_null(strstr(la_errmsg(), "gnuplot-nox"));
    assert_true(exists(dir, "results.md") && exists(dir, "synth_copy.dat"));
    assert_false(exists(dir, "synth_copy.png"));
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A failed results.csv write is the run's error even when the writes after it succeed
 * (it was lost once: the markdown table's status overwrote it). results.csv is made a
 * non-empty directory, so its atomic rename fails. */
static void test_failed_csv_write_is_the_error(void **state) {
    (void)state;
    char dir[] = "/tmp/la_synth_run_XXXXXX";
    assert_non_null(mkdtemp(dir));
    la_synth_opts o = tiny(dir);
    o.steps = 2;
    o.max_mult = 1;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/run/results.csv/x", dir);
    assert_int_equal(system(cmd), 0);
    la_status s = la_synth_run(&o, NULL, NULL, NULL);
    assert_int_not_equal(s, LA_OK);
    assert_non_null(strstr(la_errmsg(), "results.csv"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_bad_options(void **state) {
    (void)state;
    la_synth_opts o = tiny("/nonexistent_la_synth");
    snprintf(o.tasks, sizeof o.tasks, "copy,bogus");
    assert_int_equal(la_synth_validate(&o), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "bogus"));
    o = tiny("/nonexistent_la_synth");
    o.max_mult = 3;
    assert_int_equal(la_synth_run(&o, NULL, NULL, NULL), LA_EINVAL); /* before creating the folder */
    assert_non_null(strstr(la_errmsg(), "power of two"));
    assert_int_not_equal(access("/nonexistent_la_synth", F_OK), 0);
    o = tiny("/nonexistent_la_synth");
    o.heads = 3;
    assert_int_equal(la_synth_validate(&o), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "divide"));
    o = tiny("/nonexistent_la_synth");
    snprintf(o.specs, sizeof o.specs, " ; ");
    assert_int_equal(la_synth_validate(&o), LA_EINVAL);
    assert_int_equal(la_synth_validate(NULL), LA_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_reports_through_callback),
        cmocka_unit_test(test_missing_gnuplot_is_an_error_after_the_tables),
        cmocka_unit_test(test_failed_csv_write_is_the_error),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
