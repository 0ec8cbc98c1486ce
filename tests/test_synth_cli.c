/* test_synth_cli.c -- `longattn synth --quick` end to end: it trains, evaluates, and its
 * results.json / results.csv / results.md / PNG plots exist and agree with each other;
 * bad options are usage errors (exit 2) that name the problem. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "support/test_corpus.h"

static const char *bin(void) {
    const char *b = getenv("LA_BIN");
    return b && *b ? b : "build/longattn";
}

/* Run `bin args`, capture stderr+stdout into out (cap), return the exit code. */
static int run(const char *args, char *out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin(), args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path) { return la_test_read_file(path, NULL); }

/* Run `synth OPTIONS --out DIR/run` in a fresh temp folder dir (mkdtemp template), fail
 * with its output unless it exits 0, and return its parsed results.json. */
static cJSON *run_synth_json(const char *options, char *dir) {
    assert_non_null(mkdtemp(dir));
    char args[768], path[600];
    static char out[1 << 16];
    snprintf(args, sizeof args, "synth %s --out %s/run", options, dir);
    int rc = run(args, out, sizeof out);
    if (rc != 0) fail_msg("longattn %s exited %d:\n%s", args, rc, out);
    snprintf(path, sizeof path, "%s/run/results.json", dir);
    char *js = slurp(path);
    assert_non_null(js);
    cJSON *root = cJSON_Parse(js);
    free(js);
    assert_non_null(root);
    return root;
}

static void test_quick_run_end_to_end(void **state) {
    (void)state;
    char dir[] = "/tmp/la_synth_cli_XXXXXX";
    char args[512], path[600];
    cJSON *root = run_synth_json("--quick", dir);
    cJSON *runs = cJSON_GetObjectItem(root, "runs");
    assert_true(cJSON_IsArray(runs));
    /* --quick: 2 tasks x 2 specs, lengths 1x, 2x, 4x */
    assert_int_equal(cJSON_GetArraySize(runs), 4);
    int rows = 0;
    cJSON *r;
    cJSON_ArrayForEach(r, runs) {
        assert_true(cJSON_IsString(cJSON_GetObjectItem(r, "task")));
        assert_true(cJSON_IsString(cJSON_GetObjectItem(r, "spec")));
        double loss = cJSON_GetObjectItem(r, "final_loss")->valuedouble;
        assert_true(loss > 0 && loss < 20); /* finite cross-entropy */
        cJSON *ev = cJSON_GetObjectItem(r, "eval");
        assert_int_equal(cJSON_GetArraySize(ev), 3);
        int mult = 1;
        cJSON *e;
        cJSON_ArrayForEach(e, ev) {
            assert_int_equal(cJSON_GetObjectItem(e, "mult")->valueint, mult);
            assert_int_equal(cJSON_GetObjectItem(e, "content_len")->valueint, 16 * mult);
            int n = cJSON_GetObjectItem(e, "n")->valueint, c = cJSON_GetObjectItem(e, "correct")->valueint;
            assert_int_equal(n, 16);
            assert_true(c >= 0 && c <= n);
            double acc = cJSON_GetObjectItem(e, "exact_match")->valuedouble;
            assert_true(acc == (double)c / n);
            mult *= 2;
            rows++;
        }
    }
    cJSON_Delete(root);

    /* CSV: header + one row per run x length */
    snprintf(path, sizeof path, "%s/run/results.csv", dir);
    char *csv = slurp(path);
    assert_non_null(csv);
    assert_true(!strncmp(csv, "task,spec,mult,content_len,tokens,n,correct,exact_match", 55));
    int lines = 0;
    for (char *c = csv; *c; c++) lines += *c == '\n';
    assert_int_equal(lines, 1 + rows);
    free(csv);

    /* Markdown table with a row per run; plots are PNG files */
    snprintf(path, sizeof path, "%s/run/results.md", dir);
    char *md = slurp(path);
    assert_non_null(md);
    assert_non_null(strstr(md, "| task | spec |"));
    assert_non_null(strstr(md, "| flipflop | `softmax+nape` |"));
    assert_non_null(strstr(md, "| copy | `softmax+logn+nape` |"));
    free(md);
    const char *tasks[] = {"flipflop", "copy"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/run/synth_%s.png", dir, tasks[i]);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        unsigned char sig[8] = {0};
        assert_int_equal(fread(sig, 1, 8, f), 8);
        fclose(f);
        assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
    }
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    assert_int_equal(system(args), 0);
}

