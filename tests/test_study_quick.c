/* test_study_quick.c -- a whole study, end to end, on a tiny generated corpus: train two
 * variants, evaluate at two lengths, fine-tune and score passkey, write every output file.
 * Runs the real `longattn study` program when LA_BIN names it (as `make test` does), the
 * library entry point otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "core/internal.h"
#include "longattn.h"
#include "support/test_corpus.h"

static char dir[256];

static const char STUDY[] =
    "{\n"
    "  \"name\": \"ci\",\n"
    "  \"data\": \"%s/data\",\n"
    "  \"model\": {\"n_layer\": 1, \"d_model\": 32, \"n_head\": 2, \"n_kv_head\": 1, \"qk_gain\": 1.5},\n"
    "  \"steps\": 16, \"batch\": 4, \"seq_len\": 128, \"lr\": 0.01, \"warmup\": 2, \"seed\": 7,\n"
    "  \"eval_lens\": [128, 512], \"eval_windows\": 2, \"val_every\": 8,\n"
    "  \"passkey\": {\"pretrain_mix\": 0.25, \"finetune_steps\": 4, \"lens\": [128, 256], \"depths\": [0, 1], \"trials\": 2},\n"
    "  \"specs\": [\"softmax+rope\", \"softmax+sinv(tau=10)+prope(p=0.5)\"]\n"
    "}\n";

static int setup(void **state) {
    (void)state;
    if (la_test_mkdtemp("la_studyq_", dir, sizeof dir)) return -1;
    const int va[] = {300, 1200, 2000};
    if (la_test_write_split_corpus(dir, 12, 1500, 400, 1, 3, va, 2)) return -1;
    char p[512];
    snprintf(p, sizeof p, "%s/ci.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    fprintf(f, STUDY, dir);
    return fclose(f);
}

static int teardown(void **state) {
    (void)state;
    la_test_rmtree(dir);
    return 0;
}

static char *slurp(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/out/%s", dir, name);
    char *buf = la_test_read_file(path, NULL);
    if (!buf) fail_msg("output file %s is missing", path);
    return buf;
}

static int png_ok(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/out/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char m[8];
    size_t n = fread(m, 1, 8, f);
    fclose(f);
    return n == 8 && !memcmp(m, "\x89PNG\r\n\x1a\n", 8);
}

static void test_quick_study_end_to_end(void **state) {
    (void)state;
    char study[512], out[512];
    snprintf(study, sizeof study, "%s/ci.json", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    const char *bin = getenv("LA_BIN");
    if (bin && *bin) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s study '%s' --out '%s' --threads 1 > '%s/stdout.txt' 2> '%s/stderr.txt'",
                 bin, study, out, dir, dir);
        int rc = system(cmd);
        if (rc != 0) {
            snprintf(cmd, sizeof cmd, "cat '%s/stderr.txt'", dir);
            if (system(cmd)) {}
            fail_msg("`longattn study` exited with %d", rc);
        }
        /* the table is printed at the end */
        char p[512];
        snprintf(p, sizeof p, "%s/stdout.txt", dir);
        FILE *f = fopen(p, "r");
        char buf[8192] = {0};
        assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
        fclose(f);
        assert_non_null(strstr(buf, "| `softmax+rope` |"));
        assert_non_null(strstr(buf, "passkey @256"));
    } else {
        la_study st;
        assert_int_equal(la_study_load(study, &st), LA_OK);
        la_study_opts o = la_study_opts_default();
        o.n_threads = 1;
        la_study_summary sum;
        assert_int_equal(la_study_run(&st, out, &o, &sum), LA_OK);
    }

    /* results.csv: 2 specs x 2 lengths, finite positive losses below log2(256) + margin */
    char *csv = slurp("results.csv");
    int rows = 0;
    for (char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        rows++;
        char *q = strchr(line + 2, '"');
        assert_non_null(q);
        int len;
        double loss;
        unsigned long long seed;
        assert_int_equal(sscanf(q + 1, ",%llu,%d,%lf", &seed, &len, &loss), 3);
        assert_true(seed == 7); /* the study's seed */
        assert_true(len == 128 || len == 512);
        assert_true(isfinite(loss) && loss > 0 && loss < 10);
    }
    assert_int_equal(rows, 4);
    free(csv);
    char *pk = slurp("passkey.csv");
    rows = 0;
    for (char *line = strchr(pk, '\n'); line && line[1]; line = strchr(line + 1, '\n')) rows++;
    assert_int_equal(rows, 2 * 2 * 2);
    free(pk);

    /* results.json: one row per spec x eval_len with a loss, one per spec x length x depth */
    char *js = slurp("results.json");
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    cJSON *loss = cJSON_GetObjectItem(root, "loss"), *e;
    assert_int_equal(cJSON_GetArraySize(loss), 4);
    cJSON_ArrayForEach(e, loss) {
        assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "spec")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(e, "eval_len")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(e, "loss")));
        /* every length scores the same 2 x 512 target bytes */
        assert_int_equal(cJSON_GetObjectItem(e, "tokens")->valueint, 1024);
    }
    /* the settings that shaped the run are recorded */
    cJSON *sst = cJSON_GetObjectItem(root, "study");
    assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(sst, "model"), "qk_gain")->valuedouble == 1.5);
    assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(sst, "passkey"), "pretrain_mix")->valuedouble == 0.25);
    assert_int_equal(cJSON_GetObjectItem(sst, "val_every")->valueint, 8);
    cJSON *pks = cJSON_GetObjectItem(root, "passkey");
    assert_int_equal(cJSON_GetArraySize(pks), 8);
    cJSON_ArrayForEach(e, pks) {
        double a = cJSON_GetObjectItem(e, "passkey_acc")->valuedouble;
        assert_true(a >= 0 && a <= 1);
    }
    /* the models learned: final training loss well below the 8 bits of a uniform guess */
    cJSON *vars = cJSON_GetObjectItem(root, "variants");
    assert_int_equal(cJSON_GetArraySize(vars), 2);
    cJSON_ArrayForEach(e, vars) assert_true(cJSON_GetObjectItem(e, "final_train_loss")->valuedouble < 7.0);
    cJSON_Delete(root);
    free(js);

    char *md = slurp("results.md");
    assert_non_null(strstr(md, "| `softmax+sinv(tau=10)+prope(p=0.5)` |"));
    free(md);
    /* the pre-trained and the passkey-tuned weights of each variant, loadable, with the
     * study's spec and QK-norm gain */
    for (int i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/out/%s_%d_%s.safetensors", dir, i < 2 ? "model" : "passkey", i % 2 + 1,
                 i % 2 == 0 ? "softmax_rope" : "softmax_sinv_tau_10_prope_p_0.5");
        la_model *m = NULL;
        if (la_model_load(path, &m) != LA_OK) fail_msg("%s: %s", path, la_errmsg());
        assert_true(la_model_get_config(m)->qk_gain == 1.5f);
        assert_int_equal(la_model_get_config(m)->train_len, 128);
        la_model_free(m);
    }
    char *tr = slurp("training.csv");
    assert_non_null(strstr(tr, "\"softmax+rope\",7,16,"));
    free(tr);
    if (access("/usr/bin/gnuplot", X_OK) == 0) {
        assert_true(png_ok("loss_vs_length.png"));
        assert_true(png_ok("loss_by_position.png"));
        assert_true(png_ok("passkey_1_softmax_rope.png"));
        assert_true(png_ok("passkey_2_softmax_sinv_tau_10_prope_p_0.5.png"));
    } else {
        print_message("gnuplot not installed: PNG checks skipped\n");
    }
}

/* Problems that can be seen before training are reported before training. */
static void test_fails_fast(void **state) {
    (void)state;
    char study[512], out[512];
    snprintf(study, sizeof study, "%s/ci.json", dir);
    snprintf(out, sizeof out, "%s/out2", dir);
    la_study st;
    assert_int_equal(la_study_load(study, &st), LA_OK);
    st.eval_lens[1] = 4096; /* longer than every validation document */
    la_study_opts o = la_study_opts_default();
    assert_int_equal(la_study_run(&st, out, &o, NULL), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "eval_lens"));
    assert_non_null(strstr(la_errmsg(), "2000"));
    assert_int_not_equal(access(out, F_OK), 0); /* nothing was started */
    o.data = "/nonexistent_la_data";
    assert_int_equal(la_study_load(study, &st), LA_OK);
    assert_int_equal(la_study_run(&st, out, &o, NULL), LA_EIO);
    assert_non_null(strstr(la_errmsg(), "setup.sh"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quick_study_end_to_end),
        cmocka_unit_test(test_fails_fast),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
