/* bpe.c -- byte-level BPE (tokenizer.ggml.model "gpt2"): regex pre-tokenizers (PCRE2,
 * compiled once with UTF + UCP so that \p{L}, \p{N}, \s are Unicode classes), the GPT-2
 * byte <-> unicode map, and the ranked merge loop (lowest rank first, leftmost first on
 * equal ranks, as Hugging Face tokenizers' BPE does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* The regexes as Hugging Face tokenizer.json files write them (llama.cpp's copies spell
 * the case-insensitive group out and drop the last "\s+", which matches the same text),
 * with \s written out as WS: the Unicode White_Space characters, which is what \s means to
 * Oniguruma (HF tokenizers' regex engine); PCRE2's own \s also takes U+180E. */
#define WS "\\t\\n\\x{0b}\\f\\r\\x{20}\\x{85}\\p{Z}"
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+"
#define RE_LLAMA3                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*" \
    "|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"
#define RE_QWEN2                                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"     \
    "|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"

typedef struct {
    const char *name;
    const char *re[LA_TOK_MAX_RE]; /* applied in turn: each splits the pieces of the one before */
    int ignore_merges;
} pre_def;

static const pre_def PRE[] = {
    {"smollm", {"\\p{N}", RE_GPT2}, 0},    /* SmolLM/SmolLM2: Digits(individual) + ByteLevel */
    {"starcoder", {"\\p{N}", RE_GPT2}, 0},
    {"gpt2", {RE_GPT2, NULL}, 0},
    {"default", {RE_GPT2, NULL}, 0},
    {"llama-bpe", {RE_LLAMA3, NULL}, 1},   /* Llama 3: ignore_merges in its tokenizer.json */
    {"llama3", {RE_LLAMA3, NULL}, 1},
    {"qwen2", {RE_QWEN2, NULL}, 0},
};

static int g_jit = 1;
void la_tok_use_jit(int on) { __atomic_store_n(&g_jit, on != 0, __ATOMIC_SEQ_CST); }

/* PCRE2's memory (compiled patterns, match data, the interpreter's backtracking frames)
 * comes from la_malloc, so an injected allocation failure reaches it too */
static void *pcre_malloc(PCRE2_SIZE n, void *user) {
    (void)user;
    return la_malloc(n);
}
static void pcre_free(void *p, void *user) {
    (void)user;
    free(p);
}

static void byte_map(la_tokenizer *t) {
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        t->byte_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + extra++);
    }
    for (int c = 0; c < 512; c++) t->cp_byte[c] = -1;
    for (int b = 0; b < 256; b++) t->cp_byte[t->byte_cp[b]] = (int16_t)b;
}

