/* test_cli_train.c -- `longattn train` end to end (binary from $LA_BIN): a short run writes
 * weights, state and CSV; --resume extends it; SIGINT saves a checkpoint that resumes; bad
 * usage and bad data give exit codes 2 and 1 with a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "longattn.h"
#include "support/test_corpus.h"

static char g_dir[64];
static const char *g_bin;

static int setup(void **st) {
    (void)st;
    g_bin = getenv("LA_BIN");
    if (!g_bin) g_bin = "build/longattn";
    snprintf(g_dir, sizeof g_dir, "/tmp/la_clitrain_XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    char p[256];
    snprintf(p, sizeof p, "%s/text", g_dir);
    mkdir(p, 0755);
    for (int d = 0; d < 4; d++) {
        snprintf(p, sizeof p, "%s/text/doc%d.txt", g_dir, d);
        FILE *f = fopen(p, "w");
        for (int i = 0; i < 40; i++) fprintf(f, "document %d line %d: the cat sat on the mat.\n", d, i);
        fclose(f);
    }
    return 0;
}

static int teardown(void **st) {
    (void)st;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd);
}

static int run(const char *args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s train %s >%s/out.txt 2>&1", g_bin, args, g_dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int csv_rows(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = -1;  // header
    char line[512];
    while (fgets(line, sizeof line, f)) n++;
    fclose(f);
    return n;
}

static int output_has(const char *s) {
    char p[256], buf[8192] = {0};
    snprintf(p, sizeof p, "%s/out.txt", g_dir);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strstr(buf, s) != NULL;
}

#define SMALL "--layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16 --lr 1e-2 --eval-every 3"

static void test_train_and_resume(void **st) {
    (void)st;
    char args[512], csv[256], ck[256];
    snprintf(args, sizeof args, "--data %s/text --out %s/run " SMALL " --steps 5", g_dir, g_dir);
    assert_int_equal(run(args), 0);
    snprintf(csv, sizeof csv, "%s/run/log.csv", g_dir);
    snprintf(ck, sizeof ck, "%s/run/model.safetensors", g_dir);
    assert_int_equal(csv_rows(csv), 5);
    assert_true(output_has("step 5/5"));
    assert_true(output_has("validation loss"));
    la_model *m;
    assert_int_equal(la_model_load(ck, &m), LA_OK);
    assert_int_equal(la_model_get_config(m)->d_model, 16);
    assert_int_equal(la_model_get_config(m)->train_len, 16);
    la_model_free(m);
    snprintf(args, sizeof args, "--resume --out %s/run --steps 8", g_dir);
    assert_int_equal(run(args), 0);
    assert_int_equal(csv_rows(csv), 8);
}

/* --precision bf16: the run says which path runs, the checkpoint keeps the precision and a
 * resume continues in bf16 bitwise like an uninterrupted bf16 run (--precision is fixed by
 * the checkpoint, as --lr is); a bad value is a usage error. */
static void test_precision_bf16(void **st) {
    (void)st;
    char args[512], a[256], b[256];
    snprintf(args, sizeof args, "--data %s/text --out %s/bf_a " SMALL " --steps 6 --precision bf16", g_dir, g_dir);
    assert_int_equal(run(args), 0);
    assert_true(output_has("precision bf16: emulated path"));
    snprintf(args, sizeof args, "--data %s/text --out %s/bf_b " SMALL " --steps 3 --precision bf16", g_dir, g_dir);
    assert_int_equal(run(args), 0);
    snprintf(args, sizeof args, "--resume --out %s/bf_b --steps 6", g_dir);
    assert_int_equal(run(args), 0);
    assert_true(output_has("precision bf16"));
    snprintf(a, sizeof a, "%s/bf_a/model.safetensors", g_dir);
    snprintf(b, sizeof b, "%s/bf_b/model.safetensors", g_dir);
    la_model *ma, *mb;
    assert_int_equal(la_model_load(a, &ma), LA_OK);
    assert_int_equal(la_model_load(b, &mb), LA_OK);
    assert_memory_equal(la_model_params(ma), la_model_params(mb), sizeof(float) * la_model_num_params(ma));
    /* and it is not the float32 run */
    snprintf(args, sizeof args, "--data %s/text --out %s/f32_a " SMALL " --steps 6", g_dir, g_dir);
    assert_int_equal(run(args), 0);
    assert_false(output_has("precision bf16"));
    la_model *mf;
    snprintf(a, sizeof a, "%s/f32_a/model.safetensors", g_dir);
    assert_int_equal(la_model_load(a, &mf), LA_OK);
    assert_true(memcmp(la_model_params(ma), la_model_params(mf), sizeof(float) * la_model_num_params(ma)) != 0);
    la_model_free(ma), la_model_free(mb), la_model_free(mf);
    assert_int_equal(run("--data x --precision f16"), 2);
    assert_true(output_has("f32 or bf16"));
    snprintf(args, sizeof args, "--resume --out %s/bf_b --precision f32", g_dir);
    assert_int_equal(run(args), 2);
    assert_true(output_has("--precision cannot change"));
}

