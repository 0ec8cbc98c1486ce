/* test_tokenizer.c -- la_tokenizer_* on tiny hand-made vocabularies: the merge rules
 * (byte-level ranks, SentencePiece scores and byte fallback), special tokens, decoding,
 * and one test per kind of bad input (invalid UTF-8 with its byte offset, empty vocabulary,
 * merges naming unknown tokens, unknown model / pre-tokenizer, bad ids), and
 * la_tokenizer_from_gguf on GGUF images built here (missing and mistyped keys). The agreement with
 * real reference tokenizers is tested in tests/python/test_tokenizer.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "longattn.h"
#include "support/gguf_writer.h"

/* ---- a byte-level vocabulary: the 256 GPT-2 byte characters, then merged tokens ---- */

#define MAXTOK 300
static char tok_store[MAXTOK][32];
static const char *toks[MAXTOK];
static int32_t types[MAXTOK];
static float scores[MAXTOK];
static int ntok;

static void put_utf8(char *dst, unsigned cp) {
    if (cp < 0x80) { dst[0] = (char)cp; dst[1] = 0; }
    else { dst[0] = (char)(0xC0 | (cp >> 6)); dst[1] = (char)(0x80 | (cp & 0x3F)); dst[2] = 0; }
}

static int add_tok(const char *s, int type, float score) {
    snprintf(tok_store[ntok], sizeof tok_store[ntok], "%s", s);
    toks[ntok] = tok_store[ntok];
    types[ntok] = type;
    scores[ntok] = score;
    return ntok++;
}

/* the GPT-2 byte -> character map, written out independently of the library's */
static unsigned byte_char(int b) {
    static unsigned map[256];
    static int done;
    if (!done) {
        int n = 0;
        for (int c = 0; c < 256; c++) {
            int keep = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255);
            map[c] = keep ? (unsigned)c : 256u + (unsigned)n++;
        }
        done = 1;
    }
    return map[b];
}

