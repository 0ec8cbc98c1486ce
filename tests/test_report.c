/* test_report.c -- the runners' report writer (src/runner/report.c): a table written as
 * CSV and as a markdown table byte for byte, quoting, rows split at tabs, empty cells, a header given as one CSV line
 * or as the first row, the atomic file writes (text and JSON, with and without the final newline) and the gnuplot runs
 * (la_report_plot, with sh standing in for gnuplot). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/internal.h"
#include "runner/report.h"

static void test_csv_and_markdown(void **state) {
    (void)state;
    static const char *const head[] = {"spec", "len", "acc"};
    la_table t;
    assert_int_equal(la_table_init(&t, 3, head, "llr"), LA_OK);
    la_table_add_quoted(&t, "yarn(s=4,train=128) \"q\"");
    la_table_row(&t, "%d\t%.2f", 128, 0.5);
    la_table_add(&t, "%s", "softmax");
    la_table_row(&t, "%d\t", 256); /* an empty last cell */
    la_sbuf csv = {0}, md = {0};
    la_table_csv(&t, &csv);
    la_table_md(&t, &md);
    assert_string_equal(csv.s, "spec,len,acc\n\"yarn(s=4,train=128) \"\"q\"\"\",128,0.50\nsoftmax,256,\n");
    assert_string_equal(md.s, "| spec | len | acc |\n|---|---|---:|\n| \"yarn(s=4,train=128) \"\"q\"\"\" | 128 | 0.50 |\n"
                              "| softmax | 256 |  |\n");
    free(csv.s);
    free(md.s);
    la_table_free(&t);
    /* default alignment: the first column left, the others right */
    assert_int_equal(la_table_init(&t, 2, head, NULL), LA_OK);
    la_sbuf h = {0};
    la_table_md(&t, &h);
    assert_string_equal(h.s, "| spec | len |\n|---|---:|\n");
    free(h.s);
    la_table_free(&t);
    /* the header as one CSV line */
    assert_int_equal(la_table_begin(&t, "layer,head,mass", NULL), LA_OK);
    assert_int_equal(t.n_cols, 3);
    la_table_row(&t, "%d\t%d\t%.2f", 0, 1, 0.25);
    la_sbuf c2 = {0};
    la_table_csv(&t, &c2);
    assert_string_equal(c2.s, "layer,head,mass\n0,1,0.25\n");
    free(c2.s);
    la_table_free(&t);
    /* no header given: the caller's first row is the header */
    assert_int_equal(la_table_init(&t, 3, NULL, NULL), LA_OK);
    la_table_row(&t, "spec\tseeds");
    la_table_add(&t, "val @%d", 64);
    la_table_row(&t, "`a`\t2\t1.5 ± 0.1");
    la_sbuf m2 = {0};
    la_table_md(&t, &m2);
    assert_string_equal(m2.s, "| spec | seeds | val @64 |\n|---|---:|---:|\n| `a` | 2 | 1.5 ± 0.1 |\n");
    free(m2.s);
    la_table_free(&t);
}

static int file_exists(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* la_report_plot with sh standing in for gnuplot (its "script" draws two PNGs as .tmp):
 * a real PNG is moved into place, anything else removed; the log is kept when named, else
 * removed and quoted on failure; a failed run moves nothing. */
static void test_plot(void **state) {
    (void)state;
    char dir[] = "/tmp/la_report_plot_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/draw.sh", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("printf '\\211PNG\\r\\n\\032\\n' > a.png.tmp\necho not a png > b.png.tmp\necho drawn\n", f);
    fclose(f);
    const char *const pngs[] = {"a.png", "b.png"};
    int moved = -1;
    char said[64] = "";
    assert_int_equal(la_report_plot("sh", dir, "draw.sh", "draw.log", pngs, 2, &moved, said, sizeof said), 0);
    assert_int_equal(moved, 1);
    assert_true(file_exists(dir, "a.png") && !file_exists(dir, "a.png.tmp"));
    assert_true(!file_exists(dir, "b.png") && !file_exists(dir, "b.png.tmp"));
    assert_true(file_exists(dir, "draw.log")); /* named: kept */
    assert_string_equal(said, "");
    snprintf(path, sizeof path, "%s/fail.sh", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("echo drawn > c.png.tmp\necho 'line 3: undefined variable'\nexit 3\n", f);
    fclose(f);
    const char *const c[] = {"c.png"};
    assert_int_equal(la_report_plot("sh", dir, "fail.sh", NULL, c, 1, &moved, said, sizeof said), 3);
    assert_int_equal(moved, 0);
    assert_string_equal(said, "line 3: undefined variable");
    assert_true(!file_exists(dir, "c.png") && !file_exists(dir, "c.png.tmp") && !file_exists(dir, "fail.sh.log"));
    assert_int_equal(la_report_plot("/nonexistent/gnuplot", dir, "fail.sh", NULL, NULL, 0, NULL, NULL, 0), 127);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_files(void **state) {
    (void)state;
    char dir[] = "/tmp/la_report_XXXXXX";
    assert_non_null(mkdtemp(dir));
    static const char *const head[] = {"a", "b"};
    la_table t;
    assert_int_equal(la_table_init(&t, 2, head, NULL), LA_OK);
    la_table_row(&t, "%d\t%d", 1, 2);
    assert_int_equal(la_table_write_csv(&t, dir, "t.csv"), LA_OK);
    assert_null(t.cell); /* freed */
    char path[256], buf[256];
    snprintf(path, sizeof path, "%s/t.csv", dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    assert_string_equal(buf, "a,b\n1,2\n");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "x", 1);
    for (int nl = 0; nl < 2; nl++) {
        assert_int_equal(la_report_write_json(dir, "r.json", o, nl), LA_OK);
        snprintf(path, sizeof path, "%s/r.json", dir);
        f = fopen(path, "rb");
        assert_non_null(f);
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        assert_string_equal(buf, nl ? "{\n\t\"x\":\t1\n}\n" : "{\n\t\"x\":\t1\n}");
    }
    cJSON_Delete(o);
    /* a text that ran out of memory is not written */
    la_sbuf bad = {0};
    bad.oom = 1;
    assert_int_equal(la_report_write(dir, "bad.md", &bad), LA_ENOMEM);
    snprintf(path, sizeof path, "%s/bad.md", dir);
    assert_int_not_equal(access(path, F_OK), 0);
    /* an empty text is the empty file */
    la_sbuf empty = {0};
    assert_int_equal(la_report_write(NULL, path, &empty), LA_OK);
    assert_int_equal(access(path, F_OK), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_and_markdown),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_plot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
