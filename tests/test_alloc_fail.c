/* test_alloc_fail.c -- allocation failure injection (issue 17): la_alloc_fail_at(n) makes
 * the n-th library allocation fail (every allocation of the library, the attention
 * workspace, cJSON's and PCRE2's included); each scenario is walked with n = 1, 2, ... until
 * it runs through without reaching the n-th allocation. Every call must return LA_OK or
 * LA_ENOMEM (never crash, never another status), a run that succeeds must give the clean
 * run's result, a failed save must leave the previous file intact and no temp file, and
 * nothing may leak (make test-san runs this under LeakSanitizer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <math.h>

#include "core/internal.h"
#include "longattn.h"
#include "tokenizer/tok_internal.h"
#include "support/test_corpus.h"
#include "support/gguf_writer.h"

static char g_dir[64];

static int setup(void **st) {
    (void)st;
    /* in memory where there is /dev/shm: the walks write thousands of small files, and an
     * fsync per file on a shared disk made them minutes slower */
    snprintf(g_dir, sizeof g_dir, "/dev/shm/la_allocfail_XXXXXX");
    if (!mkdtemp(g_dir)) {
        snprintf(g_dir, sizeof g_dir, "/tmp/la_allocfail_XXXXXX");
        assert_non_null(mkdtemp(g_dir));
    }
    assert_int_equal(la_test_write_repeated(g_dir, "text.txt", 40), 0);
    return 0;
}

static int teardown(void **st) {
    (void)st;
    la_test_rmtree(g_dir);
    return 0;
}

static la_model_config tiny(const char *spec) {
    la_model_config c = la_model_config_default();
    c.n_layer = 2, c.d_model = 16, c.n_head = 2, c.vocab = 256, c.train_len = 16;
    snprintf(c.spec, sizeof c.spec, "%s", spec);
    return c;
}

/* a status inside a walk: LA_OK or LA_ENOMEM only */
#define OK_OR_NOMEM(expr, what)                                                            \
    do {                                                                                   \
        la_status s_ = (expr);                                                             \
        if (s_ != LA_OK && s_ != LA_ENOMEM)                                                \
            fail_msg("n = %ld, %s: %s (%s)", n, what, la_status_name(s_), la_errmsg());    \
        if (s_ == LA_ENOMEM) nomem++;                                                      \
        ok = ok && s_ == LA_OK;                                                            \
    } while (0)

/* walk summary: stop once a run finished without reaching the n-th allocation */
static int walk_done(long n, int nomem, const char *name, long *total) {
    long used = la_alloc_count();
    la_alloc_fail_at(0);
    if (used < n) {
        *total = n - 1;
        assert_int_equal(nomem, 0); /* nothing failed, so nothing may report LA_ENOMEM */
        print_message("%s: %ld allocations, each failed in turn\n", name, n - 1);
        return 1;
    }
    return 0;
}

static void test_forward_backward(void **st) {
    (void)st;
    int32_t tok[2 * 12], tgt[2 * 12];
    for (int i = 0; i < 24; i++) tok[i] = (i * 7) % 256, tgt[i] = (i * 7 + 1) % 256;
    const char *specs[] = {"softmax+rope+causal", "entmax(alpha=1.5)+nape+window(4)"};
    for (int si = 0; si < 2; si++)
        for (long n = 1;; n++) {
            la_model_config c = tiny(specs[si]);
            la_model *m = NULL;
            int nomem = 0, ok = 1;
            float loss;
            la_alloc_fail_at(n);
            OK_OR_NOMEM(la_model_new(&c, 1, &m), "la_model_new");
            if (ok) OK_OR_NOMEM(la_model_forward(m, tok, tgt, 2, 12, &loss, NULL), "forward");
            if (ok) OK_OR_NOMEM(la_model_backward(m), "backward");
            long total;
            int done = walk_done(n, nomem, specs[si], &total);
            if (!ok) assert_true(nomem > 0);
            la_model_free(m);
            if (done) break;
        }
}

