/* test_passkey.c -- the passkey / needle generator and its exact-match scoring. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "core/internal.h"
#include "longattn.h"
#include "support/test_corpus.h"

static char dir[256];
static la_docs hay;

static int setup(void **state) {
    (void)state;
    if (la_test_mkdtemp("la_pk_", dir, sizeof dir)) return -1;
    /* the generator puts a 5-digit number every ~23 words, so keys must be redrawn often */
    const int sizes[] = {5000, 300, 9000, 64, 3000};
    if (la_test_write_corpus(dir, 5, sizes, 11)) return -1;
    return la_docs_load(dir, &hay) == LA_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    la_docs_free(&hay);
    la_test_rmtree(dir);
    return 0;
}

static int count_occurrences(const char *s, int n, const char *pat, int *first) {
    int m = (int)strlen(pat), c = 0;
    *first = -1;
    for (int i = 0; i + m <= n; i++)
        if (!memcmp(s + i, pat, (size_t)m)) {
            if (*first < 0) *first = i;
            c++;
        }
    return c;
}

/* The answer is at the stated depth and at the end, and nowhere else. */
static void test_needle_at_depth_and_absent_elsewhere(void **state) {
    (void)state;
    const int lens[] = {0 /* min */, 128, 512, 2048};
    const double depths[] = {0, 0.1, 0.25, 0.5, 0.75, 0.9, 1};
    int32_t *tok = malloc(4096 * sizeof *tok);
    char *s = malloc(4096);
    for (int li = 0; li < 4; li++) {
        int T = lens[li] ? lens[li] : la_passkey_min_len();
        for (int di = 0; di < 7; di++) {
            for (uint64_t seed = 1; seed <= 6; seed++) {
                la_passkey pk;
                assert_int_equal(la_passkey_make(&hay, T, depths[di], seed * 977 + (uint64_t)di, tok, &pk), LA_OK);
                for (int i = 0; i <= T; i++) {
                    assert_true(tok[i] >= 0 && tok[i] < 256);
                    s[i] = (char)tok[i];
                }
                char key[16], needle[128];
                snprintf(key, sizeof key, "%d", pk.key);
                assert_true(pk.key >= 10000 && pk.key <= 99999);
                snprintf(needle, sizeof needle, " The pass key is %s. Remember it. %s is the pass key. ", key, key);
                int first;
                /* the needle text sits exactly at needle_pos, once */
                assert_int_equal(count_occurrences(s, T + 1, needle, &first), 1);
                assert_int_equal(first, pk.needle_pos);
                assert_int_equal(pk.needle_len, (int)strlen(needle));
                /* the answer digits are the last 5 tokens, right after the question */
                assert_int_equal(pk.answer_pos, T + 1 - LA_PASSKEY_DIGITS);
                assert_memory_equal(s + pk.answer_pos, key, 5);
                const char *q = "\nWhat is the pass key? The pass key is ";
                assert_memory_equal(s + pk.answer_pos - strlen(q), q, strlen(q));
                /* the key occurs 3 times: twice in the needle and as the answer */
                assert_int_equal(count_occurrences(s, T + 1, key, &first), 3);
                assert_int_equal(first, pk.needle_pos + 17);
                /* "pass key": twice in the needle, twice in the question, never in the haystack */
                int n_pass;
                assert_int_equal(count_occurrences(s, T + 1, "pass key", &n_pass), 4);
                /* depth: the needle follows floor(depth*H) haystack bytes, moved back at most
                 * 15 bytes to a word boundary */
                int H = T + 1 - pk.needle_len - (int)strlen(q) - 5;
                int want = (int)(depths[di] * H);
                assert_true(pk.needle_pos <= want && pk.needle_pos >= want - 15);
                assert_true(pk.needle_pos == want || pk.needle_pos == 0 ||
                            s[pk.needle_pos - 1] == ' ' || s[pk.needle_pos - 1] == '\n');
                if (H > 0) assert_true(fabs(pk.depth - (double)pk.needle_pos / H) < 1e-12);
                /* the haystack without the needle is real text from the documents */
                char *h = malloc((size_t)H + 1);
                memcpy(h, s, (size_t)pk.needle_pos);
                memcpy(h + pk.needle_pos, s + pk.needle_pos + pk.needle_len, (size_t)(H - pk.needle_pos));
                char *all = malloc((size_t)hay.n_tokens);
                for (int64_t i = 0; i < hay.n_tokens; i++) all[i] = (char)hay.tokens[i];
                /* a stretch that fits in one document is a substring of it (joins add '\n') */
                int64_t longest = la_docs_longest(&hay);
                if (H > 0 && H < longest / 4 && !memchr(h, '\n', (size_t)H))
                    assert_non_null(memmem(all, (size_t)hay.n_tokens, h, (size_t)H));
                free(all);
                free(h);
            }
        }
    }
    free(tok);
    free(s);
}

