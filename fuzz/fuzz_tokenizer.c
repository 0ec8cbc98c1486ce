/* fuzz_tokenizer.c -- the GGUF-vocabulary tokenizers (src/tokenizer). The first input byte
 * picks what is fuzzed:
 *   byte % 8 in 0..3: text encoded by a byte-level BPE tokenizer (model "gpt2" with the
 *       "gpt2", "smollm", "llama-bpe" or "qwen2" pre-tokenizer) over a small vocabulary
 *       built here (the 256 GPT-2 byte tokens, merges of common pairs, a control and a
 *       user-defined token); bit 3 adds LA_TOK_PARSE_SPECIAL, bit 4 LA_TOK_ADD_SPECIAL.
 *       Invariants: ids inside the vocabulary, and byte-level BPE is lossless:
 *       decode(encode(text)) == text for every valid UTF-8 text.
 *   4..5: the same text through a SentencePiece BPE tokenizer (model "llama", byte
 *       fallback tokens): ids in range, decode succeeds.
 *   6..7: a vocabulary read from the input (lines: model, pre, tokens, an empty line,
 *       merges) given to la_tokenizer_new, which must refuse it cleanly or build a
 *       tokenizer that encodes and decodes a fixed text. */
#include <string.h>

#include "fuzz_util.h"
#include "longattn.h"
#include "longattn/tokenizer.h"

static la_tokenizer *g_bpe[4], *g_spm;

/* GPT-2's byte -> code point map (printable bytes map to themselves, the rest to 256+k) */
static void byte_token(int b, char out[4]) {
    int cp;
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
        cp = b;
    } else {
        int k = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) k++;
        cp = 256 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
    }
}

static void setup(void) {
    static char bytes[256][4];
    static char merged[64][16];
    static const char *toks[256 + 64 + 2];
    static int32_t types[256 + 64 + 2];
    static const char *merges[64];
    /* pairs in GPT-2 byte form ("\xc4\xa0" is U+0120, the space byte) */
    static const char *pairs[][2] = {{"\xc4\xa0", "t"}, {"h", "e"}, {"\xc4\xa0t", "he"}, {"i", "n"},
                                     {"\xc4\xa0", "a"}, {"e", "r"}, {"o", "n"}, {"\xc4\xa0", "w"},
                                     {"r", "e"}, {"\xc4\xa0", "s"}, {"a", "t"}, {"1", "2"}};
    int n = 0;
    for (int b = 0; b < 256; b++) byte_token(b, bytes[b]), toks[n] = bytes[b], types[n++] = LA_TOKEN_NORMAL;
    int nm = (int)(sizeof pairs / sizeof pairs[0]);
    for (int i = 0; i < nm; i++) {
        snprintf(merged[i], sizeof merged[i], "%s%s", pairs[i][0], pairs[i][1]);
        static char mtext[64][24];
        snprintf(mtext[i], sizeof mtext[i], "%s %s", pairs[i][0], pairs[i][1]);
        merges[i] = mtext[i];
        toks[n] = merged[i], types[n++] = LA_TOKEN_NORMAL;
    }
    toks[n] = "<|endoftext|>", types[n++] = LA_TOKEN_CONTROL;
    toks[n] = "<user>", types[n++] = LA_TOKEN_USER_DEFINED;
    static const char *pres[4] = {"gpt2", "smollm", "llama-bpe", "qwen2"};
    for (int p = 0; p < 4; p++) {
        la_tokenizer_vocab v;
        v = la_tokenizer_vocab_default();
        v.model = "gpt2", v.pre = pres[p];
        v.n_tokens = n, v.tokens = toks, v.token_type = types;
        v.n_merges = nm, v.merges = merges;
        v.bos_id = v.eos_id = n - 2;
        v.add_bos = 1;
        FZ_CHECK(la_tokenizer_new(&v, &g_bpe[p]) == LA_OK, "bpe %s: %s", pres[p], la_errmsg());
    }
    /* SentencePiece: <unk> <s> </s>, 256 byte tokens, letters and a few pieces with scores */
    static char sb[256][8], letters[26][4];
    static const char *st[3 + 256 + 26 + 4];
    static float sc[3 + 256 + 26 + 4];
    static int32_t sy[3 + 256 + 26 + 4];
    int m = 0;
    st[m] = "<unk>", sy[m] = LA_TOKEN_UNKNOWN, sc[m++] = 0;
    st[m] = "<s>", sy[m] = LA_TOKEN_CONTROL, sc[m++] = 0;
    st[m] = "</s>", sy[m] = LA_TOKEN_CONTROL, sc[m++] = 0;
    for (int b = 0; b < 256; b++) snprintf(sb[b], sizeof sb[b], "<0x%02X>", b), st[m] = sb[b], sy[m] = LA_TOKEN_BYTE, sc[m++] = 0;
    for (int c = 0; c < 26; c++) letters[c][0] = (char)('a' + c), letters[c][1] = 0, st[m] = letters[c], sy[m] = 1, sc[m++] = -10.0f - c;
    static const char *pieces[4] = {"\xe2\x96\x81", "\xe2\x96\x81t", "he", "\xe2\x96\x81the"};
    for (int i = 0; i < 4; i++) st[m] = pieces[i], sy[m] = 1, sc[m++] = -1.0f - (float)i;
    la_tokenizer_vocab v;
    v = la_tokenizer_vocab_default();
    v.model = "llama";
    v.n_tokens = m, v.tokens = st, v.scores = sc, v.token_type = sy;
    v.bos_id = 1, v.eos_id = 2, v.unk_id = 0;
    FZ_CHECK(la_tokenizer_new(&v, &g_spm) == LA_OK, "spm: %s", la_errmsg());
}