static void test_training_step(void **st) {
    (void)st;
    char p[128];
    snprintf(p, sizeof p, "%s/text.txt", g_dir);
    for (long n = 1;; n++) {
        la_model_config c = tiny("softmax+rope+causal");
        la_data_config dc = la_data_config_default();
        la_train_config tc = la_train_config_default();
        tc.B = 2, tc.T = 16, tc.steps = 4, tc.warmup = 1;
        la_model *m = NULL;
        la_data *d = NULL;
        la_trainer *tr = NULL;
        int nomem = 0, ok = 1;
        la_alloc_fail_at(n);
        OK_OR_NOMEM(la_model_new(&c, 1, &m), "la_model_new");
        if (ok) OK_OR_NOMEM(la_data_open(p, &dc, &d), "la_data_open");
        if (ok) OK_OR_NOMEM(la_trainer_new(m, d, &tc, &tr), "la_trainer_new");
        if (ok) OK_OR_NOMEM(la_trainer_step(tr, NULL), "la_trainer_step");
        long total;
        int done = walk_done(n, nomem, "model + data + trainer + one step", &total);
        la_trainer_free(tr);
        la_data_free(d);
        la_model_free(m);
        if (done) break;
    }
}

/* a corpus folder with train/ and val/ (the study corpus layout): a failed allocation while
 * listing val/ must release the names already listed from train/ (the sanitized run's leak
 * check is what fails here) */
static void test_data_split_folders(void **st) {
    (void)st;
    char p[128], sub[160];
    snprintf(p, sizeof p, "%s/split", g_dir);
    assert_int_equal(mkdir(p, 0777), 0);
    snprintf(sub, sizeof sub, "%s/train", p);
    assert_int_equal(mkdir(sub, 0777), 0);
    assert_int_equal(la_test_write_repeated(sub, "a.txt", 40), 0);
    assert_int_equal(la_test_write_repeated(sub, "b.txt", 40), 0);
    snprintf(sub, sizeof sub, "%s/val", p);
    assert_int_equal(mkdir(sub, 0777), 0);
    assert_int_equal(la_test_write_repeated(sub, "c.txt", 40), 0);
    for (long n = 1;; n++) {
        la_data_config dc = la_data_config_default();
        la_data *d = NULL;
        int nomem = 0, ok = 1;
        la_alloc_fail_at(n);
        OK_OR_NOMEM(la_data_open(p, &dc, &d), "la_data_open");
        (void)ok;
        long total;
        int done = walk_done(n, nomem, "data open of a train/ + val/ folder", &total);
        la_data_free(d);
        if (done) break;
    }
}

static int count_tmp(void) {
    DIR *dd = opendir(g_dir);
    int k = 0;
    struct dirent *e;
    while (dd && (e = readdir(dd)))
        if (strstr(e->d_name, ".tmp.")) k++;
    if (dd) closedir(dd);
    return k;
}

static unsigned char *slurp(const char *path, long *len) {
    size_t n = 0;
    unsigned char *b = (unsigned char *)la_test_read_file(path, &n);
    *len = b ? (long)n : -1;
    return b;
}

