/* test_bench_cli.c -- `longattn bench attn --quick --json` (bench/bench_attn.c, the
 * dispatcher bench/bench_main.c): the JSON parses and has every documented key, the rows are
 * the documented ones, and the exact visible-pair counts behind the GFLOP/s are right.
 * Timing values are only checked to be positive and consistent (speed is never asserted). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

static const char *bin(void) {
    const char *b = getenv("LA_BIN");
    return b ? b : "build/longattn";
}

static int run_status(const char *args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>&1", bin(), args);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* stdout of the command (progress goes to stderr), NUL-terminated; NULL on failure */
static char *run_capture(const char *args, int *status) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", bin(), args);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int rc = pclose(p);
    *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    return buf;
}

/* visible pairs of one head, written out by hand: causal T(T+1)/2; window(w) at T keys:
 * 1 + 2 + ... + w for the first w queries, then w each */
static double causal_pairs(int T) { return T * (T + 1.0) / 2; }
static double window_pairs(int T, int w) { return w * (w + 1.0) / 2 + (double)(T - w) * w; }

static void test_quick_json(void **st) {
    (void)st;
    int status;
    char *out = run_capture("bench attn --quick --json", &status);
    assert_non_null(out);
    assert_int_equal(status, 0);
    cJSON *root = cJSON_Parse(out);
    assert_non_null(root);
    cJSON *sg = cJSON_GetObjectItem(root, "sgemm_gflops");
    assert_true(cJSON_IsNumber(sg) && sg->valuedouble > 0);
    /* the measured FMA peak (bench/bench_peak.c), at the start and the end; the figure used
     * is the better of the two, and the vector width is one of the three builds' */
    cJSON *pk = cJSON_GetObjectItem(root, "fma_peak_gflops"), *pk0 = cJSON_GetObjectItem(root, "fma_peak_gflops_start"),
          *pk1 = cJSON_GetObjectItem(root, "fma_peak_gflops_end"), *lanes = cJSON_GetObjectItem(root, "fma_peak_lanes");
    assert_true(cJSON_IsNumber(pk) && pk->valuedouble > 0);
    assert_true(cJSON_IsNumber(pk0) && pk0->valuedouble > 0 && cJSON_IsNumber(pk1) && pk1->valuedouble > 0);
    assert_true(pk->valuedouble == (pk0->valuedouble > pk1->valuedouble ? pk0->valuedouble : pk1->valuedouble));
    assert_true(cJSON_IsNumber(lanes) && (lanes->valueint == 16 || lanes->valueint == 8 || lanes->valueint == 1));
    cJSON *rows = cJSON_GetObjectItem(root, "rows");
    assert_true(cJSON_IsArray(rows));
    /* quick: per T in {128, 256}: causal fwd, sinv+prope fwd, entmax-1.5 fwd, sink fwd,
     * sigmoid fwd (issue 31), then the same five fwd+bwd; then window(64) at 1024 fwd, fwd+bwd;
     * then the 8 reduced-precision rows below */
    assert_int_equal(cJSON_GetArraySize(rows), 30);
    static const char *specs[] = {"softmax+causal", "softmax+sinv(tau=10)+prope(p=0.5)+causal",
                                  "entmax(alpha=1.5)+causal", "softmax+sink+causal", "sigmoid(b=-8)+causal"};
    for (int i = 0; i < 22; i++) {
        cJSON *r = cJSON_GetArrayItem(rows, i);
        cJSON *spec = cJSON_GetObjectItem(r, "spec"), *T = cJSON_GetObjectItem(r, "T"), *pass = cJSON_GetObjectItem(r, "pass"),
              *gf = cJSON_GetObjectItem(r, "gflops"), *sec = cJSON_GetObjectItem(r, "seconds"),
              *xb = cJSON_GetObjectItem(r, "extra_bytes"), *pairs = cJSON_GetObjectItem(r, "pairs");
        assert_true(cJSON_IsString(spec) && cJSON_IsNumber(T) && cJSON_IsString(pass));
        assert_true(cJSON_IsNumber(gf) && cJSON_IsNumber(sec) && cJSON_IsNumber(xb) && cJSON_IsNumber(pairs));
        int bwd = i < 20 ? (i % 10) / 5 : i % 2;
        assert_string_equal(pass->valuestring, bwd ? "fwd+bwd" : "fwd");
        double want;
        cJSON *ms = cJSON_GetObjectItem(r, "mean_support"), *zf = cJSON_GetObjectItem(r, "zero_fraction");
        if (i < 20) {
            int Ti = i < 10 ? 128 : 256;
            assert_int_equal(T->valueint, Ti);
            assert_string_equal(spec->valuestring, specs[i % 5]);
            want = 8 * causal_pairs(Ti);
            if (i % 5 == 2) { /* entmax rows carry support statistics */
                assert_true(cJSON_IsNumber(ms) && ms->valuedouble >= 1 && ms->valuedouble <= Ti);
                assert_true(cJSON_IsNumber(zf) && zf->valuedouble >= 0 && zf->valuedouble < 1);
                /* zero fraction = 1 - (support summed over rows) / visible pairs */
                double rows_n = 8.0 * Ti;
                assert_true(fabs(zf->valuedouble - (1 - ms->valuedouble * rows_n / want)) <= 1e-9);
            } else {
                assert_null(ms);
            }
        } else {
            assert_int_equal(T->valueint, 1024);
            assert_string_equal(spec->valuestring, "softmax+window(64)");
            want = 8 * window_pairs(1024, 64);
        }
        assert_true(pairs->valuedouble == want);
        assert_true(sec->valuedouble > 0 && gf->valuedouble > 0);
        /* gflops = pairs * (4 or 10) * D / seconds */
        double expect = want * (bwd ? 10 : 4) * 64 / sec->valuedouble / 1e9;
        assert_true(fabs(gf->valuedouble - expect) <= 1e-9 * expect);
        /* each row as a fraction of both baselines of the same run */
        cJSON *vs = cJSON_GetObjectItem(r, "vs_sgemm"), *vp = cJSON_GetObjectItem(r, "vs_peak");
        assert_true(cJSON_IsNumber(vs) && cJSON_IsNumber(vp));
        assert_true(fabs(vs->valuedouble - gf->valuedouble / sg->valuedouble) <= 1e-9 * vs->valuedouble);
        assert_true(fabs(vp->valuedouble - gf->valuedouble / pk->valuedouble) <= 1e-9 * vp->valuedouble);
        /* peak RSS probe: available on Linux; a few MiB at most at these sizes under ASan too */
        assert_true(xb->valuedouble >= 0 && xb->valuedouble < 256.0 * 1024 * 1024);
        assert_string_equal(cJSON_GetObjectItem(r, "dtype")->valuestring, "f32");
        assert_null(cJSON_GetObjectItem(r, "vs_f32"));
    }
    /* then per T in {128, 256}: softmax+causal with bf16 inputs fwd, fwd+bwd, then f16, each
     * with its time against the float32 kernel (interleaved calls) */
    for (int i = 22; i < 30; i++) {
        cJSON *r = cJSON_GetArrayItem(rows, i);
        int j = i - 22, Ti = j < 4 ? 128 : 256, bwd = j % 2;
        assert_string_equal(cJSON_GetObjectItem(r, "spec")->valuestring, "softmax+causal");
        assert_int_equal(cJSON_GetObjectItem(r, "T")->valueint, Ti);
        assert_string_equal(cJSON_GetObjectItem(r, "pass")->valuestring, bwd ? "fwd+bwd" : "fwd");
        assert_string_equal(cJSON_GetObjectItem(r, "dtype")->valuestring, (j % 4) < 2 ? "bf16" : "f16");
        cJSON *vf = cJSON_GetObjectItem(r, "vs_f32");
        assert_true(cJSON_IsNumber(vf) && vf->valuedouble > 0);
        assert_true(cJSON_GetObjectItem(r, "pairs")->valuedouble == 8 * causal_pairs(Ti));
    }
    cJSON *tg = cJSON_GetObjectItem(root, "targets");
    assert_true(cJSON_IsArray(tg) && cJSON_GetArraySize(tg) == 8);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(tg, 6), "name")->valuestring, "bf16_fwd_vs_f32");
    for (int i = 0; i < 8; i++) {
        cJSON *t = cJSON_GetArrayItem(tg, i);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(t, "name")));
        assert_true(cJSON_IsBool(cJSON_GetObjectItem(t, "pass")));
    }
    cJSON_Delete(root);
    free(out);
}