static const char *MERGES[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w", "o r", "\xc4\xa0w or", "l d"};
enum { ID_HE = 256, ID_LL, ID_HELL, ID_HELLO, ID_GW, ID_OR, ID_GWOR, ID_LD, ID_SPECIAL, ID_USER };

static la_tokenizer_vocab bpe_vocab(void) {
    ntok = 0;
    for (int b = 0; b < 256; b++) {
        char s[4];
        put_utf8(s, byte_char(b));
        add_tok(s, LA_TOKEN_NORMAL, 0);
    }
    add_tok("he", 1, 0);
    add_tok("ll", 1, 0);
    add_tok("hell", 1, 0);
    add_tok("hello", 1, 0);
    add_tok("\xc4\xa0w", 1, 0); /* "Ġw" */
    add_tok("or", 1, 0);
    add_tok("\xc4\xa0wor", 1, 0);
    add_tok("ld", 1, 0);
    add_tok("<|end|>", LA_TOKEN_CONTROL, 0);
    add_tok("@@", LA_TOKEN_USER_DEFINED, 0);
    la_tokenizer_vocab v;
    v = la_tokenizer_vocab_default();
    v.model = "gpt2";
    v.pre = "gpt2";
    v.n_tokens = ntok;
    v.tokens = toks;
    v.token_type = types;
    v.n_merges = (int32_t)(sizeof MERGES / sizeof MERGES[0]);
    v.merges = MERGES;
    v.eos_id = ID_SPECIAL;
    return v;
}

static la_tokenizer *make(const la_tokenizer_vocab *v) {
    la_tokenizer *t = NULL;
    la_status s = la_tokenizer_new(v, &t);
    if (s != LA_OK) fail_msg("la_tokenizer_new: %s", la_errmsg());
    return t;
}

static void expect_ids(la_tokenizer *t, const char *text, int flags, const int32_t *want, int n) {
    la_token_buf b = {0};
    assert_int_equal(la_tokenizer_encode(t, text, strlen(text), flags, &b), LA_OK);
    if (b.n != n) fail_msg("\"%s\": %lld ids, want %d", text, (long long)b.n, n);
    for (int i = 0; i < n; i++)
        if (b.ids[i] != want[i]) fail_msg("\"%s\": ids[%d] = %d, want %d", text, i, b.ids[i], want[i]);
    char *dec;
    size_t len;
    assert_int_equal(la_tokenizer_decode(t, b.ids, b.n, 0, &dec, &len), LA_OK);
    assert_string_equal(dec, text); /* byte-level: decode(encode(x)) == x */
    assert_int_equal(len, strlen(text));
    free(dec);
    la_token_buf_free(&b);
}

static void test_bpe_merges(void **state) {
    (void)state;
    la_tokenizer_vocab v = bpe_vocab();
    la_tokenizer *t = make(&v);
    expect_ids(t, "hello world", 0, (int32_t[]){ID_HELLO, ID_GWOR, ID_LD}, 3);
    /* "hel": h+e (rank 0) wins over l+l which is not there; leftover l */
    expect_ids(t, "hel", 0, (int32_t[]){ID_HE, 'l'}, 2);
    /* equal ranks: the leftmost pair merges first ("lll" -> "ll" "l") */
    expect_ids(t, "lll", 0, (int32_t[]){ID_LL, 'l'}, 2);
    /* a space before a digit: the GPT-2 regex keeps " 1" one pre-token, no merge: two ids;
     * the space is the byte-level character of byte 0x20 */
    int32_t sp = la_tokenizer_token_id(t, "\xc4\xa0");
    assert_int_equal(sp, ' ');
    expect_ids(t, "a 1", 0, (int32_t[]){'a', ' ', '1'}, 3);
    la_tokenizer_free(t);
}

static void test_bpe_specials(void **state) {
    (void)state;
    la_tokenizer_vocab v = bpe_vocab();
    la_tokenizer *t = make(&v);
    /* control tokens only with PARSE_SPECIAL; user-defined ones always */
    expect_ids(t, "he<|end|>", LA_TOK_PARSE_SPECIAL, (int32_t[]){ID_HE, ID_SPECIAL}, 2);
    expect_ids(t, "he@@", 0, (int32_t[]){ID_HE, ID_USER}, 2);
    la_token_buf b = {0};
    assert_int_equal(la_tokenizer_encode(t, "<|end|>", 7, 0, &b), LA_OK);
    assert_true(b.n > 1);
    for (int64_t i = 0; i < b.n; i++) assert_int_not_equal(b.ids[i], ID_SPECIAL);
    /* SKIP_SPECIAL leaves control tokens out of the decoded text */
    int32_t ids[] = {ID_HELLO, ID_SPECIAL, ID_USER};
    char *dec;
    assert_int_equal(la_tokenizer_decode(t, ids, 3, LA_TOK_SKIP_SPECIAL, &dec, NULL), LA_OK);
    assert_string_equal(dec, "hello@@");
    free(dec);
    /* add_eos with ADD_SPECIAL appends EOS; without ADD_SPECIAL nothing is added */
    la_tokenizer_free(t);
    v.add_eos = 1;
    t = make(&v);
    b.n = 0;
    assert_int_equal(la_tokenizer_encode(t, "he", 2, LA_TOK_ADD_SPECIAL, &b), LA_OK);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.ids[1], ID_SPECIAL);
    la_token_buf_free(&b);
    assert_int_equal(la_tokenizer_eos(t), ID_SPECIAL);
    assert_int_equal(la_tokenizer_bos(t), -1);
    assert_int_equal(la_tokenizer_n_vocab(t), ntok);
    assert_string_equal(la_tokenizer_token_text(t, ID_HELLO), "hello");
    assert_null(la_tokenizer_token_text(t, ntok));
    assert_null(la_tokenizer_chat_template(t));
    la_tokenizer_free(t);
}

static void expect_bad_utf8(la_tokenizer *t, const char *text, size_t len, const char *offset) {
    la_token_buf b = {0};
    assert_int_equal(la_tokenizer_encode(t, "he", 2, 0, &b), LA_OK);
    assert_int_equal(la_tokenizer_encode(t, text, len, 0, &b), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "UTF-8"));
    if (!strstr(la_errmsg(), offset)) fail_msg("message \"%s\" lacks \"%s\"", la_errmsg(), offset);
    assert_int_equal(b.n, 1); /* the buffer keeps what it had */
    la_token_buf_free(&b);
}

