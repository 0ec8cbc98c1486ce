/* test_cli_attn.c -- `longattn attn` (src/cli/attn.c) run as a program ($LA_BIN, set by
 * tests/run.sh; default build/longattn) on temporary .npy files: the happy path must
 * reproduce the library call bit for bit (same kernel, one thread); bad shapes, bad specs,
 * bad options and missing files must fail with the documented exit code and a message
 * naming the file, the shapes and the rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <math.h>

#include "core/half.h"
#include "core/internal.h"
#include "longattn.h"

static char dir[64];
static const char *bin;

static int setup(void **state) {
    (void)state;
    bin = getenv("LA_BIN");
    if (!bin || !*bin) bin = "build/longattn";
    strcpy(dir, "/tmp/la_cli_attn_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *P(const char *name) {
    static char p[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static char errtext[8192];

/* Run `$LA_BIN attn <args>`; returns the exit code, stderr in errtext. */
static int run_attn(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s attn %s >%s/stdout.txt 2>%s/stderr.txt", bin, args, dir, dir);
    int st = system(cmd);
    errtext[0] = '\0';
    FILE *f = fopen(P("stderr.txt"), "r");
    if (f) {
        size_t n = fread(errtext, 1, sizeof errtext - 1, f);
        errtext[n] = '\0';
        fclose(f);
    }
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void expect_fail(const char *args, int code, const char *f1, const char *f2, const char *f3) {
    int rc = run_attn(args);
    if (rc != code) fail_msg("`attn %s` exited %d, expected %d; stderr: %s", args, rc, code, errtext);
    const char *fr[3] = {f1, f2, f3};
    for (int i = 0; i < 3; i++)
        if (fr[i] && !strstr(errtext, fr[i])) fail_msg("`attn %s`: stderr lacks '%s': %s", args, fr[i], errtext);
}

static float *rand_arr(la_rng *r, size_t n) {
    float *x = malloc(4 * n);
    for (size_t i = 0; i < n; i++) x[i] = (float)la_rng_normal(r);
    return x;
}

static void save(const char *name, const float *x, int nd, const int64_t *shape) {
    assert_int_equal(la_npy_write_f32(P(name), x, nd, shape), LA_OK);
}

static void expect_file_equal(const char *name, const float *want, int nd, const int64_t *shape) {
    float *got;
    int gnd;
    int64_t gs[8];
    if (la_npy_read_f32(P(name), &got, &gnd, gs) != LA_OK) fail_msg("%s: %s", name, la_errmsg());
    assert_int_equal(gnd, nd);
    size_t n = 1;
    for (int i = 0; i < nd; i++) {
        assert_int_equal(gs[i], shape[i]);
        n *= (size_t)shape[i];
    }
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], 4) != 0)
            fail_msg("%s[%zu]: CLI %.9g, library %.9g", name, i, (double)got[i], (double)want[i]);
    free(got);
}

/* Forward + backward with documents, explicit pos0 and per-head logn through the CLI, and
 * the same through the library: identical bits. */