static void roundtrip(la_tokenizer *t, const char *text, size_t len, int flags, int lossless) {
    la_token_buf buf = {0};
    la_status s = la_tokenizer_encode(t, text, len, flags, &buf);
    if (s != LA_OK) {
        FZ_CHECK(s == LA_EINVAL && strstr(la_errmsg(), "UTF-8"), "encode failed: %s", la_errmsg());
        la_token_buf_free(&buf);
        return;
    }
    int32_t V = la_tokenizer_n_vocab(t);
    for (int64_t i = 0; i < buf.n; i++) FZ_CHECK(buf.ids[i] >= 0 && buf.ids[i] < V, "id %d", buf.ids[i]);
    char *out = NULL;
    size_t olen = 0;
    s = la_tokenizer_decode(t, buf.ids, buf.n, 0, &out, &olen);
    FZ_CHECK(s == LA_OK, "decode failed: %s", la_errmsg());
    if (lossless && !(flags & LA_TOK_ADD_SPECIAL))
        FZ_CHECK(olen == len && memcmp(out, text, len) == 0, "decode(encode(text)) != text (%zu vs %zu bytes)", olen, len);
    free(out);
    la_token_buf_free(&buf);
}

static void from_input(const char *text) {
    /* lines: model, pre, tokens..., "", merges... */
    char *copy = strdup(text), *save = NULL;
    const char *lines[512];
    int nl = 0;
    for (char *p = copy, *line; nl < 512 && (line = strsep(&p, "\n")) != NULL;) lines[nl++] = line;
    (void)save;
    if (nl < 3) {
        free(copy);
        return;
    }
    int blank = 2;
    while (blank < nl && lines[blank][0]) blank++;
    la_tokenizer_vocab v;
    v = la_tokenizer_vocab_default();
    v.model = lines[0];
    v.pre = lines[1][0] ? lines[1] : NULL;
    v.n_tokens = blank - 2, v.tokens = lines + 2;
    v.n_merges = blank < nl ? nl - blank - 1 : 0, v.merges = lines + blank + 1;
    la_tokenizer *t = NULL;
    if (la_tokenizer_new(&v, &t) == LA_OK) {
        roundtrip(t, "hello world 123", 15, 0, 0);
        la_tokenizer_free(t);
    } else {
        FZ_CHECK(t == NULL && la_errmsg()[0], "refused vocabulary without a clean error");
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 8192) return 0;
    if (!g_spm) setup();
    int mode = data[0] & 7, flags = ((data[0] >> 3) & 1 ? LA_TOK_PARSE_SPECIAL : 0) |
                                    ((data[0] >> 4) & 1 ? LA_TOK_ADD_SPECIAL : 0);
    char *text = fz_cstr(data + 1, size - 1);
    if (mode < 4) roundtrip(g_bpe[mode], text, size - 1, flags, 1);
    else if (mode < 6) roundtrip(g_spm, text, size - 1, flags, 0);
    else from_input(text);
    free(text);
    return 0;
}