static int put_utf8(char *dst, uint32_t cp) { /* cp < 0x800 here */
    if (cp < 0x80) { dst[0] = (char)cp; return 1; }
    dst[0] = (char)(0xC0 | (cp >> 6));
    dst[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

la_status la_tok_bpe_init(la_tokenizer *t, const char *pre) {
    if (!pre) pre = "default";
    const pre_def *d = NULL;
    for (size_t i = 0; i < sizeof PRE / sizeof PRE[0]; i++)
        if (strcmp(PRE[i].name, pre) == 0) d = &PRE[i];
    if (!d) {
        char names[256] = "";
        for (size_t i = 0; i < sizeof PRE / sizeof PRE[0]; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, PRE[i].name, sizeof names - strlen(names) - 1);
        }
        return la_fail(LA_EINVAL, "tokenizer: pre-tokenizer \"%s\" (tokenizer.ggml.pre) is not supported; "
                       "supported are: %s", pre, names);
    }
    t->ignore_merges = d->ignore_merges;
    t->pgc = pcre2_general_context_create(pcre_malloc, pcre_free, NULL);
    t->pcc = t->pgc ? pcre2_compile_context_create(t->pgc) : NULL;
    t->pmc = t->pcc ? pcre2_match_context_create(t->pgc) : NULL;
    if (!t->pmc) return la_fail(LA_ENOMEM, "tokenizer: cannot allocate PCRE2 contexts");
    for (int i = 0; i < LA_TOK_MAX_RE && d->re[i]; i++) {
        int err;
        PCRE2_SIZE off;
        t->re[i] = pcre2_compile((PCRE2_SPTR)d->re[i], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                                 &off, t->pcc);
        if (!t->re[i] && err == PCRE2_ERROR_HEAP_FAILED)
            return la_fail(LA_ENOMEM, "tokenizer: out of memory compiling the \"%s\" regex", pre);
        if (!t->re[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            return la_fail(LA_EUNSUPPORTED, "tokenizer: PCRE2 cannot compile the \"%s\" regex at %zu: %s",
                           pre, (size_t)off, (const char *)msg);
        }
        t->n_re = i + 1;
        if (__atomic_load_n(&g_jit, __ATOMIC_SEQ_CST))
            (void)pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE); /* interpreted if JIT is unavailable */
    }
    t->md = pcre2_match_data_create(4, t->pgc);
    if (!t->md) return la_fail(LA_ENOMEM, "tokenizer: cannot allocate PCRE2 match data");
    byte_map(t);
    for (int b = 0; b < 256; b++) {
        char s[4];
        t->byte_id[b] = la_tok_lookup(t, s, (size_t)put_utf8(s, t->byte_cp[b]));
    }
    return LA_OK;
}

/* merge one pre-token s[0..len) and append its ids */
static la_status bpe_word(la_tokenizer *t, const char *s, size_t len, la_token_buf *out) {
    if (len > (size_t)INT32_MAX)
        return la_fail(LA_EINVAL, "la_tokenizer_encode: a pre-token of %zu bytes is too long (at most 2^31 - 1)", len);
    if (t->ignore_merges) {
        LA_TRY(la_tok_reserve_buf(t, 2 * len));
        size_t m = 0;
        for (size_t i = 0; i < len; i++) m += (size_t)put_utf8(t->buf + m, t->byte_cp[(unsigned char)s[i]]);
        int32_t id = la_tok_lookup(t, t->buf, m);
        if (id >= 0) return la_tok_push(out, id);
    }
    LA_TRY(la_tok_reserve_sym(t, (int64_t)len));
    la_tok_sym *sym = t->sym;
    int32_t n = (int32_t)len;
    for (int32_t i = 0; i < n; i++)
        sym[i] = (la_tok_sym){t->byte_id[(unsigned char)s[i]], i - 1, i + 1 < n ? i + 1 : -1, i, 1};
    t->heap_n = 0;
    for (int32_t i = 0; i + 1 < n; i++) {
        int32_t merged, r = la_tok_pair_rank(t, sym[i].id, sym[i + 1].id, &merged);
        if (r >= 0) LA_TRY(la_tok_heap_push(t, (la_tok_cand){r, i, i + 1, sym[i].id, sym[i + 1].id}));
    }
    while (t->heap_n > 0) {
        la_tok_cand c = la_tok_heap_pop(t);
        int32_t l = c.left, r = sym[l].next;
        /* stale: the left symbol was merged away or changed, or its right neighbour did */
        if (sym[l].len == 0 || r < 0 || sym[l].id != c.a || sym[r].id != c.b) continue;
        int32_t merged;
        (void)la_tok_pair_rank(t, c.a, c.b, &merged);
        sym[l].id = merged;
        sym[l].len += sym[r].len;
        sym[r].len = 0;
        sym[l].next = sym[r].next;
        if (sym[l].next >= 0) sym[sym[l].next].prev = l;
        int32_t p = sym[l].prev, q = sym[l].next, rk;
        if (p >= 0 && (rk = la_tok_pair_rank(t, sym[p].id, sym[l].id, &merged)) >= 0)
            LA_TRY(la_tok_heap_push(t, (la_tok_cand){rk, p, l, sym[p].id, sym[l].id}));
        if (q >= 0 && (rk = la_tok_pair_rank(t, sym[l].id, sym[q].id, &merged)) >= 0)
            LA_TRY(la_tok_heap_push(t, (la_tok_cand){rk, l, q, sym[l].id, sym[q].id}));
    }
    /* a byte whose character is not in the vocabulary is dropped, as HF tokenizers' BPE
     * without unk_token and llama.cpp do (the byte-level vocabularies hold all 256) */
    for (int32_t i = 0; i >= 0; i = sym[i].next)
        if (sym[i].id >= 0) LA_TRY(la_tok_push(out, sym[i].id));
    return LA_OK;
}

/* split s[0..len) by regex `level` (matches and the gaps between them are pieces, as the
 * Hugging Face "Isolated" split behaviour), then each piece by the next regex or BPE */
static la_status split(la_tokenizer *t, int level, const char *s, size_t len, la_token_buf *out) {
    if (len == 0) return LA_OK;
    if (level == t->n_re) return bpe_word(t, s, len, out);
    size_t pos = 0;
    while (pos < len) {
        int rc = pcre2_match(t->re[level], (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, t->md, t->pmc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc == PCRE2_ERROR_NOMEMORY) return la_fail(LA_ENOMEM, "tokenizer: PCRE2 match: out of memory");
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return la_fail(LA_EUNSUPPORTED, "tokenizer: PCRE2 match failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* an empty match (none of the built-in regexes makes one): step on */
            pos = me + (size_t)la_tok_utf8_len((unsigned char)s[me]);
            continue;
        }
        LA_TRY(split(t, level + 1, s + pos, ms - pos, out)); /* the gap before the match */
        LA_TRY(split(t, level + 1, s + ms, me - ms, out));
        pos = me;
    }
    return split(t, level + 1, s + pos, len - pos, out);
}

la_status la_tok_bpe_encode(la_tokenizer *t, const char *text, size_t len, la_token_buf *out) {
    return split(t, 0, text, len, out);
}

/* the bytes of a byte-level token into dst (room for *n >= the token's text length);
 * characters outside the byte map are copied as they are */
la_status la_tok_bpe_decode_token(const la_tokenizer *t, int32_t id, char *dst, size_t *n) {
    const unsigned char *s = (const unsigned char *)t->text[id];
    size_t len = t->tlen[id], k = 0, o = 0;
    while (k < len) {
        uint32_t cp = 0x110000;
        if (s[k] < 0x80) cp = s[k];
        else if ((s[k] & 0xE0) == 0xC0 && k + 1 < len) cp = (uint32_t)(s[k] & 0x1F) << 6 | (s[k + 1] & 0x3F);
        if (cp < 512 && t->cp_byte[cp] >= 0) {
            dst[o++] = (char)t->cp_byte[cp];
            k += cp < 0x80 ? 1 : 2;
        } else {
            int l = la_tok_utf8_len(s[k]);
            for (int j = 0; j < l && k < len; j++) dst[o++] = (char)s[k++];
        }
    }
    *n = o;
    return LA_OK;
}
