/* test_diagnose_run.c -- the diagnostics experiments as library calls
 * (src/runner/diagnose_run.c): la_diagnose_gaussian_run returns the same accumulators as
 * la_diag_gaussian and writes its files; la_diagnose_ckpt_run calls on_start before the
 * diagnosis, returns n_layer * n_head accumulators and writes its files; errors are
 * statuses naming the problem, with nothing left allocated; la_diagnose_passkey_run gives
 * what its pieces (the study's examples, la_model_eval, la_model_diagnose_rows) give. */
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

#include <math.h>

#include "longattn.h"
#include "support/test_corpus.h"

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

/* la_diagnose_passkey_run against its pieces called directly: the study's examples
 * (la_passkey_make with la_study_passkey_seed, haystacks from <data>/val), la_model_eval +
 * la_passkey_exact for the score, la_model_diagnose_rows on the five answer rows with the
 * needle's digit places found here from the needle text (" The pass key is K. Remember it.
 * K is ..." puts them at needle_pos + 17 and + 37). Same float computations in the same
 * order, so the means agree to 1e-12 (only the order of the double averaging differs). */
static void test_passkey(void **state) {
    (void)state;
    char dir[300], path[700], data[400], val[420], out[400];
    assert_int_equal(la_test_mkdtemp("la_diagnose_pk_", dir, sizeof dir), 0);
    la_model_config cfg = la_model_config_default();
    cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.vocab = 256, cfg.train_len = 16;
    snprintf(cfg.spec, sizeof cfg.spec, "softmax+rope+causal");
    la_model *m = NULL;
    assert_int_equal(la_model_new(&cfg, 1, &m), LA_OK);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    assert_int_equal(la_model_save(m, path), LA_OK);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(val, sizeof val, "%s/val", data);
    assert_int_equal(mkdir(data, 0777), 0);
    assert_int_equal(mkdir(val, 0777), 0);
    const int sizes[3] = {900, 1500, 700};
    assert_int_equal(la_test_write_corpus(val, 3, sizes, 5), 0);
    snprintf(out, sizeof out, "%s/out", dir);
    la_diagnose_passkey_opts o;
    memset(&o, 0, sizeof o);
    o.ckpt = path, o.data = data, o.out = out, o.trials = 2, o.seed = 77, o.threads = 1;
    o.n_lens = 2, o.lens[0] = 120, o.lens[1] = 300;
    o.n_depths = 2, o.depths[0] = 0.25, o.depths[1] = 1;
    la_diagnose_passkey_result r;
    if (la_diagnose_passkey_run(&o, &r) != LA_OK) fail_msg("la_diagnose_passkey_run: %s", la_errmsg());
    assert_int_equal(r.n_examples, 8);
    assert_int_equal(r.val_docs, 3);

    /* the same by hand */
    la_docs docs = {0};
    assert_int_equal(la_docs_load(val, &docs), LA_OK);
    const int LH = 4, NR = 5;
    int32_t ex[301], pred[300];
    double mass[4 * 5 * 3], mass2[4 * 5 * 2];
    la_diag *d[4];
    for (int i = 0; i < LH; i++) assert_int_equal(la_diag_new(299, 10, 1, &d[i]), LA_OK);
    for (int li = 0; li < 2; li++) {
        double dig[4] = {0}, ndl[4] = {0}, q[4] = {0}, tgt[4] = {0}, uni = 0;
        int correct = 0;
        for (int di = 0; di < 2; di++)
            for (int k = 0; k < 2; k++) {
                la_passkey pk;
                int T = o.lens[li];
                assert_int_equal(la_passkey_make(&docs, T, o.depths[di], la_study_passkey_seed(77, li, di, k), ex, &pk), LA_OK);
                assert_int_equal(la_model_eval(m, ex, NULL, 1, T, NULL, NULL, pred, NULL), LA_OK);
                correct += la_passkey_exact(pred, ex, &pk);
                int rows[5];
                for (int x = 0; x < NR; x++) rows[x] = T - 5 + x; /* answer_pos - 1 = T - 5 */
                int64_t sp[6] = {pk.needle_pos + 17, pk.needle_pos + 22, pk.needle_pos + 37, pk.needle_pos + 42,
                                 pk.needle_pos, pk.needle_pos + pk.needle_len};
                char key[8];
                snprintf(key, sizeof key, "%d", pk.key);
                for (int x = 0; x < 5; x++) assert_int_equal(ex[sp[0] + x], key[x]), assert_int_equal(ex[sp[2] + x], key[x]);
                la_diag_rows sel = {rows, NR, sp, 3, mass};
                assert_int_equal(la_model_diagnose_rows(m, ex, T, &sel, d), LA_OK);
                /* the digit each row outputs, at its two places: one call per row */
                for (int x = 0; x < NR; x++) {
                    int64_t one[4] = {sp[0] + x, sp[0] + x + 1, sp[2] + x, sp[2] + x + 1};
                    double m1[4 * 2];
                    la_diag_rows s1 = {rows + x, 1, one, 2, m1};
                    assert_int_equal(la_model_diagnose_rows(m, ex, T, &s1, d), LA_OK);
                    for (int i = 0; i < LH; i++) mass2[((size_t)i * NR + x) * 2] = m1[i * 2], mass2[((size_t)i * NR + x) * 2 + 1] = m1[i * 2 + 1];
                }
                for (int i = 0; i < LH; i++) {
                    for (int x = 0; x < NR; x++) {
                        const double *mm = mass + ((size_t)i * NR + x) * 3;
                        dig[i] += (mm[0] + mm[1]) / (NR * 4), ndl[i] += mm[2] / (NR * 4);
                        if (x == 0) q[i] += (mm[0] + mm[1]) / 4;
                        tgt[i] += (ex[sp[0] + x] == ex[T - 4 + x] ? 0 : 1e9) + (mass2[((size_t)i * NR + x) * 2] + mass2[((size_t)i * NR + x) * 2 + 1]) / (NR * 4);
                    }
                }
                for (int x = 0; x < NR; x++) uni += 10.0 / (rows[x] + 1) / (NR * 4);
            }
        assert_int_equal(r.correct[li], correct);
        assert_true(fabs(r.uniform_digits[li] - uni) < 1e-12);
        for (int i = 0; i < LH; i++) {
            size_t at = (size_t)li * LH + i;
            assert_true(fabs(r.digits_ans[at] - dig[i]) < 1e-12);
            assert_true(fabs(r.needle_ans[at] - ndl[i]) < 1e-12);
            assert_true(fabs(r.digits_q[at] - q[i]) < 1e-12);
            assert_true(fabs(r.target_ans[at] - tgt[i]) < 1e-12);
            assert_true(r.target_ans[at] <= r.digits_ans[at] + 1e-12);
            assert_true(r.digits_ans[at] > 0 && r.needle_ans[at] >= r.digits_ans[at] - 1e-12); /* digits inside the needle */
        }
    }
    for (int i = 0; i < LH; i++) la_diag_free(d[i]);
    la_docs_free(&docs);
    la_diagnose_passkey_free(&r);
    assert_null(r.digits_ans);
    /* files: one line per example, layer, head and row, plus the header */
    snprintf(path, sizeof path, "%s/passkey_needle.csv", out);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int lines = 0;
    for (int c; (c = fgetc(f)) != EOF;) lines += c == '\n';
    fclose(f);
    assert_int_equal(lines, 1 + 8 * LH * NR);
    assert_true(exists(out, "passkey_summary.csv"));

    /* bad inputs name the problem */
    la_diagnose_passkey_opts b = o;
    b.lens[1] = la_passkey_min_len() - 1;
    assert_int_equal(la_diagnose_passkey_run(&b, &r), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "passkey length"));
    b = o, b.depths[0] = 1.5;
    assert_int_equal(la_diagnose_passkey_run(&b, &r), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "outside [0, 1]"));
    b = o, b.trials = 0;
    assert_int_equal(la_diagnose_passkey_run(&b, &r), LA_EINVAL);
    b = o, b.n_lens = 0;
    assert_int_equal(la_diagnose_passkey_run(&b, &r), LA_EINVAL);
    b = o, b.data = dir; /* no val/ there */
    assert_int_not_equal(la_diagnose_passkey_run(&b, &r), LA_OK);
    assert_null(r.digits_ans);
    la_model_free(m);
    la_test_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gaussian),
        cmocka_unit_test(test_ckpt),
        cmocka_unit_test(test_passkey),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
