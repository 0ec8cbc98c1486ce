/* test_diagnose_cli.c -- `longattn diagnose` (src/cli/diagnose.c) end to end:
 *   --gaussian at a small N: CSV written with one block per spec, PASS for sinv;
 *   --ckpt on a tiny random model saved here and a generated text: CSV / summary layout,
 *   every row's masses sum to 1 (sum of rows * mass = N per layer and head);
 *   bad options, missing / corrupt checkpoints and short or missing texts rejected;
 *   --passkey on the same model: CSV layout and invariants, option mix-ups rejected. */
#include <math.h>
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
#include "support/test_corpus.h"

static char dir[64];

static int run(const char *args, const char *stdout_path) {
    const char *bin = getenv("LA_BIN");
    if (!bin) bin = "build/longattn";
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s diagnose %s >%s 2>&1", bin, args, stdout_path ? stdout_path : "/dev/null");
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_gaussian_small(void **st) {
    (void)st;
    char args[512], path[128], out[128], line[512];
    snprintf(out, sizeof out, "%s/stdout.txt", dir);
    snprintf(args, sizeof args,
             "--gaussian --n 12000 --draws 40 --spec softmax+causal --spec 'softmax+sinv(tau=10)+causal' --no-plot --out %s", dir);
    assert_int_equal(run(args, out), 0);
    snprintf(path, sizeof path, "%s/gaussian.csv", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "spec_id,spec,lo,hi,complete,rows,keys,mass,mass_se,entropy,entropy_se,log_keys\n");
    int rows[2] = {0, 0};
    double mass_sum[2] = {0, 0};
    while (fgets(line, sizeof line, f)) {
        int id;
        char spec[128];
        long long lo, hi;
        int complete;
        long long nrows;
        double keys, mass;
        assert_int_equal(sscanf(line, "%d,\"%127[^\"]\",%lld,%lld,%d,%lld,%lf,%lf", &id, spec, &lo, &hi, &complete, &nrows, &keys, &mass), 8);
        assert_true(id == 0 || id == 1);
        assert_string_equal(spec, id ? "softmax+sinv(tau=10)+causal" : "softmax+causal");
        assert_int_equal(nrows, 40);
        rows[id]++;
        mass_sum[id] += mass;
    }
    fclose(f);
    /* ranges [0,1) [1,10) [10,100) [100,1000) [1000,10000) [10000,100000) */
    assert_int_equal(rows[0], 6);
    assert_int_equal(rows[1], 6);
    /* every row's probabilities sum to 1, so the per-range means do too */
    assert_true(fabs(mass_sum[0] - 1) < 1e-4 && fabs(mass_sum[1] - 1) < 1e-4);
    /* stdout: plain softmax fails the mass check, sinv passes both */
    f = fopen(out, "r");
    assert_non_null(f);
    int pass = 0, fail = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "  PASS ")) pass++;
        if (strstr(line, "  FAIL ")) fail++;
    }
    fclose(f);
    assert_int_equal(pass, 2);
    assert_int_equal(fail, 2);
}

/* Fewer than two complete ranges: the checks are reported as n/a with the fix (raise --n),
 * never as nan or FAIL. N = 500 with delta 10 has only [10,100) complete. */
static void test_gaussian_too_short(void **st) {
    (void)st;
    char args[512], out[128], line[512];
    snprintf(out, sizeof out, "%s/stdout_short.txt", dir);
    snprintf(args, sizeof args, "--gaussian --n 500 --draws 2 --no-plot --out %s", dir);
    assert_int_equal(run(args, out), 0);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    int na = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "n/a: only 1 complete range") && strstr(line, "the checks need")) na++;
        if (strstr(line, "raise --n to at least 1000")) na++;
        if (strstr(line, "nan") || strstr(line, "FAIL") || strstr(line, "PASS")) bad++;
    }
    fclose(f);
    assert_true(na >= 2);
    assert_int_equal(bad, 0);
    /* a delta whose two ranges need more than --n's 2^30 tokens: only "lower --delta" */
    snprintf(args, sizeof args, "--gaussian --n 500 --delta 1e19 --draws 1 --no-plot --out %s", dir);
    assert_int_equal(run(args, out), 0);
    f = fopen(out, "r");
    assert_non_null(f);
    na = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "raise --n")) bad++;
        if (strstr(line, "lower --delta (--n takes at most 2^30)")) na++;
    }
    fclose(f);
    assert_true(na >= 1);
    assert_int_equal(bad, 0);
}

