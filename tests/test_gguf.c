/* test_gguf.c -- GGUF reader (src/io/gguf.c) on a small hand-built file and on every way
 * a file can be broken: truncated at every byte, bad magic/version, big-endian, huge
 * counts and lengths, tensors beyond the file or misaligned, unknown types, duplicates,
 * missing or mistyped keys. Each must be a clear error (status + message naming the
 * problem), never a crash: the hostile images are opened from exactly-sized malloc'ed
 * copies (la_gguf_open_mem) so that under ASan any read past the end is caught, and huge
 * counts must fail before any allocation they would size (ASan aborts on those too).
 * Agreement with gguf-py on real files is tests/python/test_gguf.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/internal.h"
#include "longattn.h"

/* ---- a little GGUF writer that records where each field is ---- */
typedef struct {
    uint8_t b[4096];
    size_t n;
} buf;

static void put(buf *f, const void *p, size_t n) {
    assert_true(f->n + n <= sizeof f->b);
    memcpy(f->b + f->n, p, n);
    f->n += n;
}
static size_t put_u32(buf *f, uint32_t v) {
    size_t at = f->n;
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(f, x, 4);
    return at;
}
static size_t put_u64(buf *f, uint64_t v) {
    size_t at = f->n;
    put_u32(f, (uint32_t)v);
    put_u32(f, (uint32_t)(v >> 32));
    return at;
}
static size_t put_str(buf *f, const char *s) {
    size_t at = put_u64(f, strlen(s));
    put(f, s, strlen(s));
    return at;
}
static void set_u32(buf *f, size_t at, uint32_t v) {
    for (int i = 0; i < 4; i++) f->b[at + i] = (uint8_t)(v >> (8 * i));
}
static void set_u64(buf *f, size_t at, uint64_t v) {
    set_u32(f, at, (uint32_t)v);
    set_u32(f, at + 4, (uint32_t)(v >> 32));
}

/* Positions of the fields the tests corrupt. */
typedef struct {
    size_t version, n_tensors, n_kv, key0_len, u8_type, tokens_count, tokens_elem, scores_count,
        ok_key, ok_value, t0_name, t1_ndims, t1_ne0, t1_type, t1_offset, t2_name, t2_type,
        t2_offset, data;
} layout;

/* Three tensors; the file ends exactly where the last tensor's data ends, so every
 * truncation must be an error. alignment 0 = default 32 (no general.alignment key). */
static void build(buf *f, layout *L) {
    memset(f, 0, sizeof *f);
    put(f, "GGUF", 4);
    L->version = put_u32(f, 3);
    L->n_tensors = put_u64(f, 3);
    L->n_kv = put_u64(f, 6);
    L->key0_len = put_str(f, "general.architecture");
    put_u32(f, LA_GGUF_STR);
    put_str(f, "llama");
    put_str(f, "test.u8");
    L->u8_type = put_u32(f, LA_GGUF_U8);
    uint8_t seven = 7;
    put(f, &seven, 1);
    put_str(f, "test.f32");
    put_u32(f, LA_GGUF_F32);
    float half = 0.5f;
    put(f, &half, 4);
    put_str(f, "test.tokens");
    put_u32(f, LA_GGUF_ARR);
    L->tokens_elem = put_u32(f, LA_GGUF_STR);
    L->tokens_count = put_u64(f, 3);
    put_str(f, "a");
    put_str(f, "bc");
    put_str(f, "");
    put_str(f, "test.scores");
    put_u32(f, LA_GGUF_ARR);
    put_u32(f, LA_GGUF_F32);
    L->scores_count = put_u64(f, 2);
    float sc[2] = {1.5f, -2.0f};
    put(f, sc, 8);
    L->ok_key = put_str(f, "test.ok") + 8;
    put_u32(f, LA_GGUF_BOOL);
    L->ok_value = f->n;
    uint8_t one = 1;
    put(f, &one, 1);
    /* tensors: names of equal length so that one can be renamed into another */
    L->t0_name = put_str(f, "w.f32");
    put_u32(f, 2);
    put_u64(f, 4);
    put_u64(f, 2);
    put_u32(f, LA_GGML_F32);
    put_u64(f, 0);
    L->t2_name = 0;
    put_str(f, "w.q80");
    L->t1_ndims = put_u32(f, 2);
    L->t1_ne0 = put_u64(f, 32);
    put_u64(f, 2);
    L->t1_type = put_u32(f, LA_GGML_Q8_0);
    L->t1_offset = put_u64(f, 32);
    L->t2_name = put_str(f, "w.q2k") + 8;
    put_u32(f, 1);
    put_u64(f, 256);
    L->t2_type = put_u32(f, 10); /* Q2_K: known, not dequantized */
    L->t2_offset = put_u64(f, 128);
    while (f->n % 32) f->b[f->n++] = 0;
    L->data = f->n;
    /* w.f32 = 0..7; w.q80 = two Q8_0 blocks (d = 0.5 and 2, qs = j - 16) */
    for (int i = 0; i < 8; i++) {
        float v = (float)i;
        put(f, &v, 4);
    }
    for (int blk = 0; blk < 2; blk++) {
        uint16_t d = blk ? 0x4000 : 0x3800; /* f16 2.0, 0.5 */
        put(f, &d, 2);
        for (int j = 0; j < 32; j++) {
            int8_t q = (int8_t)(j - 16);
            put(f, &q, 1);
        }
    }
    while (f->n < L->data + 128) f->b[f->n++] = 0;
    for (int i = 0; i < 84; i++) f->b[f->n++] = (uint8_t)i;
}