static void test_invalid_utf8(void **state) {
    (void)state;
    la_tokenizer_vocab v = bpe_vocab();
    la_tokenizer *t = make(&v);
    expect_bad_utf8(t, "\xff", 1, "byte offset 0 (byte 0xff)");
    expect_bad_utf8(t, "ab\xc3(", 4, "byte offset 2");                /* bad continuation */
    expect_bad_utf8(t, "x\xc0\xaf", 3, "byte offset 1");              /* overlong '/' */
    expect_bad_utf8(t, "xy\xed\xa0\x80", 5, "byte offset 2");         /* surrogate D800 */
    expect_bad_utf8(t, "abc\xe2\x82", 5, "byte offset 3");            /* cut off at the end */
    expect_bad_utf8(t, "\xf4\x90\x80\x80", 4, "byte offset 0");       /* above U+10FFFF */
    expect_bad_utf8(t, "ok \x80", 4, "byte offset 3");                /* stray continuation */
    la_tokenizer_free(t);
}

static void expect_new_fails(const la_tokenizer_vocab *v, la_status want, const char *a, const char *b) {
    la_tokenizer *t = (la_tokenizer *)1;
    la_status s = la_tokenizer_new(v, &t);
    if (s != want) fail_msg("status %s, want %s (%s)", la_status_name(s), la_status_name(want), la_errmsg());
    assert_null(t);
    if (a && !strstr(la_errmsg(), a)) fail_msg("message \"%s\" lacks \"%s\"", la_errmsg(), a);
    if (b && !strstr(la_errmsg(), b)) fail_msg("message \"%s\" lacks \"%s\"", la_errmsg(), b);
}

static void test_bad_vocab(void **state) {
    (void)state;
    la_tokenizer_vocab v = bpe_vocab();
    expect_new_fails(NULL, LA_EINVAL, "NULL", NULL);
    la_tokenizer_vocab e = v;
    e.n_tokens = 0;
    expect_new_fails(&e, LA_EINVAL, "empty", NULL);
    e = v;
    e.model = "bert";
    expect_new_fails(&e, LA_EINVAL, "\"bert\"", "\"gpt2\"");
    e.model = NULL;
    expect_new_fails(&e, LA_EINVAL, "\"llama\"", NULL);
    e = v;
    e.pre = "falcon";
    expect_new_fails(&e, LA_EINVAL, "\"falcon\"", "smollm, starcoder, gpt2, default, llama-bpe, llama3, qwen2");
    /* merges naming tokens that are not in the vocabulary, or malformed */
    static const char *bad1[] = {"h e", "x zz"};
    e = v;
    e.merges = bad1;
    e.n_merges = 2;
    expect_new_fails(&e, LA_EFORMAT, "merge 1", "\"zz\"");
    static const char *bad2[] = {"h e", "h l"}; /* "hl" is no token */
    e.merges = bad2;
    expect_new_fails(&e, LA_EFORMAT, "makes \"hl\"", NULL);
    static const char *bad3[] = {"hello"};
    e.merges = bad3;
    e.n_merges = 1;
    expect_new_fails(&e, LA_EFORMAT, "\"left right\"", NULL);
    e = v;
    e.n_merges = 0;
    expect_new_fails(&e, LA_EINVAL, "needs merges", NULL);
    e = v;
    e.bos_id = ntok;
    expect_new_fails(&e, LA_EINVAL, "bos_id", NULL);
    e = v;
    e.add_bos = 1;
    expect_new_fails(&e, LA_EINVAL, "add_bos_token", NULL);
    static int32_t badtype[MAXTOK];
    memcpy(badtype, types, sizeof badtype);
    badtype[3] = 9;
    e = v;
    e.token_type = badtype;
    expect_new_fails(&e, LA_EINVAL, "type 9", NULL);
    static const char *nulltok[MAXTOK];
    memcpy(nulltok, toks, sizeof nulltok);
    nulltok[5] = NULL;
    e = v;
    e.tokens = nulltok;
    expect_new_fails(&e, LA_EINVAL, "token 5 is NULL", NULL);
    assert_int_equal(la_tokenizer_new(&v, NULL), LA_EINVAL);
}