/* A haystack of random digits holds ~20% of all 5-digit keys: the key must be redrawn
 * until it is absent, or the count below would be 4+ for about one seed in five. */
static void test_key_redrawn_when_in_haystack(void **state) {
    (void)state;
    enum { N = 30000, T = 20000 };
    int32_t *digits = malloc(N * sizeof *digits);
    int64_t offset[2] = {0, N};
    la_rng r;
    la_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) digits[i] = '0' + (int32_t)la_rng_below(&r, 10);
    la_docs d = {digits, offset, N, 1, 256, 1};
    int32_t *tok = malloc((T + 1) * sizeof *tok);
    char *s = malloc(T + 1);
    for (uint64_t seed = 0; seed < 40; seed++) {
        la_passkey pk;
        assert_int_equal(la_passkey_make(&d, T, 0.5, seed, tok, &pk), LA_OK);
        for (int i = 0; i <= T; i++) s[i] = (char)tok[i];
        char key[16];
        snprintf(key, sizeof key, "%d", pk.key);
        int first;
        assert_int_equal(count_occurrences(s, T + 1, key, &first), 3);
    }
    free(s);
    free(tok);
    free(digits);
}

static void test_seeded_and_varied(void **state) {
    (void)state;
    int32_t a[513], b[513];
    la_passkey pa, pb;
    assert_int_equal(la_passkey_make(&hay, 512, 0.5, 42, a, &pa), LA_OK);
    assert_int_equal(la_passkey_make(&hay, 512, 0.5, 42, b, &pb), LA_OK);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(pa.key, pb.key);
    int differ = 0;
    for (uint64_t seed = 43; seed < 53; seed++) {
        assert_int_equal(la_passkey_make(&hay, 512, 0.5, seed, b, &pb), LA_OK);
        differ += pb.key != pa.key;
    }
    assert_true(differ >= 9);
}

static void test_bad_arguments(void **state) {
    (void)state;
    int32_t tok[600];
    la_passkey pk;
    int m = la_passkey_min_len();
    assert_int_equal(la_passkey_make(&hay, m - 1, 0.5, 1, tok, &pk), LA_ESHAPE);
    assert_non_null(strstr(la_errmsg(), "too short"));
    assert_int_equal(la_passkey_make(&hay, 512, -0.1, 1, tok, &pk), LA_EINVAL);
    assert_int_equal(la_passkey_make(&hay, 512, 1.5, 1, tok, &pk), LA_EINVAL);
    assert_int_equal(la_passkey_make(&hay, 512, NAN, 1, tok, &pk), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "depth"));
    la_docs shards = hay;
    shards.is_bytes = 0;
    assert_int_equal(la_passkey_make(&shards, 512, 0.5, 1, tok, &pk), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "byte-level"));
    assert_int_equal(la_passkey_make(NULL, 512, 0.5, 1, tok, &pk), LA_EINVAL);
}

/* Only an exact match of all five digits counts. */
static void test_exact_match_scoring(void **state) {
    (void)state;
    enum { T = 256 };
    int32_t tok[T + 1], pred[T];
    la_passkey pk;
    assert_int_equal(la_passkey_make(&hay, T, 0.3, 7, tok, &pk), LA_OK);
    /* a perfect predictor: pred[t] = tok[t+1] */
    for (int t = 0; t < T; t++) pred[t] = tok[t + 1];
    assert_int_equal(la_passkey_exact(pred, tok, &pk), 1);
    /* garbage outside the answer positions does not matter */
    for (int t = 0; t < pk.answer_pos - 1; t++) pred[t] = 'x';
    assert_int_equal(la_passkey_exact(pred, tok, &pk), 1);
    /* any single wrong digit fails the whole answer */
    for (int i = 0; i < LA_PASSKEY_DIGITS; i++) {
        int32_t keep = pred[pk.answer_pos - 1 + i];
        pred[pk.answer_pos - 1 + i] = keep == '9' ? '0' : keep + 1;
        assert_int_equal(la_passkey_exact(pred, tok, &pk), 0);
        pred[pk.answer_pos - 1 + i] = keep;
    }
    /* predictions aligned one position late (pred[t] = tok[t]) are not an answer */
    for (int t = 0; t < T; t++) pred[t] = tok[t];
    assert_int_equal(la_passkey_exact(pred, tok, &pk), 0);
    assert_int_equal(la_passkey_exact(NULL, tok, &pk), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_needle_at_depth_and_absent_elsewhere),
        cmocka_unit_test(test_key_redrawn_when_in_haystack),
        cmocka_unit_test(test_seeded_and_varied),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_exact_match_scoring),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