static void test_checkpoint_save_load(void **st) {
    (void)st;
    la_model_config c = tiny("softmax+logn+rope+causal");
    la_model *m = NULL;
    la_trainer *tr = NULL;
    la_train_config tc = la_train_config_default();
    tc.B = 1, tc.T = 8, tc.steps = 4, tc.optimizer = LA_OPT_MUON;
    assert_int_equal(la_model_new(&c, 2, &m), LA_OK);
    assert_int_equal(la_trainer_new(m, NULL, &tc, &tr), LA_OK);
    char ck[128], cks[140];
    snprintf(ck, sizeof ck, "%s/ck.safetensors", g_dir);
    snprintf(cks, sizeof cks, "%s.state", ck);
    assert_int_equal(la_trainer_save(tr, ck), LA_OK);
    long lw0 = 0, ls0 = 0, lw = 0, ls = 0;
    unsigned char *w0 = slurp(ck, &lw0), *s0 = slurp(cks, &ls0);
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8}, tgt[8] = {2, 3, 4, 5, 6, 7, 8, 9};
    assert_int_equal(la_trainer_step_batch(tr, tok, tgt, 1, 8, NULL), LA_OK); /* a save would differ */
    /* the bytes a clean save writes now (nothing in them depends on the path) */
    char ck1[128], ck1s[140];
    snprintf(ck1, sizeof ck1, "%s/ck1.safetensors", g_dir);
    snprintf(ck1s, sizeof ck1s, "%s.state", ck1);
    assert_int_equal(la_trainer_save(tr, ck1), LA_OK);
    long lw1 = 0, ls1 = 0;
    unsigned char *w1 = slurp(ck1, &lw1), *s1 = slurp(ck1s, &ls1);
    for (long n = 1;; n++) {
        int nomem = 0, ok = 1;
        FILE *f = fopen(ck, "wb"); /* the previous pair, again */
        fwrite(w0, 1, (size_t)lw0, f), fclose(f);
        f = fopen(cks, "wb");
        fwrite(s0, 1, (size_t)ls0, f), fclose(f);
        la_alloc_fail_at(n);
        OK_OR_NOMEM(la_trainer_save(tr, ck), "la_trainer_save");
        long total;
        int done = walk_done(n, nomem, "trainer checkpoint save", &total);
        assert_int_equal(count_tmp(), 0);
        /* a failed save leaves the previous pair, a successful one writes exactly the clean bytes */
        const unsigned char *wx = ok ? w1 : w0, *sx = ok ? s1 : s0;
        long lwx = ok ? lw1 : lw0, lsx = ok ? ls1 : ls0;
        unsigned char *w = slurp(ck, &lw), *s = slurp(cks, &ls);
        if (!(lw == lwx && ls == lsx && !memcmp(w, wx, (size_t)lw) && !memcmp(s, sx, (size_t)ls)))
            fail_msg("n = %ld: save %s but the checkpoint holds other bytes", n, ok ? "succeeded" : "failed");
        free(w), free(s);
        if (done) break;
    }
    free(w1), free(s1);
    for (long n = 1;; n++) {
        int nomem = 0, ok = 1;
        la_model *m2 = NULL;
        la_trainer *tr2 = NULL;
        la_alloc_fail_at(n);
        OK_OR_NOMEM(la_model_load(ck, &m2), "la_model_load");
        if (ok) OK_OR_NOMEM(la_trainer_new(m2, NULL, &tc, &tr2), "la_trainer_new");
        if (ok) OK_OR_NOMEM(la_trainer_load(tr2, ck), "la_trainer_load");
        long total;
        int done = walk_done(n, nomem, "checkpoint load (model + trainer state)", &total);
        if (ok) assert_int_equal(la_trainer_step_count(tr2), 1);
        la_trainer_free(tr2);
        la_model_free(m2);
        if (done) break;
    }
    free(w0), free(s0);
    la_trainer_free(tr);
    la_model_free(m);
}

static void test_kv_session(void **st) {
    (void)st;
    for (long n = 1;; n++) {
        la_model_config c = tiny("softmax+rope+causal");
        la_model *m = NULL;
        la_decoder *d = NULL;
        la_kv_params kp;
        int nomem = 0, ok = 1;
        float logits[256 * 4];
        int32_t prompt[4] = {10, 20, 30, 40}, next = 50;
        la_alloc_fail_at(n);
        OK_OR_NOMEM(la_model_new(&c, 1, &m), "la_model_new");
        if (ok) OK_OR_NOMEM(la_kv_params_for_model(m, &kp), "la_kv_params_for_model");
        if (ok) OK_OR_NOMEM(la_kv_policy_parse("sinks(2,4)+int8", &kp), "la_kv_policy_parse");
        if (ok) OK_OR_NOMEM(la_decoder_new(m, &kp, 4, &d), "la_decoder_new");
        if (ok) OK_OR_NOMEM(la_decoder_step(d, prompt, 4, logits, 1), "la_decoder_step (prompt)");
        for (int t = 0; ok && t < 6; t++) OK_OR_NOMEM(la_decoder_step(d, &next, 1, logits, 0), "la_decoder_step");
        long total;
        int done = walk_done(n, nomem, "KV-cache session (decoder, sinks+int8)", &total);
        la_decoder_free(d);
        la_model_free(m);
        if (done) break;
    }
}

