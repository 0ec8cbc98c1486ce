/* test_data.c -- la_data (src/train/data*.c): text and llm.c shard loading, the document
 * split, window sampling bounds and reachability, resumable sampler state, and malformed
 * shards (short, truncated, wrongly sized, wrong magic/version, bad tokens). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>
#include <cblas.h>

#include "longattn.h"

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", g_dir, name); }

static void write_file(const char *name, const void *data, size_t n) {
    char p[256];
    path_in(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* An llm.c shard with `count` declared tokens, `actual` written, and a given header. */
static void write_shard(const char *name, const uint16_t *tok, int count, int actual, int magic,
                        int version) {
    int32_t hdr[256] = {0};
    hdr[0] = magic;
    hdr[1] = version;
    hdr[2] = count;
    char p[256];
    path_in(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    fwrite(hdr, 4, 256, f);
    if (actual) fwrite(tok, 2, actual, f);
    fclose(f);
}

static int setup(void **st) {
    (void)st;
    snprintf(g_dir, sizeof g_dir, "/tmp/la_data_XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    return 0;
}

static int teardown(void **st) {
    (void)st;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd);
}

static la_data *open_ok(const char *name, double vf) {
    char p[256];
    path_in(p, sizeof p, name);
    la_data_config c = la_data_config_default();
    c.val_fraction = vf;
    la_data *d = NULL;
    la_status s = la_data_open(p, &c, &d);
    if (s != LA_OK) fail_msg("la_data_open(%s): %s", p, la_errmsg());
    return d;
}

static la_status open_status(const char *name) {
    char p[256];
    path_in(p, sizeof p, name);
    la_data *d = NULL;
    la_status s = la_data_open(p, NULL, &d);
    la_data_free(d);
    return s;
}

/* A directory of text files: one document per file, bytes as tokens, a document-level split
 * that is fixed by the seed, hidden files skipped, every byte in exactly one split. */
static void test_text_directory(void **st) {
    (void)st;
    char sub[256];
    path_in(sub, sizeof sub, "txt");
    mkdir(sub, 0755);
    char name[64], body[300];
    int64_t total = 0;
    for (int i = 0; i < 20; i++) {
        int n = 50 + 10 * i;
        for (int j = 0; j < n; j++) body[j] = (char)('a' + (i + j) % 26);
        snprintf(name, sizeof name, "txt/doc%02d.txt", i);
        write_file(name, body, n);
        total += n;
    }
    write_file("txt/.hidden", "zzzz", 4);
    write_file("txt/empty.txt", "", 0);
    la_data *d = open_ok("txt", 0.25);
    assert_int_equal(la_data_vocab(d), 256);
    int nt = la_data_num_docs(d, LA_SPLIT_TRAIN), nv = la_data_num_docs(d, LA_SPLIT_VAL);
    assert_int_equal(nt + nv, 20);
    assert_true(nv >= 1 && nt >= 1);
    assert_int_equal(la_data_num_tokens(d, LA_SPLIT_TRAIN) + la_data_num_tokens(d, LA_SPLIT_VAL), total);
    /* each validation document is one whole file: its first byte and length match a file */
    for (int i = 0; i < nv; i++) {
        int64_t len = la_data_doc_len(d, LA_SPLIT_VAL, i);
        assert_true(len >= 50 && (len - 50) % 10 == 0);
        int32_t first;
        assert_int_equal(la_data_read(d, LA_SPLIT_VAL, i, 0, 1, &first), LA_OK);
        int file = (int)(len - 50) / 10;
        assert_int_equal(first, 'a' + file % 26);
    }
    int32_t buf[8];
    assert_int_equal(la_data_read(d, LA_SPLIT_VAL, 0, la_data_doc_len(d, LA_SPLIT_VAL, 0) - 2, 3, buf), LA_EINVAL);
    assert_int_equal(la_data_read(d, LA_SPLIT_VAL, nv, 0, 1, buf), LA_EINVAL);
    assert_int_equal(la_data_doc_len(d, LA_SPLIT_VAL, nv), -1);
    /* same seed, same split */
    la_data *d2 = open_ok("txt", 0.25);
    assert_int_equal(la_data_num_docs(d2, LA_SPLIT_VAL), nv);
    for (int i = 0; i < nv; i++)
        assert_int_equal(la_data_doc_len(d2, LA_SPLIT_VAL, i), la_data_doc_len(d, LA_SPLIT_VAL, i));
    la_data_free(d);
    la_data_free(d2);
}

/* A folder with train/ and val/ subfolders (the study corpus layout, data/pydoc) is read as
 * those two splits whatever val_fraction says; a folder with only train/ is split as usual.
 * Other files beside the subfolders (e.g. a MANIFEST) are not documents. */
static void test_train_val_folders(void **st) {
    (void)st;
    char p[256];
    const char *dirs[] = {"tv", "tv/train", "tv/val", "tonly", "tonly/train"};
    for (int i = 0; i < 5; i++) {
        path_in(p, sizeof p, dirs[i]);
        mkdir(p, 0755);
    }
    write_file("tv/MANIFEST", "not a document", 14);
    write_file("tv/train/a.txt", "aaaaaaaaaa", 10);
    write_file("tv/train/b.txt", "bbbbbbbbbbbb", 12);
    write_file("tv/train/c.txt", "cccccccc", 8);
    write_file("tv/val/v.txt", "vvvvv", 5);
    la_data *d = open_ok("tv", 0.5);
    assert_int_equal(la_data_num_docs(d, LA_SPLIT_TRAIN), 3);
    assert_int_equal(la_data_num_docs(d, LA_SPLIT_VAL), 1);
    assert_int_equal(la_data_num_tokens(d, LA_SPLIT_TRAIN), 30);
    assert_int_equal(la_data_num_tokens(d, LA_SPLIT_VAL), 5);
    int32_t first;
    assert_int_equal(la_data_read(d, LA_SPLIT_VAL, 0, 0, 1, &first), LA_OK);
    assert_int_equal(first, 'v');
    la_data_free(d);
    for (int i = 0; i < 10; i++) {
        char name[64];
        snprintf(name, sizeof name, "tonly/train/d%d.txt", i);
        write_file(name, "0123456789", 10);
    }
    d = open_ok("tonly", 0.3);
    assert_int_equal(la_data_num_docs(d, LA_SPLIT_TRAIN) + la_data_num_docs(d, LA_SPLIT_VAL), 10);
    assert_true(la_data_num_docs(d, LA_SPLIT_VAL) >= 1);
    la_data_free(d);
}

/* A single text file is cut at (1 - val_fraction) of its bytes. */
static void test_single_text_file_cut(void **st) {
    (void)st;
    char body[1000];
    for (int i = 0; i < 1000; i++) body[i] = (char)(i % 251);
    write_file("one.txt", body, 1000);
    la_data *d = open_ok("one.txt", 0.1);
    assert_int_equal(la_data_num_tokens(d, LA_SPLIT_TRAIN), 900);
    assert_int_equal(la_data_num_tokens(d, LA_SPLIT_VAL), 100);
    int32_t v;
    assert_int_equal(la_data_read(d, LA_SPLIT_VAL, 0, 0, 1, &v), LA_OK);
    assert_int_equal(v, 900 % 251);
    la_data_free(d);
}

/* Windows never read past the split, every start position is drawn (T+1 tokens exactly
 * fitting ⇒ a single window; N tokens ⇒ N - T distinct starts), and the sampler state
 * resumes the stream exactly. */
static void test_sampling_bounds_and_resume(void **st) {
    (void)st;
    char body[40];
    for (int i = 0; i < 40; i++) body[i] = (char)i;  // token value = position
    write_file("pos.txt", body, 40);
    la_data *d = open_ok("pos.txt", 0.0);
    assert_int_equal(la_data_num_tokens(d, LA_SPLIT_TRAIN), 40);
    const int T = 9, B = 4;
    int32_t w[B * (T + 1)];
    int seen[40] = {0};
    la_data_seed(d, 11);
    for (int it = 0; it < 400; it++) {
        assert_int_equal(la_data_sample(d, B, T, w), LA_OK);
        for (int b = 0; b < B; b++) {
            int s = w[b * (T + 1)];
            for (int t = 0; t <= T; t++) assert_int_equal(w[b * (T + 1) + t], s + t);  // contiguous
            assert_true(s + T <= 39);  // never past the last token
            seen[s]++;
        }
    }
    for (int s = 0; s <= 40 - T - 1; s++) assert_true(seen[s] > 0);  // every full window, incl. the last
    /* resume: state after k batches reproduces the following batches */
    la_data_seed(d, 3);
    int32_t a[B * (T + 1)], b2[B * (T + 1)];
    la_data_sample(d, B, T, a);
    la_data_state sst;
    la_data_get_state(d, &sst);
    assert_int_equal(sst.n_windows, B);
    la_data_sample(d, B, T, a);
    la_data_seed(d, 999);
    la_data_set_state(d, &sst);
    la_data_sample(d, B, T, b2);
    assert_memory_equal(a, b2, sizeof a);
    /* exactly one window fits at T = 39; T = 40 does not */
    assert_int_equal(la_data_sample(d, 1, 39, w), LA_OK);
    assert_int_equal(w[0], 0);
    int32_t big[41];
    assert_int_equal(la_data_sample(d, 1, 40, big), LA_ESHAPE);
    assert_int_equal(la_data_sample(d, 0, 4, w), LA_EINVAL);
    /* T = INT_MAX: the message's T + 1 is computed in 64 bits (int overflow before 2026-12-05) */
    assert_int_equal(la_data_sample(d, 1, INT_MAX, big), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "T+1 = 2147483648"));
    assert_int_equal(la_data_val_batch(d, 0, 1, INT_MAX, big), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "T+1 = 2147483648"));
    la_data_free(d);
}