static void test_bad_calls(void **state) {
    (void)state;
    la_tokenizer_vocab v = bpe_vocab();
    la_tokenizer *t = make(&v);
    la_token_buf b = {0};
    assert_int_equal(la_tokenizer_encode(NULL, "a", 1, 0, &b), LA_EINVAL);
    assert_int_equal(la_tokenizer_encode(t, "a", 1, 0, NULL), LA_EINVAL);
    assert_int_equal(la_tokenizer_encode(t, NULL, 3, 0, &b), LA_EINVAL);
    assert_int_equal(la_tokenizer_encode(t, NULL, 0, 0, &b), LA_OK);
    assert_int_equal(b.n, 0);
    char *dec = (char *)1;
    int32_t bad[] = {1, ntok};
    assert_int_equal(la_tokenizer_decode(t, bad, 2, 0, &dec, NULL), LA_EINVAL);
    assert_null(dec);
    assert_non_null(strstr(la_errmsg(), "ids[1]"));
    int32_t neg[] = {-1};
    assert_int_equal(la_tokenizer_decode(t, neg, 1, 0, &dec, NULL), LA_EINVAL);
    assert_int_equal(la_tokenizer_decode(t, NULL, 0, 0, &dec, NULL), LA_OK);
    assert_string_equal(dec, "");
    free(dec);
    la_tokenizer_free(t);
    la_tokenizer_free(NULL);
    la_token_buf_free(&b);
}

/* ---- SentencePiece: <unk> <s> </s>, byte tokens, pieces with scores ---- */

static la_tokenizer_vocab spm_vocab(int byte_tokens) {
    ntok = 0;
    add_tok("<unk>", LA_TOKEN_UNKNOWN, 0);
    add_tok("<s>", LA_TOKEN_CONTROL, 0);
    add_tok("</s>", LA_TOKEN_CONTROL, 0);
    for (int b = 0; b < 256 && byte_tokens; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        add_tok(s, LA_TOKEN_BYTE, 0);
    }
    add_tok("\xe2\x96\x81", 1, -1);          /* ▁ */
    add_tok("h", 1, -2);
    add_tok("e", 1, -2);
    add_tok("l", 1, -2);
    add_tok("o", 1, -2);
    add_tok("\xe2\x96\x81h", 1, -5);         /* ▁h */
    add_tok("ll", 1, -3);
    add_tok("he", 1, -4);
    add_tok("hell", 1, -6);
    add_tok("\xe2\x96\x81hell", 1, -7);
    add_tok("\xe2\x96\x81hello", 1, -8);
    add_tok("lo", 1, -1.5f);
    la_tokenizer_vocab v;
    v = la_tokenizer_vocab_default();
    v.model = "llama";
    v.n_tokens = ntok;
    v.tokens = toks;
    v.scores = scores;
    v.token_type = types;
    v.bos_id = 1;
    v.eos_id = 2;
    v.unk_id = 0;
    v.add_bos = 1;
    return v;
}

