/* test_docs.c -- loading a folder of documents: byte text files and llm.c token shards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/internal.h"
#include "longattn.h"
#include "support/test_corpus.h"

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void test_text_folder(void **state) {
    (void)state;
    char dir[256];
    assert_int_equal(la_test_mkdtemp("la_docs_", dir, sizeof dir), 0);
    write_file(dir, "b.txt", "world\n", 6);
    write_file(dir, "a.txt", "hello", 5);
    write_file(dir, "c.txt", "", 0);            /* empty: no document */
    write_file(dir, ".hidden", "secret", 6);    /* hidden: skipped */
    write_file(dir, "d.rst", "\xff\x00z", 3);   /* any byte, any name */
    write_file(dir, "MANIFEST", "6 b.txt\n", 8); /* scripts/prepare_*.sh's list: skipped */
    la_docs d;
    assert_int_equal(la_docs_load(dir, &d), LA_OK);
    assert_int_equal(d.n_docs, 3);
    assert_int_equal(d.is_bytes, 1);
    assert_int_equal(d.vocab, 256);
    assert_int_equal(d.n_tokens, 14);
    const int64_t off[] = {0, 5, 11, 14};
    for (int i = 0; i <= 3; i++) assert_int_equal(d.offset[i], off[i]);
    const char *text = "helloworld\n";  /* name order: a.txt then b.txt */
    for (int i = 0; i < 11; i++) assert_int_equal(d.tokens[i], (unsigned char)text[i]);
    assert_int_equal(d.tokens[11], 255);
    assert_int_equal(d.tokens[12], 0);
    assert_int_equal(la_docs_longest(&d), 6);
    la_docs_free(&d);
    la_test_rmtree(dir);
}

static void shard(const char *dir, const char *name, const uint16_t *tok, int n, int declared, int magic) {
    int32_t hdr[256] = {0};
    hdr[0] = magic;
    hdr[1] = 1;
    hdr[2] = declared;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(hdr, sizeof hdr[0], 256, f);
    fwrite(tok, sizeof tok[0], (size_t)n, f);
    fclose(f);
}

static void test_shards_split_at_eot(void **state) {
    (void)state;
    char dir[256];
    assert_int_equal(la_test_mkdtemp("la_docs_", dir, sizeof dir), 0);
    const uint16_t a[] = {50256, 10, 11, 12, 50256, 20, 21};
    const uint16_t b[] = {50256, 30};
    shard(dir, "x_000.bin", a, 7, 7, 20240520);
    shard(dir, "x_001.bin", b, 2, 2, 20240520);
    write_file(dir, "README.txt", "ignored next to shards", 22);
    la_docs d;
    assert_int_equal(la_docs_load(dir, &d), LA_OK);
    assert_int_equal(d.is_bytes, 0);
    assert_int_equal(d.vocab, 50257);
    assert_int_equal(d.n_docs, 3);
    assert_int_equal(d.offset[1] - d.offset[0], 4); /* EOT 10 11 12 */
    assert_int_equal(d.offset[2] - d.offset[1], 3); /* EOT 20 21 */
    assert_int_equal(d.offset[3] - d.offset[2], 2); /* EOT 30 */
    assert_int_equal(d.tokens[d.offset[1] + 1], 20);
    la_docs_free(&d);

    /* truncated shard and wrong magic are format errors naming the file */
    shard(dir, "x_002.bin", b, 2, 5, 20240520);
    assert_int_equal(la_docs_load(dir, &d), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "x_002.bin"));
    assert_non_null(strstr(la_errmsg(), "truncated"));
    assert_null(d.tokens);
    shard(dir, "x_002.bin", b, 2, 2, 12345);
    assert_int_equal(la_docs_load(dir, &d), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "magic"));
    /* fuzz_shards (issue 17): a header promising 2^31-1 tokens over a 2-token file made
     * la_docs_load allocate 8 GiB before reading; the count is now checked against the
     * file size first (as la_data_open does), and trailing bytes are refused too */
    shard(dir, "x_002.bin", b, 2, 2147483647, 20240520);
    assert_int_equal(la_docs_load(dir, &d), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "x_002.bin"));
    assert_non_null(strstr(la_errmsg(), "should be 4294968318 bytes"));
    assert_non_null(strstr(la_errmsg(), "truncated"));
    assert_null(d.tokens);
    shard(dir, "x_002.bin", a, 7, 2, 20240520);
    assert_int_equal(la_docs_load(dir, &d), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "trailing bytes"));
    la_test_rmtree(dir);
}

static void test_missing_and_empty_folders(void **state) {
    (void)state;
    la_docs d;
    assert_int_equal(la_docs_load("/nonexistent_la_docs", &d), LA_EIO);
    assert_non_null(strstr(la_errmsg(), "/nonexistent_la_docs"));
    assert_non_null(strstr(la_errmsg(), "setup.sh"));
    assert_null(strstr(la_errmsg(), "\"data\"")); /* longeval's option is --docs, kv-eval's --data */
    assert_non_null(strstr(la_errmsg(), "folder of .txt documents"));
    char dir[256];
    assert_int_equal(la_test_mkdtemp("la_docs_", dir, sizeof dir), 0);
    write_file(dir, "empty.txt", "", 0);
    assert_int_equal(la_docs_load(dir, &d), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "no documents"));
    assert_int_equal(la_docs_load(NULL, &d), LA_EINVAL);
    la_test_rmtree(dir);
}

static void test_generated_corpus_sizes(void **state) {
    (void)state;
    char dir[256];
    assert_int_equal(la_test_mkdtemp("la_docs_", dir, sizeof dir), 0);
    const int sizes[] = {1000, 33, 4096};
    assert_int_equal(la_test_write_corpus(dir, 3, sizes, 5), 0);
    la_docs d;
    assert_int_equal(la_docs_load(dir, &d), LA_OK);
    assert_int_equal(d.n_docs, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(d.offset[i + 1] - d.offset[i], sizes[i]);
    la_docs_free(&d);
    la_test_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_folder),
        cmocka_unit_test(test_shards_split_at_eot),
        cmocka_unit_test(test_missing_and_empty_folders),
        cmocka_unit_test(test_generated_corpus_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