/* Validation windows are consecutive, non-overlapping and deterministic. */
static void test_val_batches(void **st) {
    (void)st;
    char body[100];
    for (int i = 0; i < 100; i++) body[i] = (char)i;
    write_file("v.txt", body, 100);
    la_data *d = open_ok("v.txt", 0.5);  // val = tokens 50..99
    int32_t w[2 * 11];
    assert_int_equal(la_data_val_batch(d, 0, 2, 10, w), LA_OK);
    assert_int_equal(w[0], 50);
    assert_int_equal(w[11], 61);
    assert_int_equal(w[21], 71);
    assert_int_equal(la_data_val_batch(d, 1, 2, 10, w), LA_OK);  // windows 2, 3
    assert_int_equal(w[0], 50 + 2 * 11);
    assert_int_equal(w[11], 50 + 3 * 11);
    assert_int_equal(la_data_val_batch(d, 2, 2, 10, w), LA_OK);  // 4 windows fit: wraps to 0, 1
    assert_int_equal(w[0], 50);
    assert_int_equal(w[11], 61);
    assert_int_equal(la_data_val_batch(d, 0, 1, 50, w), LA_ESHAPE);
    la_data_free(d);
}

/* llm.c shards: documents start at each eot; shards named *_val_* are the validation set;
 * odd token counts and a shard shorter than one window work. */