/* Open an exactly-sized heap copy of the first n bytes. */
static la_status open_n(const buf *f, size_t n, la_gguf **g, void **copy) {
    *copy = malloc(n ? n : 1);
    assert_non_null(*copy);
    memcpy(*copy, f->b, n);
    return la_gguf_open_mem(*copy, n, "t.gguf", g);
}

/* Expect status s and a message containing each of the NULL-terminated fragments. */
static void expect_fail(const buf *f, la_status s, ...) {
    la_gguf *g = (la_gguf *)1;
    void *copy;
    la_status got = open_n(f, f->n, &g, &copy);
    if (got != s) print_error("got %s (%s)\n", la_status_name(got), la_errmsg());
    assert_int_equal(got, s);
    assert_null(g);
    va_list ap;
    va_start(ap, s);
    for (const char *frag; (frag = va_arg(ap, const char *));) {
        if (!strstr(la_errmsg(), frag)) print_error("message '%s' lacks '%s'\n", la_errmsg(), frag);
        assert_non_null(strstr(la_errmsg(), frag));
    }
    va_end(ap);
    free(copy);
}

static void test_valid_file(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    la_gguf *g;
    void *copy;
    assert_int_equal(open_n(&f, f.n, &g, &copy), LA_OK);
    assert_int_equal(la_gguf_version(g), 3);
    assert_int_equal(la_gguf_alignment(g), 32);
    assert_int_equal(la_gguf_data_offset(g), L.data);
    assert_int_equal(la_gguf_n_kv(g), 6);
    assert_string_equal(la_gguf_kv_at(g, 0)->key, "general.architecture");
    const char *arch;
    assert_int_equal(la_gguf_get_str(g, "general.architecture", &arch), LA_OK);
    assert_string_equal(arch, "llama");
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    assert_int_equal(la_gguf_get_u32(g, "test.u8", &u32), LA_OK); /* widened */
    assert_int_equal(u32, 7);
    assert_int_equal(la_gguf_get_i32(g, "test.u8", &i32), LA_OK);
    assert_int_equal(la_gguf_get_u64(g, "test.u8", &u64), LA_OK);
    assert_int_equal(i32 + (int)u64, 14);
    float f32;
    double f64;
    assert_int_equal(la_gguf_get_f32(g, "test.f32", &f32), LA_OK);
    assert_int_equal(la_gguf_get_f64(g, "test.f32", &f64), LA_OK);
    assert_true(f32 == 0.5f && f64 == 0.5);
    int b = 0;
    assert_int_equal(la_gguf_get_bool(g, "test.ok", &b), LA_OK);
    assert_int_equal(b, 1);
    const la_gguf_kv *tok, *scores;
    assert_int_equal(la_gguf_get_arr(g, "test.tokens", LA_GGUF_STR, &tok), LA_OK);
    assert_int_equal(tok->n, 3);
    uint64_t len = 99;
    assert_string_equal(la_gguf_arr_str(tok, 1, &len), "bc");
    assert_int_equal(len, 2);
    assert_string_equal(la_gguf_arr_str(tok, 2, &len), "");
    assert_int_equal(len, 0);
    assert_int_equal(la_gguf_get_arr(g, "test.scores", LA_GGUF_ANY, &scores), LA_OK);
    assert_true(la_gguf_arr_float(scores, 0) == 1.5 && la_gguf_arr_float(scores, 1) == -2.0);
    assert_null(la_gguf_find_kv(g, "nope"));

    assert_int_equal(la_gguf_n_tensors(g), 3);
    const la_gguf_tensor *t0 = la_gguf_find_tensor(g, "w.f32"), *t1, *t2;
    assert_non_null(t0);
    assert_int_equal(la_gguf_get_tensor(g, "w.q80", &t1), LA_OK);
    assert_int_equal(la_gguf_get_tensor(g, "w.q2k", &t2), LA_OK);
    assert_ptr_equal(la_gguf_tensor_at(g, 1), t1);
    assert_int_equal(t0->n_dims, 2);
    assert_true(t0->ne[0] == 4 && t0->ne[1] == 2 && t0->ne[2] == 1 && t0->ne[3] == 1);
    assert_int_equal(t0->nbytes, 32);
    assert_int_equal(t1->nbytes, 68);
    assert_int_equal(t2->nbytes, 84);
    assert_ptr_equal(t1->data, (const uint8_t *)copy + L.data + 32);
    assert_int_equal(la_gguf_tensor_nrows(t1), 2);
    float out[64];
    assert_int_equal(la_gguf_dequant(t0, out), LA_OK);
    for (int i = 0; i < 8; i++) assert_true(out[i] == (float)i);
    assert_int_equal(la_gguf_dequant(t1, out), LA_OK);
    for (int j = 0; j < 32; j++) {
        assert_true(out[j] == 0.5f * (float)(j - 16));
        assert_true(out[32 + j] == 2.0f * (float)(j - 16));
    }
    assert_int_equal(la_gguf_dequant_rows(t1, 1, 1, out), LA_OK); /* one row */
    assert_true(out[0] == -32.0f && out[31] == 30.0f);
    assert_int_equal(la_gguf_dequant_rows(t1, 1, 2, out), LA_EINVAL);
    /* a type ggml defines but longattn does not dequantize: named, with the tensor */
    assert_int_equal(la_gguf_dequant(t2, out), LA_EUNSUPPORTED);
    assert_non_null(strstr(la_errmsg(), "Q2_K"));
    assert_non_null(strstr(la_errmsg(), "w.q2k"));
    la_gguf_close(g);
    free(copy);
}

