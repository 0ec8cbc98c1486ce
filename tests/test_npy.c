/* test_npy.c -- NumPy .npy float32 reading and writing (src/io/npy.c): bit-exact round
 * trips, byte-exact agreement with the header NumPy writes, versions 2.0/3.0, and one
 * fault test per way a file can be wrong. The expected bytes were produced by
 * np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3)) (NumPy 1.x/2.x agree). */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <math.h>

#include "core/internal.h"
#include "longattn.h"

static char dir[64];

static int setup(void **state) {
    (void)state;
    strcpy(dir, "/tmp/la_npy_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static size_t read_bytes(const char *path, unsigned char *b, size_t cap) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(b, 1, cap, f);
    fclose(f);
    return n;
}

/* A .npy file with the given version and header dict (padded NumPy-style) and data. */
static size_t make_npy(unsigned char *out, int major, const char *dict, const void *data, size_t nbytes) {
    size_t pre = major == 1 ? 10 : 12, len = strlen(dict);
    size_t total = (pre + len + 1 + 63) / 64 * 64, hlen = total - pre;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major;
    out[7] = 0;
    out[8] = (unsigned char)(hlen & 0xff);
    out[9] = (unsigned char)(hlen >> 8);
    if (major != 1) out[10] = out[11] = 0;
    memcpy(out + pre, dict, len);
    memset(out + pre + len, ' ', hlen - len - 1);
    out[total - 1] = '\n';
    memcpy(out + total, data, nbytes);
    return total + nbytes;
}

static void expect_read_error(const char *path, la_status want, const char *frag1, const char *frag2) {
    float *d = (float *)0x1;
    int nd = -7;
    int64_t shape[8];
    la_status st = la_npy_read_f32(path, &d, &nd, shape);
    if (st != want) fail_msg("%s: expected %s, got %s (%s)", path, la_status_name(want), la_status_name(st), la_errmsg());
    assert_true(d == (float *)0x1 && nd == -7); /* outputs untouched on error */
    if (frag1 && !strstr(la_errmsg(), frag1)) fail_msg("message lacks '%s': %s", frag1, la_errmsg());
    if (frag2 && !strstr(la_errmsg(), frag2)) fail_msg("message lacks '%s': %s", frag2, la_errmsg());
}

static void test_bytes_match_numpy(void **state) {
    (void)state;
    const float x[6] = {0, 1, 2, 3, 4, 5};
    const int64_t shape[2] = {2, 3};
    const char *p = tmp("a.npy");
    assert_int_equal(la_npy_write_f32(p, x, 2, shape), LA_OK);
    unsigned char got[256], want[256];
    size_t n = read_bytes(p, got, sizeof got);
    size_t m = make_npy(want, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", x, sizeof x);
    assert_int_equal(n, 128 + 24);
    assert_int_equal(n, m);
    assert_memory_equal(got, want, n);
    /* NumPy writes a 1-tuple as (5,) and a scalar as () */
    const int64_t s1[1] = {5};
    assert_int_equal(la_npy_write_f32(p, x, 1, s1), LA_OK);
    n = read_bytes(p, got, sizeof got);
    assert_non_null(memmem(got, n, "'shape': (5,), }", 16));
    assert_int_equal(la_npy_write_f32(p, x, 0, NULL), LA_OK);
    n = read_bytes(p, got, sizeof got);
    assert_non_null(memmem(got, n, "'shape': (), }", 14));
    assert_int_equal(n, 128 + 4); /* 10 + 58 + 1 header bytes pad to 128 */
    /* no temp file left behind by the atomic write */
    char tmpname[300];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld", p, (long)getpid());
    assert_int_not_equal(access(tmpname, F_OK), 0);
}

static void test_round_trip_bit_exact(void **state) {
    (void)state;
    la_rng r;
    la_rng_seed(&r, 7);
    const int64_t shapes[][8] = {{0}, {1}, {17}, {3, 5}, {2, 3, 4, 5}, {1, 1, 1, 1, 1, 1, 1, 2}, {4, 0, 3}};
    const int ndims[] = {0, 1, 1, 2, 4, 8, 3};
    for (size_t c = 0; c < sizeof ndims / sizeof ndims[0]; c++) {
        int64_t count = 1;
        for (int i = 0; i < ndims[c]; i++) count *= shapes[c][i];
        float *x = malloc((size_t)(count > 0 ? count : 1) * 4);
        for (int64_t i = 0; i < count; i++) x[i] = (float)la_rng_normal(&r);
        if (count > 4) {
            x[0] = -0.0f;
            x[1] = INFINITY;
            x[2] = NAN;
            x[3] = 1e-45f; /* denormal */
        }
        const char *p = tmp("rt.npy");
        assert_int_equal(la_npy_write_f32(p, x, ndims[c], shapes[c]), LA_OK);
        float *y = NULL;
        int nd = -1;
        int64_t shape[8];
        assert_int_equal(la_npy_read_f32(p, &y, &nd, shape), LA_OK);
        assert_int_equal(nd, ndims[c]);
        for (int i = 0; i < nd; i++) assert_int_equal(shape[i], shapes[c][i]);
        assert_non_null(y);
        if (count) assert_memory_equal(x, y, (size_t)count * 4);
        free(x);
        free(y);
    }
}

static void test_reads_versions_2_and_3(void **state) {
    (void)state;
    const float x[4] = {1.5f, -2, 3, 4};
    unsigned char b[512];
    /* keys in another order, no trailing comma, extra spaces: still a valid dict */
    size_t n = make_npy(b, 2, "{'shape': (2,2), 'fortran_order' : False, 'descr': '<f4'}", x, sizeof x);
    write_bytes(tmp("v2.npy"), b, n);
    float *y;
    int nd;
    int64_t shape[8];
    assert_int_equal(la_npy_read_f32(tmp("v2.npy"), &y, &nd, shape), LA_OK);
    assert_int_equal(nd, 2);
    assert_true(shape[0] == 2 && shape[1] == 2);
    assert_memory_equal(x, y, sizeof x);
    free(y);
    n = make_npy(b, 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", x, sizeof x);
    write_bytes(tmp("v3.npy"), b, n);
    assert_int_equal(la_npy_read_f32(tmp("v3.npy"), &y, &nd, shape), LA_OK);
    assert_int_equal(nd, 1);
    assert_int_equal(shape[0], 4);
    assert_memory_equal(x, y, sizeof x);
    free(y);
}

static void test_fault_missing_file(void **state) {
    (void)state;
    expect_read_error(tmp("does_not_exist.npy"), LA_EIO, "does_not_exist.npy", "No such file");
    expect_read_error(dir, LA_EIO, "not a regular file", NULL); /* a folder */
    /* a FIFO without a writer: refused at once (the open blocked forever; the alarm turns a
     * hang into a failure) */
    assert_int_equal(mkfifo(tmp("fifo.npy"), 0600), 0);
    alarm(10);
    expect_read_error(tmp("fifo.npy"), LA_EIO, "fifo.npy is not a regular file", NULL);
    alarm(0);
    const float x[1] = {1};
    const int64_t s[1] = {1};
    assert_int_equal(la_npy_write_f32("/nonexistent_la_dir/x.npy", x, 1, s), LA_EIO);
    assert_non_null(strstr(la_errmsg(), "/nonexistent_la_dir/x.npy"));
}

static void test_fault_bad_magic(void **state) {
    (void)state;
    write_bytes(tmp("text.npy"), "hello, this is not numpy at all\n", 32);
    expect_read_error(tmp("text.npy"), LA_EFORMAT, "text.npy is not a NumPy .npy file", "bad magic");
    write_bytes(tmp("empty.npy"), "", 0);
    expect_read_error(tmp("empty.npy"), LA_EFORMAT, "bad magic", NULL);
    unsigned char b[256];
    const float x[1] = {0};
    size_t n = make_npy(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", x, 4);
    b[6] = 9; /* version 9.0 */
    write_bytes(tmp("v9.npy"), b, n);
    expect_read_error(tmp("v9.npy"), LA_EFORMAT, "unsupported .npy format version 9.0", NULL);
}

static void test_fault_wrong_dtype(void **state) {
    (void)state;
    unsigned char b[512];
    const double x[2] = {1, 2};
    size_t n = make_npy(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", x, sizeof x);
    write_bytes(tmp("f8.npy"), b, n);
    expect_read_error(tmp("f8.npy"), LA_EFORMAT, "dtype '<f8' (float64)", "convert with x.astype(np.float32)");
    n = make_npy(b, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", x, 8);
    write_bytes(tmp("i4.npy"), b, n);
    expect_read_error(tmp("i4.npy"), LA_EFORMAT, "dtype '<i4' (int32)", "astype(np.float32)");
    n = make_npy(b, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", x, 8);
    write_bytes(tmp("be.npy"), b, n);
    expect_read_error(tmp("be.npy"), LA_EFORMAT, "big-endian", "astype('<f4')");
    n = make_npy(b, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", x, 8);
    write_bytes(tmp("rec.npy"), b, n);
    expect_read_error(tmp("rec.npy"), LA_EFORMAT, "structured dtype", NULL);
}

static void test_fault_fortran_order(void **state) {
    (void)state;
    unsigned char b[512];
    const float x[4] = {1, 2, 3, 4};
    size_t n = make_npy(b, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", x, sizeof x);
    write_bytes(tmp("fo.npy"), b, n);
    expect_read_error(tmp("fo.npy"), LA_EFORMAT, "Fortran", "np.ascontiguousarray");
}

static void test_fault_truncated(void **state) {
    (void)state;
    const float x[6] = {0, 1, 2, 3, 4, 5};
    const int64_t shape[2] = {2, 3};
    const char *p = tmp("t.npy");
    assert_int_equal(la_npy_write_f32(p, x, 2, shape), LA_OK);
    unsigned char b[256];
    size_t n = read_bytes(p, b, sizeof b);
    write_bytes(tmp("cut_data.npy"), b, n - 3);
    expect_read_error(tmp("cut_data.npy"), LA_EFORMAT, "truncated .npy data", "needs 24 bytes, the file holds 21");
    write_bytes(tmp("cut_head.npy"), b, 40);
    expect_read_error(tmp("cut_head.npy"), LA_EFORMAT, "truncated .npy header", NULL);
    write_bytes(tmp("cut_pre.npy"), b, 8);
    expect_read_error(tmp("cut_pre.npy"), LA_EFORMAT, "bad magic", NULL);
    unsigned char c[300];
    memcpy(c, b, n);
    memcpy(c + n, "junk", 4);
    write_bytes(tmp("stray.npy"), c, n + 4);
    expect_read_error(tmp("stray.npy"), LA_EFORMAT, "4 stray bytes", NULL);
}

static void test_fault_absurd_header(void **state) {
    (void)state;
    unsigned char b[512];
    const float x[2] = {1, 2};
    size_t n = make_npy(b, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", x, sizeof x);
    b[8] = b[9] = b[10] = b[11] = 0xff; /* 4 GiB header */
    write_bytes(tmp("huge.npy"), b, n);
    expect_read_error(tmp("huge.npy"), LA_EFORMAT, "absurd .npy header length 4294967295", NULL);
    /* shape whose element count overflows 64 bits */
    n = make_npy(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", x, 8);
    write_bytes(tmp("ovf.npy"), b, n);
    expect_read_error(tmp("ovf.npy"), LA_EFORMAT, "absurd .npy shape", NULL);
    n = make_npy(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,2), }", x, 8);
    write_bytes(tmp("dims.npy"), b, n);
    expect_read_error(tmp("dims.npy"), LA_EFORMAT, "more than 8 dimensions", NULL);
    n = make_npy(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", x, 8);
    write_bytes(tmp("neg.npy"), b, n);
    expect_read_error(tmp("neg.npy"), LA_EFORMAT, "malformed 'shape'", NULL);
    n = make_npy(b, 1, "{'descr': '<f4', 'fortran_order': False}", x, 8);
    write_bytes(tmp("noshape.npy"), b, n);
    expect_read_error(tmp("noshape.npy"), LA_EFORMAT, "lacks 'shape'", NULL);
    n = make_npy(b, 1, "[1, 2, 3]", x, 8);
    write_bytes(tmp("list.npy"), b, n);
    expect_read_error(tmp("list.npy"), LA_EFORMAT, "not a Python dict", NULL);
    n = make_npy(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", x, 8);
    write_bytes(tmp("extra.npy"), b, n);
    expect_read_error(tmp("extra.npy"), LA_EFORMAT, "unexpected key 'extra'", NULL);
    n = make_npy(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", x, 8);
    write_bytes(tmp("open.npy"), b, n);
    expect_read_error(tmp("open.npy"), LA_EFORMAT, "malformed", NULL);
}

static void test_write_bad_arguments(void **state) {
    (void)state;
    const float x[1] = {1};
    const int64_t neg[1] = {-1};
    assert_int_equal(la_npy_write_f32(tmp("n.npy"), x, 1, neg), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "negative dimension"));
    assert_int_equal(la_npy_write_f32(tmp("n.npy"), x, 9, neg), LA_EINVAL);
    const int64_t one[1] = {1};
    assert_int_equal(la_npy_write_f32(tmp("n.npy"), NULL, 1, one), LA_EINVAL);
    assert_int_equal(la_npy_write_f32(NULL, x, 1, one), LA_EINVAL);
    float *d;
    int nd;
    int64_t s[8];
    assert_int_equal(la_npy_read_f32(NULL, &d, &nd, s), LA_EINVAL);
}

/* Issue 17: .npy writes failing at each atomic-write step (la_afile_fail_at), for a small
 * array (the write error shows at flush) and one of 400 KB (fwrite itself fails): LA_EIO
 * naming the path, the previous file reads back unchanged, no temp file is left. */
static void test_write_io_failures_keep_previous(void **state) {
    (void)state;
    static float big[100000];
    for (int i = 0; i < 100000; i++) big[i] = (float)i;
    float small[3] = {1, 2, 3};
    const char *p = tmp("keep.npy");
    char tmpname[300];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld", p, (long)getpid());
    for (int size = 0; size < 2; size++)
        for (int step = LA_AFILE_STEP_OPEN; step <= LA_AFILE_STEP_RENAME; step++) {
            float first[2] = {-1.5f, 7.0f};
            int64_t s1[1] = {2}, s2[1] = {size ? 100000 : 3};
            assert_int_equal(la_npy_write_f32(p, first, 1, s1), LA_OK);
            la_afile_fail_at((la_afile_step)step, 1);
            la_status st = la_npy_write_f32(p, size ? big : small, 1, s2);
            if (st != LA_EIO) fail_msg("size %d step %d: status %s", size, step, la_status_name(st));
            if (!strstr(la_errmsg(), p)) fail_msg("size %d step %d: message: %s", size, step, la_errmsg());
            assert_int_not_equal(access(tmpname, F_OK), 0);
            float *y = NULL;
            int nd = 0;
            int64_t shape[8];
            assert_int_equal(la_npy_read_f32(p, &y, &nd, shape), LA_OK);
            assert_true(nd == 1 && shape[0] == 2 && y[0] == -1.5f && y[1] == 7.0f);
            free(y);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_match_numpy),
        cmocka_unit_test(test_round_trip_bit_exact),
        cmocka_unit_test(test_reads_versions_2_and_3),
        cmocka_unit_test(test_fault_missing_file),
        cmocka_unit_test(test_fault_bad_magic),
        cmocka_unit_test(test_fault_wrong_dtype),
        cmocka_unit_test(test_fault_fortran_order),
        cmocka_unit_test(test_fault_truncated),
        cmocka_unit_test(test_fault_absurd_header),
        cmocka_unit_test(test_write_bad_arguments),
        cmocka_unit_test(test_write_io_failures_keep_previous),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
