/* test_kv_eval_run.c -- the KV-cache policy evaluation as a library call (la_kv_eval_run,
 * src/runner/kv_eval_run.c): one progress point per (policy, length) through the callback,
 * the output files, and errors as statuses (LA_EINVAL for bad options, LA_ESPEC for a
 * policy that does not parse) before anything is written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/internal.h"
#include "longattn.h"
#include "support/test_corpus.h"

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/la_kv_eval_run_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    la_rng r;
    la_rng_seed(&r, 3);
    static const char *words[] = {"attention ", "cache ", "key ", "value ", "token ", "the ", "of ", "\n"};
    char path[256];
    snprintf(path, sizeof path, "%s/docs", g_dir);
    if (mkdir(path, 0777)) return -1;
    for (int f = 0; f < 2; f++) {
        snprintf(path, sizeof path, "%s/docs/d%d.txt", g_dir, f);
        FILE *fp = fopen(path, "w");
        if (!fp) return -1;
        for (int w = 0; w < 300; w++) fputs(words[la_rng_below(&r, 8)], fp);
        fclose(fp);
    }
    la_model_config cfg = la_model_config_default();
    cfg.n_layer = 1, cfg.n_head = 2, cfg.d_model = 16, cfg.vocab = 256, cfg.train_len = 16;
    snprintf(cfg.spec, sizeof cfg.spec, "softmax+rope+causal");
    la_model *m = NULL;
    if (la_model_new(&cfg, 5, &m) != LA_OK) return -1;
    snprintf(path, sizeof path, "%s/m.safetensors", g_dir);
    la_status s = la_model_save(m, path);
    la_model_free(m);
    return s == LA_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

typedef struct {
    int points, notes;
    double worst_bits;
} seen;

static void on_progress(void *user, const la_kv_eval_progress *p) {
    seen *s = user;
    if (p->event == LA_KV_EVAL_NOTE) {
        s->notes++;
        return;
    }
    s->points++;
    assert_non_null(p->policy);
    assert_true(isfinite(p->bits) && p->bits > 0);
    assert_true(p->hits <= p->n_passkey && p->digit_hits <= p->n_digits);
    assert_true(p->cache_tokens >= 1 && p->cache_tokens <= p->len);
}

static la_kv_eval_opts opts(const char *out_name, char *ckpt, char *data, char *out) {
    la_kv_eval_opts o = la_kv_eval_opts_default();
    sprintf(ckpt, "%s/m.safetensors", g_dir);
    sprintf(data, "%s/docs", g_dir);
    sprintf(out, "%s/%s", g_dir, out_name);
    o.ckpt = ckpt, o.data = data, o.out = out;
    o.lens[0] = 16, o.lens[1] = 32, o.n_lens = 2;
    o.policies = "full;window(8)";
    o.windows = 1;
    o.trials = 0;
    return o;
}

static void test_run_reports_points(void **state) {
    (void)state;
    char ckpt[128], data[128], out[128], path[200];
    la_kv_eval_opts o = opts("out", ckpt, data, out);
    seen s = {0};
    assert_int_equal(la_kv_eval_run(&o, on_progress, &s), LA_OK);
    assert_int_equal(s.points, 4); /* 2 policies x 2 lengths */
    assert_int_equal(s.notes, 0);
    const char *files[] = {"kv_eval.csv", "kv_eval.md", "kv_eval.dat", "kv_eval.gp", "kv_eval.png"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", out, files[i]);
        if (access(path, F_OK)) fail_msg("%s missing", path);
    }
    snprintf(path, sizeof path, "%s/kv_eval.gp.log", out);
    assert_int_not_equal(access(path, F_OK), 0);
    /* passkey asked for at lengths too short for an example: a note says so and the CSV
     * counts the examples run there, 0 (it wrote the requested count before 2026-12-05) */
    o = opts("short", ckpt, data, out);
    o.trials = 2;
    s = (seen){0};
    assert_int_equal(la_kv_eval_run(&o, on_progress, &s), LA_OK);
    assert_int_equal(s.notes, 1);
    snprintf(path, sizeof path, "%s/kv_eval.csv", out);
    char *csv = la_test_read_file(path, NULL);
    assert_non_null(csv);
    assert_non_null(strstr(csv, "nan,nan,0,")); /* accuracy nan over 0 examples run */
    assert_null(strstr(csv, "nan,nan,2,"));     /* no row claims the 2 asked for */
    free(csv);
}

static void test_errors(void **state) {
    (void)state;
    char ckpt[128], data[128], out[128], path[200];
    la_kv_eval_opts o = opts("bad", ckpt, data, out);
    o.policies = "full;bogus(3)";
    assert_int_equal(la_kv_eval_run(&o, NULL, NULL), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "bogus"));
    o.policies = ";;";
    assert_int_equal(la_kv_eval_run(&o, NULL, NULL), LA_ESPEC);
    o = opts("bad", ckpt, data, out);
    o.lens[1] = 8; /* not increasing */
    assert_int_equal(la_kv_eval_run(&o, NULL, NULL), LA_EINVAL);
    o = opts("bad", ckpt, data, out);
    o.ckpt = NULL;
    assert_int_equal(la_kv_eval_run(&o, NULL, NULL), LA_EINVAL);
    o = opts("bad", ckpt, data, out);
    o.passkey_ckpt = "/nonexistent/pk.safetensors";
    assert_int_not_equal(la_kv_eval_run(&o, NULL, NULL), LA_OK);
    assert_non_null(strstr(la_errmsg(), "/nonexistent/pk.safetensors"));
    snprintf(path, sizeof path, "%s/bad", g_dir);
    assert_int_not_equal(access(path, F_OK), 0); /* nothing written */
    assert_int_equal(la_kv_eval_run(NULL, NULL, NULL), LA_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_reports_points),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
