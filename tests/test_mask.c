/* test_mask.c -- row visibility ranges, tile spans and tile classes (src/attn/mask.c)
 * against pair-by-pair visibility written from SPEC 2 (tests/attn_testutil.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "attn_testutil.h"
#include "attn/attn_internal.h"

static int in_row(const la_rowvis *rv, int j) {
    return (j >= rv->lo0 && j < rv->hi0) || (j >= rv->lo1 && j < rv->hi1);
}

/* Every pattern, with and without documents, several pos0: ranges == pair predicate, and
 * the row's tile span covers every visible key, and tile classes are exact. */
static void check_pattern(const la_spec *sp, int S, int T, int64_t pos0, const int32_t *ids) {
    int32_t ds[256], de[256];
    if (ids) la_doc_runs(ids, S, ds, de);
    la_rowvis rows[256];
    for (int i = 0; i < T; i++) {
        la_row_visibility(sp, S, pos0, i, ids ? ds : NULL, ids ? de : NULL, &rows[i]);
        const la_rowvis *rv = &rows[i];
        assert_true(rv->lo0 <= rv->hi0 && rv->hi0 <= rv->lo1 && rv->lo1 <= rv->hi1);
        long long qa = pos0 + i, s0 = ids ? tu_doc_start(ids, (int)qa) : 0, e0 = ids ? tu_doc_end(ids, S, (int)qa) : S;
        int cnt = 0;
        for (int j = 0; j < S; j++) {
            int want = j >= s0 && j < e0 && tu_visible(sp, qa - s0, j - s0);
            cnt += want;
            if (want != in_row(rv, j))
                fail_msg("pattern %d row %d key %d: range says %d, SPEC says %d", sp->pattern, i, j, in_row(rv, j), want);
        }
        assert_int_equal(rv->nq, cnt);
        assert_int_equal(rv->p, qa - s0);
    }
    for (int i0 = 0; i0 < T; i0 += LA_BQ) {
        int nr = T - i0 < LA_BQ ? T - i0 : LA_BQ;
        la_tilespan sp2;
        la_rows_tilespan(rows + i0, nr, &sp2);
        assert_true(sp2.a0 <= sp2.a1 && sp2.a1 <= sp2.b0 && sp2.b0 <= sp2.b1);
        for (int j0 = 0; j0 < S; j0 += LA_BK) {
            int nc = S - j0 < LA_BK ? S - j0 : LA_BK, any = 0, all = 1;
            for (int r = 0; r < nr; r++)
                for (int x = 0; x < nc; x++) {
                    int vv = in_row(&rows[i0 + r], j0 + x);
                    any |= vv;
                    all &= vv;
                }
            int kt = j0 / LA_BK;
            int covered = (kt >= sp2.a0 && kt < sp2.a1) || (kt >= sp2.b0 && kt < sp2.b1);
            if (any) assert_true(covered);
            assert_int_equal(la_tile_class(rows + i0, nr, j0, nc), !any ? 0 : all ? 1 : 2);
        }
    }
}

static void test_patterns_match_spec(void **state) {
    (void)state;
    int32_t ids[200];
    for (int j = 0; j < 200; j++) ids[j] = j < 3 ? 0 : j < 90 ? 1 : j < 91 ? 2 : j < 150 ? 1 : 4;
    la_pattern pats[5] = {LA_PAT_CAUSAL, LA_PAT_WINDOW, LA_PAT_SINKS, LA_PAT_GLOBAL, LA_PAT_FULL};
    for (int pi = 0; pi < 5; pi++) {
        la_spec s = tu_spec();
        s.pattern = pats[pi];
        s.window = 9;
        s.sinks = 4;
        s.global = 5;
        check_pattern(&s, 200, 200, 0, NULL);
        check_pattern(&s, 200, 70, 130, NULL);
        check_pattern(&s, 150, 60, -20, NULL);
        check_pattern(&s, 100, 50, 120, NULL);
        check_pattern(&s, 200, 130, 70, ids);
        s.window = 1;
        s.sinks = 0;
        s.global = 0;
        check_pattern(&s, 130, 130, 0, ids);
    }
}

/* window(w): a row at position p sees exactly min(p+1, w) keys. */
static void test_window_exact_count(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pattern = LA_PAT_WINDOW;
    for (int w = 1; w <= 600; w += 97) {
        s.window = w;
        for (int p = 0; p < 1000; p += 13) {
            la_rowvis rv;
            la_row_visibility(&s, 1000, 0, p, NULL, NULL, &rv);
            assert_int_equal(rv.nq, p + 1 < w ? p + 1 : w);
            assert_int_equal(rv.hi0, p + 1);
        }
    }
}

/* Longformer global tokens see every key of the document and are seen by all queries. */
static void test_global_tokens(void **state) {
    (void)state;
    la_spec s = tu_spec();
    s.pattern = LA_PAT_GLOBAL;
    s.global = 3;
    s.window = 2;
    la_rowvis rv;
    la_row_visibility(&s, 50, 0, 1, NULL, NULL, &rv); /* a global query */
    assert_int_equal(rv.nq, 50);
    la_row_visibility(&s, 50, 0, 40, NULL, NULL, &rv); /* keys 0,1,2 and 39,40 */
    assert_int_equal(rv.nq, 5);
    assert_int_equal(rv.lo0, 0); assert_int_equal(rv.hi0, 3);
    assert_int_equal(rv.lo1, 39); assert_int_equal(rv.hi1, 41);
}

/* Document runs: an id reappearing after another id starts a new document. */
static void test_doc_runs(void **state) {
    (void)state;
    int32_t ids[8] = {4, 4, 7, 7, 7, 4, 9, 9}, ds[8], de[8];
    la_doc_runs(ids, 8, ds, de);
    int32_t eds[8] = {0, 0, 2, 2, 2, 5, 6, 6}, ede[8] = {2, 2, 5, 5, 5, 6, 8, 8};
    assert_memory_equal(ds, eds, sizeof ds);
    assert_memory_equal(de, ede, sizeof de);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patterns_match_spec),
        cmocka_unit_test(test_window_exact_count),
        cmocka_unit_test(test_global_tokens),
        cmocka_unit_test(test_doc_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