static void test_dispatcher_and_options(void **st) {
    (void)st;
    assert_int_equal(run_status("bench"), 2);             /* no benchmark named */
    assert_int_equal(run_status("bench --help"), 0);
    assert_int_equal(run_status("bench nosuch"), 2);
    assert_int_equal(run_status("bench attn --threads 0"), 2);
    assert_int_equal(run_status("bench attn --threads x"), 2);
    assert_int_equal(run_status("bench attn --bogus"), 2);
    assert_int_equal(run_status("bench attn --help"), 0);
    int status;
    char *out = run_capture("bench --help", &status);
    assert_non_null(strstr(out, "attn"));
    free(out);
}

/* the text table: both baselines printed at the start and the end, and a /sgemm and a
 * /peak column on every row */
static void test_quick_text(void **st) {
    (void)st;
    int status;
    char *out = run_capture("bench attn --quick", &status);
    assert_non_null(out);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "FMA peak at the start: "));
    assert_non_null(strstr(out, "FMA peak at the end: "));
    assert_non_null(strstr(out, "sgemm 256^3 at the start: "));
    char *hdr = strstr(out, "\nspec ");
    assert_non_null(hdr);
    char *eol = strchr(hdr + 1, '\n');
    assert_non_null(eol);
    *eol = 0;
    assert_non_null(strstr(hdr, "/sgemm"));
    assert_non_null(strstr(hdr, "/peak"));
    /* 30 rows, each with two ratio fields "<x.xx>x" */
    int rows = 0;
    for (char *line = eol + 1; line && *line && *line != '\n'; ) {
        char *next = strchr(line, '\n');
        if (next) *next = 0;
        int nx = 0;
        for (char *p = line; (p = strstr(p, "x ")) != NULL; p++) nx++;
        assert_true(nx >= 2);
        rows++;
        line = next ? next + 1 : NULL;
    }
    assert_int_equal(rows, 30);
    free(out);
}