/* a tiny model (2 layers, 2 heads) saved as dir/model.safetensors, a 3000-byte text, a
 * 100-byte text and a folder holding both */
static void make_inputs(void) {
    la_model_config cfg = la_model_config_default();
    cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 32, cfg.d_ff = 64, cfg.train_len = 32;
    la_model *m;
    assert_int_equal(la_model_new(&cfg, 5, &m), LA_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(la_model_save(m, path), LA_OK);
    la_model_free(m);
    snprintf(path, sizeof path, "%s/texts", dir);
    assert_int_equal(mkdir(path, 0777), 0);
    const char *names[] = {"a_short.txt", "b_long.txt"};
    const int sizes[] = {100, 3000};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/texts/%s", dir, names[k]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        for (int i = 0; i < sizes[k]; i++) fputc("the quick brown fox jumps over the lazy dog. "[i % 45], f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    FILE *f = fopen(path, "w");
    fputs("not a safetensors file", f);
    fclose(f);
}

static void test_ckpt_small(void **st) {
    (void)st;
    make_inputs();
    char args[512], path[256], line[512];
    /* folder: the first file with offset + N bytes is b_long.txt */
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --text %s/texts --n 400 --offset 50 --delta 4 --no-plot --out %s/ck",
             dir, dir, dir);
    snprintf(path, sizeof path, "%s/ck_stdout.txt", dir);
    assert_int_equal(run(args, path), 0);
    FILE *f = fopen(path, "r");
    int saw_text = 0;
    while (fgets(line, sizeof line, f)) saw_text |= strstr(line, "b_long.txt") != NULL;
    fclose(f);
    assert_true(saw_text);
    snprintf(path, sizeof path, "%s/ck/diagnose.csv", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "layer,head,range_lo,range_hi,rows,keys,mass,mass_se,entropy,entropy_se\n");
    double tot[4] = {0};
    int nlines[4] = {0};
    while (fgets(line, sizeof line, f)) {
        int l, h;
        long long lo, hi, rows;
        double keys, mass;
        assert_int_equal(sscanf(line, "%d,%d,%lld,%lld,%lld,%lf,%lf", &l, &h, &lo, &hi, &rows, &keys, &mass), 7);
        assert_true(l >= 0 && l < 2 && h >= 0 && h < 2);
        tot[l * 2 + h] += (double)rows * mass;
        nlines[l * 2 + h]++;
    }
    fclose(f);
    /* delta 4 up to distance 399: [0,1) [1,4) [4,16) [16,64) [64,256) [256,1024) */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(nlines[i], 6);
        assert_true(fabs(tot[i] - 400) < 400 * 1e-5);
    }
    snprintf(path, sizeof path, "%s/ck/summary.csv", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    int n = 0;
    while (fgets(line, sizeof line, f)) n++;
    fclose(f);
    assert_int_equal(n, 5); /* header + 2 layers x 2 heads */
    snprintf(path, sizeof path, "%s/ck/diagnose.gp", dir);
    assert_int_equal(access(path, R_OK), 0);
    snprintf(path, sizeof path, "%s/ck/sinks.csv", dir);
    assert_int_not_equal(access(path, F_OK), 0); /* no sink in this model: no sinks.csv */
}

/* issue 31: a softmax+sink model's sinks.csv, a row per layer, head and span range holding
 * rows, and no file for a model without a sink (test_ckpt_small) */
static void test_ckpt_sinks_csv(void **st) {
    (void)st;
    la_model_config cfg = la_model_config_default();
    cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 32, cfg.d_ff = 64, cfg.train_len = 32;
    snprintf(cfg.spec, sizeof cfg.spec, "softmax+sink+causal");
    la_model *m;
    assert_int_equal(la_model_new(&cfg, 5, &m), LA_OK);
    char args[512], path[256], line[512];
    snprintf(path, sizeof path, "%s/sink.safetensors", dir);
    assert_int_equal(la_model_save(m, path), LA_OK);
    la_model_free(m);
    snprintf(args, sizeof args, "--ckpt %s/sink.safetensors --text %s/texts --n 400 --offset 50 --delta 4 --no-plot "
             "--out %s/sk", dir, dir, dir);
    snprintf(path, sizeof path, "%s/sk_stdout.txt", dir);
    assert_int_equal(run(args, path), 0);
    snprintf(path, sizeof path, "%s/sk/sinks.csv", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "layer,head,span_lo,span_hi,rows,sink_mass,sink_mass_se\n");
    int n = 0;
    long long rows_total = 0;
    while (fgets(line, sizeof line, f)) {
        int l, h;
        long long lo, hi, rows;
        double mass;
        assert_int_equal(sscanf(line, "%d,%d,%lld,%lld,%lld,%lf", &l, &h, &lo, &hi, &rows, &mass), 6);
        assert_true(rows > 0 && mass > 0.0 && mass < 1.0);
        rows_total += rows;
        n++;
    }
    fclose(f);
    assert_true(n >= 4);                 /* every layer and head has rows */
    assert_true(rows_total == 4 * 400); /* 2 layers x 2 heads x the 400 rows */
}