static void test_missing_and_mistyped_keys(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    la_gguf *g;
    void *copy;
    assert_int_equal(open_n(&f, f.n, &g, &copy), LA_OK);
    uint32_t u = 123;
    assert_int_equal(la_gguf_get_u32(g, "llama.block_count", &u), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "llama.block_count"));
    assert_non_null(strstr(la_errmsg(), "missing"));
    assert_int_equal(u, 123);
    assert_int_equal(la_gguf_get_u32(g, "test.f32", &u), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "test.f32"));
    assert_non_null(strstr(la_errmsg(), "f32"));
    const char *s;
    assert_int_equal(la_gguf_get_str(g, "test.u8", &s), LA_EFORMAT);
    float fl;
    assert_int_equal(la_gguf_get_f32(g, "general.architecture", &fl), LA_EFORMAT);
    int b;
    assert_int_equal(la_gguf_get_bool(g, "test.u8", &b), LA_EFORMAT);
    const la_gguf_kv *kv;
    assert_int_equal(la_gguf_get_arr(g, "test.tokens", LA_GGUF_I32, &kv), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "array of str"));
    assert_int_equal(la_gguf_get_arr(g, "test.u8", LA_GGUF_ANY, &kv), LA_EFORMAT);
    const la_gguf_tensor *t;
    assert_int_equal(la_gguf_get_tensor(g, "output.weight", &t), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "output.weight"));
    la_gguf_close(g);
    free(copy);
}

static void test_range_checked_integers(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    /* make test.u8 an i8 holding -1 (0xff stays in the byte after the type) */
    set_u32(&f, L.u8_type, LA_GGUF_I8);
    f.b[L.u8_type + 4] = 0xff;
    la_gguf *g;
    void *copy;
    assert_int_equal(open_n(&f, f.n, &g, &copy), LA_OK);
    int32_t i = 0;
    assert_int_equal(la_gguf_get_i32(g, "test.u8", &i), LA_OK);
    assert_int_equal(i, -1);
    uint32_t u;
    assert_int_equal(la_gguf_get_u32(g, "test.u8", &u), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "-1"));
    la_gguf_close(g);
    free(copy);
}