static void test_happy_path_matches_library(void **state) {
    (void)state;
    const int B = 2, H = 4, Hkv = 2, T = 20, S = 33, D = 8;
    la_rng r;
    la_rng_seed(&r, 5);
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * Hkv * S * D;
    float *q = rand_arr(&r, nq), *k = rand_arr(&r, nk), *v = rand_arr(&r, nk), *g = rand_arr(&r, nq);
    float docsf[2 * 33], s_h[4] = {0.3f, 0.4f, 0.5f, 0.6f};
    int32_t docs[2 * 33];
    for (int i = 0; i < B * S; i++) docs[i] = (int32_t)(docsf[i] = (float)((i % S) < 10 + i / S ? 7 : 9));
    const int64_t qs[4] = {B, H, T, D}, ks[4] = {B, Hkv, S, D}, ds[2] = {B, S}, hs[1] = {H};
    save("q.npy", q, 4, qs);
    save("k.npy", k, 4, ks);
    save("v.npy", v, 4, ks);
    save("dout.npy", g, 4, qs);
    save("docs.npy", docsf, 2, ds);
    save("s.npy", s_h, 1, hs);
    const char *spec = "softmax+logn(s=0.5)+rope(theta=500)+window(9)";
    char args[1024];
    snprintf(args, sizeof args,
             "--spec '%s' --q %s --k %s --v %s --out %s --dout %s --pos0 11 --doc-ids %s --logn-s=%s --threads 1 "
             "--stats",
             spec, P("q.npy"), P("k.npy"), P("v.npy"), P("out.npy"), P("dout.npy"), P("docs.npy"), P("s.npy"));
    int rc = run_attn(args);
    if (rc != 0) fail_msg("exit %d: %s", rc, errtext);

    la_spec sp;
    assert_int_equal(la_spec_parse(spec, &sp), LA_OK);
    la_shape sh = {B, H, Hkv, T, S, D, 11};
    float *out = malloc(4 * nq), *lse = malloc(4 * (size_t)B * H * T), *ent = malloc(4 * (size_t)B * H * T);
    float *mass = malloc(4 * (size_t)B * H * S), *dq = malloc(4 * nq), *dk = malloc(4 * nk), *dv = malloc(4 * nk);
    float dls[4];
    la_attn_opts o = la_attn_opts_default();
    o.doc_ids = docs;
    o.logn_s = s_h;
    o.n_threads = 1;
    o.row_entropy = ent;
    o.key_mass = mass;
    assert_int_equal(la_attn_forward(&sp, &sh, q, k, v, out, lse, &o), LA_OK);
    o.row_entropy = o.key_mass = NULL;
    o.dlogn_s = dls;
    assert_int_equal(la_attn_backward(&sp, &sh, q, k, v, out, lse, g, dq, dk, dv, &o), LA_OK);
    const int64_t rs[3] = {B, H, T}, ms[3] = {B, H, S};
    expect_file_equal("out.npy", out, 4, qs);
    expect_file_equal("lse.npy", lse, 3, rs);
    expect_file_equal("entropy.npy", ent, 3, rs);
    expect_file_equal("key_mass.npy", mass, 3, ms);
    expect_file_equal("dq.npy", dq, 4, qs);
    expect_file_equal("dk.npy", dk, 4, ks);
    expect_file_equal("dv.npy", dv, 4, ks);
    expect_file_equal("dlogn_s.npy", dls, 1, hs);
    free(q), free(k), free(v), free(g), free(out), free(lse), free(ent), free(mass), free(dq), free(dk), free(dv);
}

/* --dtype bf16 / f16: the float32 files rounded to the type (nearest even) and run through
 * la_attn_forward_typed / la_attn_backward_typed: identical bits to the library call on the
 * same half arrays; a bad type is a usage error naming the accepted ones. */
