/* test_critical_cli.c -- `longattn critical` (src/cli/critical.c) end to end on a tiny grid:
 * files written, CSV shape and values, bad options rejected. Uses $LA_BIN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];

static int run(const char *args) {
    const char *bin = getenv("LA_BIN");
    if (!bin) bin = "build/longattn";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s critical %s >/dev/null 2>&1", bin, args);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_tiny_grid(void **st) {
    (void)st;
    char args[512], path[128], line[512];
    snprintf(args, sizeof args, "--n 64 --d 16 --rho 0.2,0.6 --gamma 0.1:5.1:2.5 --no-plot --out %s", dir);
    assert_int_equal(run(args), 0);
    snprintf(path, sizeof path, "%s/critical.csv", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "rho,gamma,gamma_crit,beta,angle_before,angle_after,angle_ratio,ip_before,ip_after,simplex_ip,simplex_limit\n");
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        double v[11];
        assert_int_equal(sscanf(line, "%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                                &v[6], &v[7], &v[8], &v[9], &v[10]),
                         11);
        assert_true(fabs(v[2] - 1 / (1 - v[0])) < 1e-4);     /* gamma_crit */
        assert_true(fabs(v[3] - v[1] * log(64.0)) < 1e-4);   /* beta = gamma log n */
        assert_true(v[6] >= 0 && v[6] <= 1.0001);             /* angle ratio */
        rows++;
    }
    fclose(f);
    assert_int_equal(rows, 2 * 3); /* gammas 0.1, 2.6, 5.1 */
    snprintf(path, sizeof path, "%s/simplex.csv", dir);
    assert_int_equal(access(path, R_OK), 0);
    snprintf(path, sizeof path, "%s/critical.gp", dir);
    assert_int_equal(access(path, R_OK), 0);
}

static void test_bad_options(void **st) {
    (void)st;
    assert_int_equal(run("--rho 1.0 --no-plot --out /nonexistent-dir-x"), 2);
    assert_int_equal(run("--gamma -1"), 2);
    assert_int_equal(run("--n 1"), 2);
    assert_int_equal(run("--rho 0.1:"), 2);
    assert_int_equal(run("--frobnicate"), 2);
    assert_int_equal(run("--help"), 0);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/la_critical_cli_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_grid),
        cmocka_unit_test(test_bad_options),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) rc = rc ? rc : 1;
    return rc;
}