/* ---- GGUF files for the tokenizer and tiny-Llama walks: tests/support/gguf_writer.h ---- */

/* the GPT-2 byte -> character map, as UTF-8 */
static void byte_sym(int byte, char out[4]) {
    int n = 0, cp = -1;
    for (int c = 0; c < 256 && cp < 0; c++) {
        int keep = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255);
        if (c == byte) cp = keep ? c : 256 + n;
        if (!keep) n++;
    }
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

/* tokenizer metadata: byte-level BPE (256 byte tokens, merges for " the" and " fox", an
 * <|end|> control token, pre-tokenizer "smollm": digits, then the GPT-2 regex) or
 * SentencePiece (<unk> <s> </s>, byte tokens, a few scored pieces) */
static void tok_kv(la_tg_buf *kv, int spm) {
    static char store[300][12];
    const char *toks[300];
    int32_t type[300];
    float score[300];
    int n = 0;
    if (!spm) {
        for (int b = 0; b < 256; b++, n++) byte_sym(b, store[n]), toks[n] = store[n], type[n] = 1;
        const char *extra[] = {"he", "\xc4\xa0t", "\xc4\xa0the", "ox", "\xc4\xa0" "f", "\xc4\xa0" "fox", "<|end|>"};
        for (int i = 0; i < 7; i++, n++) toks[n] = extra[i], type[n] = i == 6 ? 3 : 1;
        static const char *merges[] = {"h e", "\xc4\xa0 t", "\xc4\xa0t he", "o x", "\xc4\xa0 f", "\xc4\xa0" "f ox"};
        la_tg_kv_str(kv, "tokenizer.ggml.model", "gpt2");
        la_tg_kv_str(kv, "tokenizer.ggml.pre", "smollm");
        la_tg_kv_strs(kv, "tokenizer.ggml.tokens", toks, n);
        la_tg_kv_arr4(kv, "tokenizer.ggml.token_type", 5, type, n);
        la_tg_kv_strs(kv, "tokenizer.ggml.merges", merges, 6);
        la_tg_kv_u32(kv, "tokenizer.ggml.eos_token_id", (uint32_t)(n - 1));
        la_tg_kv_str(kv, "tokenizer.chat_template", "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}");
        return;
    }
    const char *head[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++, n++) toks[n] = head[i], type[n] = i ? 3 : 2, score[n] = 0;
    for (int b = 0; b < 256; b++, n++)
        snprintf(store[n], sizeof store[n], "<0x%02X>", b), toks[n] = store[n], type[n] = 6, score[n] = 0;
    const char *pieces[] = {"\xe2\x96\x81", "t", "h", "e", "\xe2\x96\x81t", "he", "\xe2\x96\x81the", "o", "x"};
    for (int i = 0; i < 9; i++, n++) toks[n] = pieces[i], type[n] = 1, score[n] = -(float)(i + 1);
    la_tg_kv_str(kv, "tokenizer.ggml.model", "llama");
    la_tg_kv_strs(kv, "tokenizer.ggml.tokens", toks, n);
    la_tg_kv_arr4(kv, "tokenizer.ggml.token_type", 5, type, n);
    la_tg_kv_arr4(kv, "tokenizer.ggml.scores", 6, score, n);
    la_tg_kv_u32(kv, "tokenizer.ggml.bos_token_id", 1);
    la_tg_kv_u32(kv, "tokenizer.ggml.eos_token_id", 2);
    la_tg_kv_u32(kv, "tokenizer.ggml.unknown_token_id", 0);
    la_tg_kv_bool(kv, "tokenizer.ggml.add_bos_token", 1);
}

/* load (file -> GGUF -> tokenizer), encode with specials, decode; ids and text on success */
static la_status tok_run(const char *path, const char *text, la_token_buf *ids, char **dec, long n, int *nomem) {
    int ok = 1;
    la_gguf *g = NULL;
    la_tokenizer *t = NULL;
    size_t len;
    *dec = NULL;
    OK_OR_NOMEM(la_gguf_open(path, &g), "la_gguf_open");
    if (ok) OK_OR_NOMEM(la_tokenizer_from_gguf(g, &t), "la_tokenizer_from_gguf");
    la_gguf_close(g);
    if (ok) OK_OR_NOMEM(la_tokenizer_encode(t, text, strlen(text), LA_TOK_ADD_SPECIAL | LA_TOK_PARSE_SPECIAL, ids),
                        "la_tokenizer_encode");
    if (ok) OK_OR_NOMEM(la_tokenizer_decode(t, ids->ids, ids->n, 0, dec, &len), "la_tokenizer_decode");
    la_tokenizer_free(t);
    return ok ? LA_OK : LA_ENOMEM;
}

