/* test_study_report.c -- a study's result files: CSV, JSON, markdown and gnuplot PNGs,
 * written from results filled in by hand (no training needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "study/study_internal.h"
#include "support/test_corpus.h"
#include "longattn.h"

static la_study st;
static study_results *res;

static int setup(void **state) {
    (void)state;
    const char *text =
        "{\"name\": \"t\", \"data\": \"d\", \"steps\": 10, \"batch\": 2, \"seq_len\": 128, \"lr\": 0.01,"
        " \"eval_lens\": [128, 256, 512], \"eval_windows\": 2,"
        " \"passkey\": {\"lens\": [128, 256], \"depths\": [0, 0.5, 1], \"trials\": 4},"
        " \"specs\": [\"softmax+rope\", \"softmax+yarn(s=4,train=128)\", \"softmax+alibi\"]}";
    if (la_study_parse(text, "t.json", &st) != LA_OK) return -1;
    res = calloc(1, sizeof *res);
    res->st = &st;
    res->is_bytes = 1;
    res->vocab = 256;
    res->train_docs = 9;
    res->val_docs = 2;
    res->wall_s = 12.5;
    for (int vi = 0; vi < 2; vi++) { /* the third variant never finished */
        study_variant *v = &res->v[vi];
        snprintf(v->canon, sizeof v->canon, "%s", st.specs[vi]);
        v->trained = v->passkey_done = 1;
        v->seed = 1337 + (uint64_t)vi; /* not a real study's seeds: only written out */
        v->n_params = 1000 + (size_t)vi;
        v->final_train_bpb = 2.0 + vi;
        for (int i = 0; i < 3; i++) {
            v->loss[i] = 1.5 + 0.25 * i + vi;
            v->tokens[i] = 2 * st.eval_lens[i];
            v->n_bucket[i] = st.eval_lens[i] / 128;
            v->bucket[i] = calloc((size_t)v->n_bucket[i], sizeof(double));
            v->bucket_tokens[i] = calloc((size_t)v->n_bucket[i], sizeof(int64_t));
            for (int b = 0; b < v->n_bucket[i]; b++) {
                v->bucket[i][b] = v->loss[i] + 0.01 * b;
                v->bucket_tokens[i][b] = 256;
            }
        }
        for (int li = 0; li < 2; li++)
            for (int di = 0; di < 3; di++) v->correct[li][di] = (li + di + vi) % 5;
        v->log = calloc(2, sizeof *v->log);
        v->log[0] = (study_log_row){5, 3.0, NAN, 1.0};
        v->log[1] = (study_log_row){10, 2.5, 2.6, 2.0};
        v->n_log = v->cap_log = 2;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int vi = 0; vi < 2; vi++) {
        for (int i = 0; i < 3; i++) {
            free(res->v[vi].bucket[i]);
            free(res->v[vi].bucket_tokens[i]);
        }
        free(res->v[vi].log);
    }
    free(res);
    return 0;
}