/* A run started with a relative --data path resumes from another working directory:
 * data.txt records the absolute path. */
static void test_resume_elsewhere(void **st) {
    (void)st;
    char *bin = realpath(g_bin, NULL);
    assert_non_null(bin);
    char cmd[2048], meta[256], line[512];
    snprintf(cmd, sizeof cmd, "cd %s && %s train --data text --out rel " SMALL " --steps 3 >%s/out.txt 2>&1", g_dir,
             bin, g_dir);
    assert_int_equal(system(cmd), 0);
    snprintf(meta, sizeof meta, "%s/rel/data.txt", g_dir);
    FILE *f = fopen(meta, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_int_equal(line[0], '/'); /* absolute */
    assert_non_null(strstr(line, "/text"));
    snprintf(cmd, sizeof cmd, "cd / && %s train --resume --out %s/rel --steps 5 >%s/out.txt 2>&1", bin, g_dir, g_dir);
    assert_int_equal(system(cmd), 0);
    snprintf(meta, sizeof meta, "%s/rel/log.csv", g_dir);
    assert_int_equal(csv_rows(meta), 5);
    free(bin);
}

/* SIGINT during training: exit code 1, a checkpoint at the step reached, resumable. The
 * run stops itself after its 3rd logged step (LA_TEST_STOP_AT, src/core/test_point.c), the
 * SIGINT is sent while it is stopped and SIGCONT lets it handle it: the signal lands after
 * step 3 on any machine, however fast or loaded (a poll of log.csv with a time limit raced the run). */
static void test_sigint_saves(void **st) {
    (void)st;
    char out[256], csv[256], ck[256];
    snprintf(out, sizeof out, "%s/int", g_dir);
    snprintf(csv, sizeof csv, "%s/int/log.csv", g_dir);
    snprintf(ck, sizeof ck, "%s/int/model.safetensors", g_dir);
    char data[256];
    snprintf(data, sizeof data, "%s/text", g_dir);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        setenv("LA_TEST_STOP_AT", "train-step:3", 1);
        signal(SIGINT, SIG_DFL); /* not inherited as ignored from a background shell */
        execl(g_bin, g_bin, "train", "--data", data, "--out", out, "--layers", "1", "--d-model",
              "16", "--heads", "2", "--batch", "2", "--seq-len", "16", "--steps", "1000000",
              "--eval-every", "0", "--ckpt-every", "0", (char *)NULL);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
    assert_true(WIFSTOPPED(status)); /* not exited: it reached its 3rd step */
    assert_int_equal(csv_rows(csv), 3);
    kill(pid, SIGINT);
    kill(pid, SIGCONT);
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    la_model *m;
    assert_int_equal(la_model_load(ck, &m), LA_OK);
    la_train_config tc;
    assert_int_equal(la_trainer_read_config(ck, &tc), LA_OK);
    la_trainer *tr;
    assert_int_equal(la_trainer_new(m, NULL, &tc, &tr), LA_OK);
    assert_int_equal(la_trainer_load(tr, ck), LA_OK);
    int step = la_trainer_step_count(tr);
    assert_int_equal(step, 3); /* the handler's flag is read before step 4 starts */
    assert_int_equal(csv_rows(csv), step);  // the checkpoint is at the last logged step
    la_trainer_free(tr);
    la_model_free(m);
    char args[512];
    snprintf(args, sizeof args, "--resume --out %s --steps %d", out, step + 2);
    assert_int_equal(run(args), 0);
    assert_int_equal(csv_rows(csv), step + 2);
}

static void test_bad_usage(void **st) {
    (void)st;
    char args[512];
    assert_int_equal(run("--steps 5"), 2);  // no --data
    assert_true(output_has("--data"));
    assert_int_equal(run("--data x --optimizer sgd"), 2);
    assert_true(output_has("adamw or muon"));
    assert_int_equal(run("--data x --steps -3"), 2);
    assert_int_equal(run("--bogus 1"), 2);
    snprintf(args, sizeof args, "--data %s/missing --out %s/r2", g_dir, g_dir);
    assert_int_equal(run(args), 1);
    assert_true(output_has("missing"));
    snprintf(args, sizeof args, "--resume --out %s/nothing_here", g_dir);
    assert_int_equal(run(args), 1);
    /* --resume with a setting the checkpoint fixes: refused before anything is read */
    snprintf(args, sizeof args, "--resume --out %s/run --spec softmax+alibi", g_dir);
    assert_int_equal(run(args), 2);
    assert_true(output_has("--spec cannot change"));
    snprintf(args, sizeof args, "--resume --out %s/run --lr 0.5", g_dir);
    assert_int_equal(run(args), 2);
    assert_int_equal(run("--data x --d-model 536870912"), 2); /* 4 x d-model (the MLP) once overflowed */
    assert_true(output_has("--d-model"));
    assert_int_equal(run("--data x --qk-gain 0"), 2);
    assert_true(output_has("(0, 100]"));
    /* bad model settings and specs: usage errors naming the option, before --out is made */
    static const char *const bad[][2] = {{"--spec softmax+bogus", "bogus"}, {"--spec 'softmax+rope('", "--spec"},
                                         {"--heads 3 --d-model 32", "--heads 3"}, {"--kv-heads 3", "--kv-heads"},
                                         {"--min-lr 1", "--min-lr"}, {"--d-model 18 --heads 2", "is odd"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "--data %s/text --out %s/r3 %s", g_dir, g_dir, bad[i][0]);
        assert_int_equal(run(args), 2);
        assert_true(output_has(bad[i][1]));
        assert_true(output_has("--help"));
    }
    snprintf(args, sizeof args, "%s/r3", g_dir);
    assert_int_equal(access(args, F_OK), -1);
}

/* steps column of log.csv: 1 when the rows are steps 1..n in order, 0 otherwise; *vals gets
 * the number of rows with a validation loss */
static int csv_steps_in_order(const char *path, int *vals) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    int ok = fgets(line, sizeof line, f) != NULL, want = 1;
    *vals = 0;
    for (; ok && fgets(line, sizeof line, f); want++) {
        ok = atoi(line) == want;
        char *v = line;
        for (int k = 0; k < 3 && v; k++) v = strchr(v + 1, ',');
        *vals += v && strncmp(v + 1, "nan", 3) != 0;
    }
    fclose(f);
    return ok;
}