/* Every prefix of the file (0 .. n-1 bytes) is an error, with a message that names a
 * byte offset (truncation is found where it happens) -- and no read past the copy. */
static void test_truncated_at_every_byte(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    for (size_t n = 0; n < f.n; n++) {
        la_gguf *g = (la_gguf *)1;
        void *copy;
        la_status s = open_n(&f, n, &g, &copy);
        if (s != LA_EFORMAT) print_error("prefix of %zu bytes: %s\n", n, la_status_name(s));
        assert_int_equal(s, LA_EFORMAT);
        assert_null(g);
        assert_true(strlen(la_errmsg()) > 10);
        if (n > 0 && !strstr(la_errmsg(), "byte")) print_error("%zu: %s\n", n, la_errmsg());
        assert_true(n == 0 || strstr(la_errmsg(), "byte"));
        free(copy);
    }
    la_gguf *g;
    void *copy;
    assert_int_equal(open_n(&f, f.n, &g, &copy), LA_OK);
    la_gguf_close(g);
    free(copy);
}

static void test_magic_version_endianness(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    f.b[0] = 'X';
    expect_fail(&f, LA_EFORMAT, "not a GGUF file", NULL);
    build(&f, &L);
    set_u32(&f, L.version, 1);
    expect_fail(&f, LA_EUNSUPPORTED, "version 1", NULL);
    set_u32(&f, L.version, 4);
    expect_fail(&f, LA_EFORMAT, "version 4", "byte 4", NULL);
    set_u32(&f, L.version, 0x03000000); /* 3 written big-endian */
    expect_fail(&f, LA_EUNSUPPORTED, "big-endian", NULL);
    set_u32(&f, L.version, 2); /* v2: same layout */
    la_gguf *g;
    void *copy;
    assert_int_equal(open_n(&f, f.n, &g, &copy), LA_OK);
    assert_int_equal(la_gguf_version(g), 2);
    la_gguf_close(g);
    free(copy);
}

static void test_huge_counts_and_lengths(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    set_u64(&f, L.n_kv, (uint64_t)1 << 60);
    expect_fail(&f, LA_EFORMAT, "metadata entries", NULL);
    set_u64(&f, L.n_kv, UINT64_MAX);
    expect_fail(&f, LA_EFORMAT, NULL);
    build(&f, &L);
    set_u64(&f, L.n_tensors, (uint64_t)1 << 40);
    expect_fail(&f, LA_EFORMAT, "tensors", NULL);
    build(&f, &L);
    set_u64(&f, L.key0_len, UINT64_MAX);
    expect_fail(&f, LA_EFORMAT, "metadata key", "byte 24", NULL);
    build(&f, &L);
    set_u64(&f, L.tokens_count, (uint64_t)1 << 61);
    expect_fail(&f, LA_EFORMAT, "test.tokens", "strings", NULL);
    build(&f, &L);
    set_u64(&f, L.scores_count, UINT64_MAX / 2);
    expect_fail(&f, LA_EFORMAT, "test.scores", NULL);
    build(&f, &L);
    set_u64(&f, L.t1_ne0, (uint64_t)1 << 62); /* nelem overflows 64 bits with ne1 = 2 */
    expect_fail(&f, LA_EFORMAT, "w.q80", "overflow", NULL);
    build(&f, &L);
    set_u64(&f, L.t1_ne0, (uint64_t)1 << 57); /* element count fine, beyond the file */
    expect_fail(&f, LA_EFORMAT, "w.q80", "beyond the end", NULL);
}

static void test_tensor_placement(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    set_u64(&f, L.t2_offset, 4096);
    expect_fail(&f, LA_EFORMAT, "w.q2k", "beyond the end", NULL);
    set_u64(&f, L.t2_offset, UINT64_MAX - 31); /* offset + nbytes overflows */
    expect_fail(&f, LA_EFORMAT, "w.q2k", NULL);
    build(&f, &L);
    set_u64(&f, L.t1_offset, 40);
    expect_fail(&f, LA_EFORMAT, "w.q80", "not a multiple of the alignment 32", NULL);
    build(&f, &L);
    set_u32(&f, L.t1_ndims, 5);
    expect_fail(&f, LA_EFORMAT, "w.q80", "5 dimensions", NULL);
    set_u32(&f, L.t1_ndims, 0);
    expect_fail(&f, LA_EFORMAT, "w.q80", "0 dimensions", NULL);
    build(&f, &L);
    set_u64(&f, L.t1_ne0, 31);
    expect_fail(&f, LA_EFORMAT, "w.q80", "Q8_0", "block size 32", NULL);
}