static void test_spm(void **state) {
    (void)state;
    la_tokenizer_vocab v = spm_vocab(1);
    la_tokenizer *t = make(&v);
    int32_t id_gh = la_tokenizer_token_id(t, "\xe2\x96\x81h"), id_lo = la_tokenizer_token_id(t, "lo");
    int32_t id_ghello = la_tokenizer_token_id(t, "\xe2\x96\x81hello"), id_sp = la_tokenizer_token_id(t, "\xe2\x96\x81");
    int32_t id_he = la_tokenizer_token_id(t, "he"), id_l = la_tokenizer_token_id(t, "l");
    int32_t id_ghell = la_tokenizer_token_id(t, "\xe2\x96\x81hell");
    /* "▁hello": pairs ▁h -5, he -4, (el none), ll -3, lo -1.5. The best score merges
     * first: lo; then ll is stale (its l joined lo), he merges, ▁h is stale: ▁ he l lo */
    la_token_buf b = {0};
    assert_int_equal(la_tokenizer_encode(t, "hello", 5, LA_TOK_ADD_SPECIAL, &b), LA_OK);
    int32_t want[] = {1, id_sp, id_he, id_l, id_lo};
    assert_int_equal(b.n, 5);
    for (int i = 0; i < 5; i++) assert_int_equal(b.ids[i], want[i]);
    /* "▁hell": ll, then he, then he+ll = hell (-6), then ▁+hell = ▁hell (-7) */
    b.n = 0;
    assert_int_equal(la_tokenizer_encode(t, "hell", 4, 0, &b), LA_OK);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.ids[0], id_ghell);
    /* byte fallback for "é" (no piece): <0xC3> <0xA9>; spaces become ▁ */
    b.n = 0;
    assert_int_equal(la_tokenizer_encode(t, "h \xc3\xa9", 4, 0, &b), LA_OK);
    assert_int_equal(b.n, 4);
    assert_int_equal(b.ids[0], id_gh);
    assert_int_equal(b.ids[1], id_sp);
    assert_int_equal(b.ids[2], la_tokenizer_token_id(t, "<0xC3>"));
    assert_int_equal(b.ids[3], la_tokenizer_token_id(t, "<0xA9>"));
    char *dec;
    assert_int_equal(la_tokenizer_decode(t, b.ids, b.n, 0, &dec, NULL), LA_OK);
    assert_string_equal(dec, "h \xc3\xa9"); /* the prefix space is removed again */
    free(dec);
    /* BOS in front, decoded as "<s>" unless SKIP_SPECIAL */
    int32_t ids2[] = {1, id_ghello};
    assert_int_equal(la_tokenizer_decode(t, ids2, 2, 0, &dec, NULL), LA_OK);
    assert_string_equal(dec, "<s>hello");
    free(dec);
    assert_int_equal(la_tokenizer_decode(t, ids2, 2, LA_TOK_SKIP_SPECIAL, &dec, NULL), LA_OK);
    assert_string_equal(dec, "hello");
    free(dec);
    /* "<s>" written in the text is a control token only with PARSE_SPECIAL; the text after
     * it gets the prefix space again (llama.cpp) */
    b.n = 0;
    assert_int_equal(la_tokenizer_encode(t, "<s>h", 4, LA_TOK_PARSE_SPECIAL, &b), LA_OK);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.ids[0], 1);
    assert_int_equal(b.ids[1], id_gh);
    b.n = 0;
    assert_int_equal(la_tokenizer_encode(t, "<s>", 3, 0, &b), LA_OK);
    for (int64_t i = 0; i < b.n; i++) assert_int_not_equal(b.ids[i], 1);
    /* empty text: nothing, or BOS alone */
    b.n = 0;
    assert_int_equal(la_tokenizer_encode(t, "", 0, LA_TOK_ADD_SPECIAL, &b), LA_OK);
    assert_int_equal(b.n, 1);
    la_tokenizer_free(t);

    /* no byte tokens: an unknown character becomes <unk> (one per byte) */
    v = spm_vocab(0);
    t = make(&v);
    b.n = 0;
    assert_int_equal(la_tokenizer_encode(t, "\xc3\xa9", 2, 0, &b), LA_OK);
    assert_int_equal(b.n, 3);
    assert_int_equal(b.ids[0], la_tokenizer_token_id(t, "\xe2\x96\x81"));
    assert_int_equal(b.ids[1], 0);
    la_tokenizer_free(t);
    la_token_buf_free(&b);
}

/* ---- la_tokenizer_from_gguf on GGUF v3 images built here (no tensors) ---- */

/* a tiny byte-level file: tokens a b ab, merge "a b"; `omit` leaves one key out, `bad`
 * spoils one (1: token_type as f32, 2: token_type one short, 3: model is a u32); 4 adds
 * eos and padding ids 0xFFFFFFFF (-1 as u32: none), 5 an eos id 4 (past the last token) */
