/* test_trainer.c -- the trainer (src/train): learning on repeated text with AdamW and Muon,
 * bit-identical resume from a checkpoint, safetensors headers readable by a JSON parser,
 * corrupt / mismatched checkpoints rejected, the training loop's CSV log and interruption,
 * the LR schedule, AdamW arithmetic and Newton-Schulz orthogonalisation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>
#include <cmocka.h>
#include <cblas.h>
#include <cjson/cJSON.h>

#include "longattn.h"
#include "core/internal.h"
#include "train/optim.h"
#include "support/test_corpus.h"

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", g_dir, name); }

static int setup(void **st) {
    (void)st;
    snprintf(g_dir, sizeof g_dir, "/tmp/la_trainer_XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    /* a small repeated text: a learnable signal */
    assert_int_equal(la_test_write_repeated(g_dir, "text.txt", 60), 0);
    return 0;
}

static int teardown(void **st) {
    (void)st;
    la_test_rmtree(g_dir);
    return 0;
}

static la_model *small_model(const char *spec) {
    la_model_config c = la_model_config_default();
    c.n_layer = 2;
    c.d_model = 32;
    c.n_head = 2;
    c.vocab = 256;
    c.train_len = 32;
    snprintf(c.spec, sizeof c.spec, "%s", spec);
    la_model *m = NULL;
    if (la_model_new(&c, 42, &m) != LA_OK) fail_msg("la_model_new: %s", la_errmsg());
    return m;
}

static la_data *text_data(void) {
    char p[256];
    path_in(p, sizeof p, "text.txt");
    la_data *d = NULL;
    if (la_data_open(p, NULL, &d) != LA_OK) fail_msg("la_data_open: %s", la_errmsg());
    return d;
}

static la_train_config small_cfg(la_optimizer opt, int steps) {
    la_train_config c = la_train_config_default();
    c.steps = steps;
    c.B = 4;
    c.T = 32;
    c.lr = 1e-2;
    c.min_lr = 1e-3;
    c.warmup = 5;
    c.optimizer = opt;
    c.eval_batches = 2;
    return c;
}

/* The first loss is about ln 256 = 5.5 nats; the text has ~30 distinct patterns, so a model
 * that learns gets far below it within 80 steps. A broken gradient, optimizer or data
 * pipeline stays near the start. Asserting loss < 0.35 x start (< ~1.9 nats). */
static void learns(la_optimizer opt) {
    la_model *m = small_model("softmax+rope+causal");
    la_data *d = text_data();
    la_train_config c = small_cfg(opt, 80);
    la_trainer *tr;
    assert_int_equal(la_trainer_new(m, d, &c, &tr), LA_OK);
    la_step_info info;
    float first = 0, last = 0;
    for (int i = 0; i < c.steps; i++) {
        assert_int_equal(la_trainer_step(tr, &info), LA_OK);
        if (i == 0) first = info.loss;
        last = info.loss;
    }
    float val;
    assert_int_equal(la_trainer_eval(tr, &val), LA_OK);
    print_message("%s: loss %.3f -> %.3f, val %.3f\n", opt == LA_OPT_MUON ? "muon" : "adamw", first, last, val);
    assert_true(first > 5.0f);
    assert_true(last < 0.35f * first);
    assert_true(val < 0.5f * first);
    assert_int_equal(la_trainer_step_count(tr), 80);
    la_trainer_free(tr);
    la_data_free(d);
    la_model_free(m);
}
static void test_learns_adamw(void **st) { (void)st; learns(LA_OPT_ADAMW); }
static void test_learns_muon(void **st) { (void)st; learns(LA_OPT_MUON); }

