/* test_api_compat.c -- the names replaced by the naming rule (longattn.h) still work: each
 * deprecated alias gives exactly what its canonical function gives, and la_train_run still
 * calls a callback written with the user data last. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "longattn.h"

/* this file calls the old names on purpose */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* The aliases only forward to the canonical constructors; each check compares the fields
 * that carry non-zero defaults (memcmp of whole structs would read padding bytes). */
static void test_default_constructors(void **state) {
    (void)state;
    la_attn_opts ao = la_attn_default_opts(), an = la_attn_opts_default();
    assert_true(ao.n_threads == an.n_threads && ao.ws == an.ws && ao.doc_ids == an.doc_ids);
    la_model_config mo = la_model_default_config(), mn = la_model_config_default();
    assert_true(mo.n_layer == mn.n_layer && mo.d_model == mn.d_model && mo.vocab == mn.vocab &&
                mo.train_len == mn.train_len && mo.init_std == mn.init_std &&
                mo.qk_gain == mn.qk_gain);
    assert_string_equal(mo.spec, mn.spec);
    assert_int_equal(mn.d_model, 128); /* the documented default, not a zeroed struct */
    la_data_config dco = la_data_default_config(), dcn = la_data_config_default();
    assert_true(dco.val_fraction == dcn.val_fraction && dco.split_seed == dcn.split_seed &&
                dco.eot == dcn.eot && dco.vocab == dcn.vocab);
    la_train_config to = la_train_default_config(), tn = la_train_config_default();
    assert_true(to.steps == tn.steps && to.B == tn.B && to.T == tn.T && to.lr == tn.lr &&
                to.warmup == tn.warmup && to.beta2 == tn.beta2 && to.clip == tn.clip &&
                to.muon_lr == tn.muon_lr && to.seed == tn.seed && to.eval_batches == tn.eval_batches);
    la_kv_params ko = la_kv_default_params(), kn = la_kv_params_default();
    assert_true(ko.n_layers == kn.n_layers && ko.D == kn.D && ko.policy == kn.policy &&
                ko.max_tokens == kn.max_tokens && ko.storage == kn.storage);
    assert_int_equal(kn.D, 64);
    la_sample_params so = la_sample_default_params(), sn = la_sample_params_default();
    assert_true(so.temperature == sn.temperature && so.top_k == sn.top_k && so.top_p == sn.top_p);
    la_study_opts yo = la_study_default_opts(), yn = la_study_opts_default();
    assert_true(yo.n_threads == yn.n_threads && yo.progress == yn.progress && yo.gnuplot == yn.gnuplot);
    la_critical_params co = la_critical_default_params(), cn = la_critical_params_default();
    assert_true(co.n == cn.n && co.d == cn.d && co.draws == cn.draws && co.seed == cn.seed);
    for (int t = 0; t < LA_TASK_COUNT_; t++) {
        la_task_params po = la_task_default_params((la_task)t), pn = la_task_params_default((la_task)t);
        assert_true(po.task == pn.task && po.n_symbols == pn.n_symbols && po.min_len == pn.min_len &&
                    po.max_len == pn.max_len && po.k_len == pn.k_len && po.kv_frac == pn.kv_frac &&
                    po.n_queries == pn.n_queries && po.write_prob == pn.write_prob);
    }
    la_tokenizer_vocab v, w = la_tokenizer_vocab_default();
    memset(&v, 0x5a, sizeof v);
    la_tokenizer_vocab_init(&v);
    assert_true(v.model == NULL && v.tokens == NULL && v.n_tokens == 0 && v.bos_id == -1 &&
                v.pad_id == -1 && v.add_bos == 0 && v.add_space_prefix == -1);
    assert_true(w.model == NULL && w.bos_id == -1 && w.unk_id == -1 && w.add_space_prefix == -1);
}