static void test_dtype(void **state) {
    (void)state;
    const int B = 1, H = 2, Hkv = 1, T = 70, S = 70, D = 8;
    la_rng r;
    la_rng_seed(&r, 13);
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * Hkv * S * D;
    float *q = rand_arr(&r, nq), *k = rand_arr(&r, nk), *v = rand_arr(&r, nk), *g = rand_arr(&r, nq);
    const int64_t qs[4] = {B, H, T, D}, ks[4] = {B, Hkv, S, D}, rs[3] = {B, H, T};
    save("hq.npy", q, 4, qs), save("hk.npy", k, 4, ks), save("hv.npy", v, 4, ks), save("hg.npy", g, 4, qs);
    uint16_t *h[4] = {malloc(2 * nq), malloc(2 * nk), malloc(2 * nk), malloc(2 * nq)};
    float *out = malloc(4 * nq), *lse = malloc(4 * (size_t)B * H * T), *dq = malloc(4 * nq), *dk = malloc(4 * nk),
          *dv = malloc(4 * nk);
    la_spec sp;
    assert_int_equal(la_spec_parse("softmax+rope+causal", &sp), LA_OK);
    la_shape sh = {B, H, Hkv, T, S, D, LA_POS0_AUTO};
    for (int t = 0; t < 2; t++) {
        la_dtype dt = t ? LA_DTYPE_F16 : LA_DTYPE_BF16;
        const float *src[4] = {q, k, v, g};
        size_t n[4] = {nq, nk, nk, nq};
        for (int i = 0; i < 4; i++)
            if (t) la_cvt_f32_to_f16(h[i], src[i], n[i]);
            else la_cvt_f32_to_bf16(h[i], src[i], n[i]);
        char args[1024];
        snprintf(args, sizeof args, "--spec softmax+rope+causal --q %s --k %s --v %s --out %s --dout %s --dtype %s",
                 P("hq.npy"), P("hk.npy"), P("hv.npy"), P("ho.npy"), P("hg.npy"), la_dtype_name(dt));
        int rc = run_attn(args);
        if (rc != 0) fail_msg("exit %d: %s", rc, errtext);
        la_attn_opts o = la_attn_opts_default();
        o.n_threads = 1;
        assert_int_equal(la_attn_forward_typed(dt, &sp, &sh, h[0], h[1], h[2], out, lse, &o), LA_OK);
        assert_int_equal(la_attn_backward_typed(dt, &sp, &sh, h[0], h[1], h[2], out, lse, h[3], dq, dk, dv, &o),
                         LA_OK);
        expect_file_equal("ho.npy", out, 4, qs);
        expect_file_equal("lse.npy", lse, 3, rs);
        expect_file_equal("dq.npy", dq, 4, qs);
        expect_file_equal("dk.npy", dk, 4, ks);
        expect_file_equal("dv.npy", dv, 4, ks);
    }
    char args[1024];
    snprintf(args, sizeof args, "--spec softmax --q %s --k %s --v %s --out %s --dtype int8", P("hq.npy"), P("hk.npy"),
             P("hv.npy"), P("ho.npy"));
    expect_fail(args, 2, "--dtype 'int8'", "f32, f16 or bf16", NULL);
    snprintf(args, sizeof args, "--spec softmax --q %s --k %s --v %s --out %s --dtype fp8", P("hq.npy"), P("hk.npy"),
             P("hv.npy"), P("ho.npy"));
    expect_fail(args, 2, "--dtype 'fp8'", NULL, NULL);
    for (int i = 0; i < 4; i++) free(h[i]);
    free(q), free(k), free(v), free(g), free(out), free(lse), free(dq), free(dk), free(dv);
}

/* 3-D inputs mean B = 1; outputs keep the rank; default pos0 is S - T. */
static void test_three_d_inputs(void **state) {
    (void)state;
    const int H = 2, T = 3, S = 5, D = 4;
    la_rng r;
    la_rng_seed(&r, 9);
    float *q = rand_arr(&r, H * T * D), *k = rand_arr(&r, H * S * D), *v = rand_arr(&r, H * S * D);
    const int64_t qs[3] = {H, T, D}, ks[3] = {H, S, D}, rs[2] = {H, T};
    save("q3.npy", q, 3, qs);
    save("k3.npy", k, 3, ks);
    save("v3.npy", v, 3, ks);
    char args[1024];
    snprintf(args, sizeof args, "--spec 'sinv+prope' --q %s --k %s --v %s --out %s", P("q3.npy"), P("k3.npy"),
             P("v3.npy"), P("o3.npy"));
    int rc = run_attn(args);
    if (rc != 0) fail_msg("exit %d: %s", rc, errtext);
    la_spec sp;
    assert_int_equal(la_spec_parse("sinv+prope", &sp), LA_OK);
    la_shape sh = {1, H, H, T, S, D, LA_POS0_AUTO};
    float out[24], lse[6];
    la_attn_opts o = la_attn_opts_default();
    o.n_threads = 1;
    assert_int_equal(la_attn_forward(&sp, &sh, q, k, v, out, lse, &o), LA_OK);
    expect_file_equal("o3.npy", out, 3, qs);
    expect_file_equal("lse.npy", lse, 2, rs);
    free(q), free(k), free(v);
}