static void test_tokenizer(void **st) {
    (void)st;
    static const char text[] = "the fox 2024: the  fox<|end|> \xc3\xa9t\xc3\xa9\n\tthe foxes 12 \xf0\x9f\x99\x82 ox";
    for (int spm = 0; spm < 2; spm++)
        for (int jit = 1; jit >= 0; jit--) {
            if (spm && !jit) continue; /* SentencePiece uses no regex */
            char path[128];
            snprintf(path, sizeof path, "%s/tok%d.gguf", g_dir, spm);
            la_tg_buf kv = {0};
            tok_kv(&kv, spm);
            assert_int_equal(la_tg_write_file(path, &kv, NULL, 0), 0);
            la_tg_free(&kv);
            la_tok_use_jit(jit);
            /* the clean result, to compare every successful run with */
            la_token_buf ref = {0};
            char *rdec = NULL;
            long n = 0;
            int nomem = 0;
            assert_int_equal(tok_run(path, text, &ref, &rdec, 0, &nomem), LA_OK);
            assert_true(ref.n > 10);
            const char *name = spm ? "SentencePiece tokenizer: load + encode + decode"
                                   : jit ? "byte-level BPE tokenizer (PCRE2 JIT): load + encode + decode"
                                         : "byte-level BPE tokenizer (PCRE2 interpreter): load + encode + decode";
            for (n = 1;; n++) {
                la_token_buf ids = {0};
                char *dec = NULL;
                nomem = 0;
                la_alloc_fail_at(n);
                la_status s = tok_run(path, text, &ids, &dec, n, &nomem);
                long total;
                int done = walk_done(n, nomem, name, &total);
                if (s == LA_OK) {
                    if (ids.n != ref.n || memcmp(ids.ids, ref.ids, sizeof *ids.ids * (size_t)ref.n) ||
                        strcmp(dec, rdec))
                        fail_msg("n = %ld: the run succeeded with other ids or text than a clean run", n);
                }
                la_token_buf_free(&ids);
                free(dec);
                if (done) break;
            }
            la_tok_use_jit(1);
            la_token_buf_free(&ref);
            free(rdec);
        }
}

/* ---- long-context evaluation of a tiny Llama GGUF (model + the BPE tokenizer above) ---- */

static void write_tiny_llama(const char *path) {
    const int L = 1, C = 16, H = 2, K = 1, F = 32, D = C / H, V = 263; /* V: the BPE vocabulary */
    la_rng r;
    la_rng_seed(&r, 5);
    la_tg_tensor t[16];
    int nt = 0;
    char nm[64];
    la_tg_add_normal(t, &nt, "token_embd.weight", C, V, &r, 1.0, 0);
    la_tg_add_normal(t, &nt, "output_norm.weight", C, 1, &r, 0.1, 1);
    for (int l = 0; l < L; l++) {
        const struct { const char *n; int cols, rows; } w[] = {{"attn_q", C, H * D}, {"attn_k", C, K * D},
            {"attn_v", C, K * D}, {"attn_output", H * D, C}, {"ffn_gate", C, F}, {"ffn_up", C, F},
            {"ffn_down", F, C}, {"attn_norm", C, 1}, {"ffn_norm", C, 1}};
        for (int i = 0; i < 9; i++) {
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, w[i].n);
            la_tg_add_normal(t, &nt, nm, w[i].cols, w[i].rows, &r, w[i].rows == 1 ? 0.1 : 1.0 / sqrt(w[i].cols),
                       w[i].rows == 1 ? 1 : 0);
        }
    }
    la_tg_buf kv = {0};
    la_tg_kv_str(&kv, "general.architecture", "llama");
    la_tg_kv_u32(&kv, "llama.block_count", L);
    la_tg_kv_u32(&kv, "llama.context_length", 256);
    la_tg_kv_u32(&kv, "llama.embedding_length", C);
    la_tg_kv_u32(&kv, "llama.feed_forward_length", F);
    la_tg_kv_u32(&kv, "llama.attention.head_count", H);
    la_tg_kv_u32(&kv, "llama.attention.head_count_kv", K);
    la_tg_kv_u32(&kv, "llama.rope.dimension_count", D);
    la_tg_kv_f32(&kv, "llama.rope.freq_base", 10000.0f);
    la_tg_kv_f32(&kv, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    tok_kv(&kv, 0);
    assert_int_equal(la_tg_write_file(path, &kv, t, nt), 0);
    la_tg_free(&kv);
    for (int i = 0; i < nt; i++) free(t[i].data);
}