static void test_shards(void **st) {
    (void)st;
    char sub[256];
    path_in(sub, sizeof sub, "sh");
    mkdir(sub, 0755);
    uint16_t t1[7] = {50256, 10, 11, 12, 50256, 20, 21};  // odd count: 7 tokens, 2 docs
    uint16_t t2[5] = {50256, 30, 31, 32, 33};             // 1 doc, shorter than a T=8 window
    write_shard("sh/x_train_000.bin", t1, 7, 7, 20240520, 1);
    write_shard("sh/x_val_000.bin", t2, 5, 5, 20240520, 1);
    la_data *d = open_ok("sh", 0.1);
    assert_int_equal(la_data_vocab(d), 50257);
    assert_int_equal(la_data_num_docs(d, LA_SPLIT_TRAIN), 2);
    assert_int_equal(la_data_num_docs(d, LA_SPLIT_VAL), 1);
    assert_int_equal(la_data_doc_len(d, LA_SPLIT_TRAIN, 0), 4);
    assert_int_equal(la_data_doc_len(d, LA_SPLIT_TRAIN, 1), 3);
    int32_t w[16];
    assert_int_equal(la_data_read(d, LA_SPLIT_TRAIN, 1, 0, 3, w), LA_OK);
    assert_int_equal(w[0], 50256);
    assert_int_equal(w[2], 21);
    /* train split of 7 tokens: T = 6 fits once, T = 7 does not */
    assert_int_equal(la_data_sample(d, 2, 6, w), LA_OK);
    assert_int_equal(w[6], 21);
    assert_int_equal(la_data_sample(d, 1, 7, w), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "7 tokens"));
    assert_int_equal(la_data_val_batch(d, 0, 1, 8, w), LA_ESHAPE);
    assert_int_equal(la_data_val_batch(d, 0, 1, 4, w), LA_OK);
    assert_int_equal(w[4], 33);
    la_data_free(d);
    /* only the file's name decides: shards in a folder named *_val_* are not all validation */
    const char *dirs[] = {"my_val_dir", "my_val_dir/sh", "allval"};
    for (int i = 0; i < 3; i++) {
        path_in(sub, sizeof sub, dirs[i]);
        mkdir(sub, 0755);
    }
    write_shard("my_val_dir/sh/x_train_000.bin", t1, 7, 7, 20240520, 1);
    write_shard("my_val_dir/sh/x_val_000.bin", t2, 5, 5, 20240520, 1);
    d = open_ok("my_val_dir/sh", 0.1);
    assert_int_equal(la_data_num_docs(d, LA_SPLIT_TRAIN), 2);
    assert_int_equal(la_data_num_docs(d, LA_SPLIT_VAL), 1);
    la_data_free(d);
    /* every shard a validation one: an empty train split, said so */
    write_shard("allval/x_val_000.bin", t2, 5, 5, 20240520, 1);
    assert_int_equal(open_status("allval"), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "*_val_*"));
}