/* Caller-provided batches with ignored targets train only the counted positions. */
static void test_step_batch(void **st) {
    (void)st;
    la_model *m = small_model("softmax+rope+causal");
    la_train_config c = small_cfg(LA_OPT_ADAMW, 40);
    la_trainer *tr;
    assert_int_equal(la_trainer_new(m, NULL, &c, &tr), LA_OK);
    assert_int_equal(la_trainer_step(tr, NULL), LA_EINVAL);  // no data
    int32_t tok[2 * 8], tgt[2 * 8];
    for (int i = 0; i < 16; i++) {
        tok[i] = 'a' + i % 8;
        tgt[i] = -1;
    }
    tgt[7] = '7';
    tgt[15] = '9';
    la_step_info info;
    float first = 0;
    for (int i = 0; i < 40; i++) {
        assert_int_equal(la_trainer_step_batch(tr, tok, tgt, 2, 8, &info), LA_OK);
        if (!i) first = info.loss;
    }
    /* two answers that depend only on the batch row (same inputs!) cannot both be learned:
     * the best is ln 2 */
    assert_true(info.loss < 0.3f * first);
    assert_true(info.loss > 0.6f);
    /* a non-finite loss names the step that failed (the 41st), not the last that succeeded */
    la_tensor_info last;
    assert_int_equal(la_model_get_tensor(m, la_model_num_tensors(m) - 1, &last), LA_OK);
    for (size_t i = 0; i < last.numel; i++) la_model_params(m)[last.offset + i] = NAN;
    assert_int_equal(la_trainer_step_batch(tr, tok, tgt, 2, 8, &info), LA_ENUMERIC);
    assert_non_null(strstr(la_errmsg(), "at step 41;"));
    la_trainer_free(tr);
    la_model_free(m);
}

/* la_trainer_step_rows: with grad_accum 1 it is la_trainer_step_batch; with grad_accum 2
 * and the same rows twice the step gradient is (g + g) * 0.5 = g exactly (doubling and
 * halving are exact in float), so both give the weights of la_trainer_step_batch bit for
 * bit: the rows reach the right micro-batches and the fold averages them. Rows whose
 * micro-batches differ are covered against one process in tests/mpi.sh (bitwise). */
static void test_step_rows(void **st) {
    (void)st;
    enum { B = 2, T = 8 };
    int32_t tok[2 * B * T], tgt[2 * B * T];
    for (int i = 0; i < B * T; i++) {
        tok[i] = tok[i + B * T] = 'a' + (i * 7) % 26;
        tgt[i] = tgt[i + B * T] = 'a' + (i * 7 + 7) % 26;
    }
    la_model *ref = small_model("softmax+rope+causal");
    la_train_config c = small_cfg(LA_OPT_ADAMW, 3);
    c.B = B;
    c.T = T;
    la_trainer *tr;
    assert_int_equal(la_trainer_new(ref, NULL, &c, &tr), LA_OK);
    la_step_info want[3], got;
    for (int i = 0; i < 3; i++) assert_int_equal(la_trainer_step_batch(tr, tok, tgt, B, T, &want[i]), LA_OK);
    la_trainer_free(tr);
    for (int A = 1; A <= 2; A++) {
        la_model *m = small_model("softmax+rope+causal");
        c.grad_accum = A;
        assert_int_equal(la_trainer_new(m, NULL, &c, &tr), LA_OK);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(la_trainer_step_rows(tr, tok, tgt, &got), LA_OK);
            assert_true(got.loss == want[i].loss);
            assert_true(got.grad_norm == want[i].grad_norm);
            assert_true(got.comm_seconds == 0);
        }
        assert_memory_equal(la_model_params(m), la_model_params(ref), la_model_num_params(m) * sizeof(float));
        la_trainer_free(tr);
        la_model_free(m);
    }
    assert_int_equal(la_trainer_step_rows(NULL, tok, tgt, &got), LA_EINVAL);
    la_model_free(ref);
}

/* Save at step k, resume in a fresh model + trainer, and compare with an uninterrupted run:
 * every loss and every parameter bitwise equal. Gradient accumulation and clipping on. */