static void test_longeval(void **st) {
    (void)st;
    char model[128], docs[128];
    snprintf(model, sizeof model, "%s/tiny_llama.gguf", g_dir);
    write_tiny_llama(model);
    snprintf(docs, sizeof docs, "%s/le_docs", g_dir);
    mkdir(docs, 0777);
    int sizes[3] = {900, 1500, 700};
    assert_int_equal(la_test_write_corpus(docs, 3, sizes, 9), 0);
    la_longeval_opts o = la_longeval_opts_default();
    o.model = model, o.docs = docs, o.out_dir = NULL; /* no files: model, tokenizer, text, every cell */
    o.n_methods = 2;
    o.methods[0] = "as-trained";
    o.methods[1] = "yarn({s},{C}) | sinks(4,64)+int8";
    o.n_lengths = 2, o.lengths[0] = 1, o.lengths[1] = 2;
    o.n_depths = 1, o.depths[0] = 0.5;
    o.trials = 1, o.distractors = 1, o.buckets = 4, o.chunk = 64, o.threads = 1;
    la_longeval_cell ref[4], cells[4];
    la_status s0 = la_longeval_run(&o, NULL, NULL, ref);
    if (s0 != LA_OK) fail_msg("clean longeval run: %s", la_errmsg());
    for (long n = 1;; n++) {
        int nomem = 0, ok = 1;
        memset(cells, 0, sizeof cells);
        la_alloc_fail_at(n);
        OK_OR_NOMEM(la_longeval_run(&o, NULL, NULL, cells), "la_longeval_run");
        long total;
        int done = walk_done(n, nomem, "longeval (tiny GGUF, 2 methods x 2 lengths, no files)", &total);
        for (int c = 0; ok && c < 4; c++) /* a run that succeeds gives the clean numbers */
            if (cells[c].ppl_bits_token != ref[c].ppl_bits_token || cells[c].passkey_hits != ref[c].passkey_hits ||
                cells[c].multikey_hits != ref[c].multikey_hits)
                fail_msg("n = %ld: cell %d differs from the clean run's", n, c);
        if (done) break;
    }
}

/* ---- a whole study on tiny data ---- */

/* every file under dir (recursively): no temp file of an atomic write (*.tmp.<pid>), every
 * .json parses, every .csv / .md / .gp ends with a newline (a complete write) */
static void check_outputs(const char *dir, long n) {
    DIR *dd = opendir(dir);
    if (!dd) return; /* failed before making it */
    struct dirent *e;
    while ((e = readdir(dd))) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_type == DT_DIR) {
            check_outputs(p, n);
            continue;
        }
        if (strstr(e->d_name, ".tmp.")) fail_msg("n = %ld: temp file %s left behind", n, p);
        long len = 0;
        unsigned char *b = slurp(p, &len);
        assert_non_null(b);
        b[len > 0 ? len : 0] = 0;
        const char *ext = strrchr(e->d_name, '.');
        if (ext && !strcmp(ext, ".json")) {
            cJSON *j = cJSON_Parse((const char *)b);
            if (!j) fail_msg("n = %ld: %s is not complete JSON", n, p);
            cJSON_Delete(j);
        }
        if (ext && (!strcmp(ext, ".csv") || !strcmp(ext, ".md") || !strcmp(ext, ".gp")) && (len < 1 || b[len - 1] != '\n'))
            fail_msg("n = %ld: %s does not end with a newline (incomplete)", n, p);
        free(b);
    }
    closedir(dd);
}