static void test_bad_shapes(void **state) {
    (void)state;
    la_rng r;
    la_rng_seed(&r, 3);
    float *x = rand_arr(&r, 4096);
    const int64_t q4[4] = {1, 6, 4, 8}, k4[4] = {1, 4, 5, 8}, k4b[4] = {1, 2, 5, 8}, kD[4] = {1, 2, 5, 6},
                  kB[4] = {2, 2, 5, 8}, v4[4] = {1, 2, 6, 8}, m2[2] = {4, 8}, d2[2] = {1, 4}, s1[1] = {3};
    save("bq.npy", x, 4, q4);
    save("bk_h4.npy", x, 4, k4);
    save("bk.npy", x, 4, k4b);
    save("bk_d6.npy", x, 4, kD);
    save("bk_b2.npy", x, 4, kB);
    save("bv_s6.npy", x, 4, v4);
    save("b2d.npy", x, 2, m2);
    save("bdocs.npy", x, 2, d2);
    save("bs.npy", x, 1, s1);
    char a[1024];
#define ARGS(qf, kf, vf, extra)                                                                                  \
    snprintf(a, sizeof a, "--spec 'logn(s=1)' --q %s --k %s --v %s --out %s %s", P(qf), P(kf), P(vf), \
             P("bo.npy"), extra)
    ARGS("bq.npy", "bk_h4.npy", "bk_h4.npy", "");
    expect_fail(a, 1, "H = 6 query heads", "Hkv = 4 kv heads", "H must be a multiple of Hkv");
    ARGS("bq.npy", "bk_d6.npy", "bk_d6.npy", "");
    expect_fail(a, 1, "(1, 6, 4, 8) (D = 8)", "(1, 2, 5, 6) (D = 6)", "same head dimension D");
    ARGS("bq.npy", "bk_b2.npy", "bk_b2.npy", "");
    expect_fail(a, 1, "batch sizes must agree", "bk_b2.npy", NULL);
    ARGS("bq.npy", "bk.npy", "bv_s6.npy", "");
    expect_fail(a, 1, "bv_s6.npy has shape (1, 2, 6, 8)", "k and v must have the same shape", NULL);
    ARGS("b2d.npy", "bk.npy", "bk.npy", "");
    expect_fail(a, 1, "b2d.npy has shape (4, 8) (2 dimensions)", "expected q (B, H, T, D) or (H, T, D)", NULL);
    char extra[300];
    snprintf(extra, sizeof extra, "--dout %s", P("bk.npy"));
    ARGS("bq.npy", "bk.npy", "bk.npy", extra);
    expect_fail(a, 1, "dout must have the shape of q", "(1, 6, 4, 8)", NULL);
    snprintf(extra, sizeof extra, "--doc-ids %s", P("bdocs.npy"));
    ARGS("bq.npy", "bk.npy", "bk.npy", extra);
    expect_fail(a, 1, "bdocs.npy has shape (1, 4)", "(B, S) = (1, 5)", NULL);
    snprintf(extra, sizeof extra, "--logn-s %s", P("bs.npy"));
    ARGS("bq.npy", "bk.npy", "bk.npy", extra);
    expect_fail(a, 1, "bs.npy has shape (3,)", "(H,) = (6,)", NULL);
    /* non-integer document ids */
    const int64_t d15[2] = {1, 5};
    float fd[5] = {0, 0, 0.5f, 1, 1};
    save("bdocs_frac.npy", fd, 2, d15);
    snprintf(extra, sizeof extra, "--doc-ids %s", P("bdocs_frac.npy"));
    ARGS("bq.npy", "bk.npy", "bk.npy", extra);
    expect_fail(a, 1, "entry 2 is 0.5", "whole numbers", NULL);
    free(x);
}