static void resume_bitwise(la_optimizer opt, const char *spec) {
    const int K = 4, N = 9;
    la_train_config c = small_cfg(opt, N);
    c.grad_accum = 2;
    c.clip = 0.5;
    float ref_loss[16], res_loss[16];
    la_step_info info;
    /* uninterrupted */
    la_model *m = small_model(spec);
    la_data *d = text_data();
    la_trainer *tr;
    assert_int_equal(la_trainer_new(m, d, &c, &tr), LA_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(la_trainer_step(tr, &info), LA_OK);
        ref_loss[i] = info.loss;
    }
    size_t P = la_model_num_params(m);
    float *ref = malloc(P * sizeof(float));
    memcpy(ref, la_model_params(m), P * sizeof(float));
    la_trainer_free(tr);
    la_model_free(m);
    la_data_free(d);
    /* interrupted at K */
    char ck[256];
    path_in(ck, sizeof ck, "resume.safetensors");
    m = small_model(spec);
    d = text_data();
    assert_int_equal(la_trainer_new(m, d, &c, &tr), LA_OK);
    for (int i = 0; i < K; i++) {
        assert_int_equal(la_trainer_step(tr, &info), LA_OK);
        res_loss[i] = info.loss;
    }
    assert_int_equal(la_trainer_save(tr, ck), LA_OK);
    /* keep stepping the old trainer: the checkpoint must not depend on what happens after */
    assert_int_equal(la_trainer_step(tr, &info), LA_OK);
    la_trainer_free(tr);
    la_model_free(m);
    la_data_free(d);
    /* resume in fresh objects: model from the checkpoint, trainer state from its sidecar */
    assert_int_equal(la_model_load(ck, &m), LA_OK);
    d = text_data();
    la_train_config c2;
    assert_int_equal(la_trainer_read_config(ck, &c2), LA_OK);
    assert_int_equal(c2.grad_accum, 2);
    assert_int_equal(c2.optimizer, opt);
    assert_int_equal(la_trainer_new(m, d, &c2, &tr), LA_OK);
    assert_int_equal(la_trainer_load(tr, ck), LA_OK);
    assert_int_equal(la_trainer_step_count(tr), K);
    for (int i = K; i < N; i++) {
        assert_int_equal(la_trainer_step(tr, &info), LA_OK);
        res_loss[i] = info.loss;
    }
    assert_memory_equal(ref_loss, res_loss, N * sizeof(float));
    assert_memory_equal(ref, la_model_params(m), P * sizeof(float));
    free(ref);
    la_trainer_free(tr);
    la_model_free(m);
    la_data_free(d);
}
static void test_resume_adamw(void **st) { (void)st; resume_bitwise(LA_OPT_ADAMW, "softmax+rope+causal"); }
static void test_resume_muon_logn(void **st) { (void)st; resume_bitwise(LA_OPT_MUON, "softmax+rope+logn+causal"); }
/* issue 31: the learned sink logits are AdamW parameters (scalar class) saved in the
 * checkpoint and resumed bitwise; and they move away from their initial 0 */
static void test_resume_sink(void **st) {
    (void)st;
    resume_bitwise(LA_OPT_ADAMW, "softmax+sink+rope+causal");
    la_model *m = small_model("softmax+sink+rope+causal");
    la_data *d = text_data();
    la_train_config c = small_cfg(LA_OPT_ADAMW, 5);
    la_trainer *tr;
    la_step_info info;
    assert_int_equal(la_trainer_new(m, d, &c, &tr), LA_OK);
    for (int i = 0; i < 5; i++) assert_int_equal(la_trainer_step(tr, &info), LA_OK);
    int found = 0;
    for (int i = 0; i < la_model_num_tensors(m); i++) {
        la_tensor_info t;
        assert_int_equal(la_model_get_tensor(m, i, &t), LA_OK);
        if (!strstr(t.name, "attn.sinks")) continue;
        found++;
        assert_int_equal(t.pclass, LA_PCLASS_SCALAR);
        double moved = 0;
        for (size_t j = 0; j < t.numel; j++) moved += fabs(la_model_params(m)[t.offset + j]);
        assert_true(moved > 0);
    }
    assert_true(found >= 1);
    la_trainer_free(tr);
    la_model_free(m);
    la_data_free(d);
}
static void test_resume_sigmoid(void **st) { (void)st; resume_bitwise(LA_OPT_ADAMW, "sigmoid+rope+causal"); }