static char *read_out(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    long len = 0;
    unsigned char *b = slurp(p, &len);
    if (!b) fail_msg("%s is missing", p);
    b[len] = 0;
    return (char *)b;
}

/* a JSON file without its timing fields (seconds, the elapsed entry of log rows) */
static cJSON *json_no_timing(const char *dir, const char *name) {
    char *t = read_out(dir, name);
    cJSON *j = cJSON_Parse(t);
    free(t);
    if (!j) fail_msg("%s/%s is not JSON", dir, name);
    cJSON *stack[64];
    int sp = 0;
    stack[sp++] = j;
    while (sp) {
        cJSON *o = stack[--sp];
        for (cJSON *c = o->child, *next; c; c = next) {
            next = c->next;
            const char *k = c->string;
            size_t kl = k ? strlen(k) : 0;
            if (k && ((kl > 2 && !strcmp(k + kl - 2, "_s")) || (kl > 8 && !strcmp(k + kl - 8, "_seconds")))) {
                cJSON_DetachItemViaPointer(o, c);
                cJSON_Delete(c);
                continue;
            }
            if (k && !strcmp(k, "log") && cJSON_IsArray(c))
                for (cJSON *row = c->child; row; row = row->next) cJSON_DeleteItemFromArray(row, 3);
            if ((cJSON_IsObject(c) || cJSON_IsArray(c)) && sp < 64) stack[sp++] = c;
        }
    }
    return j;
}

/* a CSV file without its elapsed_s column (the last) when strip_last */
static char *csv_text(const char *dir, const char *name, int strip_last) {
    char *t = read_out(dir, name), *w = t;
    if (!strip_last) return t;
    for (char *line = t; *line;) {
        char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        char *comma = line;
        for (char *q = line; q < end; q++)
            if (*q == ',') comma = q;
        size_t keep = (size_t)(comma - line);
        memmove(w, line, keep);
        w += keep;
        if (*end) *w++ = '\n', end++;
        line = end;
    }
    *w = 0;
    return t;
}

/* a study's outputs equal the clean run's, timings aside: the CSV tables, results.json and
 * every cell file (plots are off; results.md holds the wall time) */
static void same_as_clean(const char *clean, const char *dir, long n, const char *what) {
    const char *csv[] = {"results.csv", "passkey.csv", "training.csv"};
    for (int i = 0; i < 3; i++) {
        char *a = csv_text(clean, csv[i], i == 2), *b = csv_text(dir, csv[i], i == 2);
        if (strcmp(a, b)) fail_msg("n = %ld: %s, but %s differs from the clean run's", n, what, csv[i]);
        free(a), free(b);
    }
    char cells[512];
    snprintf(cells, sizeof cells, "%s/cells", clean);
    DIR *dd = opendir(cells);
    assert_non_null(dd);
    struct dirent *e;
    int k = 0;
    while ((e = readdir(dd)))
        if (strstr(e->d_name, ".json")) {
            char name[300];
            snprintf(name, sizeof name, "cells/%s", e->d_name);
            cJSON *a = json_no_timing(clean, name), *b = json_no_timing(dir, name);
            if (!cJSON_Compare(a, b, 1)) fail_msg("n = %ld: %s, but %s differs from the clean run's", n, what, name);
            cJSON_Delete(a), cJSON_Delete(b);
            k++;
        }
    closedir(dd);
    assert_true(k >= 3);
    cJSON *a = json_no_timing(clean, "results.json"), *b = json_no_timing(dir, "results.json");
    if (!cJSON_Compare(a, b, 1)) fail_msg("n = %ld: %s, but results.json differs from the clean run's", n, what);
    cJSON_Delete(a), cJSON_Delete(b);
}