static char *slurp(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return la_test_read_file(path, NULL);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void test_tables(void **state) {
    (void)state;
    char dir[256];
    assert_int_equal(la_test_mkdtemp("la_rep_", dir, sizeof dir), 0);
    assert_int_equal(la_study_write_tables(res, dir), LA_OK);

    char *csv = slurp(dir, "results.csv");
    assert_non_null(csv);
    /* header with bucket columns up to the longest length: 512/128 = 4 buckets */
    const char *head = "spec,seed,eval_len,loss_bpb,windows,tokens,pos_0,pos_128,pos_256,pos_384\n";
    assert_true(!strncmp(csv, head, strlen(head)));
    assert_int_equal(count_lines(csv), 1 + 2 * 3); /* unfinished variant left out */
    /* the spec with commas is quoted and its numbers follow */
    assert_non_null(strstr(csv, "\"softmax+yarn(s=4,train=128)\",1338,256,2.750000,2,512,2.750000,2.760000,,\n"));
    free(csv);

    char *pk = slurp(dir, "passkey.csv");
    assert_non_null(pk);
    assert_int_equal(count_lines(pk), 1 + 2 * 2 * 3);
    assert_non_null(strstr(pk, "\"softmax+rope\",1337,256,0.5,4,2,0.5000\n"));
    free(pk);

    char *tr = slurp(dir, "training.csv");
    assert_non_null(strstr(tr, "\"softmax+rope\",1337,5,3.000000,,1.000\n")); /* no val at that step */
    assert_non_null(strstr(tr, "\"softmax+rope\",1337,10,2.500000,2.600000,2.000\n"));
    free(tr);

    char *js = slurp(dir, "results.json");
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    cJSON *loss = cJSON_GetObjectItem(root, "loss");
    assert_int_equal(cJSON_GetArraySize(loss), 6);
    cJSON *e = cJSON_GetArrayItem(loss, 4);
    assert_string_equal(cJSON_GetObjectItem(e, "spec")->valuestring, "softmax+yarn(s=4,train=128)");
    assert_int_equal(cJSON_GetObjectItem(e, "eval_len")->valueint, 256);
    assert_true(fabs(cJSON_GetObjectItem(e, "loss")->valuedouble - 2.75) < 1e-12);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(e, "buckets")), 2);
    cJSON *pks = cJSON_GetObjectItem(root, "passkey");
    assert_int_equal(cJSON_GetArraySize(pks), 12);
    e = cJSON_GetArrayItem(pks, 11); /* spec 2, length 256, depth 1: (1 + 2 + 1) % 5 = 4 of 4 */
    assert_int_equal(cJSON_GetObjectItem(e, "length")->valueint, 256);
    assert_true(fabs(cJSON_GetObjectItem(e, "passkey_acc")->valuedouble - 1.0) < 1e-12);
    assert_string_equal(cJSON_GetObjectItem(root, "loss_unit")->valuestring, "bits per byte");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "variants")), 2);
    cJSON_Delete(root);
    free(js);

    char *md = slurp(dir, "results.md");
    assert_non_null(strstr(md, "| spec | params | train bpb | val bpb @128 | val bpb @256 | val bpb @512 | passkey @128 | passkey @256 |"));
    /* passkey @128 of spec 1: depths 0,0.5,1 -> 0+1+2 of 12 = 0.25 */
    assert_non_null(strstr(md, "| `softmax+rope` | 1000 | 2.000 | 1.500 | 1.750 | 2.000 | 0.25 |"));
    assert_null(strstr(md, "`softmax+alibi` |")); /* unfinished */
    /* spec 1 retrieves 0.25 at L: below 0.5, so its longer length is "not learned";
     * spec 2 retrieves 1+2+3 of 12 = 0.50 at L (learned) and 2+3+4 = 0.75 at 256 */
    assert_non_null(strstr(md, "| `softmax+rope` | 1000 | 2.000 | 1.500 | 1.750 | 2.000 | 0.25 | not learned |"));
    assert_non_null(strstr(md, "| `softmax+yarn(s=4,train=128)` | 1001 | 3.000 | 2.500 | 2.750 | 3.000 | 0.50 | 0.75 |"));
    assert_non_null(strstr(md, "| `softmax+rope` | 256 | not learned |"));
    assert_non_null(strstr(md, "\"not learned\": the variant's passkey accuracy at 128 is below 0.5"));
    free(md);

    char *sc = slurp(dir, "summary.csv");
    assert_non_null(strstr(sc, "spec,seeds,metric,length,mean,std,min,max\n"));
    assert_non_null(strstr(sc, "\"softmax+rope\",1,passkey_acc,128,0.250000,0.000000,0.250000,0.250000\n"));
    assert_non_null(strstr(sc, "\"softmax+rope\",1,passkey_acc,256,not learned,,,\n"));
    assert_non_null(strstr(sc, "\"softmax+yarn(s=4,train=128)\",1,passkey_acc,256,0.750000,0.000000,0.750000,0.750000\n"));
    assert_non_null(strstr(sc, "\"softmax+rope\",1,val_loss_bpb,256,1.750000,0.000000,1.750000,1.750000\n"));
    free(sc);
    /* results.json keeps the raw numbers of an unlearned variant, with the flag */
    js = slurp(dir, "results.json");
    root = cJSON_Parse(js);
    cJSON *sum = cJSON_GetObjectItem(root, "summary");
    assert_int_equal(cJSON_GetArraySize(sum), 2);
    cJSON *s0 = cJSON_GetArrayItem(sum, 0), *s1 = cJSON_GetArrayItem(sum, 1);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(s0, "passkey_learned")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(s1, "passkey_learned")));
    assert_int_equal(cJSON_GetObjectItem(s0, "passkey_learned_at")->valueint, 128);
    cJSON *raw = cJSON_GetArrayItem(cJSON_GetObjectItem(s0, "passkey"), 1); /* spec 1 at 256: 1+2+3 of 12 */
    assert_int_equal(cJSON_GetObjectItem(raw, "length")->valueint, 256);
    assert_true(fabs(cJSON_GetObjectItem(raw, "mean")->valuedouble - 0.5) < 1e-12);
    cJSON_Delete(root);
    free(js);
    la_test_rmtree(dir);
}