/* The weights file is standard safetensors: an 8-byte little-endian length, a JSON header
 * whose tensors tile the data section in order with F32 shapes, metadata with the config
 * and the spec. Parsed here independently with cJSON. */
static void test_safetensors_header(void **st) {
    (void)st;
    la_model *m = small_model("softmax+sinv(tau=10)+prope(p=0.5)+causal");
    char p[256];
    path_in(p, sizeof p, "w.safetensors");
    assert_int_equal(la_model_save(m, p), LA_OK);
    FILE *f = fopen(p, "rb");
    uint8_t l8[8];
    assert_int_equal(fread(l8, 1, 8, f), 8);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)l8[i] << (8 * i);
    assert_int_equal(hl % 8, 0);
    char *js = calloc(hl + 1, 1);
    assert_int_equal(fread(js, 1, hl, f), hl);
    fseek(f, 0, SEEK_END);
    long fsize = ftell(f);
    fclose(f);
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    cJSON *md = cJSON_GetObjectItem(root, "__metadata__");
    assert_non_null(md);
    assert_string_equal(cJSON_GetObjectItem(md, "n_layer")->valuestring, "2");
    assert_string_equal(cJSON_GetObjectItem(md, "d_model")->valuestring, "32");
    assert_string_equal(cJSON_GetObjectItem(md, "spec")->valuestring, la_model_get_config(m)->spec);
    assert_non_null(strstr(cJSON_GetObjectItem(md, "spec")->valuestring, "sinv"));
    size_t expect = 0;
    const float *P = la_model_params(m);
    FILE *g = fopen(p, "rb");
    for (int i = 0; i < la_model_num_tensors(m); i++) {
        la_tensor_info t;
        la_model_get_tensor(m, i, &t);
        cJSON *e = cJSON_GetObjectItem(root, t.name);
        if (!e) fail_msg("tensor %s missing from the header", t.name);
        assert_string_equal(cJSON_GetObjectItem(e, "dtype")->valuestring, "F32");
        cJSON *sh = cJSON_GetObjectItem(e, "shape");
        assert_int_equal(cJSON_GetArraySize(sh), t.ndim);
        for (int k = 0; k < t.ndim; k++) assert_int_equal((int64_t)cJSON_GetArrayItem(sh, k)->valuedouble, t.shape[k]);
        cJSON *of = cJSON_GetObjectItem(e, "data_offsets");
        size_t b = (size_t)cJSON_GetArrayItem(of, 0)->valuedouble, en = (size_t)cJSON_GetArrayItem(of, 1)->valuedouble;
        assert_int_equal(b, expect);
        assert_int_equal(en - b, t.numel * 4);
        expect = en;
        /* the bytes at that offset are the tensor's values */
        float v;
        fseek(g, 8 + hl + b, SEEK_SET);
        assert_int_equal(fread(&v, 4, 1, g), 1);
        assert_memory_equal(&v, P + t.offset, 4);
    }
    fclose(g);
    assert_int_equal(cJSON_GetArraySize(root), la_model_num_tensors(m) + 1);
    assert_int_equal((long)(8 + hl + expect), fsize);
    cJSON_Delete(root);
    free(js);
    /* and it loads back into an identical model */
    la_model *m2;
    assert_int_equal(la_model_load(p, &m2), LA_OK);
    assert_int_equal(la_model_num_params(m2), la_model_num_params(m));
    assert_memory_equal(la_model_params(m2), P, la_model_num_params(m) * sizeof(float));
    assert_string_equal(la_model_get_config(m2)->spec, la_model_get_config(m)->spec);
    la_model_free(m2);
    la_model_free(m);
}

static void copy_file(const char *from, const char *to, long truncate_at, long flip_at) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int ch;
    long i = 0;
    while ((ch = fgetc(a)) != EOF) {
        if (truncate_at >= 0 && i >= truncate_at) break;
        if (i == flip_at) ch ^= 0x40;
        fputc(ch, b);
        i++;
    }
    fclose(a);
    fclose(b);
}

/* Missing, truncated, corrupted, half-overwritten or mismatched checkpoints are clear
 * errors and leave the trainer unchanged. */
