/* test_study_file.c -- the study file parser: defaults, the shipped files, and a clear
 * error (file, key, problem, fix) for every kind of bad file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/internal.h"
#include "longattn.h"

#define MIN_OK "\"data\": \"d\", \"steps\": 100, \"batch\": 4, \"seq_len\": 128, \"lr\": 0.001, " \
               "\"specs\": [\"softmax+rope\"]"

static void test_minimal_file_takes_defaults(void **state) {
    (void)state;
    la_study s;
    assert_int_equal(la_study_parse("{" MIN_OK "}", "studies/mini.json", &s), LA_OK);
    assert_string_equal(s.name, "mini");
    assert_string_equal(s.data, "d");
    assert_int_equal(s.steps, 100);
    assert_int_equal(s.seq_len, 128);
    /* eval at L, 4L, 16L by default, passkey on the same lengths */
    assert_int_equal(s.n_eval_lens, 3);
    assert_int_equal(s.eval_lens[0], 128);
    assert_int_equal(s.eval_lens[1], 512);
    assert_int_equal(s.eval_lens[2], 2048);
    assert_int_equal(s.n_pk_lens, 3);
    assert_int_equal(s.pk_lens[2], 2048);
    assert_int_equal(s.n_pk_depths, 5);
    assert_int_equal(s.warmup, 10);
    assert_int_equal(s.pk_steps, 25);
    assert_int_equal(s.n_layer, 4);
    assert_int_equal(s.d_model, 128);
    assert_int_equal(s.n_kv_head, 4);
    assert_int_equal(s.n_specs, 1);
    assert_int_equal(s.accum, 1);
    assert_int_equal(s.ranks_per_variant, 1);
    assert_string_equal(s.specs[0], "softmax+rope");
    assert_true(s.qk_gain == 1.0); /* model default: QK-norm gains start at 1 */
    assert_true(s.pk_mix == 0.0);  /* no passkey rows in pre-training unless asked */
    assert_int_equal(la_study_parse("{" MIN_OK ", \"model\": {\"qk_gain\": 1.5}, \"passkey\": {\"pretrain_mix\": 0.25}}",
                                    "mini.json", &s), LA_OK);
    assert_true(s.qk_gain == 1.5);
    assert_true(s.pk_mix == 0.25);
    assert_int_equal(s.n_seeds, 1); /* one seed unless asked */
    assert_int_equal(la_study_parse("{" MIN_OK ", \"seeds\": 3}", "mini.json", &s), LA_OK);
    assert_int_equal(s.n_seeds, 3);
    assert_int_equal(s.pk_mix_all, 0); /* passkey rows scored on the answer digits by default */
    assert_int_equal(la_study_parse("{" MIN_OK ", \"passkey\": {\"pretrain_mix\": 0.25, \"pretrain_targets\": \"all\"}}",
                                    "mini.json", &s), LA_OK);
    assert_int_equal(s.pk_mix_all, 1);
    assert_int_equal(s.precision, LA_DTYPE_F32); /* float32 unless asked */
    assert_int_equal(la_study_parse("{" MIN_OK ", \"precision\": \"bf16\"}", "mini.json", &s), LA_OK);
    assert_int_equal(s.precision, LA_DTYPE_BF16);
}

static void test_shipped_study_files_parse(void **state) {
    (void)state;
    la_study s;
    /* the default: RoPE against scale-invariant p-RoPE with the paper preset's retrieval
     * schedule (docs/study.md, "Why this default"); variants.json: the six-variant table */
    assert_int_equal(la_study_load("studies/default.json", &s), LA_OK);
    assert_int_equal(s.n_specs, 2);
    assert_int_equal(s.eval_lens[s.n_eval_lens - 1], 16 * s.seq_len);
    assert_true(s.pk_trials > 0);
    la_study p;
    assert_int_equal(la_study_load("studies/paper.json", &p), LA_OK);
    assert_int_equal(s.pk_steps, p.pk_steps);
    assert_true(s.pk_mix_all && p.pk_mix_all);
    assert_int_equal(la_study_load("studies/variants.json", &s), LA_OK);
    assert_true(s.n_specs >= 5);
    assert_true(s.pk_trials > 0);
    assert_int_equal(la_study_load("studies/quick.json", &s), LA_OK);
    assert_true(s.n_specs >= 2);
    /* issue 31: the sinks preset, the paper preset's settings with the sink and sigmoid specs */
    assert_int_equal(la_study_load("studies/sinks.json", &s), LA_OK);
    assert_int_equal(s.n_specs, 3);
    assert_int_equal(s.n_seeds, 3);
    assert_int_equal(s.steps, p.steps);
    assert_int_equal(s.seq_len, p.seq_len);
    assert_int_equal(s.pk_steps, p.pk_steps);
}