/* `bench train --json` on a tiny model: every documented key, the FLOP count worked out by
 * hand (bench_train.c's header), PyTorch skipped with a reason when asked not to run it. */
static void test_train_json(void **st) {
    (void)st;
    int status;
    char *out = run_capture("bench train --layers 1 --d-model 32 --heads 2 --seq-len 16 --batch 2 "
                            "--steps 1 --rounds 2 --no-torch --json", &status);
    assert_non_null(out);
    assert_int_equal(status, 0);
    cJSON *root = cJSON_Parse(out);
    assert_non_null(root);
    const char *keys[] = {"tokens_per_s", "step_s", "attention_share", "matmul_share", "flops_per_step",
                          "gflops", "fma_peak_gflops", "peak_fraction", "tokens_per_cpu_s"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        cJSON *v = cJSON_GetObjectItem(root, keys[i]);
        assert_true(cJSON_IsNumber(v));
        assert_true(v->valuedouble >= 0);
    }
    /* C = 32, 2 heads of D = 16, d_ff 128, vocab 256, N = 2 x 16 tokens:
     * matrices per layer C(HD) + 2 C(KD) + (HD)C + 2 C F = 1024 + 2048 + 1024 + 8192, LM head
     * C V = 8192: 20480 weights, 6 N flops each; attention 12 D per causal pair,
     * 16*17/2 pairs per head and sequence, 2 sequences, 2 heads, 1 layer */
    double mm = 6.0 * 32 * 20480, at = 12.0 * 16 * (16 * 17 / 2) * 2 * 2;
    assert_float_equal(cJSON_GetObjectItem(root, "flops_matmul_per_step")->valuedouble, mm, 0.5);
    assert_float_equal(cJSON_GetObjectItem(root, "flops_attention_per_step")->valuedouble, at, 0.5);
    assert_float_equal(cJSON_GetObjectItem(root, "flops_per_step")->valuedouble, mm + at, 0.5);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(root, "torch")));
    assert_string_equal(cJSON_GetObjectItem(root, "torch_skipped")->valuestring, "--no-torch");
    cJSON *cfg = cJSON_GetObjectItem(root, "config");
    assert_int_equal(cJSON_GetObjectItem(cfg, "rounds")->valueint, 2);
    cJSON_Delete(root);
    free(out);
    /* a spec the PyTorch script does not implement is named, not silently compared */
    out = run_capture("bench train --layers 1 --d-model 32 --heads 2 --seq-len 16 --batch 2 --steps 1 "
                      "--rounds 1 --spec softmax+alibi+causal", &status);
    assert_non_null(out);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "PyTorch not measured: bench/torch_train.py implements"));
    free(out);
    /* --precision bf16: the float32 trainer timed in the same rounds, and the ratio */
    out = run_capture("bench train --layers 1 --d-model 32 --heads 2 --seq-len 16 --batch 2 --steps 1 "
                      "--rounds 2 --no-torch --precision bf16 --json", &status);
    assert_non_null(out);
    assert_int_equal(status, 0);
    root = cJSON_Parse(out);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "config"), "precision")->valuestring, "bf16");
    cJSON *f32 = cJSON_GetObjectItem(root, "f32");
    double tps = cJSON_GetObjectItem(root, "tokens_per_s")->valuedouble,
           ftps = cJSON_GetObjectItem(f32, "tokens_per_s")->valuedouble;
    assert_true(ftps > 0);
    assert_float_equal(cJSON_GetObjectItem(f32, "ratio")->valuedouble, tps / ftps, 1e-3 * tps / ftps + 1e-4);
    cJSON_Delete(root);
    free(out);
    assert_int_equal(run_status("bench train --precision f16"), 2);
    /* a bad spec or model shape is a usage error as in train (exit 1 before 2026-12-05) */
    assert_int_equal(run_status("bench train --spec softmax+bogus --no-torch"), 2);
    assert_int_equal(run_status("bench train --heads 3 --no-torch"), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quick_json),
        cmocka_unit_test(test_quick_text),
        cmocka_unit_test(test_dispatcher_and_options),
        cmocka_unit_test(test_train_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