static void test_bad_checkpoints(void **st) {
    (void)st;
    la_model *m = small_model("softmax+rope+causal");
    la_data *d = text_data();
    la_train_config c = small_cfg(LA_OPT_ADAMW, 5);
    la_trainer *tr;
    assert_int_equal(la_trainer_new(m, d, &c, &tr), LA_OK);
    la_step_info info;
    assert_int_equal(la_trainer_step(tr, &info), LA_OK);
    char ck[256], bad[256], bads[300], cks[300];
    path_in(ck, sizeof ck, "good.safetensors");
    path_in(bad, sizeof bad, "bad.safetensors");
    snprintf(cks, sizeof cks, "%s.state", ck);
    snprintf(bads, sizeof bads, "%s.state", bad);
    assert_int_equal(la_trainer_save(tr, ck), LA_OK);
    size_t P = la_model_num_params(m);
    float *before = malloc(P * sizeof(float));
    memcpy(before, la_model_params(m), P * sizeof(float));
    assert_int_equal(la_trainer_step(tr, &info), LA_OK);  // move on, so a load would change things
    memcpy(before, la_model_params(m), P * sizeof(float));

    char missing[256];
    path_in(missing, sizeof missing, "nope.safetensors");
    assert_int_equal(la_trainer_load(tr, missing), LA_EIO);
    assert_non_null(strstr(la_errmsg(), "nope.safetensors"));
    la_model *lm = NULL;
    assert_int_equal(la_model_load(missing, &lm), LA_EIO);

    /* truncated weights */
    copy_file(ck, bad, 3000, -1);
    copy_file(cks, bads, -1, -1);
    assert_int_equal(la_trainer_load(tr, bad), LA_EFORMAT);
    assert_int_equal(la_model_load(bad, &lm), LA_EFORMAT);
    assert_null(lm);
    /* garbage header */
    copy_file(ck, bad, -1, 12);
    assert_int_equal(la_trainer_load(tr, bad), LA_EFORMAT);
    /* one flipped bit in the weights data: the hash pairing catches it */
    FILE *f = fopen(ck, "rb");
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fclose(f);
    copy_file(ck, bad, -1, sz - 10);
    assert_int_equal(la_trainer_load(tr, bad), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "hash"));
    /* missing state sidecar */
    copy_file(ck, bad, -1, -1);
    unlink(bads);
    assert_int_equal(la_trainer_load(tr, bad), LA_EIO);
    /* truncated state */
    copy_file(cks, bads, 200, -1);
    assert_int_equal(la_trainer_load(tr, bad), LA_EFORMAT);
    /* one flipped bit in the optimiser state's data: its hash (state_hash) catches it */
    f = fopen(cks, "rb");
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fclose(f);
    copy_file(cks, bads, -1, sz - 10);
    assert_int_equal(la_trainer_load(tr, bad), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "bad.safetensors.state"));
    assert_memory_equal(before, la_model_params(m), P * sizeof(float));  // untouched
    assert_int_equal(la_trainer_step_count(tr), 2);

    /* a checkpoint of a different model */
    la_model_config mc = *la_model_get_config(m);
    mc.n_layer = 1;
    la_model *other;
    assert_int_equal(la_model_new(&mc, 1, &other), LA_OK);
    la_trainer *tr2;
    assert_int_equal(la_trainer_new(other, d, &c, &tr2), LA_OK);
    assert_int_equal(la_trainer_load(tr2, ck), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "n_layer"));
    la_trainer_free(tr2);
    /* a checkpoint of another optimizer */
    la_train_config cm = c;
    cm.optimizer = LA_OPT_MUON;
    assert_int_equal(la_trainer_new(m, d, &cm, &tr2), LA_OK);
    assert_int_equal(la_trainer_load(tr2, ck), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "optimizer"));
    la_trainer_free(tr2);
    la_model_free(other);
    free(before);
    la_trainer_free(tr);
    la_model_free(m);
    la_data_free(d);
}

static int stop_at_3(void *user, const la_train_progress *p) {
    (*(int *)user)++;
    return p->step == 3;
}