static la_status from_image(const char *omit, int bad, la_tokenizer **t) {
    static const char *tk[] = {"a", "b", "ab", "<|x|>"};
    static const char *mg[] = {"a b"};
    static const int32_t ty[] = {1, 1, 1, 3};
    la_tg_buf kv = {0}, m = {0};
    if (!omit || strcmp(omit, "model")) {
        if (bad == 3) la_tg_kv_u32(&kv, "tokenizer.ggml.model", 2);
        else la_tg_kv_str(&kv, "tokenizer.ggml.model", "gpt2");
    }
    if (!omit || strcmp(omit, "pre")) la_tg_kv_str(&kv, "tokenizer.ggml.pre", "gpt2");
    if (!omit || strcmp(omit, "tokens")) la_tg_kv_strs(&kv, "tokenizer.ggml.tokens", tk, 4);
    if (!omit || strcmp(omit, "type"))
        la_tg_kv_arr4(&kv, "tokenizer.ggml.token_type", bad == 1 ? 6 : 5, ty, bad == 2 ? 3 : 4);
    if (!omit || strcmp(omit, "merges")) la_tg_kv_strs(&kv, "tokenizer.ggml.merges", mg, 1);
    if (bad >= 4) la_tg_kv_u32(&kv, "tokenizer.ggml.eos_token_id", bad == 4 ? UINT32_MAX : 4);
    if (bad == 4) la_tg_kv_u32(&kv, "tokenizer.ggml.padding_token_id", UINT32_MAX);
    assert_int_equal(kv.nkv, 5 - (omit != NULL) + (bad == 4 ? 2 : bad == 5));
    la_tg_image(&m, &kv, NULL, 0);
    la_gguf *g;
    la_status s = la_gguf_open_mem(m.p, m.n, "tiny.gguf", &g);
    if (s != LA_OK) fail_msg("la_gguf_open_mem: %s", la_errmsg());
    s = la_tokenizer_from_gguf(g, t);
    la_gguf_close(g);
    la_tg_free(&kv), la_tg_free(&m);
    return s;
}

static void test_from_gguf(void **state) {
    (void)state;
    la_tokenizer *t;
    assert_int_equal(from_image(NULL, 0, &t), LA_OK);
    expect_ids(t, "abba<|x|>", LA_TOK_PARSE_SPECIAL, (int32_t[]){2, 1, 0, 3}, 4);
    la_tokenizer_free(t);
    assert_int_equal(from_image("model", 0, &t), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "tokenizer.ggml.model"));
    assert_null(t);
    assert_int_equal(from_image("tokens", 0, &t), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "tokenizer.ggml.tokens"));
    assert_int_equal(from_image(NULL, 1, &t), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "tokenizer.ggml.token_type"));
    assert_int_equal(from_image(NULL, 2, &t), LA_EFORMAT);
    assert_non_null(strstr(la_errmsg(), "3 entries but there are 4 tokens"));
    assert_int_equal(from_image(NULL, 3, &t), LA_EFORMAT);
    assert_int_equal(from_image(NULL, 4, &t), LA_OK); /* was refused as 2147483647 */
    assert_int_equal(la_tokenizer_eos(t), -1);
    la_tokenizer_free(t);
    assert_int_equal(from_image(NULL, 5, &t), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "eos_id 4"));
    assert_int_equal(from_image("merges", 0, &t), LA_EINVAL); /* gpt2 without merges */
    assert_non_null(strstr(la_errmsg(), "needs merges"));
    assert_int_equal(from_image("type", 0, &t), LA_OK);       /* all normal: <|x|> is text */
    la_tokenizer_free(t);
    assert_int_equal(la_tokenizer_from_gguf(NULL, &t), LA_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_merges),   cmocka_unit_test(test_bpe_specials),
        cmocka_unit_test(test_invalid_utf8), cmocka_unit_test(test_bad_vocab),
        cmocka_unit_test(test_bad_calls),    cmocka_unit_test(test_spm),
        cmocka_unit_test(test_from_gguf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