/* Several seeds, filled in by hand: means, sample standard deviations and ranges in the
 * tables, and "not learned" decided by the mean over the seeds at L. */
static void test_seed_tables(void **state) {
    (void)state;
    la_study s2;
    const char *text =
        "{\"name\": \"t2\", \"data\": \"d\", \"steps\": 10, \"batch\": 2, \"seq_len\": 128, \"lr\": 0.01,"
        " \"seed\": 5, \"seeds\": 2, \"eval_lens\": [128, 512], \"eval_windows\": 2,"
        " \"passkey\": {\"lens\": [128, 512], \"depths\": [0, 1], \"trials\": 4},"
        " \"specs\": [\"softmax+rope\", \"softmax+alibi\"]}";
    assert_int_equal(la_study_parse(text, "t2.json", &s2), LA_OK);
    assert_int_equal(s2.n_seeds, 2);
    study_results *r = calloc(1, sizeof *r);
    r->st = &s2;
    r->is_bytes = 1;
    r->vocab = 256;
    /* cell c = vi * 2 + k; losses 1.5 / 1.7 (+ vi) at 128, 2.0 / 2.4 at 512; passkey at
     * 128: spec 1 has 8/8 and 0/8 (mean 0.5: learned), spec 2 has 6/8 and 0/8 (mean
     * 0.375: not learned although one seed retrieves) */
    const int pk128[2][2] = {{4, 0}, {3, 0}}; /* correct per depth (both depths) */
    for (int c = 0; c < 4; c++) {
        int vi = c / 2, k = c % 2;
        study_variant *v = &r->v[c];
        v->seed = 5 + (uint64_t)k;
        v->trained = v->passkey_done = 1;
        v->n_params = 99;
        v->final_train_bpb = 3.0 + 0.5 * k;
        v->loss[0] = 1.5 + 0.2 * k + vi;
        v->loss[1] = 2.0 + 0.4 * k;
        for (int i = 0; i < 2; i++) {
            v->n_bucket[i] = s2.eval_lens[i] / 128;
            v->bucket[i] = calloc((size_t)v->n_bucket[i], sizeof(double));
            v->bucket_tokens[i] = calloc((size_t)v->n_bucket[i], sizeof(int64_t));
        }
        for (int di = 0; di < 2; di++) {
            v->correct[0][di] = pk128[vi][k];
            v->correct[1][di] = k; /* 0/8 and 2/8 */
        }
        v->n_ft = 10;
        v->ft_curve = calloc(10, sizeof(double));
        for (int j = 0; j < 10; j++) v->ft_curve[j] = 3.0 - 0.1 * j - k; /* last step: 2.1, 1.1 */
    }
    char dir[256];
    assert_int_equal(la_test_mkdtemp("la_rep2_", dir, sizeof dir), 0);
    assert_int_equal(la_study_write_tables(r, dir), LA_OK);
    char *md = slurp(dir, "results.md");
    /* mean ± sample std (n - 1): 1.5, 1.7 -> 1.600 ± 0.141; 2.0, 2.4 -> 2.200 ± 0.283;
     * passkey 1.0, 0.0 -> 0.50 ± 0.71, at 512 0.00, 0.25 -> 0.12 ± 0.18; answer loss
     * (last 10% of 10 steps = the last step) 2.1, 1.1 -> 1.60 ± 0.71 */
    assert_non_null(strstr(md, "| spec | seeds | train bpb | val bpb @128 | val bpb @512 | passkey @128 | passkey @512 | answer bits/digit |"));
    assert_non_null(strstr(md, "| `softmax+rope` | 2 | 3.250 ± 0.354 | 1.600 ± 0.141 | 2.200 ± 0.283 | 0.50 ± 0.71 | 0.12 ± 0.18 | 1.60 ± 0.71 |"));
    assert_non_null(strstr(md, "| `softmax+alibi` | 2 | 3.250 ± 0.354 | 2.600 ± 0.141 | 2.200 ± 0.283 | 0.38 ± 0.53 | not learned | 1.60 ± 0.71 |"));
    assert_non_null(strstr(md, "| `softmax+rope` | 2 | 3.000–3.500 | 1.500–1.700 | 2.000–2.400 | 0.00–1.00 | 0.00–0.25 | 1.10–2.10 |"));
    assert_non_null(strstr(md, "| `softmax+alibi` | 2 | 3.000–3.500 | 2.500–2.700 | 2.000–2.400 | 0.00–0.75 | not learned | 1.10–2.10 |"));
    assert_non_null(strstr(md, "| `softmax+rope` | 128 | 0.50 ± 0.71 | 0.50 ± 0.71 |"));
    assert_non_null(strstr(md, "(mean over seeds) is below 0.5"));
    free(md);
    char *pk = slurp(dir, "passkey.csv");
    assert_non_null(strstr(pk, "spec,seed,length,depth,trials,correct,passkey_acc\n"));
    assert_non_null(strstr(pk, "\"softmax+alibi\",5,512,1,4,0,0.0000\n")); /* raw, even where not learned */
    free(pk);
    char *ft = slurp(dir, "finetune.csv");
    assert_non_null(strstr(ft, "\"softmax+rope\",6,10,1.100000\n"));
    free(ft);
    la_test_rmtree(dir);
    for (int c = 0; c < 4; c++) {
        for (int i = 0; i < 2; i++) free(r->v[c].bucket[i]), free(r->v[c].bucket_tokens[i]);
        free(r->v[c].ft_curve);
    }
    free(r);
}