static void test_bad_spec_and_options(void **state) {
    (void)state;
    la_rng r;
    la_rng_seed(&r, 4);
    float *x = rand_arr(&r, 256);
    const int64_t s3[3] = {2, 4, 8};
    save("oq.npy", x, 3, s3);
    char a[1024];
    snprintf(a, sizeof a, "--spec 'softmax+ropee' --q %s --k %s --v %s --out %s", P("oq.npy"), P("oq.npy"),
             P("oq.npy"), P("oo.npy"));
    expect_fail(a, 2, "unknown position 'ropee'", "valid positions: nope, rope", NULL);
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s", P("oq.npy"), P("oq.npy"), P("oq.npy"));
    expect_fail(a, 2, "missing required option --out", NULL, NULL);
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out %s --frobnicate", P("oq.npy"), P("oq.npy"),
             P("oq.npy"), P("oo.npy"));
    expect_fail(a, 2, "unknown option '--frobnicate'", "--spec", NULL);
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out %s --pos0 x1", P("oq.npy"), P("oq.npy"),
             P("oq.npy"), P("oo.npy"));
    expect_fail(a, 2, "--pos0 'x1' is not an integer", NULL, NULL);
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out %s --threads 0", P("oq.npy"), P("oq.npy"),
             P("oq.npy"), P("oo.npy"));
    expect_fail(a, 2, "--threads", NULL, NULL);
    expect_fail("--spec causal --q", 2, "option '--q' needs a value", NULL, NULL);
    expect_fail("--q a --q b", 2, "given twice", NULL, NULL);
    /* --help succeeds and documents the options */
    assert_int_equal(run_attn("--help"), 0);
    FILE *f = fopen(P("stdout.txt"), "r");
    char buf[4096] = {0};
    assert_non_null(f);
    assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    assert_non_null(strstr(buf, "--doc-ids"));
    assert_non_null(strstr(buf, "lse.npy"));
    free(x);
}

static void test_missing_and_bad_files(void **state) {
    (void)state;
    la_rng r;
    la_rng_seed(&r, 4);
    float *x = rand_arr(&r, 256);
    const int64_t s3[3] = {2, 4, 8};
    save("mq.npy", x, 3, s3);
    char a[1024];
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out %s", P("mq.npy"), P("nothere.npy"), P("mq.npy"),
             P("mo.npy"));
    expect_fail(a, 1, "cannot read --k", "nothere.npy", "No such file");
    FILE *f = fopen(P("text.npy"), "w");
    fputs("not numpy\n", f);
    fclose(f);
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out %s", P("text.npy"), P("mq.npy"), P("mq.npy"),
             P("mo.npy"));
    expect_fail(a, 1, "cannot read --q", "not a NumPy .npy file", NULL);
    /* output folder that does not exist: runtime error naming the path, nothing half-written */
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out /nonexistent_la_dir/o.npy", P("mq.npy"),
             P("mq.npy"), P("mq.npy"));
    expect_fail(a, 1, "/nonexistent_la_dir/o.npy", NULL, NULL);
    /* a kernel-level rejection (doc ids with a query outside the keys) is a runtime error */
    const int64_t d1[1] = {4};
    float docs[4] = {0, 0, 1, 1};
    save("mdocs.npy", docs, 1, d1);
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out %s --doc-ids %s --pos0 3", P("mq.npy"),
             P("mq.npy"), P("mq.npy"), P("mo.npy"), P("mdocs.npy"));
    expect_fail(a, 1, "attention forward failed", NULL, NULL);
    free(x);
}

/* --out named like a file written next to it (lse.npy; dk.npy with --dout; key_mass.npy
 * with --stats) is refused before anything is written, so the output is not silently
 * replaced; the same name is fine when the run does not write that file. */
