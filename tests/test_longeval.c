/* test_longeval.c -- the long-context evaluation's tasks (src/tasks/longeval.c): the
 * needle is present once at the stated depth, examples depend only on their seed (so
 * every method sees the same haystack and needles), multi-key distractors differ from the
 * asked key, exact-match scoring. Byte-level GPT-2 tokenizer built here (256 byte
 * symbols and one merge) and a repeated filler line as the stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "longattn.h"

static la_tokenizer *tok;
static int32_t *stream;
static int64_t n_stream;

/* GPT-2's byte -> unicode map, as UTF-8 strings */
static void byte_symbols(char sym[256][4]) {
    int cp[256], n = 0, is_direct[256] = {0};
    for (int b = 0; b < 256; b++)
        is_direct[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    for (int b = 0; b < 256; b++) cp[b] = is_direct[b] ? b : 256 + n++;
    for (int b = 0; b < 256; b++) {
        int c = cp[b];
        if (c < 0x80) sym[b][0] = (char)c, sym[b][1] = 0;
        else sym[b][0] = (char)(0xC0 | (c >> 6)), sym[b][1] = (char)(0x80 | (c & 0x3F)), sym[b][2] = 0;
    }
}

static int setup(void **state) {
    (void)state;
    static char sym[257][4];
    byte_symbols(sym);
    strcpy(sym[256], "\xC4\xA0t"); /* "Ġt" */
    const char *toks[257];
    for (int i = 0; i < 257; i++) toks[i] = sym[i];
    const char *merges[1] = {"\xC4\xA0 t"};
    la_tokenizer_vocab v = la_tokenizer_vocab_default();
    v.model = "gpt2";
    v.n_tokens = 257;
    v.tokens = toks;
    v.n_merges = 1;
    v.merges = merges;
    if (la_tokenizer_new(&v, &tok) != LA_OK) {
        fprintf(stderr, "%s\n", la_errmsg());
        return -1;
    }
    const char *filler = "Real text is used as the haystack; this line stands in when the corpus is absent. ";
    la_token_buf b = {0};
    for (int i = 0; i < 200; i++) la_tokenizer_encode(tok, filler, strlen(filler), 0, &b);
    stream = b.ids;
    n_stream = b.n;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    free(stream);
    la_tokenizer_free(tok);
    return 0;
}

static char *decode(const int32_t *ids, int64_t n) {
    char *t = NULL;
    assert_int_equal(la_tokenizer_decode(tok, ids, n, 0, &t, NULL), LA_OK);
    return t;
}

static int count(const char *hay, const char *needle) {
    int c = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) c++;
    return c;
}

static void test_passkey_needle_once_at_depth(void **state) {
    (void)state;
    const int64_t L = 1500;
    int32_t *a = malloc(sizeof(int32_t) * L), *b = malloc(sizeof(int32_t) * L);
    double depths[] = {0, 0.1, 0.5, 0.9, 1};
    for (int d = 0; d < 5; d++) {
        char ans[16], ans2[16], needle[96];
        int64_t at, at2;
        assert_int_equal(la_longeval_example(tok, stream, n_stream, 0, L, depths[d], 0, 77 + d, a, ans, &at), LA_OK);
        /* same seed -> the same example (the methods never enter it) */
        assert_int_equal(la_longeval_example(tok, stream, n_stream, 0, L, depths[d], 0, 77 + d, b, ans2, &at2), LA_OK);
        assert_memory_equal(a, b, sizeof(int32_t) * L);
        assert_string_equal(ans, ans2);
        assert_int_equal(strlen(ans), 5);
        char *text = decode(a, L);
        snprintf(needle, sizeof needle, "The pass key is %s. Remember it. %s is the pass key.", ans, ans);
        assert_int_equal(count(text, needle), 1);
        assert_int_equal(count(text, ans), 2); /* only inside the needle */
        const char *q = "\nWhat is the pass key? The pass key is";
        assert_true(strlen(text) > strlen(q) && !strcmp(text + strlen(text) - strlen(q), q));
        /* the needle starts at token floor(depth * haystack tokens) */
        char *head = decode(a + at, 20);
        assert_true(!strncmp(head, " The pass key", 13));
        la_token_buf nb = {0}, qb = {0};
        char nt[128];
        snprintf(nt, sizeof nt, " %s", needle);
        la_tokenizer_encode(tok, nt, strlen(nt), 0, &nb);
        la_tokenizer_encode(tok, q, strlen(q), 0, &qb);
        int64_t H = L - nb.n - qb.n;
        assert_int_equal(at, (int64_t)(depths[d] * (double)H));
        la_token_buf_free(&nb);
        la_token_buf_free(&qb);
        free(head);
        free(text);
    }
    /* another seed: another key and haystack offset */
    char ans3[16], ans4[16];
    int64_t at;
    la_longeval_example(tok, stream, n_stream, 0, L, 0.5, 0, 1, a, ans3, &at);
    la_longeval_example(tok, stream, n_stream, 0, L, 0.5, 0, 2, b, ans4, &at);
    assert_true(strcmp(ans3, ans4) || memcmp(a, b, sizeof(int32_t) * L));
    free(a);
    free(b);
}