static void test_getters(void **state) {
    (void)state;
    la_task_params p = la_task_params_default(LA_TASK_COPY);
    la_task_vocab a, b;
    assert_int_equal(la_task_vocab_of(&p, &a), LA_OK);
    assert_int_equal(la_task_get_vocab(&p, &b), LA_OK);
    assert_memory_equal(&a, &b, sizeof a);

    la_diag *d = NULL;
    assert_int_equal(la_diag_new(1000, 10, 1, &d), LA_OK);
    for (int r = 0; r < la_diag_num_ranges(d); r++) {
        int64_t lo1, hi1, lo2, hi2;
        assert_int_equal(la_diag_range_edges(d, r, &lo1, &hi1), LA_OK);
        assert_int_equal(la_diag_get_range_edges(d, r, &lo2, &hi2), LA_OK);
        assert_true(lo1 == lo2 && hi1 == hi2);
    }
    la_diag_free(d);

    la_model_config cfg = la_model_config_default();
    cfg.n_layer = 1, cfg.d_model = 16, cfg.n_head = 2, cfg.vocab = 32;
    la_model *m = NULL;
    assert_int_equal(la_model_new(&cfg, 1, &m), LA_OK);
    for (int i = 0; i < la_model_num_tensors(m); i++) {
        la_tensor_info x, y;
        assert_int_equal(la_model_tensor(m, i, &x), LA_OK);
        assert_int_equal(la_model_get_tensor(m, i, &y), LA_OK);
        assert_string_equal(x.name, y.name);
        assert_true(x.offset == y.offset && x.numel == y.numel);
    }
    la_model_free(m);
}

/* a callback in the old order: progress first, user data last */
static int old_style_stop_at_2(const la_train_progress *p, void *user) {
    int *calls = user;
    (*calls)++;
    return p->step >= 2;
}

static void test_train_run_old_callback(void **state) {
    (void)state;
    la_train_config tc = la_train_config_default();
    tc.steps = 5, tc.B = 2, tc.T = 8, tc.eval_every = 0;
    enum { N = 4096 };
    char dir[] = "/tmp/la_api_compat_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/a.txt", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < N; i++) fputc('a' + (i * 7 + i / 13) % 26, f);
    fclose(f);
    la_data_config dc = la_data_config_default();
    dc.vocab = 256;
    la_data *data = NULL;
    assert_int_equal(la_data_open(path, &dc, &data), LA_OK);
    la_model_config cfg = la_model_config_default();
    cfg.n_layer = 1, cfg.d_model = 16, cfg.n_head = 2, cfg.vocab = 256;
    la_model *m = NULL;
    assert_int_equal(la_model_new(&cfg, 1, &m), LA_OK);
    la_trainer *tr = NULL;
    assert_int_equal(la_trainer_new(m, data, &tc, &tr), LA_OK);
    int calls = 0;
    assert_int_equal(la_train_run(tr, old_style_stop_at_2, &calls), LA_EINTERRUPTED);
    assert_int_equal(calls, 2);
    assert_int_equal(la_trainer_step_count(tr), 2);
    assert_int_equal(la_train_run(tr, NULL, NULL), LA_OK); /* NULL callback still allowed */
    assert_int_equal(la_trainer_step_count(tr), 5);
    la_trainer_free(tr);
    la_data_free(data);
    la_model_free(m);
    remove(path);
    rmdir(dir);
}

/* la_workspace_new (the pointer-returning constructor) still works beside la_workspace_create,
 * and both give a workspace the kernel runs with; la_workspace_create refuses a NULL out. */
static void test_workspace_constructors(void **state) {
    (void)state;
    la_workspace *a = la_workspace_new(), *b = NULL;
    assert_non_null(a);
    assert_int_equal(la_workspace_create(&b), LA_OK);
    assert_non_null(b);
    assert_int_equal(la_workspace_create(NULL), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "la_workspace_create"));
    la_spec spec;
    assert_int_equal(la_spec_parse("softmax+causal", &spec), LA_OK);
    la_shape sh = {1, 2, 2, 8, 8, 4, LA_POS0_AUTO};
    float q[64], k[64], v[64], o[2][64], lse[2][16];
    for (int i = 0; i < 64; i++) q[i] = 0.1f * (float)(i % 7), k[i] = 0.05f * (float)(i % 5), v[i] = (float)i;
    la_workspace *ws[2] = {a, b};
    for (int w = 0; w < 2; w++) {
        la_attn_opts op = la_attn_opts_default();
        op.ws = ws[w];
        op.n_threads = 1;
        assert_int_equal(la_attn_forward(&spec, &sh, q, k, v, o[w], lse[w], &op), LA_OK);
    }
    assert_memory_equal(o[0], o[1], sizeof o[0]);
    la_workspace_free(a);
    la_workspace_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_constructors),
        cmocka_unit_test(test_getters),
        cmocka_unit_test(test_workspace_constructors),
        cmocka_unit_test(test_train_run_old_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