/* The sizing options reach the run and its record: MQMTAR inline layout, Muon, init std. */
static void test_quick_mqmtar_inline_options(void **state) {
    (void)state;
    char dir[] = "/tmp/la_synth_cli_XXXXXX";
    char args[512];
    cJSON *root = run_synth_json("--quick --tasks mqmtar --specs softmax+rope --mq-layout inline --optimizer muon "
                                 "--muon-lr 0.03 --init-std 0.07 --max-mult 2",
                                 dir);
    cJSON *cfg = cJSON_GetObjectItem(root, "config");
    assert_non_null(cfg);
    assert_string_equal(cJSON_GetObjectItem(cfg, "optimizer")->valuestring, "muon");
    assert_true(cJSON_GetObjectItem(cfg, "muon_lr")->valuedouble == 0.03);
    assert_true(cJSON_GetObjectItem(cfg, "init_std")->valuedouble == 0.07);
    cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "runs"), 0);
    assert_non_null(r);
    cJSON *tp = cJSON_GetObjectItem(r, "task_params");
    assert_string_equal(cJSON_GetObjectItem(tp, "layout")->valuestring, "inline");
    double loss = cJSON_GetObjectItem(r, "final_loss")->valuedouble;
    assert_true(loss > 0 && loss < 20);
    cJSON_Delete(root);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    assert_int_equal(system(args), 0);
}

/* --precision bf16: the note on which path runs, the results' config and the resume
 * fingerprint say bf16, and the runs differ from float32's (--quick, seconds). */
static void test_quick_bf16(void **state) {
    (void)state;
    char dir[] = "/tmp/la_synth_bf16_XXXXXX", dir2[] = "/tmp/la_synth_f32_XXXXXX";
    cJSON *root = run_synth_json("--quick --precision bf16", dir);
    cJSON *cfg = cJSON_GetObjectItem(root, "config");
    assert_string_equal(cJSON_GetObjectItem(cfg, "precision")->valuestring, "bf16");
    cJSON *f32 = run_synth_json("--quick", dir2);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(f32, "config"), "precision"));
    double a = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "runs"), 0), "final_loss")->valuedouble;
    double b = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(f32, "runs"), 0), "final_loss")->valuedouble;
    assert_true(a != b && fabs(a - b) < 0.5);
    cJSON_Delete(root);
    cJSON_Delete(f32);
    static char out[1 << 14];
    char args[700];
    /* a resume with the other precision is refused (the fingerprint differs) */
    snprintf(args, sizeof args, "synth --quick --resume --out %s/run", dir);
    assert_int_equal(run(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "precision"));
    assert_null(strstr(out, "study file")); /* synth has none: the message names its options */
    snprintf(args, sizeof args, "rm -rf %s %s", dir, dir2);
    assert_int_equal(system(args), 0);
    assert_int_equal(run("synth --precision f16", out, sizeof out), 2);
    assert_non_null(strstr(out, "f32 or bf16"));
}

/* issue 31: the learned sink and sigmoid attention are synth variants like any spec string */
static void test_quick_sink_sigmoid_variants(void **state) {
    (void)state;
    char dir[] = "/tmp/la_synth_cli_XXXXXX";
    char args[512];
    cJSON *root = run_synth_json("--quick --tasks flipflop --specs 'softmax+sink+nape;sigmoid+nape' --max-mult 2", dir);
    cJSON *runs = cJSON_GetObjectItem(root, "runs");
    assert_int_equal(cJSON_GetArraySize(runs), 2);
    for (int i = 0; i < 2; i++) {
        cJSON *r = cJSON_GetArrayItem(runs, i);
        const char *spec = cJSON_GetObjectItem(r, "spec")->valuestring;
        assert_string_equal(spec, i ? "sigmoid+nape" : "softmax+sink+nape");
        double loss = cJSON_GetObjectItem(r, "final_loss")->valuedouble;
        assert_true(loss > 0 && loss < 20);
    }
    cJSON_Delete(root);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    assert_int_equal(system(args), 0);
}