static void test_unknown_types(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    set_u32(&f, L.t1_type, 4); /* a retired id */
    expect_fail(&f, LA_EFORMAT, "w.q80", "unknown type id 4", NULL);
    set_u32(&f, L.t1_type, 1000);
    expect_fail(&f, LA_EFORMAT, "unknown type id 1000", NULL);
    build(&f, &L);
    set_u32(&f, L.u8_type, 13);
    expect_fail(&f, LA_EFORMAT, "test.u8", "unknown value type 13", NULL);
    build(&f, &L);
    set_u32(&f, L.tokens_elem, 77);
    expect_fail(&f, LA_EFORMAT, "test.tokens", "element type 77", NULL);
    set_u32(&f, L.tokens_elem, LA_GGUF_ARR);
    expect_fail(&f, LA_EUNSUPPORTED, "test.tokens", "nested", NULL);
    build(&f, &L);
    f.b[L.ok_value] = 2;
    expect_fail(&f, LA_EFORMAT, "test.ok", "not 0 or 1", NULL);
}

static void test_duplicates(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    memcpy(f.b + L.t2_name, "w.q80", 5);
    expect_fail(&f, LA_EFORMAT, "duplicate tensor name 'w.q80'", NULL);
    build(&f, &L);
    memcpy(f.b + L.ok_key, "test.u8", 7);
    expect_fail(&f, LA_EFORMAT, "duplicate metadata key 'test.u8'", NULL);
}

static void test_alignment_key(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    /* rename test.f32 (8 chars) into general.alignment? lengths differ: rebuild by hand */
    memset(&f, 0, sizeof f);
    put(&f, "GGUF", 4);
    put_u32(&f, 3);
    put_u64(&f, 1);
    put_u64(&f, 1);
    put_str(&f, "general.alignment");
    size_t ty = put_u32(&f, LA_GGUF_U32);
    size_t val = put_u32(&f, 64);
    put_str(&f, "w");
    put_u32(&f, 1);
    put_u64(&f, 4);
    put_u32(&f, LA_GGML_F32);
    size_t off = put_u64(&f, 0);
    while (f.n % 64) f.b[f.n++] = 0;
    size_t data = f.n;
    for (int i = 0; i < 16; i++) f.b[f.n++] = 0;
    la_gguf *g;
    void *copy;
    assert_int_equal(open_n(&f, f.n, &g, &copy), LA_OK);
    assert_int_equal(la_gguf_alignment(g), 64);
    assert_int_equal(la_gguf_data_offset(g), data);
    la_gguf_close(g);
    free(copy);
    set_u64(&f, off, 32); /* aligned to 32 but not 64 */
    expect_fail(&f, LA_EFORMAT, "alignment 64", NULL);
    set_u64(&f, off, 0);
    set_u32(&f, val, 48);
    expect_fail(&f, LA_EFORMAT, "general.alignment = 48", "power of two", NULL);
    set_u32(&f, val, 0);
    expect_fail(&f, LA_EFORMAT, "power of two", NULL);
    set_u32(&f, ty, LA_GGUF_I32);
    expect_fail(&f, LA_EFORMAT, "general.alignment", "u32", NULL);
}

/* The file path (mmap) gives the same results and names the file. */
static void test_open_file(void **state) {
    (void)state;
    buf f;
    layout L;
    build(&f, &L);
    char dir[] = "/tmp/la_gguf_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(f.b, 1, f.n, fp), f.n);
    fclose(fp);
    la_gguf *g;
    assert_int_equal(la_gguf_open(path, &g), LA_OK);
    const la_gguf_tensor *t;
    assert_int_equal(la_gguf_get_tensor(g, "w.f32", &t), LA_OK);
    float out[8];
    assert_int_equal(la_gguf_dequant(t, out), LA_OK);
    assert_true(out[7] == 7.0f);
    assert_int_equal(la_gguf_file_size(g), f.n);
    la_gguf_close(g);
    assert_int_equal(truncate(path, (off_t)f.n - 1), 0);
    assert_int_equal(la_gguf_open(path, &g), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), path));
    assert_null(g);
    assert_int_equal(truncate(path, 0), 0);
    assert_int_equal(la_gguf_open(path, &g), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "empty"));
    unlink(path);
    assert_int_equal(la_gguf_open(path, &g), LA_EIO);
    assert_non_null(strstr(la_errmsg(), path));
    assert_int_equal(la_gguf_open(dir, &g), LA_EIO);
    rmdir(dir);
    assert_int_equal(la_gguf_open(NULL, &g), LA_EINVAL);
    la_gguf_close(NULL);
}