/* la_trainer_run: CSV rows per step with validation at eval_every; a progress callback asking
 * to stop yields LA_EINTERRUPTED with a checkpoint at that step; running again after loading
 * continues to the end and appends to the log. */
/* whole file into a malloc'ed buffer (*n bytes); NULL if missing */
static unsigned char *slurp(const char *path, size_t *n) {
    *n = 0;
    return (unsigned char *)la_test_read_file(path, n);
}

static int count_tmp_files(void) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '\\.tmp\\.' > %s/ntmp.txt", g_dir, g_dir);
    if (system(cmd) < 0) return -1;
    char p[256];
    path_in(p, sizeof p, "ntmp.txt");
    size_t n;
    unsigned char *b = slurp(p, &n);
    int k = b ? atoi((char *)b) : -1;
    free(b);
    return k;
}

/* Issue 17: a trainer checkpoint (weights + .state) written while each atomic-write step
 * (create, write, fsync, close, rename) of either file fails in turn. Both files are
 * written and synced before either is renamed, so every failure leaves the previous pair
 * byte for byte, no temp file, and an error naming the path; that pair still resumes.
 * The renames go state -> .state.new, then weights, then .state.new -> .state
 * (checkpoint.c), so a failing weights rename (the second) also leaves the previous pair:
 * its .state.new is removed. (A kill between the last two renames is covered by
 * tests/python/test_resume.py: the loader then takes .state.new.) */
static void test_checkpoint_io_failures(void **st) {
    (void)st;
    la_model *m = small_model("softmax+rope+causal");
    la_data *d = text_data();
    la_train_config c = small_cfg(LA_OPT_ADAMW, 20);
    la_trainer *tr;
    assert_int_equal(la_trainer_new(m, d, &c, &tr), LA_OK);
    assert_int_equal(la_trainer_step(tr, NULL), LA_OK);
    char ck[256], cks[300];
    path_in(ck, sizeof ck, "io.safetensors");
    snprintf(cks, sizeof cks, "%s.state", ck);
    assert_int_equal(la_trainer_save(tr, ck), LA_OK);
    size_t nw0 = 0, ns0 = 0, nw = 0, ns = 0;
    unsigned char *w0 = slurp(ck, &nw0), *s0 = slurp(cks, &ns0);
    assert_non_null(w0);
    assert_non_null(s0);
    assert_int_equal(la_trainer_step(tr, NULL), LA_OK); /* the next save would differ */
    for (int nth = 1; nth <= 2; nth++)
        for (int step = LA_AFILE_STEP_OPEN; step <= LA_AFILE_STEP_RENAME; step++) {
            la_afile_fail_at((la_afile_step)step, nth);
            la_status s = la_trainer_save(tr, ck);
            la_afile_fail_at(LA_AFILE_STEP_NONE, 0);
            if (s != LA_EIO) fail_msg("file %d step %d: status %s", nth, step, la_status_name(s));
            if (!strstr(la_errmsg(), ck)) fail_msg("file %d step %d: message: %s", nth, step, la_errmsg());
            assert_int_equal(count_tmp_files(), 0);
            unsigned char *w = slurp(ck, &nw), *sb = slurp(cks, &ns);
            int w_same = nw == nw0 && !memcmp(w, w0, nw), s_same = ns == ns0 && !memcmp(sb, s0, ns);
            free(w), free(sb);
            la_model *m2 = NULL;
            la_trainer *tr2 = NULL;
            assert_int_equal(la_model_load(ck, &m2), LA_OK);
            assert_int_equal(la_trainer_new(m2, NULL, &c, &tr2), LA_OK);
            if (!w_same || !s_same) fail_msg("file %d step %d: previous checkpoint changed", nth, step);
            char nx[320];
            snprintf(nx, sizeof nx, "%s.new", cks);
            if (access(nx, F_OK) == 0) fail_msg("file %d step %d: %s left behind", nth, step, nx);
            assert_int_equal(la_trainer_load(tr2, ck), LA_OK);
            assert_int_equal(la_trainer_step_count(tr2), 1);
            la_trainer_free(tr2);
            la_model_free(m2);
        }
    /* with no failure armed the save goes through and replaces both files */
    assert_int_equal(la_trainer_save(tr, ck), LA_OK);
    unsigned char *w = slurp(ck, &nw);
    assert_true(nw != nw0 || memcmp(w, w0, nw));
    free(w), free(w0), free(s0);
    la_trainer_free(tr);
    la_data_free(d);
    la_model_free(m);
}

