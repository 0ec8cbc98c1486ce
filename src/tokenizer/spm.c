/* spm.c -- SentencePiece BPE with scores (tokenizer.ggml.model "llama": Llama 2,
 * TinyLlama): spaces are written U+2581, a space is put in front of the text, the text is
 * cut into characters and the adjacent pair whose concatenation is a vocabulary piece
 * with the highest score is merged first (leftmost on equal scores), as SentencePiece's
 * bpe_model does; a character that is no piece falls back to its <0xXX> byte tokens. */
#include <stdio.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define SPACE_MARK "\xE2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK */

la_status la_tok_spm_init(la_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        t->byte_tok[b] = la_tok_lookup(t, s, 6);
    }
    return LA_OK;
}

/* pieces a merge may produce: not control, unknown or byte tokens */
static int mergeable(const la_tokenizer *t, int32_t id) {
    return id >= 0 && t->type[id] != LA_TOKEN_CONTROL && t->type[id] != LA_TOKEN_UNKNOWN &&
           t->type[id] != LA_TOKEN_BYTE;
}

static la_status try_pair(la_tokenizer *t, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return LA_OK;
    const la_tok_sym *sym = t->sym;
    int32_t n = sym[l].len + sym[r].len;
    int32_t id = la_tok_lookup(t, t->buf + sym[l].start, (size_t)n);
    if (!mergeable(t, id)) return LA_OK;
    return la_tok_heap_push(t, (la_tok_cand){-(double)t->score[id], l, r, n, 0});
}

la_status la_tok_spm_encode(la_tokenizer *t, const char *text, size_t len, int prefix_space,
                            la_token_buf *out) {
    /* the escaped text: (U+2581) text with every ' ' as U+2581 */
    LA_TRY(la_tok_reserve_buf(t, 3 * len + 3));
    size_t m = 0;
    if (prefix_space) {
        memcpy(t->buf, SPACE_MARK, 3);
        m = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(t->buf + m, SPACE_MARK, 3);
            m += 3;
        } else {
            t->buf[m++] = text[i];
        }
    }
    if (m > INT32_MAX) return la_fail(LA_EINVAL, "la_tokenizer_encode: a text fragment of %zu bytes is too long", m);
    LA_TRY(la_tok_reserve_sym(t, (int64_t)m));
    la_tok_sym *sym = t->sym;
    int32_t n = 0;
    for (size_t i = 0; i < m;) {
        int l = la_tok_utf8_len((unsigned char)t->buf[i]);
        sym[n] = (la_tok_sym){-1, n - 1, -1, (int32_t)i, l};
        if (n > 0) sym[n - 1].next = n;
        n++;
        i += (size_t)l;
    }
    t->heap_n = 0;
    for (int32_t i = 0; i + 1 < n; i++) LA_TRY(try_pair(t, i, i + 1));
    while (t->heap_n > 0) {
        la_tok_cand c = la_tok_heap_pop(t);
        int32_t l = c.left, r = c.right;
        /* stale: one side was merged away or grew since the pair was queued */
        if (sym[l].len == 0 || sym[r].len == 0 || sym[l].len + sym[r].len != c.a) continue;
        sym[l].len += sym[r].len;
        sym[r].len = 0;
        sym[l].next = sym[r].next;
        if (sym[l].next >= 0) sym[sym[l].next].prev = l;
        LA_TRY(try_pair(t, sym[l].prev, l));
        LA_TRY(try_pair(t, l, sym[l].next));
    }
    for (int32_t i = 0; i >= 0 && n > 0; i = sym[i].next) {
        const char *s = t->buf + sym[i].start;
        int32_t id = la_tok_lookup(t, s, (size_t)sym[i].len);
        if (id >= 0) {
            LA_TRY(la_tok_push(out, id));
            continue;
        }
        for (int32_t k = 0; k < sym[i].len; k++) { /* byte fallback */
            int32_t b = t->byte_tok[(unsigned char)s[k]];
            if (b < 0) b = t->unk;
            if (b >= 0) LA_TRY(la_tok_push(out, b));
        }
    }
    return LA_OK;
}
