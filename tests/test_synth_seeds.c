/* test_synth_seeds.c -- several seeds per task x spec (la_synth_opts.seeds, `synth
 * --seeds N`) and the named presets (la_synth_opts_preset). Each (task, spec, seed) run
 * computes exactly what a one-seed run with that seed computes (bitwise: exact-match counts
 * and final loss), the "over the seeds" summary is recomputed here from the per-seed runs
 * (learned = at least 0.5 at 1x; longer lengths over the learned seeds only), a task no
 * seed learned reads "not learned", a resumed run recomputes only its missing cell, and
 * bad values are refused before anything runs. Tiny models, a few seconds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "longattn.h"
#include "support/test_corpus.h"

static char dir[64];

static int setup(void **state) {
    (void)state;
    return la_test_mkdtemp("la_synth_seeds_", dir, sizeof dir);
}

static int teardown(void **state) {
    (void)state;
    la_test_rmtree(dir);
    return 0;
}

/* flipflop (learned within 40 steps) and copy (not), one spec, lengths 1x-4x */
static la_synth_opts tiny(const char *out, uint64_t seed, int seeds) {
    la_synth_opts o = la_synth_opts_default();
    la_synth_opts_quick(&o);
    snprintf(o.specs, sizeof o.specs, "softmax+nape");
    snprintf(o.out, sizeof o.out, "%s/%s", dir, out);
    o.seed = seed;
    o.seeds = seeds;
    o.threads = 1;
    return o;
}

static char *slurp(const char *out, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s/%s", dir, out, name);
    char *buf = la_test_read_file(path, NULL);
    if (!buf) fail_msg("%s is missing", path);
    return buf;
}

static cJSON *results(const char *out) {
    char *t = slurp(out, "results.json");
    cJSON *r = cJSON_Parse(t);
    free(t);
    assert_non_null(r);
    return r;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsNumber(x));
    return x->valuedouble;
}

/* the run of task in a one-seed results.json */
static const cJSON *only_run(const cJSON *root, const char *task) {
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(root, "runs"))
        if (!strcmp(cJSON_GetObjectItem(r, "task")->valuestring, task)) return r;
    fail_msg("no %s run", task);
    return NULL;
}

static uint64_t seen_seeds; /* bit s set when progress named seed s */

static void note_seed(void *user, const la_synth_progress *p) {
    (void)user;
    if (p->seed < 64) seen_seeds |= 1ULL << p->seed;
}

static void test_seeds_equal_one_seed_runs(void **state) {
    (void)state;
    const int K = 3;
    la_synth_opts o = tiny("many", 5, K);
    seen_seeds = 0;
    int n_runs = 0;
    assert_int_equal(la_synth_run(&o, note_seed, NULL, &n_runs), LA_OK);
    assert_int_equal(n_runs, 2 * K);
    assert_true(seen_seeds == ((1ULL << 5) | (1ULL << 6) | (1ULL << 7)));
    cJSON *many = results("many");
    assert_int_equal((int)num(cJSON_GetObjectItem(many, "config"), "seeds"), K);
    const char *tasks[2] = {"flipflop", "copy"};
    for (int ti = 0; ti < 2; ti++) {
        double acc[3][8];
        int n_pts = 0, learned = 0;
        for (int k = 0; k < K; k++) {
            char name[32];
            snprintf(name, sizeof name, "one%d", k);
            if (ti == 0) {
                la_synth_opts o1 = tiny(name, 5 + (uint64_t)k, 1);
                assert_int_equal(la_synth_run(&o1, NULL, NULL, NULL), LA_OK);
            }
            cJSON *one = results(name);
            const cJSON *r1 = only_run(one, tasks[ti]), *rk = NULL, *r;
            cJSON_ArrayForEach(r, cJSON_GetObjectItem(many, "runs"))
                if (!strcmp(cJSON_GetObjectItem(r, "task")->valuestring, tasks[ti]) &&
                    (int)num(r, "seed") == 5 + k) rk = r;
            assert_non_null(rk);
            assert_true(num(r1, "final_loss") == num(rk, "final_loss")); /* bitwise */
            const cJSON *e1 = cJSON_GetObjectItem(r1, "eval"), *ek = cJSON_GetObjectItem(rk, "eval");
            n_pts = cJSON_GetArraySize(e1);
            assert_int_equal(cJSON_GetArraySize(ek), n_pts);
            for (int j = 0; j < n_pts; j++) {
                assert_int_equal((int)num(cJSON_GetArrayItem(e1, j), "correct"),
                                 (int)num(cJSON_GetArrayItem(ek, j), "correct"));
                acc[k][j] = num(cJSON_GetArrayItem(ek, j), "correct") / num(cJSON_GetArrayItem(ek, j), "n");
            }
            learned += acc[k][0] >= 0.5;
            cJSON_Delete(one);
        }
        /* the summary, recomputed: learned count, ID over all seeds, the rest over learned */
        const cJSON *g = NULL, *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(many, "over_seeds"))
            if (!strcmp(cJSON_GetObjectItem(x, "task")->valuestring, tasks[ti])) g = x;
        assert_non_null(g);
        assert_int_equal((int)num(g, "seeds"), K);
        assert_int_equal((int)num(g, "learned"), learned);
        double m = (acc[0][0] + acc[1][0] + acc[2][0]) / 3;
        assert_true(fabs(num(g, "id_mean") - m) < 1e-12);
        double sd = sqrt((pow(acc[0][0] - m, 2) + pow(acc[1][0] - m, 2) + pow(acc[2][0] - m, 2)) / 2);
        assert_true(fabs(num(g, "id_sd") - sd) < 1e-12);
        const cJSON *pts = cJSON_GetObjectItem(g, "learned_eval");
        for (int j = 0; j < n_pts; j++) {
            double s = 0;
            int n = 0;
            for (int k = 0; k < K; k++)
                if (acc[k][0] >= 0.5) s += acc[k][j], n++;
            const cJSON *p = cJSON_GetArrayItem(pts, j);
            assert_int_equal((int)num(p, "n_seeds"), n);
            if (n) assert_true(fabs(num(p, "mean") - s / n) < 1e-12);
        }
        if (ti == 0) assert_int_equal(learned, K); /* the test needs one learned task ... */
        else assert_int_equal(learned, 0);         /* ... and one that is not */
    }
    cJSON_Delete(many);
    char *md = slurp("many", "results.md");
    assert_non_null(strstr(md, "| seed |"));
    assert_non_null(strstr(md, "Over the seeds (5..7)"));
    assert_non_null(strstr(md, "| copy | `softmax+nape` | 3 | 0 | 0.00 ± 0.00 | not learned | not learned |"));
    free(md);
    char *csv = slurp("many", "results.csv");
    assert_non_null(strstr(csv, ",final_loss,seed\n"));
    free(csv);
    char *dat = slurp("many", "synth_flipflop.dat");
    assert_non_null(strstr(dat, "softmax+nape (3/3 learned)\tstd"));
    free(dat);
}