static void test_train_run(void **st) {
    (void)st;
    la_model *m = small_model("softmax+rope+causal");
    la_data *d = text_data();
    la_train_config c = small_cfg(LA_OPT_ADAMW, 6);
    c.eval_every = 2;
    path_in(c.csv_path, sizeof c.csv_path, "log.csv");
    path_in(c.ckpt_path, sizeof c.ckpt_path, "run.safetensors");
    la_trainer *tr;
    assert_int_equal(la_trainer_new(m, d, &c, &tr), LA_OK);
    int calls = 0;
    assert_int_equal(la_trainer_run(tr, stop_at_3, &calls), LA_EINTERRUPTED);
    assert_int_equal(calls, 3);
    la_trainer_free(tr);
    la_model_free(m);
    assert_int_equal(la_model_load(c.ckpt_path, &m), LA_OK);
    assert_int_equal(la_trainer_new(m, d, &c, &tr), LA_OK);
    assert_int_equal(la_trainer_load(tr, c.ckpt_path), LA_OK);
    assert_int_equal(la_trainer_step_count(tr), 3);
    assert_int_equal(la_trainer_run(tr, NULL, NULL), LA_OK);
    assert_int_equal(la_trainer_step_count(tr), 6);
    FILE *f = fopen(c.csv_path, "r");
    char line[256];
    int rows = 0, with_val = 0;
    assert_non_null(fgets(line, sizeof line, f));
    assert_non_null(strstr(line, "step,lr,loss,val_loss"));
    while (fgets(line, sizeof line, f)) {
        rows++;
        int step;
        float lr, loss, val;
        assert_int_equal(sscanf(line, "%d,%f,%f,%f", &step, &lr, &loss, &val), 4);
        assert_int_equal(step, rows);
        if (!isnan(val)) with_val++;
    }
    fclose(f);
    assert_int_equal(rows, 6);
    assert_int_equal(with_val, 3);  // steps 2, 4, 6
    la_trainer_free(tr);
    la_model_free(m);
    la_data_free(d);
}

static void test_schedule(void **st) {
    (void)st;
    la_train_config c = la_train_config_default();
    c.steps = 110;
    c.warmup = 10;
    c.lr = 1e-3;
    c.min_lr = 1e-4;
    assert_float_equal(la_train_lr_factor(&c, 0), 0.1, 1e-12);
    assert_float_equal(la_train_lr_factor(&c, 9), 1.0, 1e-12);
    assert_float_equal(la_train_lr_factor(&c, 10), 1.0, 1e-12);
    assert_float_equal(la_train_lr_factor(&c, 60), 0.55, 1e-12);  // half-way: (1 + 0.1) / 2
    assert_float_equal(la_train_lr_factor(&c, 110), 0.1, 1e-12);
    assert_float_equal(la_train_lr_factor(&c, 500), 0.1, 1e-12);
    la_train_config bad = c;
    bad.min_lr = 1;
    la_model *m = small_model("softmax+rope+causal");
    la_trainer *tr = NULL;
    assert_int_equal(la_trainer_new(m, NULL, &bad, &tr), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "min_lr"));
    bad = c;
    bad.B = 0;
    assert_int_equal(la_trainer_new(m, NULL, &bad, &tr), LA_EINVAL);
    /* seq_parallel (issue 30): T of at least 2k tiles of 64, then k dividing the ranks (1 here) */
    bad = c;
    bad.seq_parallel = 2;
    bad.T = 192;
    assert_int_equal(la_trainer_new(m, NULL, &bad, &tr), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "at least 193"));
    bad.T = 193;
    assert_int_equal(la_trainer_new(m, NULL, &bad, &tr), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "seq_parallel is 2 but 1 rank was started"));
    bad.seq_parallel = 1; /* 1 (like 0) is no sequence parallelism */
    assert_int_equal(la_trainer_new(m, NULL, &bad, &tr), LA_OK);
    la_trainer_free(tr);
    la_model_free(m);
}