static void test_study(void **st) {
    (void)st;
    char data[128], p[160], out[128];
    snprintf(data, sizeof data, "%s/study_data", g_dir);
    mkdir(data, 0777);
    snprintf(p, sizeof p, "%s/train", data);
    mkdir(p, 0777);
    const int L = (la_passkey_min_len() + 7) / 8 * 8;
    int tr[3] = {3 * L, 4 * L, 5 * L}, va[2] = {3 * L, 3 * L};
    assert_int_equal(la_test_write_corpus(p, 3, tr, 1), 0);
    snprintf(p, sizeof p, "%s/val", data);
    mkdir(p, 0777);
    assert_int_equal(la_test_write_corpus(p, 2, va, 2), 0);
    char text[2048];
    snprintf(text, sizeof text,
             "{\"data\": \"%s\", \"model\": {\"n_layer\": 1, \"d_model\": 16, \"n_head\": 2, \"n_kv_head\": 1},"
             " \"steps\": 2, \"batch\": 1, \"seq_len\": %d, \"lr\": 0.01, \"warmup\": 1, \"seed\": 3,"
             " \"eval_lens\": [%d, %d], \"eval_windows\": 1, \"val_every\": 1,"
             " \"passkey\": {\"pretrain_mix\": 0.5, \"finetune_steps\": 1, \"lens\": [%d], \"depths\": [0.5], \"trials\": 1},"
             " \"specs\": [\"softmax+rope\", \"entmax(alpha=1.5)+nape+window(8)\"]}",
             data, L, L, 2 * L, L);
    la_study study;
    assert_int_equal(la_study_parse(text, "tiny.json", &study), LA_OK);
    la_study_opts o = la_study_opts_default();
    o.n_threads = 1;
    o.gnuplot = ""; /* no plots: an external program, not the library's allocations */
    snprintf(out, sizeof out, "%s/study_clean", g_dir);
    la_alloc_fail_at(1L << 60); /* armed (cJSON through the hook too) but never failing: counts */
    assert_int_equal(la_study_run(&study, out, &o, NULL), LA_OK);
    long total_allocs = la_alloc_count();
    la_alloc_fail_at(0);
    print_message("study: %ld allocations in a clean run\n", total_allocs);
    check_outputs(out, 0);
    char clean[128];
    snprintf(clean, sizeof clean, "%s", out);
    /* every n under LA_ALLOC_WALK_STRIDE=1 (the sanitizer build's full walk takes long);
     * by default every STRIDE-th, a stride prime to the pattern of per-step allocations */
    const char *env = getenv("LA_ALLOC_WALK_STRIDE");
    long stride = env && atol(env) > 0 ? atol(env) : 37, runs = 0, failed = 0, resumed = 0;
    snprintf(out, sizeof out, "%s/study_walk", g_dir);
    for (long n = 1;; n += stride) {
        int nomem = 0, ok = 1;
        la_test_rmtree(out);
        la_alloc_fail_at(n);
        OK_OR_NOMEM(la_study_run(&study, out, &o, NULL), "la_study_run");
        long used = la_alloc_count();
        la_alloc_fail_at(0);
        runs++;
        if (used < n) { /* ran through without reaching n */
            assert_int_equal(nomem, 0);
            break;
        }
        if (!ok) failed++;
        check_outputs(out, n);
        if (ok) same_as_clean(clean, out, n, "the study succeeded"); /* a failure it recovered from */
        /* what a failed run left resumes to the clean run's results (every 4th failure) */
        if (!ok && failed % 4 == 1) {
            la_study_opts ro = o;
            ro.resume = 1;
            la_status s = la_study_run(&study, out, &ro, NULL);
            if (s != LA_OK) fail_msg("n = %ld: resuming after the failure: %s", n, la_errmsg());
            same_as_clean(clean, out, n, "resumed after the failure");
            resumed++;
        }
    }
    print_message("study: %ld runs (n = 1, 1 + %ld, ...), %ld failed with LA_ENOMEM, %ld of them resumed to the "
                  "clean results\n", runs, stride, failed, resumed);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_backward),
        cmocka_unit_test(test_training_step),
        cmocka_unit_test(test_data_split_folders),
        cmocka_unit_test(test_checkpoint_save_load),
        cmocka_unit_test(test_kv_session),
        cmocka_unit_test(test_tokenizer),
        cmocka_unit_test(test_study),
        cmocka_unit_test(test_longeval),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
