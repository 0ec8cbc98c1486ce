/* test_example.c -- the C API page's example: the first ```c block of docs/c-api.md must be
 * examples/attn_example.c byte for byte, and the built program (BUILD/examples/attn_example,
 * BUILD taken from $LA_BIN's folder) must run and print the numbers the double-precision
 * reference gives for the same inputs. Run from the repository root (as `make test` does). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "core/internal.h"
#include "support/ref_attn.h"
#include "support/test_corpus.h"

static char *slurp(const char *path) {
    char *b = la_test_read_file(path, NULL);
    if (!b) fail_msg("cannot read %s (run the tests from the repository root)", path);
    return b;
}

static void test_docs_block_is_the_example(void **state) {
    (void)state;
    char *readme = slurp("docs/c-api.md"), *src = slurp("examples/attn_example.c");
    char *open = strstr(readme, "\n```c\n");
    if (!open) fail_msg("no ```c block in docs/c-api.md");
    open += 6;
    char *close = strstr(open, "\n```\n");
    assert_non_null(close);
    size_t n = (size_t)(close - open) + 1; /* the block includes the file's final newline */
    if (n != strlen(src) || memcmp(open, src, n) != 0)
        fail_msg("docs/c-api.md's C block differs from examples/attn_example.c: copy the file into the page");
    free(readme);
    free(src);
}

static void test_example_runs_and_matches_reference(void **state) {
    (void)state;
    const char *bin = getenv("LA_BIN");
    char build[512] = "build";
    if (bin && strrchr(bin, '/')) snprintf(build, sizeof build, "%.*s", (int)(strrchr(bin, '/') - bin), bin);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s/examples/attn_example", build);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line1[512] = {0}, line2[512] = {0};
    assert_non_null(fgets(line1, sizeof line1, p));
    assert_non_null(fgets(line2, sizeof line2, p));
    assert_int_equal(pclose(p), 0);
    assert_string_equal(line1, "spec softmax+sinv(tau=10)+prope(p=0.5,theta=10000)+causal\n");
    double o, l, g;
    assert_int_equal(sscanf(line2, "out[0,0,T-1,0] = %lf  lse[0,0,T-1] = %lf  dk[0,0,0,0] = %lf", &o, &l, &g), 3);

    /* the same inputs through the reference */
    enum { B = 1, H = 4, HKV = 2, T = 256, S = 256, D = 64 };
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * HKV * S * D;
    double *q = malloc(8 * nq), *dout = malloc(8 * nq), *k = malloc(8 * nk), *v = malloc(8 * nk);
    for (size_t i = 0; i < nq; i++) q[i] = sinf(0.37f * (float)i), dout[i] = cosf(0.11f * (float)i);
    for (size_t i = 0; i < nk; i++) k[i] = cosf(0.23f * (float)i), v[i] = sinf(0.05f * (float)i);
    la_spec sp;
    assert_int_equal(la_spec_parse("softmax+sinv(tau=10)+prope(p=0.5)+causal", &sp), LA_OK);
    la_shape sh = {B, H, HKV, T, S, D, LA_POS0_AUTO};
    double *out = malloc(8 * nq), *lse = malloc(8 * (size_t)B * H * T), *dq = malloc(8 * nq), *dk = malloc(8 * nk),
           *dv = malloc(8 * nk);
    assert_int_equal(ref_attn_forward(&sp, &sh, q, k, v, NULL, out, lse, NULL, NULL), 0);
    assert_int_equal(ref_attn_backward(&sp, &sh, q, k, v, NULL, dout, dq, dk, dv, NULL), 0);
    /* printed with 6 decimals (rounding 5e-7); float32 kernel error ~1e-5 on O(1) values,
     * dk sums 2 heads x 256 queries so allow 1e-3 relative there */
    if (fabs(o - out[(size_t)(T - 1) * D]) > 1e-4 || fabs(l - lse[T - 1]) > 1e-4 ||
        fabs(g - dk[0]) > 1e-3 * (1 + fabs(dk[0])))
        fail_msg("example printed %.6f %.6f %.6f, reference %.6f %.6f %.6f", o, l, g, out[(size_t)(T - 1) * D],
                 lse[T - 1], dk[0]);
    free(q), free(dout), free(k), free(v), free(out), free(lse), free(dq), free(dk), free(dv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docs_block_is_the_example),
        cmocka_unit_test(test_example_runs_and_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