/* AdamW on one scalar, worked by hand: p=1, g=0.5, t=1: m-hat = 0.5, v-hat = 0.25, update
 * = 0.5/0.5 = 1, p = 1 - 0.1 (1 + 0.1 * 1) = 0.89. Second step with g = -0.5 at t=2:
 * m = 0.9*0.05 - 0.05 = -0.005, m-hat = -0.005/0.19; v = 0.95*0.0125 + 0.0125 = 0.024375,
 * v-hat = 0.024375/0.0975 = 0.25. */
static void test_adamw_arithmetic(void **st) {
    (void)st;
    float p = 1, g = 0.5f, m = 0, v = 0;
    la_adamw_update(&p, &g, &m, &v, 1, 0.1, 0.9, 0.95, 1e-8, 0.1, 1);
    assert_float_equal(p, 0.89f, 1e-6);
    g = -0.5f;
    la_adamw_update(&p, &g, &m, &v, 1, 0.1, 0.9, 0.95, 1e-8, 0.1, 2);
    double mh = -0.005 / 0.19, vh = 0.25;
    assert_float_equal(p, 0.89 - 0.1 * (mh / (sqrt(vh) + 1e-8) + 0.1 * 0.89), 1e-6);
}

/* Newton-Schulz maps a badly conditioned matrix to one whose singular values are all near 1
 * (the quintic iteration lands them in about [0.7, 1.2]): X X^T close to I, for the wide
 * and the tall orientation. */
static void test_newton_schulz(void **st) {
    (void)st;
    for (int tall = 0; tall < 2; tall++) {
        int r = tall ? 24 : 8, c = tall ? 8 : 24, mn = 8;
        float *X = malloc(sizeof(float) * r * c), *s = malloc(sizeof(float) * (2 * r * c + 2 * mn * mn));
        la_rng g;
        la_rng_seed(&g, 3);
        for (int i = 0; i < r; i++)
            for (int j = 0; j < c; j++)
                X[i * c + j] = (float)(la_rng_normal(&g) * (tall ? 1 + j * j : 1 + i * i));  // cond ~ 50
        la_muon_newton_schulz5(X, r, c, s);
        /* Gram matrix on the small side */
        double off = 0, diag_min = 1e9, diag_max = 0;
        for (int a = 0; a < mn; a++)
            for (int b = 0; b < mn; b++) {
                double dot = 0;
                for (int k = 0; k < (tall ? r : c); k++)
                    dot += tall ? (double)X[k * c + a] * X[k * c + b] : (double)X[a * c + k] * X[b * c + k];
                if (a == b) {
                    diag_min = fmin(diag_min, dot);
                    diag_max = fmax(diag_max, dot);
                } else {
                    off = fmax(off, fabs(dot));
                }
            }
        print_message("NS5 %s: diag [%.3f, %.3f], max off-diag %.3f\n", tall ? "tall" : "wide", diag_min, diag_max, off);
        assert_true(diag_min > 0.4 && diag_max < 1.5 && off < 0.35);
        free(X);
        free(s);
    }
}

int main(void) {
    /* tiny matrices: one BLAS thread (threads only add spin-waiting on a shared machine) */
    openblas_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_learns_adamw),
        cmocka_unit_test(test_learns_muon),
        cmocka_unit_test(test_step_batch),
        cmocka_unit_test(test_step_rows),
        cmocka_unit_test(test_resume_adamw),
        cmocka_unit_test(test_resume_muon_logn),
        cmocka_unit_test(test_resume_sink),
        cmocka_unit_test(test_resume_sigmoid),
        cmocka_unit_test(test_safetensors_header),
        cmocka_unit_test(test_bad_checkpoints),
        cmocka_unit_test(test_checkpoint_io_failures),
        cmocka_unit_test(test_train_run),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_adamw_arithmetic),
        cmocka_unit_test(test_newton_schulz),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