static void test_multikey_distractors_differ(void **state) {
    (void)state;
    const int64_t L = 2000;
    int32_t *a = malloc(sizeof(int32_t) * L);
    for (int seed = 0; seed < 20; seed++) {
        char ans[16];
        int64_t at;
        int nd = 1 + seed % 5;
        assert_int_equal(la_longeval_example(tok, stream, n_stream, 1, L, 0.3, nd, 1000 + seed, a, ans, &at), LA_OK);
        assert_int_equal(strlen(ans), 7);
        char *text = decode(a, L);
        assert_int_equal(count(text, "One of the special magic numbers for "), nd + 1);
        assert_int_equal(count(text, ans), 1); /* no distractor carries the asked number */
        /* the asked needle is the one at the depth, and the question names its word */
        char *head = decode(a + at, 80);
        assert_true(!strncmp(head, " One of the special magic numbers for ", 38));
        char word[32];
        assert_int_equal(sscanf(head + 38, "%31[a-z]", word), 1);
        char line[160];
        snprintf(line, sizeof line, "for %s is: %s.", word, ans);
        assert_non_null(strstr(head, line));
        snprintf(line, sizeof line, "What is the special magic number for %s mentioned in the provided text?", word);
        assert_int_equal(count(text, line), 1);
        assert_int_equal(count(text, word), 3); /* its needle and twice in the question: words are distinct */
        free(head);
        free(text);
    }
    free(a);
}

static void test_match_and_errors(void **state) {
    (void)state;
    assert_true(la_longeval_match(" 12345.", "12345"));
    assert_true(la_longeval_match("12345", "12345"));
    assert_true(la_longeval_match("\n 12345 is", "12345"));
    assert_false(la_longeval_match(" 123456", "12345"));
    assert_false(la_longeval_match(" 1234", "12345"));
    assert_false(la_longeval_match(" 12 345", "12345"));
    assert_false(la_longeval_match("", "12345"));
    assert_false(la_longeval_match("x 12345", "12345"));
    int32_t t[64];
    char ans[16];
    int64_t at;
    assert_int_equal(la_longeval_example(tok, stream, n_stream, 0, 40, 0.5, 0, 1, t, ans, &at), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "too short"));
    assert_int_equal(la_longeval_example(tok, stream, n_stream, 0, 40, 1.5, 0, 1, t, ans, &at), LA_EINVAL);
    assert_int_equal(la_longeval_example(tok, stream, n_stream, 1, 40, 0.5, 99, 1, t, ans, &at), LA_EINVAL);
}

/* The table against as-trained (issue 28): McNemar counts examples as independent, but the
 * examples of one document share its text. Seven more hits than as-trained (b = 0, c = 7:
 * exact McNemar p = 2 / 2^7 = 0.0156) are "more found" when every document has some of
 * them (each bootstrap resample over the 6 documents keeps a difference >= 6/30 > 0), and
 * "not across documents" when they sit in two documents (5 + 2): a resample without both
 * has difference 0 with probability (4/6)^6 = 0.088 > 0.025, so the interval's lower bound
 * is 0. */
static void test_table_verdict_over_documents(void **state) {
    (void)state;
    la_longeval_opts o = la_longeval_opts_default();
    o.n_methods = 3;
    o.methods[0] = "as-trained", o.methods[1] = "clustered", o.methods[2] = "spread";
    o.n_lengths = 1, o.lengths[0] = 2;
    o.n_depths = 5, o.trials = 1;
    la_longeval_cell *c = calloc(3, sizeof *c);
    assert_non_null(c);
    for (int m = 0; m < 3; m++) {
        c[m].method = m, c[m].L = 64, c[m].n_docs = 6, c[m].n_buckets = 1, c[m].n_ex = 30, c[m].passkey_n = 30;
        for (int d = 0; d < 6; d++) c[m].doc_bits[d][0] = 10, c[m].doc_bytes[d][0] = 20, c[m].doc_n[d][0] = 5;
    }
    for (int e = 0; e < 7; e++) c[1].pk_hit[e] = 1;             /* document 1: 5, document 2: 2 */
    for (int d = 0; d < 6; d++) c[2].pk_hit[d * 5] = 1;         /* one in every document */
    c[2].pk_hit[1] = 1;                                         /* and a second in document 1 */
    c[1].passkey_hits = c[2].passkey_hits = 7;
    int n = la_longeval_table(&o, c, 32, NULL, 0) + 1;
    char *buf = malloc((size_t)n);
    assert_non_null(buf);
    la_longeval_table(&o, c, 32, buf, (size_t)n);
    const char *r1 = strstr(buf, "| `clustered` | 2C |"), *r2 = strstr(buf, "| `spread` | 2C |");
    assert_non_null(r1);
    assert_non_null(r2);
    const char *e1 = strchr(r1, '\n'), *e2 = strchr(r2, '\n');
    assert_non_null(e1);
    assert_non_null(e2);
    char row1[512], row2[512];
    snprintf(row1, sizeof row1, "%.*s", (int)(e1 - r1), r1);
    snprintf(row2, sizeof row2, "%.*s", (int)(e2 - r2), r2);
    assert_non_null(strstr(row1, "0 / 7, p = 0.0156 | +0.23 [+0.00, "));
    assert_non_null(strstr(row1, "not across documents"));
    assert_non_null(strstr(row2, "0 / 7, p = 0.0156 | +0.23 [+0.2"));
    assert_non_null(strstr(row2, "more found"));
    free(buf);
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_passkey_needle_once_at_depth),
        cmocka_unit_test(test_multikey_distractors_differ),
        cmocka_unit_test(test_match_and_errors),
        cmocka_unit_test(test_table_verdict_over_documents),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