/* A new run that cannot start (its window is longer than the data) into another run's folder
 * leaves that run's log.csv and data.txt as they were, so its --resume still works. */
static void test_failed_start_keeps_run(void **st) {
    (void)st;
    char args[512], csv[256], meta[256];
    snprintf(args, sizeof args, "--data %s/text --out %s/keep " SMALL " --steps 3", g_dir, g_dir);
    assert_int_equal(run(args), 0);
    snprintf(csv, sizeof csv, "%s/keep/log.csv", g_dir);
    snprintf(meta, sizeof meta, "%s/keep/data.txt", g_dir);
    char *before = la_test_read_file(meta, NULL);
    assert_non_null(before);
    snprintf(args, sizeof args, "--data %s/text/doc0.txt --out %s/keep --seq-len 100000 --steps 3", g_dir, g_dir);
    assert_int_equal(run(args), 1);
    assert_true(output_has("--seq-len"));
    assert_int_equal(csv_rows(csv), 3);
    char *after = la_test_read_file(meta, NULL);
    assert_string_equal(before, after);
    free(before);
    free(after);
    snprintf(args, sizeof args, "--resume --out %s/keep --steps 5", g_dir);
    assert_int_equal(run(args), 0);
    assert_int_equal(csv_rows(csv), 5);
    /* a new run that starts, then fails before its first checkpoint (a non-finite loss at
     * step 2) has replaced the run: the previous weights go with its data.txt and log, so no
     * --resume trains them on the new data (they stayed before 2026-12-05) */
    snprintf(args, sizeof args, "--data %s/text/doc0.txt --out %s/keep --layers 1 --d-model 16 --heads 2 --batch 2 "
             "--seq-len 16 --steps 50 --lr 1e30 --min-lr 1e29 --warmup 0 --clip 1e30", g_dir, g_dir);
    assert_int_equal(run(args), 1);
    assert_true(output_has("non-finite"));
    snprintf(meta, sizeof meta, "%s/keep/model.safetensors", g_dir);
    assert_int_not_equal(access(meta, F_OK), 0);
    snprintf(args, sizeof args, "--resume --out %s/keep", g_dir);
    assert_int_equal(run(args), 1);
    assert_true(output_has("no checkpoint"));
}