static void test_bad_shards(void **st) {
    (void)st;
    uint16_t t[10] = {50256, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    write_shard("trunc.bin", t, 10, 7, 20240520, 1);  // declared 10, 7 present
    assert_int_equal(open_status("trunc.bin"), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "truncated"));
    write_shard("long.bin", t, 6, 10, 20240520, 1);  // declared 6, 10 present
    assert_int_equal(open_status("long.bin"), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "wrong size"));
    write_shard("magic.bin", t, 10, 10, 20240521, 1);
    assert_int_equal(open_status("magic.bin"), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "magic"));
    write_shard("ver.bin", t, 10, 10, 20240520, 2);
    assert_int_equal(open_status("ver.bin"), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "version"));
    write_file("short.bin", "abc", 3);  // shorter than the header
    assert_int_equal(open_status("short.bin"), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "header"));
    uint16_t big[3] = {50256, 60000, 1};  // token outside the GPT-2 vocabulary
    write_shard("vocab.bin", big, 3, 3, 20240520, 1);
    assert_int_equal(open_status("vocab.bin"), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "vocabulary"));
    assert_int_equal(open_status("does_not_exist"), LA_EIO);
    char sub[256];
    path_in(sub, sizeof sub, "emptydir");
    mkdir(sub, 0755);
    assert_int_equal(open_status("emptydir"), LA_EFORMAT);
    path_in(sub, sizeof sub, "mixed");
    mkdir(sub, 0755);
    write_shard("mixed/a.bin", t, 10, 10, 20240520, 1);
    write_file("mixed/b.txt", "hello", 5);
    assert_int_equal(open_status("mixed"), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "mixes"));
}

int main(void) {
    /* tiny matrices: one BLAS thread (threads only add spin-waiting on a shared machine) */
    openblas_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_directory),
        cmocka_unit_test(test_train_val_folders),
        cmocka_unit_test(test_single_text_file_cut),
        cmocka_unit_test(test_sampling_bounds_and_resume),
        cmocka_unit_test(test_val_batches),
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_bad_shards),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
