/* test_diagnose_run.c -- the diagnostics experiments as library calls
 * (src/tasks/diagnose_run.c): la_diagnose_gaussian_run returns the same accumulators as
 * la_diag_gaussian and writes its files; la_diagnose_ckpt_run calls on_start before the
 * diagnosis, returns n_layer * n_head accumulators and writes its files; errors are
 * statuses naming the problem, with nothing left allocated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "longattn.h"

static int exists(const char *dir, const char *name) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static void rm_rf(const char *dir) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_gaussian(void **state) {
    (void)state;
    char dir[] = "/tmp/la_diagnose_run_XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *specs[2] = {"softmax+causal", "softmax+sinv(tau=10)+causal"};
    la_diag *d[2];
    int gp = 5;
    assert_int_equal(la_diagnose_gaussian_run(specs, 2, 1000, 20, 10, 3, dir, 0, d, &gp), LA_OK);
    assert_int_equal(gp, -1);
    for (int k = 0; k < 2; k++) {
        la_spec sp;
        la_diag *ref = NULL;
        assert_int_equal(la_spec_parse(specs[k], &sp), LA_OK);
        assert_int_equal(la_diag_new(1000, 10, 1, &ref), LA_OK);
        assert_int_equal(la_diag_gaussian(&sp, 1000, 20, 3, ref), LA_OK);
        assert_int_equal(la_diag_num_ranges(d[k]), la_diag_num_ranges(ref));
        for (int r = 0; r < la_diag_num_ranges(ref); r++) {
            la_diag_result a, b;
            la_diag_get(d[k], r, &a);
            la_diag_get(ref, r, &b);
            assert_true(a.mass == b.mass && a.rows == b.rows); /* same computation, same bits */
        }
        la_diag_free(ref);
        la_diag_free(d[k]);
    }
    assert_true(exists(dir, "gaussian.csv") && exists(dir, "gaussian.gp"));
    assert_false(exists(dir, "gaussian.png"));
    const char *bad[2] = {"softmax+causal", "softmaxx"};
    assert_int_not_equal(la_diagnose_gaussian_run(bad, 2, 1000, 20, 10, 3, dir, 0, d, NULL), LA_OK);
    assert_non_null(strstr(la_errmsg(), "softmaxx"));
    assert_null(d[0]);
    rm_rf(dir);
}

static int started;
static void on_start(void *user, const la_diagnose_ckpt_result *r) {
    (void)user;
    started++;
    assert_int_equal(r->config.vocab, 256);
    assert_non_null(strstr(r->text_path, "t.txt"));
}

static void test_ckpt(void **state) {
    (void)state;
    char dir[] = "/tmp/la_diagnose_run_XXXXXX", path[300], text[400];
    assert_non_null(mkdtemp(dir));
    la_model_config cfg = la_model_config_default();
    cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.vocab = 256, cfg.train_len = 16;
    la_model *m = NULL;
    assert_int_equal(la_model_new(&cfg, 1, &m), LA_OK);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    assert_int_equal(la_model_save(m, path), LA_OK);
    la_model_free(m);
    char tdir[320];
    snprintf(tdir, sizeof tdir, "%s/txt", dir);
    assert_int_equal(mkdir(tdir, 0777), 0);
    snprintf(text, sizeof text, "%s/t.txt", tdir);
    FILE *f = fopen(text, "w");
    assert_non_null(f);
    for (int i = 0; i < 300; i++) fputs("a b ", f);
    fclose(f);
    char out[320];
    snprintf(out, sizeof out, "%s/out", dir);
    la_diagnose_ckpt_opts o = {path, tdir, out, 256, 10, 10, 0, 0};
    la_diagnose_ckpt_result r;
    assert_int_equal(la_diagnose_ckpt_run(&o, on_start, NULL, &r), LA_OK);
    assert_int_equal(started, 1);
    assert_non_null(r.diag);
    for (int i = 0; i < 4; i++) assert_true(la_diag_num_ranges(r.diag[i]) >= 2);
    assert_int_equal(r.gnuplot_exit, -1);
    la_diagnose_ckpt_free(&r);
    assert_true(exists(out, "diagnose.csv") && exists(out, "summary.csv") && exists(out, "diagnose.gp"));
    o.N = 5000; /* longer than the text */
    assert_int_equal(la_diagnose_ckpt_run(&o, on_start, NULL, &r), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "no file has offset + N"));
    assert_null(r.diag);
    o.N = 1;
    assert_int_equal(la_diagnose_ckpt_run(&o, NULL, NULL, &r), LA_EINVAL);
    assert_int_equal(started, 1);
    rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gaussian),
        cmocka_unit_test(test_ckpt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