/* Random corruption: 3000 copies with 1-4 random bytes overwritten (header and tensor
 * infos are the first ~330 bytes, so most hits land there). Opening must give LA_OK or a
 * clean error; when it opens, every key, string and supported tensor is read. Under ASan
 * any stray read is fatal. */
static void test_random_corruption(void **state) {
    (void)state;
    buf f, c;
    layout L;
    build(&f, &L);
    la_rng r;
    la_rng_seed(&r, 42);
    int opened = 0;
    for (int it = 0; it < 3000; it++) {
        c = f;
        int k = 1 + (int)la_rng_below(&r, 4);
        for (int j = 0; j < k; j++) {
            size_t at = (size_t)la_rng_below(&r, L.data + 16);
            c.b[at] = (uint8_t)la_rng_below(&r, 256);
        }
        la_gguf *g;
        void *copy;
        la_status s = open_n(&c, c.n, &g, &copy);
        assert_true(s == LA_OK || s == LA_EFORMAT || s == LA_EUNSUPPORTED);
        if (s == LA_OK) {
            opened++;
            for (int64_t i = 0; i < la_gguf_n_kv(g); i++) {
                const la_gguf_kv *kv = la_gguf_kv_at(g, i);
                assert_non_null(kv->key);
                int et = kv->type == LA_GGUF_ARR ? (int)kv->arr_type : (int)kv->type;
                for (uint64_t e = 0; e < kv->n; e++) {
                    if (et == LA_GGUF_STR) {
                        uint64_t len;
                        const char *str = la_gguf_arr_str(kv, e, &len);
                        assert_int_equal(str[len], 0);
                    } else {
                        (void)la_gguf_arr_float(kv, e);
                    }
                }
            }
            for (int64_t i = 0; i < la_gguf_n_tensors(g); i++) {
                const la_gguf_tensor *t = la_gguf_tensor_at(g, i);
                if (!la_ggml_type_supported(t->type) || la_gguf_tensor_nelem(t) > 4096) continue;
                float out[4096];
                assert_int_equal(la_gguf_dequant(t, out), LA_OK);
            }
            la_gguf_close(g);
        } else {
            assert_null(g);
            assert_true(strlen(la_errmsg()) > 10);
        }
        free(copy);
    }
    assert_true(opened > 0); /* some hits land in values and tensor data */
}

static void test_type_table(void **state) {
    (void)state;
    assert_string_equal(la_ggml_type_name(LA_GGML_Q4_K), "Q4_K");
    assert_null(la_ggml_type_name(4));
    assert_int_equal(la_ggml_row_bytes(LA_GGML_Q4_1, 576), 18 * 20);
    assert_int_equal(la_ggml_row_bytes(LA_GGML_Q4_1, 577), -1);
    assert_int_equal(la_ggml_row_bytes(LA_GGML_Q6_K, 512), 420);
    assert_true(la_ggml_type_supported(LA_GGML_BF16) && !la_ggml_type_supported(10));
    float y[32];
    uint8_t blk[34] = {0};
    assert_int_equal(la_ggml_dequant(LA_GGML_Q8_0, blk, y, 31), LA_EINVAL);
    assert_int_equal(la_ggml_dequant(11, blk, y, 256), LA_EUNSUPPORTED);
    assert_non_null(strstr(la_errmsg(), "Q3_K"));
    assert_int_equal(la_ggml_dequant(99, blk, y, 32), LA_EUNSUPPORTED);
    assert_non_null(strstr(la_errmsg(), "99"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_file),
        cmocka_unit_test(test_missing_and_mistyped_keys),
        cmocka_unit_test(test_range_checked_integers),
        cmocka_unit_test(test_truncated_at_every_byte),
        cmocka_unit_test(test_magic_version_endianness),
        cmocka_unit_test(test_huge_counts_and_lengths),
        cmocka_unit_test(test_tensor_placement),
        cmocka_unit_test(test_unknown_types),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_alignment_key),
        cmocka_unit_test(test_open_file),
        cmocka_unit_test(test_random_corruption),
        cmocka_unit_test(test_type_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