/* --resume: --eval-every and --ckpt-every replace the saved ones; --steps at or below the
 * checkpoint's step is a usage error; a folder without a checkpoint is named and not made. */
static void test_resume_options(void **st) {
    (void)st;
    char args[512], csv[256];
    int vals;
    snprintf(args, sizeof args, "--data %s/text --out %s/ev --layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16 "
             "--steps 4 --eval-every 0", g_dir, g_dir);
    assert_int_equal(run(args), 0);
    snprintf(csv, sizeof csv, "%s/ev/log.csv", g_dir);
    assert_true(csv_steps_in_order(csv, &vals));
    assert_int_equal(vals, 0);
    snprintf(args, sizeof args, "--resume --out %s/ev --steps 7 --eval-every 1", g_dir);
    assert_int_equal(run(args), 0);
    assert_true(csv_steps_in_order(csv, &vals));
    assert_int_equal(vals, 3);
    snprintf(args, sizeof args, "--resume --out %s/ev --steps 7", g_dir);
    assert_int_equal(run(args), 2);
    assert_true(output_has("--steps 7"));
    snprintf(args, sizeof args, "--resume --out %s/typo_dir", g_dir);
    assert_int_equal(run(args), 1);
    assert_true(output_has("no checkpoint in"));
    assert_false(output_has(".state.new"));
    snprintf(args, sizeof args, "%s/typo_dir", g_dir);
    assert_int_equal(access(args, F_OK), -1);
    /* weights without their state: the missing file is the one named */
    snprintf(args, sizeof args, "%s/ev/model.safetensors.state", g_dir);
    assert_int_equal(unlink(args), 0);
    snprintf(args, sizeof args, "--resume --out %s/ev --steps 9", g_dir);
    assert_int_equal(run(args), 1);
    assert_true(output_has("model.safetensors.state"));
    assert_false(output_has(".state.new"));
}

/* Start a run into out (8 steps, checkpoints every ckpt_every) that stops itself at the stop
 * point (src/core/test_point.c), kill it there with SIGKILL. */
static void kill_at(const char *out, const char *ckpt_every, const char *point) {
    char data[256];
    snprintf(data, sizeof data, "%s/text", g_dir);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        setenv("LA_TEST_STOP_AT", point, 1);
        execl(g_bin, g_bin, "train", "--data", data, "--out", out, "--layers", "1", "--d-model", "16", "--heads",
              "2", "--batch", "2", "--seq-len", "16", "--steps", "8", "--eval-every", "0", "--ckpt-every", ckpt_every,
              (char *)NULL);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
    assert_true(WIFSTOPPED(status));
    kill(pid, SIGKILL);
    kill(pid, SIGCONT);
    waitpid(pid, &status, 0);
}

/* Killed (SIGKILL) after step 5 with checkpoints every 2 steps: --resume continues from step 4
 * and the log has each step once, in order (the row of step 5 of the killed run is cut).
 * A new run records its data (data.txt) before its first checkpoint is written: killed in
 * the middle of that write, --resume finds both. */
static void test_kill_resume_log(void **st) {
    (void)st;
    char out[256], csv[256], args[512], meta[300];
    int vals;
    snprintf(out, sizeof out, "%s/k9", g_dir);
    snprintf(csv, sizeof csv, "%s/k9/log.csv", g_dir);
    kill_at(out, "2", "train-step:5");
    assert_int_equal(csv_rows(csv), 5);
    snprintf(args, sizeof args, "--resume --out %s", out);
    assert_int_equal(run(args), 0);
    assert_int_equal(csv_rows(csv), 8);
    assert_true(csv_steps_in_order(csv, &vals));
    snprintf(out, sizeof out, "%s/k1", g_dir);
    kill_at(out, "1", "ckpt-rename:1");
    snprintf(meta, sizeof meta, "%s/data.txt", out);
    assert_int_equal(access(meta, F_OK), 0);
    snprintf(args, sizeof args, "--resume --out %s", out);
    assert_int_equal(run(args), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_and_resume),
        cmocka_unit_test(test_resume_elsewhere),
        cmocka_unit_test(test_precision_bf16),
        cmocka_unit_test(test_sigint_saves),
        cmocka_unit_test(test_bad_usage),
        cmocka_unit_test(test_failed_start_keeps_run),
        cmocka_unit_test(test_resume_options),
        cmocka_unit_test(test_kill_resume_log),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