/* A resumed run keeps the saved cells and recomputes a missing one to the same numbers. */
static void test_seeds_resume(void **state) {
    (void)state;
    la_synth_opts o = tiny("res", 5, 2);
    snprintf(o.tasks, sizeof o.tasks, "flipflop");
    assert_int_equal(la_synth_run(&o, NULL, NULL, NULL), LA_OK);
    char *before = slurp("res", "results.csv"), path[256];
    snprintf(path, sizeof path, "%s/res/cells/flipflop_1_softmax_nape_seed6.json", dir);
    assert_int_equal(access(path, F_OK), 0); /* one cell per seed, named by it */
    assert_int_equal(unlink(path), 0);
    o.resume = 1;
    int n_runs = 0;
    assert_int_equal(la_synth_run(&o, NULL, NULL, &n_runs), LA_OK);
    assert_int_equal(n_runs, 2);
    assert_int_equal(access(path, F_OK), 0);
    char *after = slurp("res", "results.csv");
    /* equal but for train_s (column 10), which is a wall time */
    char *a = before, *b = after;
    for (int line = 0; *a && *b; line++) {
        char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        assert_non_null(ea), assert_non_null(eb);
        *ea = *eb = '\0';
        char fa[12][64] = {{0}}, fb[12][64] = {{0}};
        int na = 0, nb = 0;
        for (char *t = strtok(a, ","); t && na < 12; t = strtok(NULL, ",")) snprintf(fa[na++], 64, "%s", t);
        for (char *t = strtok(b, ","); t && nb < 12; t = strtok(NULL, ",")) snprintf(fb[nb++], 64, "%s", t);
        assert_int_equal(na, nb);
        for (int i = 0; i < na; i++)
            if (line == 0 || i != 9) assert_string_equal(fa[i], fb[i]);
        a = ea + 1, b = eb + 1;
    }
    assert_true(!*a && !*b);
    free(before), free(after);
    /* other options: refused, naming the difference */
    o.seeds = 3;
    assert_int_equal(la_synth_run(&o, NULL, NULL, NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "seeds"));
}

static void test_bad_seeds_and_presets(void **state) {
    (void)state;
    la_synth_opts o = tiny("never", 1, 0);
    assert_int_equal(la_synth_validate(&o), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "seeds must be 1..16, got 0"));
    o.seeds = LA_SYNTH_MAX_SEEDS + 1;
    assert_int_equal(la_synth_run(&o, NULL, NULL, NULL), LA_EINVAL);
    char path[128];
    snprintf(path, sizeof path, "%s/never", dir);
    assert_int_not_equal(access(path, F_OK), 0); /* refused before anything was made */
    o = la_synth_opts_default();
    assert_int_equal(o.seeds, 1);
    assert_int_equal(la_synth_opts_preset(&o, "nope"), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "known: mq-contrast"));
    assert_int_equal(la_synth_opts_preset(NULL, "mq-contrast"), LA_EINVAL);
    assert_int_equal(la_synth_opts_preset(&o, "mq-contrast"), LA_OK);
    assert_string_equal(o.tasks, "mqmtar");
    assert_string_equal(o.specs, "softmax+prope(p=0.25);asentmax+prope(p=0.25)");
    assert_int_equal(o.mq_layout, LA_MQ_INLINE);
    assert_int_equal(o.seeds, 3);
    assert_int_equal(o.steps, 12000);
    assert_int_equal(o.max_mult, 64);
    assert_int_equal(la_synth_validate(&o), LA_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seeds_equal_one_seed_runs),
        cmocka_unit_test(test_seeds_resume),
        cmocka_unit_test(test_bad_seeds_and_presets),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