static void test_bad_options(void **state) {
    (void)state;
    static char out[1 << 14];
    assert_int_equal(run("synth --tasks mqmtar,bogus --out /tmp/la_never", out, sizeof out), 2);
    assert_non_null(strstr(out, "bogus"));
    assert_int_equal(run("synth --specs 'softmax+nope;softmaxx' --out /tmp/la_never", out, sizeof out), 2);
    assert_non_null(strstr(out, "softmaxx"));
    /* a task or spec given twice (once ran twice into one cell file) */
    assert_int_equal(run("synth --tasks copy,copy --out /tmp/la_never", out, sizeof out), 2);
    assert_non_null(strstr(out, "--tasks names copy twice"));
    assert_int_equal(run("synth --specs 'softmax+nope; softmax+nope+causal' --out /tmp/la_never", out, sizeof out), 2);
    assert_non_null(strstr(out, "twice"));
    assert_int_equal(run("synth --steps 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "--steps"));
    assert_int_equal(run("synth --max-mult 3", out, sizeof out), 2);
    assert_non_null(strstr(out, "power of two"));
    assert_int_equal(run("synth --min-len 80", out, sizeof out), 2);
    assert_int_equal(run("synth --tasks mqmtar --min-len 8 --max-len 16", out, sizeof out), 2);
    assert_non_null(strstr(out, "n_queries"));
    assert_int_equal(run("synth --mq-layout sideways", out, sizeof out), 2);
    assert_non_null(strstr(out, "--mq-layout must be paper, inline or echo"));
    assert_int_equal(run("synth --tasks mqmtar --inline-share 0.5 --echo-share 0.5", out, sizeof out), 2);
    assert_non_null(strstr(out, "make their sum < 1"));
    assert_int_equal(run("synth --optimizer sgd", out, sizeof out), 2);
    assert_non_null(strstr(out, "--optimizer must be adamw or muon"));
    assert_int_equal(run("synth --init-std 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "--init-std"));
    assert_int_equal(run("synth --muon-lr -1", out, sizeof out), 2);
    assert_non_null(strstr(out, "--muon-lr"));
    assert_int_equal(run("synth --inline-share 1", out, sizeof out), 2);
    assert_non_null(strstr(out, "--inline-share expects a number in [0, 1)"));
    assert_int_equal(run("synth --seeds 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "--seeds expects an integer in [1, 16]"));
    assert_int_equal(run("synth --seeds 17", out, sizeof out), 2);
    assert_int_equal(run("synth --preset bogus", out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown synth preset 'bogus' (known: mq-contrast)"));
    assert_int_equal(run("synth --preset", out, sizeof out), 2);
    assert_non_null(strstr(out, "--preset"));
    /* the preset's values, then changed by a later option: validation sees both */
    assert_int_equal(run("synth --preset mq-contrast --heads 5", out, sizeof out), 2);
    assert_non_null(strstr(out, "heads 5 must divide d_model 64"));
    assert_int_equal(run("synth --frobnicate 1", out, sizeof out), 2);
    assert_non_null(strstr(out, "frobnicate"));
    assert_int_equal(run("synth --help", out, sizeof out), 0);
    assert_non_null(strstr(out, "--tasks"));
    assert_int_not_equal(access("/tmp/la_never", F_OK), 0); /* nothing was created */
}

/* The echo layout and the three-phase layout schedule reach the run and its record; an echo
 * phase before the (shorter) paper layout runs too: the batches must hold the echo
 * sequences, which reach the full length within --quick's curriculum at --ramp 0.1. */
static void test_quick_mqmtar_echo_schedule(void **state) {
    (void)state;
    const char *cases[2][2] = {{"--mq-layout echo", "echo"}, {"--ramp 0.1", "paper"}};
    for (int c = 0; c < 2; c++) {
        char dir[] = "/tmp/la_synth_cli_XXXXXX";
        char args[512];
        snprintf(args, sizeof args, "--quick --tasks mqmtar --specs softmax+rope --inline-share 0.25 "
                                    "--echo-share 0.5 --max-mult 2 %s", cases[c][0]);
        cJSON *root = run_synth_json(args, dir);
        cJSON *cfg = cJSON_GetObjectItem(root, "config");
        assert_true(cJSON_GetObjectItem(cfg, "inline_share")->valuedouble == 0.25);
        assert_true(cJSON_GetObjectItem(cfg, "echo_share")->valuedouble == 0.5);
        cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "runs"), 0);
        assert_non_null(r);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "task_params"), "layout")->valuestring,
                            cases[c][1]);
        double loss = cJSON_GetObjectItem(r, "final_loss")->valuedouble;
        assert_true(loss > 0 && loss < 20);
        cJSON_Delete(root);
        snprintf(args, sizeof args, "rm -rf '%s'", dir);
        assert_int_equal(system(args), 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_quick_bf16),
        cmocka_unit_test(test_quick_run_end_to_end),
        cmocka_unit_test(test_quick_mqmtar_inline_options),
        cmocka_unit_test(test_quick_sink_sigmoid_variants),
        cmocka_unit_test(test_quick_mqmtar_echo_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