/* Parse text, expect status st and every needle in the message. */
static void expect_error(const char *text, la_status st, const char *n1, const char *n2, const char *n3) {
    la_study s;
    memset(&s, 0x5a, sizeof s);
    la_study keep = s;
    la_status got = la_study_parse(text, "bad.json", &s);
    if (got != st) fail_msg("expected %s, got %s (%s) for: %s", la_status_name(st), la_status_name(got), la_errmsg(), text);
    const char *m = la_errmsg();
    assert_non_null(strstr(m, "bad.json"));
    if (n1 && !strstr(m, n1)) fail_msg("message lacks '%s': %s", n1, m);
    if (n2 && !strstr(m, n2)) fail_msg("message lacks '%s': %s", n2, m);
    if (n3 && !strstr(m, n3)) fail_msg("message lacks '%s': %s", n3, m);
    assert_memory_equal(&s, &keep, sizeof s); /* untouched on error */
}

static void test_bad_files_have_clear_errors(void **state) {
    (void)state;
    expect_error("{" MIN_OK ", \"stepz\": 3}", LA_EFORMAT, "unknown key \"stepz\"", "steps", "eval_lens");
    expect_error("{" MIN_OK ", \"precision\": \"f16\"}", LA_EFORMAT, "\"precision\"", "\"bf16\"", NULL);
    expect_error("{" MIN_OK ", \"precision\": 16}", LA_EFORMAT, "\"precision\"", "\"f32\"", NULL);
    expect_error("{" MIN_OK ", \"model\": {\"n_layers\": 2}}", LA_EFORMAT, "\"n_layers\"", "\"model\"", "n_layer");
    expect_error("{" MIN_OK ", \"passkey\": {\"depth\": [0]}}", LA_EFORMAT, "\"depth\"", "depths", NULL);
    expect_error("{\"data\": \"d\", \"steps\": 100, \"batch\": 4, \"seq_len\": 128, \"lr\": 0.001, "
                 "\"specs\": [\"softmax+rope\", \"softmax+ropee\"]}", LA_ESPEC, "\"specs\"", "entry 2", "ropee");
    expect_error("{\"data\": \"d\", \"steps\": 100, \"batch\": 4, \"seq_len\": 128, \"lr\": 0.001, "
                 "\"specs\": [\"softmax+rope\", \"softmax+rope+causal\"]}", LA_EFORMAT, "same attention", NULL, NULL);
    expect_error("{\"data\": \"d\", \"steps\": 100, \"batch\": 4, \"seq_len\": 128, \"lr\": 0.001, "
                 "\"specs\": []}", LA_EFORMAT, "\"specs\"", NULL, NULL);
    expect_error("{" MIN_OK ", \"eval_lens\": [128, 512, 512]}", LA_EFORMAT, "\"eval_lens\"", "strictly increasing", "512");
    expect_error("{" MIN_OK ", \"eval_lens\": [2048, 128]}", LA_EFORMAT, "\"eval_lens\"", "strictly increasing", NULL);
    expect_error("{" MIN_OK ", \"eval_lens\": [128, 0.5]}", LA_EFORMAT, "\"eval_lens\"", "entry 2", NULL);
    expect_error("{" MIN_OK ", \"passkey\": {\"lens\": [512, 256]}}", LA_EFORMAT, "passkey.lens", "increasing", NULL);
    expect_error("{" MIN_OK ", \"passkey\": {\"lens\": [64, 256]}}", LA_EFORMAT, "passkey.lens", "too short", NULL);
    expect_error("{" MIN_OK ", \"passkey\": {\"depths\": [0, 1.5]}}", LA_EFORMAT, "passkey.depths", "[0, 1]", NULL);
    expect_error("{\"data\": \"d\", \"batch\": 4, \"seq_len\": 128, \"lr\": 0.001, \"specs\": [\"softmax\"]}",
                 LA_EFORMAT, "\"steps\"", "missing", NULL);
    expect_error("{" MIN_OK ", \"eval_windows\": 2.5}", LA_EFORMAT, "\"eval_windows\"", "whole number", NULL);
    expect_error("{\"data\": \"d\", \"steps\": 100, \"batch\": 4, \"seq_len\": 128, \"lr\": 0, \"specs\": [\"softmax\"]}",
                 LA_EFORMAT, "\"lr\"", NULL, NULL);
    expect_error("{" MIN_OK ", \"model\": {\"d_model\": 100, \"n_head\": 3}}", LA_EFORMAT, "model.d_model", "multiple", NULL);
    expect_error("{" MIN_OK ", \"model\": {\"n_head\": 4, \"n_kv_head\": 3}}", LA_EFORMAT, "model.n_kv_head", NULL, NULL);
    expect_error("{" MIN_OK ", \"seed\": -1}", LA_EFORMAT, "\"seed\"", NULL, NULL);
    expect_error("{" MIN_OK ", \"passkey\": {\"pretrain_targets\": \"digits\"}}", LA_EFORMAT, "passkey.pretrain_targets",
                 "\"answer\"", "\"all\"");
    expect_error("{" MIN_OK ", \"seeds\": 0}", LA_EFORMAT, "\"seeds\"", "between 1 and 16", NULL);
    expect_error("{" MIN_OK ", \"seeds\": 2.5}", LA_EFORMAT, "\"seeds\"", "whole number", NULL);
    expect_error("{" MIN_OK ", \"steps\": 5}", LA_EFORMAT, "\"steps\"", "twice", NULL);
    expect_error("{\"steps\": 100, \"batch\": 4, \"seq_len\": 128, \"lr\": 0.001, \"specs\": [\"softmax\"]}",
                 LA_EFORMAT, "\"data\"", "missing", "data/pydoc");
    expect_error("{" MIN_OK ", \"passkey\": {\"pretrain_mix\": 1.5}}", LA_EFORMAT, "passkey.pretrain_mix", "[0, 1]", NULL);
    expect_error("{" MIN_OK ", \"passkey\": {\"pretrain_mix\": \"a lot\"}}", LA_EFORMAT, "passkey.pretrain_mix", NULL, NULL);
    expect_error("{\"data\": \"d\", \"steps\": 100, \"batch\": 4, \"seq_len\": 64, \"lr\": 0.001, \"specs\": [\"softmax\"], "
                 "\"passkey\": {\"trials\": 0, \"pretrain_mix\": 0.5}}", LA_EFORMAT, "passkey.pretrain_mix", "seq_len 64", NULL);
    expect_error("{" MIN_OK ", \"model\": {\"qk_gain\": 0}}", LA_EFORMAT, "model.qk_gain", NULL, NULL);
    /* batch 4: accum must divide it; ranks_per_variant a whole number >= 1 */
    expect_error("{" MIN_OK ", \"accum\": 3}", LA_EFORMAT, "\"accum\" (3) must divide \"batch\" (4)", "divisor", NULL);
    expect_error("{" MIN_OK ", \"accum\": 8}", LA_EFORMAT, "\"accum\"", NULL, NULL);
    expect_error("{" MIN_OK ", \"ranks_per_variant\": 0}", LA_EFORMAT, "\"ranks_per_variant\"", NULL, NULL);
    expect_error("{" MIN_OK ", \"ranks_per_variant\": 1.5}", LA_EFORMAT, "\"ranks_per_variant\"", "whole number", NULL);
    {
        la_study s;
        assert_int_equal(la_study_parse("{" MIN_OK ", \"accum\": 2, \"ranks_per_variant\": 2}", "g.json", &s), LA_OK);
        assert_int_equal(s.accum, 2);
        assert_int_equal(s.ranks_per_variant, 2);
        assert_int_equal(s.seq_parallel, 1);
    }
    /* seq_parallel (issue 30): divides ranks_per_variant (its default), seq_len of 2 x it tiles */
#define SP_OK "\"data\": \"d\", \"steps\": 100, \"batch\": 4, \"seq_len\": 1536, \"lr\": 0.001, \"specs\": [\"softmax\"]"
    {
        la_study s;
        assert_int_equal(la_study_parse("{" SP_OK ", \"seq_parallel\": 2}", "sp.json", &s), LA_OK);
        assert_int_equal(s.seq_parallel, 2);
        assert_int_equal(s.ranks_per_variant, 2);
        assert_int_equal(la_study_parse("{" SP_OK ", \"seq_parallel\": 2, \"ranks_per_variant\": 4}", "sp.json", &s),
                         LA_OK);
        assert_int_equal(s.ranks_per_variant, 4);
    }
    expect_error("{" SP_OK ", \"seq_parallel\": 2, \"ranks_per_variant\": 3}", LA_EFORMAT,
                 "\"seq_parallel\" (2) must divide \"ranks_per_variant\" (3)", "multiple of 2", NULL);
    expect_error("{" MIN_OK ", \"seq_parallel\": 2}", LA_EFORMAT, "\"seq_len\" (128) is too short",
                 "use seq_len >= 193", NULL);
    expect_error("{" SP_OK ", \"seq_parallel\": 0}", LA_EFORMAT, "\"seq_parallel\"", NULL, NULL);
#undef SP_OK
    expect_error("[1, 2]", LA_EFORMAT, "one JSON object", NULL, NULL);
    /* syntax error: line and column of the fault */
    expect_error("{\n  \"data\": \"d\",\n  \"steps\": 100,,\n}", LA_EFORMAT, "bad.json:3:", "not valid JSON", NULL);
}

static void test_load_missing_file(void **state) {
    (void)state;
    la_study s;
    assert_int_equal(la_study_load("/nonexistent/x.json", &s), LA_EIO);
    assert_non_null(strstr(la_errmsg(), "/nonexistent/x.json"));
    assert_int_equal(la_study_parse(NULL, "x", &s), LA_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal_file_takes_defaults),
        cmocka_unit_test(test_shipped_study_files_parse),
        cmocka_unit_test(test_bad_files_have_clear_errors),
        cmocka_unit_test(test_load_missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