static void test_ckpt_bad_inputs(void **st) {
    (void)st;
    char args[512];
    /* missing checkpoint, corrupt checkpoint: runtime failures */
    snprintf(args, sizeof args, "--ckpt %s/none.safetensors --text %s/texts --n 50 --no-plot --out %s/x", dir, dir, dir);
    assert_int_equal(run(args, NULL), 1);
    snprintf(args, sizeof args, "--ckpt %s/bad.safetensors --text %s/texts --n 50 --no-plot --out %s/x", dir, dir, dir);
    assert_int_equal(run(args, NULL), 1);
    /* missing text, text shorter than N, folder with no file long enough */
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --text %s/nothing.txt --n 50 --no-plot --out %s/x", dir, dir, dir);
    assert_int_equal(run(args, NULL), 1);
    char out[256], line[512];
    snprintf(out, sizeof out, "%s/short_stdout.txt", dir);
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --text %s/texts/a_short.txt --n 200 --no-plot --out %s/x", dir, dir, dir);
    assert_int_equal(run(args, out), 1);
    FILE *f = fopen(out, "r");
    int said = 0;
    while (fgets(line, sizeof line, f)) said |= strstr(line, "has 100 bytes, fewer than") != NULL;
    fclose(f);
    assert_true(said);
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --text %s/texts --n 2990 --offset 20 --no-plot --out %s/x", dir, dir, dir);
    assert_int_equal(run(args, NULL), 1);
    /* usage errors */
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --n 50", dir);
    assert_int_equal(run(args, NULL), 2); /* no --text */
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --text %s/texts --n 70000", dir, dir);
    assert_int_equal(run(args, NULL), 2);
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --text %s/texts --offset -3", dir, dir);
    assert_int_equal(run(args, NULL), 2);
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --text %s/texts --spec softmax+causal", dir, dir);
    assert_int_equal(run(args, NULL), 2);
    snprintf(args, sizeof args, "--gaussian --ckpt %s/model.safetensors", dir);
    assert_int_equal(run(args, NULL), 2);
    /* nothing was written by the failed runs */
    snprintf(args, sizeof args, "%s/x/diagnose.csv", dir);
    assert_int_equal(access(args, F_OK), -1);
}

/* --passkey on the tiny model (made by test_ckpt_small) with haystacks from a generated
 * corpus: one CSV line per example x layer x head x answer row, the per-length block on
 * stdout; option mix-ups are usage errors, a missing corpus a runtime failure. */