static int png_ok(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char m[8];
    size_t n = fread(m, 1, 8, f);
    fclose(f);
    return n == 8 && !memcmp(m, "\x89PNG\r\n\x1a\n", 8);
}

static void test_plots(void **state) {
    (void)state;
    char dir[256], warn[512];
    int ok = 0;
    assert_int_equal(la_test_mkdtemp("la_rep_", dir, sizeof dir), 0);
    if (access("/usr/bin/gnuplot", X_OK) == 0) {
        assert_int_equal(la_study_write_plots(res, dir, "gnuplot", &ok, warn, sizeof warn), LA_OK);
        if (!ok) fail_msg("gnuplot failed: %s", warn);
        assert_true(png_ok(dir, "loss_vs_length.png"));
        assert_true(png_ok(dir, "loss_by_position.png"));
        assert_true(png_ok(dir, "passkey_1_softmax_rope.png"));
        assert_true(png_ok(dir, "passkey_2_softmax_yarn_s_4_train_128.png"));
        char path[512];
        snprintf(path, sizeof path, "%s/loss_vs_length.png.tmp", dir);
        assert_int_not_equal(access(path, F_OK), 0); /* no temp file left */
        char *gp = slurp(dir, "plots.gp");
        assert_non_null(strstr(gp, "spec[2] = \"softmax+yarn(s=4,train=128)\""));
        free(gp);
    } else {
        print_message("gnuplot not installed: PNG checks skipped (scripts/setup.sh installs gnuplot-nox)\n");
    }
    /* a missing gnuplot is a warning, not a failure */
    assert_int_equal(la_study_write_plots(res, dir, "/nonexistent/gnuplot", &ok, warn, sizeof warn), LA_OK);
    assert_int_equal(ok, 0);
    assert_non_null(strstr(warn, "gnuplot-nox"));
    la_test_rmtree(dir);
}

static void test_slug(void **state) {
    (void)state;
    char b[64];
    la_study_slug("softmax+sinv(tau=10)+prope(p=0.5)", b, sizeof b);
    assert_string_equal(b, "softmax_sinv_tau_10_prope_p_0.5");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_seed_tables),
        cmocka_unit_test(test_plots),
        cmocka_unit_test(test_slug),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