static void test_out_clashes_with_extra_output(void **state) {
    (void)state;
    la_rng r;
    la_rng_seed(&r, 6);
    float *x = rand_arr(&r, 64);
    const int64_t s3[3] = {2, 4, 8};
    save("cq.npy", x, 3, s3);
    char a[1024];
    char dout[300];
    snprintf(dout, sizeof dout, "--dout %s", P("cq.npy"));
    const char *name[3] = {"lse.npy", "dk.npy", "key_mass.npy"}, *extra[3] = {"", dout, "--stats"};
    for (int i = 0; i < 3; i++) {
        remove(P(name[i]));
        snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out %s %s", P("cq.npy"), P("cq.npy"),
                 P("cq.npy"), P(name[i]), extra[i]);
        expect_fail(a, 2, name[i], "give --out another name", NULL);
        assert_null(fopen(P(name[i]), "r")); /* nothing written */
    }
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out %s", P("cq.npy"), P("cq.npy"), P("cq.npy"),
             P("dk.npy"));
    assert_int_equal(run_attn(a), 0);
    /* an input in the folder of --out named like a gradient this run writes: refused, naming
     * the input (dk.npy as --k was overwritten by the gradient before 2026-12-05) */
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out %s %s", P("cq.npy"), P("dk.npy"), P("cq.npy"),
             P("o2.npy"), dout);
    expect_fail(a, 2, "--k", "writes", "dk.npy over it");
    /* a device as --out: its lse.npy would go into /dev */
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out /dev/null", P("cq.npy"), P("cq.npy"), P("cq.npy"));
    expect_fail(a, 2, "/dev/null is not a file", NULL, NULL);
    free(x);
}

/* --dtype f16 with a finite input beyond f16's range names the file, the index, the value
 * and the types that hold it (it used to reach the kernel as "q[...] is inf"); 65510
 * rounds to 65504 and runs. */
static void test_f16_out_of_range(void **state) {
    (void)state;
    la_rng r;
    la_rng_seed(&r, 8);
    float *x = rand_arr(&r, 64);
    const int64_t s3[3] = {2, 4, 8};
    save("fk.npy", x, 3, s3);
    x[1 * 32 + 2 * 8 + 5] = -70000.0f;
    save("fq.npy", x, 3, s3);
    char a[1024];
    snprintf(a, sizeof a, "--spec causal --q %s --k %s --v %s --out %s --dtype f16", P("fq.npy"), P("fk.npy"),
             P("fk.npy"), P("fo.npy"));
    expect_fail(a, 1, "fq.npy: entry (1, 2, 5) is -70000", "f16", "--dtype bf16");
    x[1 * 32 + 2 * 8 + 5] = 65510.0f;
    save("fq.npy", x, 3, s3);
    assert_int_equal(run_attn(a), 0);
    free(x);
}

/* Specs that need something attn has no option for, or options the spec does not use, are
 * usage errors (exit 2) naming the options, not kernel failures naming C fields. */
static void test_spec_needs_and_unused_options(void **state) {
    (void)state;
    la_rng r;
    la_rng_seed(&r, 7);
    float *x = rand_arr(&r, 64), s_h[2] = {0.5f, 0.5f};
    const int64_t s3[3] = {2, 4, 8}, hs[1] = {2};
    save("nq.npy", x, 3, s3);
    save("ns.npy", s_h, 1, hs);
    char a[1024];
#define NARGS(spec, extra)                                                                                     \
    snprintf(a, sizeof a, "--spec '%s' --q %s --k %s --v %s --out %s %s", spec, P("nq.npy"), P("nq.npy"),     \
             P("nq.npy"), P("no.npy"), extra)
    NARGS("sigmoid", "");
    expect_fail(a, 2, "sigmoid(b=", "sigmoid(train=", NULL);
    NARGS("logn", "");
    expect_fail(a, 2, "--logn-s", "logn(s=", NULL);
    NARGS("asentmax", "");
    expect_fail(a, 2, "as_beta", "attn has no option", NULL);
    char extra[300];
    snprintf(extra, sizeof extra, "--logn-s %s", P("ns.npy"));
    NARGS("rope", extra);
    expect_fail(a, 2, "--logn-s", "has no logn", NULL);
    NARGS("logn", extra);
    assert_int_equal(run_attn(a), 0);
#undef NARGS
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_happy_path_matches_library),
        cmocka_unit_test(test_three_d_inputs),
        cmocka_unit_test(test_dtype),
        cmocka_unit_test(test_bad_shapes),
        cmocka_unit_test(test_bad_spec_and_options),
        cmocka_unit_test(test_missing_and_bad_files),
        cmocka_unit_test(test_out_clashes_with_extra_output),
        cmocka_unit_test(test_f16_out_of_range),
        cmocka_unit_test(test_spec_needs_and_unused_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