static void test_passkey_mode(void **st) {
    (void)st;
    char args[768], path[256], line[512], out[256];
    snprintf(path, sizeof path, "%s/pk", dir);
    assert_int_equal(mkdir(path, 0777), 0);
    snprintf(path, sizeof path, "%s/pk/val", dir);
    assert_int_equal(mkdir(path, 0777), 0);
    const int sizes[2] = {800, 1200};
    assert_int_equal(la_test_write_corpus(path, 2, sizes, 3), 0);
    snprintf(out, sizeof out, "%s/pk_stdout.txt", dir);
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --passkey 120,300 --depths 0,1 --trials 2 --seed 5 "
             "--data %s/pk --threads 1 --out %s/pkout", dir, dir, dir);
    assert_int_equal(run(args, out), 0);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    int blocks = 0;
    while (fgets(line, sizeof line, f)) blocks += strstr(line, "length 120: passkey") || strstr(line, "length 300: passkey");
    fclose(f);
    assert_int_equal(blocks, 2);
    snprintf(path, sizeof path, "%s/pkout/passkey_needle.csv", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "length,depth,depth_real,trial,key,needle_pos,needle_len,answer_pos,correct,layer,head,row,"
                              "visible_keys,mass_digits,mass_target,mass_needle,uniform_digits,uniform_target,"
                              "uniform_needle\n");
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        int T, trial, key, np, nl, ap, ok, l, h, row;
        double depth, dreal, vis, md, mt, mn, ud, ut, un;
        assert_int_equal(sscanf(line, "%d,%lf,%lf,%d,%d,%d,%d,%d,%d,%d,%d,%d,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &T, &depth, &dreal,
                                &trial, &key, &np, &nl, &ap, &ok, &l, &h, &row, &vis, &md, &mt, &mn, &ud, &ut, &un), 19);
        assert_true(mt >= 0 && mt <= md + 1e-6 && fabs(ut - 2 / vis) < 1e-4 * ut); /* the row's digit is one of them */
        assert_int_equal(ap, T - 4);          /* the digits end the example */
        assert_true(vis == ap + row);          /* row x sits at answer_pos - 1 + x and sees keys 0..it */
        assert_true(md >= 0 && md <= mn + 1e-6 && mn <= 1 + 1e-6); /* digits inside the needle */
        assert_true(fabs(ud - 10 / vis) < 1e-4 * ud && fabs(un - nl / vis) < 1e-4 * un);
        n++;
    }
    fclose(f);
    assert_int_equal(n, 2 * 2 * 2 * 4 * 5); /* lens x depths x trials x (layer, head) x rows */
    snprintf(path, sizeof path, "%s/pkout/passkey_summary.csv", dir);
    assert_int_equal(access(path, R_OK), 0);
    /* usage errors */
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --passkey 50 --data %s/pk", dir, dir);
    assert_int_equal(run(args, NULL), 2); /* below the shortest example */
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --passkey 128, --data %s/pk", dir, dir);
    assert_int_equal(run(args, NULL), 2);
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --passkey 128.5 --data %s/pk", dir, dir);
    assert_int_equal(run(args, NULL), 2);
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --passkey 128 --depths 0,2 --data %s/pk", dir, dir);
    assert_int_equal(run(args, NULL), 2);
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --passkey 128 --text %s/texts", dir, dir);
    assert_int_equal(run(args, NULL), 2);
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --passkey 128 --n 300 --data %s/pk", dir, dir);
    assert_int_equal(run(args, NULL), 2);
    snprintf(args, sizeof args, "--passkey 128 --data %s/pk", dir);
    assert_int_equal(run(args, NULL), 2); /* no --ckpt */
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --text %s/texts --depths 0.5", dir, dir);
    assert_int_equal(run(args, NULL), 2); /* --depths without --passkey */
    /* runtime failures: no corpus there, corrupt checkpoint */
    snprintf(args, sizeof args, "--ckpt %s/model.safetensors --passkey 128 --data %s/none --out %s/pkx", dir, dir, dir);
    assert_int_equal(run(args, NULL), 1);
    snprintf(args, sizeof args, "--ckpt %s/bad.safetensors --passkey 128 --data %s/pk --out %s/pkx", dir, dir, dir);
    assert_int_equal(run(args, NULL), 1);
    snprintf(path, sizeof path, "%s/pkx/passkey_needle.csv", dir);
    assert_int_equal(access(path, F_OK), -1);
}

static void test_bad_options(void **st) {
    (void)st;
    assert_int_equal(run("", NULL), 2); /* neither --ckpt/--text nor --gaussian */
    assert_int_equal(run("--gaussian --n 0", NULL), 2);
    assert_int_equal(run("--gaussian --delta 1", NULL), 2);
    assert_int_equal(run("--gaussian --spec softmax+bogus", NULL), 2);
    assert_int_equal(run("--gaussian --draws x", NULL), 2);
    char args[256];
    snprintf(args, sizeof args, "--gaussian --n 100 --draws 1 --spec 'entmax(alpha=1.5)+causal' --no-plot --out %s", dir);
    assert_int_equal(run(args, NULL), 1); /* valid spec, unsupported by the Gaussian model */
    assert_int_equal(run("--help", NULL), 0);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/la_diagnose_cli_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gaussian_small),
        cmocka_unit_test(test_gaussian_too_short),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_ckpt_small),
        cmocka_unit_test(test_ckpt_sinks_csv),
        cmocka_unit_test(test_ckpt_bad_inputs),
        cmocka_unit_test(test_passkey_mode),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) rc = rc ? rc : 1;
    return rc;
}
