/* tokenizer.c -- the tokenizer object built from GGUF vocabulary data: token table and
 * hash maps, special-token matching, UTF-8 checking, encode / decode dispatch to the
 * byte-level BPE (bpe.c) and SentencePiece (spm.c) models. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* ---- hashing ---- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = la_fnv1a(LA_FNV0, s, n);
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x) { /* splitmix64 finaliser */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t table_size(int64_t n) {
    uint64_t s = 16;
    while (s < (uint64_t)n * 2) s <<= 1;
    return s;
}

int32_t la_tok_lookup(const la_tokenizer *t, const char *s, size_t len) {
    for (uint64_t i = hash_bytes(s, len) & t->smask;; i = (i + 1) & t->smask) {
        int32_t id = t->smap[i];
        if (id < 0) return -1;
        if (t->tlen[id] == len && memcmp(t->text[id], s, len) == 0) return id;
    }
}

int32_t la_tok_pair_rank(const la_tokenizer *t, int32_t left, int32_t right, int32_t *merged) {
    if (!t->pkey || left < 0 || right < 0) return -1;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint64_t i = hash_u64(key) & t->pmask;; i = (i + 1) & t->pmask) {
        if (t->prank[i] < 0) return -1;
        if (t->pkey[i] == key) {
            *merged = t->pnew[i];
            return t->prank[i];
        }
    }
}

/* ---- small buffers ---- */

la_status la_tok_push(la_token_buf *out, int32_t id) {
    if (out->n == out->cap) {
        int64_t cap = out->cap ? out->cap * 2 : 256;
        int32_t *p = la_realloc(out->ids, (size_t)cap * sizeof *p);
        if (!p) return la_fail(LA_ENOMEM, "tokenizer: cannot grow the id buffer to %lld ids", (long long)cap);
        out->ids = p;
        out->cap = cap;
    }
    out->ids[out->n++] = id;
    return LA_OK;
}

void la_token_buf_free(la_token_buf *b) {
    if (!b) return;
    free(b->ids);
    b->ids = NULL;
    b->n = b->cap = 0;
}

la_status la_tok_reserve_sym(la_tokenizer *t, int64_t n) {
    if (n <= t->sym_cap) return LA_OK;
    int64_t cap = t->sym_cap ? t->sym_cap : 64;
    while (cap < n) cap *= 2;
    la_tok_sym *p = la_realloc(t->sym, (size_t)cap * sizeof *p);
    if (!p) return la_fail(LA_ENOMEM, "tokenizer: cannot allocate %lld symbols", (long long)cap);
    t->sym = p;
    t->sym_cap = cap;
    return LA_OK;
}

la_status la_tok_reserve_buf(la_tokenizer *t, size_t n) {
    if (n <= t->buf_cap) return LA_OK;
    size_t cap = t->buf_cap ? t->buf_cap : 256;
    while (cap < n) cap *= 2;
    char *p = la_realloc(t->buf, cap);
    if (!p) return la_fail(LA_ENOMEM, "tokenizer: cannot allocate %zu bytes of scratch", cap);
    t->buf = p;
    t->buf_cap = cap;
    return LA_OK;
}

/* ---- candidate heap: smallest (key, left) on top ---- */

static int cand_less(const la_tok_cand *x, const la_tok_cand *y) {
    return x->key < y->key || (x->key == y->key && x->left < y->left);
}

la_status la_tok_heap_push(la_tokenizer *t, la_tok_cand c) {
    if (t->heap_n == t->heap_cap) {
        int64_t cap = t->heap_cap ? t->heap_cap * 2 : 64;
        la_tok_cand *p = la_realloc(t->heap, (size_t)cap * sizeof *p);
        if (!p) return la_fail(LA_ENOMEM, "tokenizer: cannot grow the merge queue to %lld", (long long)cap);
        t->heap = p;
        t->heap_cap = cap;
    }
    int64_t i = t->heap_n++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!cand_less(&c, &t->heap[parent])) break;
        t->heap[i] = t->heap[parent];
        i = parent;
    }
    t->heap[i] = c;
    return LA_OK;
}

la_tok_cand la_tok_heap_pop(la_tokenizer *t) {
    la_tok_cand top = t->heap[0], last = t->heap[--t->heap_n];
    int64_t i = 0, n = t->heap_n;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_less(&t->heap[c + 1], &t->heap[c])) c++;
        if (!cand_less(&t->heap[c], &last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n > 0) t->heap[i] = last;
    return top;
}

/* ---- construction ---- */

la_tokenizer_vocab la_tokenizer_vocab_default(void) {
    la_tokenizer_vocab v;
    memset(&v, 0, sizeof v);
    v.bos_id = v.eos_id = v.unk_id = v.pad_id = -1;
    v.add_space_prefix = -1;
    return v;
}

void la_tokenizer_free(la_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    pcre2_match_data_free(t->md);
    pcre2_match_context_free(t->pmc);
    pcre2_compile_context_free(t->pcc);
    pcre2_general_context_free(t->pgc);
    free(t->text);
    free(t->tlen);
    free(t->arena);
    free(t->score);
    free(t->type);
    free(t->smap);
    free(t->pkey);
    free(t->prank);
    free(t->pnew);
    free(t->chat_template);
    free(t->spec);
    free(t->sym);
    free(t->heap);
    free(t->buf);
    free(t);
}

static la_status build_tokens(la_tokenizer *t, const la_tokenizer_vocab *v) {
    int32_t n = v->n_tokens;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!v->tokens[i])
            return la_fail(LA_EINVAL, "tokenizer: token %d is NULL (every token needs its text)", i);
        total += strlen(v->tokens[i]) + 1;
    }
    t->n = n;
    t->text = la_malloc((size_t)n * sizeof *t->text);
    t->tlen = la_malloc((size_t)n * sizeof *t->tlen);
    t->arena = la_malloc(total);
    t->score = la_calloc((size_t)n, sizeof *t->score);
    t->type = la_malloc((size_t)n);
    t->smask = table_size(n) - 1;
    t->smap = la_malloc((t->smask + 1) * sizeof *t->smap);
    if (!t->text || !t->tlen || !t->arena || !t->score || !t->type || !t->smap)
        return la_fail(LA_ENOMEM, "tokenizer: cannot allocate the table of %d tokens", n);
    memset(t->smap, 0xff, (t->smask + 1) * sizeof *t->smap);
    char *p = t->arena;
    for (int32_t i = 0; i < n; i++) {
        size_t len = strlen(v->tokens[i]);
        memcpy(p, v->tokens[i], len + 1);
        t->text[i] = p;
        t->tlen[i] = (uint32_t)len;
        p += len + 1;
        if (v->scores) t->score[i] = v->scores[i];
        int32_t ty = v->token_type ? v->token_type[i] : LA_TOKEN_NORMAL;
        if (ty < LA_TOKEN_UNDEFINED || ty > LA_TOKEN_BYTE)
            return la_fail(LA_EINVAL, "tokenizer: token %d (\"%s\") has type %d, valid types are 0..6 "
                           "(tokenizer.ggml.token_type)", i, v->tokens[i], ty);
        t->type[i] = (uint8_t)(ty == LA_TOKEN_UNDEFINED ? LA_TOKEN_NORMAL : ty);
        /* a text given twice maps to its last id, as llama.cpp's vocabulary does */
        uint64_t h = hash_bytes(t->text[i], len) & t->smask;
        for (;; h = (h + 1) & t->smask) {
            int32_t j = t->smap[h];
            if (j < 0 || (t->tlen[j] == len && memcmp(t->text[j], t->text[i], len) == 0)) {
                t->smap[h] = i;
                break;
            }
        }
    }
    return LA_OK;
}

static la_status build_merges(la_tokenizer *t, const la_tokenizer_vocab *v) {
    t->pmask = table_size(v->n_merges) - 1;
    t->pkey = la_malloc((t->pmask + 1) * sizeof *t->pkey);
    t->prank = la_malloc((t->pmask + 1) * sizeof *t->prank);
    t->pnew = la_malloc((t->pmask + 1) * sizeof *t->pnew);
    if (!t->pkey || !t->prank || !t->pnew)
        return la_fail(LA_ENOMEM, "tokenizer: cannot allocate the table of %d merges", v->n_merges);
    memset(t->prank, 0xff, (t->pmask + 1) * sizeof *t->prank);
    size_t cap = 0;
    for (int32_t r = 0; r < v->n_merges; r++) {
        const char *m = v->merges[r];
        if (!m) return la_fail(LA_EFORMAT, "tokenizer: merge %d is NULL", r);
        size_t len = strlen(m);
        const char *sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        if (!sp || sp + 1 == m + len)
            return la_fail(LA_EFORMAT, "tokenizer: merge %d \"%s\" is not \"left right\" "
                           "(tokenizer.ggml.merges holds two token texts separated by one space)", r, m);
        size_t ll = (size_t)(sp - m), rl = len - ll - 1;
        int32_t a = la_tok_lookup(t, m, ll), b = la_tok_lookup(t, sp + 1, rl);
        if (a < 0 || b < 0)
            return la_fail(LA_EFORMAT, "tokenizer: merge %d \"%s\" names \"%.*s\", which is not in the "
                           "vocabulary (merges and tokens come from different tokenizers?)", r, m,
                           (int)(a < 0 ? ll : rl), a < 0 ? m : sp + 1);
        if (ll + rl > cap) {
            cap = (ll + rl) * 2;
            LA_TRY(la_tok_reserve_buf(t, cap));
        }
        memcpy(t->buf, m, ll);
        memcpy(t->buf + ll, sp + 1, rl);
        int32_t ab = la_tok_lookup(t, t->buf, ll + rl);
        if (ab < 0)
            return la_fail(LA_EFORMAT, "tokenizer: merge %d \"%s\" makes \"%.*s\", which is not in the "
                           "vocabulary", r, m, (int)(ll + rl), t->buf);
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        for (uint64_t i = hash_u64(key) & t->pmask;; i = (i + 1) & t->pmask) {
            if (t->prank[i] < 0) {
                t->pkey[i] = key;
                t->prank[i] = r;
                t->pnew[i] = ab;
                break;
            }
            if (t->pkey[i] == key) break; /* a repeated merge keeps its first (best) rank */
        }
    }
    return LA_OK;
}

typedef struct {
    unsigned char first;
    uint32_t len;
    int32_t id;
} spec_key;

static int spec_cmp(const void *x, const void *y) {
    const spec_key *a = x, *b = y;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* tokens that can be written in the text as a whole: control, user-defined, unknown */
static la_status build_specials(la_tokenizer *t) {
    int n = 0;
    for (int32_t i = 0; i < t->n; i++)
        if (t->tlen[i] > 0 && (t->type[i] == LA_TOKEN_CONTROL || t->type[i] == LA_TOKEN_USER_DEFINED ||
                               t->type[i] == LA_TOKEN_UNKNOWN))
            n++;
    if (n == 0) return LA_OK;
    t->spec = la_malloc((size_t)n * sizeof *t->spec);
    if (!t->spec) return la_fail(LA_ENOMEM, "tokenizer: cannot allocate %d special tokens", n);
    spec_key *keys = la_malloc((size_t)n * sizeof *keys);
    if (!keys) return la_fail(LA_ENOMEM, "tokenizer: cannot allocate %d special tokens", n);
    for (int32_t i = 0; i < t->n; i++)
        if (t->tlen[i] > 0 && (t->type[i] == LA_TOKEN_CONTROL || t->type[i] == LA_TOKEN_USER_DEFINED ||
                               t->type[i] == LA_TOKEN_UNKNOWN))
            keys[t->n_spec++] = (spec_key){(unsigned char)t->text[i][0], t->tlen[i], i};
    /* grouped by first byte, longest first: the first match at a position is the longest */
    qsort(keys, (size_t)n, sizeof *keys, spec_cmp);
    for (int k = 0; k < n; k++) t->spec[k] = keys[k].id;
    free(keys);
    return LA_OK;
}

static la_status check_id(int32_t id, int32_t n, const char *what) {
    if (id < -1 || id >= n)
        return la_fail(LA_EINVAL, "tokenizer: %s %d is outside the vocabulary of %d tokens (-1 = none)",
                       what, id, n);
    return LA_OK;
}

static la_status tokenizer_init(la_tokenizer *t, const la_tokenizer_vocab *v) {
    if (v->n_tokens < 1 || !v->tokens)
        return la_fail(LA_EINVAL, "tokenizer: the vocabulary is empty (n_tokens = %d): "
                       "tokenizer.ggml.tokens must list the tokens", v->n_tokens);
    if (!v->model)
        return la_fail(LA_EINVAL, "tokenizer: no model type (tokenizer.ggml.model): "
                       "supported are \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece BPE)");
    if (strcmp(v->model, "gpt2") == 0) t->kind = LA_TOK_KIND_BPE;
    else if (strcmp(v->model, "llama") == 0) t->kind = LA_TOK_KIND_SPM;
    else
        return la_fail(LA_EINVAL, "tokenizer: model type \"%s\" (tokenizer.ggml.model) is not supported: "
                       "supported are \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece BPE)", v->model);
    if (v->n_merges < 0 || (v->n_merges > 0 && !v->merges))
        return la_fail(LA_EINVAL, "tokenizer: n_merges = %d with merges %s", v->n_merges,
                       v->merges ? "given" : "NULL");
    LA_TRY(check_id(v->bos_id, v->n_tokens, "bos_id"));
    LA_TRY(check_id(v->eos_id, v->n_tokens, "eos_id"));
    LA_TRY(check_id(v->unk_id, v->n_tokens, "unk_id"));
    LA_TRY(check_id(v->pad_id, v->n_tokens, "pad_id"));
    if ((v->add_bos && v->bos_id < 0) || (v->add_eos && v->eos_id < 0))
        return la_fail(LA_EINVAL, "tokenizer: add_%s_token is set but there is no %s token id",
                       v->add_bos && v->bos_id < 0 ? "bos" : "eos", v->add_bos && v->bos_id < 0 ? "bos" : "eos");
    t->bos = v->bos_id;
    t->eos = v->eos_id;
    t->unk = v->unk_id;
    t->add_bos = v->add_bos != 0;
    t->add_eos = v->add_eos != 0;
    t->add_space_prefix = v->add_space_prefix < 0 ? t->kind == LA_TOK_KIND_SPM : v->add_space_prefix != 0;
    if (v->chat_template && !(t->chat_template = la_strdup(v->chat_template)))
        return la_fail(LA_ENOMEM, "tokenizer: cannot copy the chat template");
    LA_TRY(build_tokens(t, v));
    if (t->kind == LA_TOK_KIND_BPE) {
        if (v->n_merges == 0)
            return la_fail(LA_EINVAL, "tokenizer: model \"gpt2\" needs merges (tokenizer.ggml.merges is empty)");
        LA_TRY(build_merges(t, v));
        LA_TRY(la_tok_bpe_init(t, v->pre));
    } else {
        LA_TRY(la_tok_spm_init(t));
    }
    return build_specials(t);
}

la_status la_tokenizer_new(const la_tokenizer_vocab *v, la_tokenizer **out) {
    if (!out) return la_fail(LA_EINVAL, "la_tokenizer_new: out is NULL");
    *out = NULL;
    if (!v) return la_fail(LA_EINVAL, "la_tokenizer_new: vocabulary is NULL");
    la_tokenizer *t = la_calloc(1, sizeof *t);
    if (!t) return la_fail(LA_ENOMEM, "la_tokenizer_new: cannot allocate the tokenizer");
    la_status s = tokenizer_init(t, v);
    if (s == LA_OK) *out = t;
    else la_tokenizer_free(t);
    return s;
}

/* ---- encoding ---- */

/* offset of the first byte that is not valid UTF-8 (overlong forms, surrogates and code
 * points above U+10FFFF are invalid), or len */
static size_t utf8_check(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t n;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; min = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; min = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; min = 0x10000; }
        else return i;
        if (i + n > len) return i;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += n;
    }
    return len;
}

/* the longest token of the special list written at text[0..), or -1 */
static int32_t match_special(const la_tokenizer *t, const char *s, size_t len, int parse) {
    unsigned char c = (unsigned char)s[0];
    for (int k = 0; k < t->n_spec; k++) {
        int32_t id = t->spec[k];
        unsigned char f = (unsigned char)t->text[id][0];
        if (f < c) continue;
        if (f > c) break;
        if (!parse && t->type[id] != LA_TOKEN_USER_DEFINED) continue;
        if (t->tlen[id] <= len && memcmp(t->text[id], s, t->tlen[id]) == 0) return id;
    }
    return -1;
}

static la_status encode_fragment(la_tokenizer *t, const char *s, size_t len, int after_special,
                                 la_token_buf *out) {
    if (t->kind == LA_TOK_KIND_BPE) return la_tok_bpe_encode(t, s, len, out);
    return la_tok_spm_encode(t, s, len, t->add_space_prefix && after_special, out);
}

static la_status encode(la_tokenizer *t, const char *text, size_t len, int flags, la_token_buf *out) {
    int add = (flags & LA_TOK_ADD_SPECIAL) != 0, parse = (flags & LA_TOK_PARSE_SPECIAL) != 0;
    if (add && t->add_bos) LA_TRY(la_tok_push(out, t->bos));
    /* the first byte of any special token, to skip positions quickly */
    unsigned char first[256] = {0};
    for (int k = 0; k < t->n_spec; k++) first[(unsigned char)t->text[t->spec[k]][0]] = 1;
    size_t frag = 0, pos = 0;
    int after_special = 1; /* SentencePiece: the text start counts as after a special token */
    while (pos < len) {
        if (!first[(unsigned char)text[pos]]) { pos++; continue; }
        int32_t id = match_special(t, text + pos, len - pos, parse);
        if (id < 0) { pos++; continue; }
        if (pos > frag) LA_TRY(encode_fragment(t, text + frag, pos - frag, after_special, out));
        LA_TRY(la_tok_push(out, id));
        after_special = 1;
        pos += t->tlen[id];
        frag = pos;
    }
    if (len > frag) LA_TRY(encode_fragment(t, text + frag, len - frag, after_special, out));
    if (add && t->add_eos) LA_TRY(la_tok_push(out, t->eos));
    return LA_OK;
}

la_status la_tokenizer_encode(la_tokenizer *t, const char *text, size_t len, int flags,
                              la_token_buf *out) {
    if (!t || !out) return la_fail(LA_EINVAL, "la_tokenizer_encode: %s is NULL", t ? "out" : "tokenizer");
    if (!text && len > 0) return la_fail(LA_EINVAL, "la_tokenizer_encode: text is NULL with len %zu", len);
    size_t bad = utf8_check((const unsigned char *)text, len);
    if (bad < len)
        return la_fail(LA_EINVAL, "la_tokenizer_encode: the text is not valid UTF-8 at byte offset %zu "
                       "(byte 0x%02x): convert it to UTF-8 first", bad, (unsigned char)text[bad]);
    int64_t n0 = out->n;
    la_status s = encode(t, text, len, flags, out);
    if (s != LA_OK) out->n = n0;
    return s;
}

/* ---- decoding ---- */

typedef struct {
    char *s;
    size_t n, cap;
} strbuf;

static la_status sb_reserve(strbuf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return LA_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    char *p = la_realloc(b->s, cap);
    if (!p) return la_fail(LA_ENOMEM, "la_tokenizer_decode: cannot allocate %zu bytes", cap);
    b->s = p;
    b->cap = cap;
    return LA_OK;
}

static la_status sb_put(strbuf *b, const char *s, size_t n) {
    LA_TRY(sb_reserve(b, n));
    memcpy(b->s + b->n, s, n);
    b->n += n;
    return LA_OK;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static la_status decode(const la_tokenizer *t, const int32_t *ids, int64_t n, int flags, strbuf *b) {
    int first_text = 1; /* SentencePiece: the first text token loses its prefix space */
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n)
            return la_fail(LA_EINVAL, "la_tokenizer_decode: ids[%lld] = %d is outside the vocabulary "
                           "of %d tokens", (long long)i, id, t->n);
        int ty = t->type[id];
        const char *s = t->text[id];
        size_t len = t->tlen[id];
        if (ty == LA_TOKEN_CONTROL || ty == LA_TOKEN_UNKNOWN || ty == LA_TOKEN_USER_DEFINED) {
            if (ty != LA_TOKEN_USER_DEFINED && (flags & LA_TOK_SKIP_SPECIAL)) continue;
            LA_TRY(sb_put(b, s, len));
            continue;
        }
        if (t->kind == LA_TOK_KIND_BPE) {
            LA_TRY(sb_reserve(b, len));
            size_t got = len;
            LA_TRY(la_tok_bpe_decode_token(t, id, b->s + b->n, &got));
            b->n += got;
            continue;
        }
        /* SentencePiece */
        if (ty == LA_TOKEN_BYTE && len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' &&
            hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
            char c = (char)(hexval(s[3]) * 16 + hexval(s[4]));
            LA_TRY(sb_put(b, &c, 1));
            first_text = 0;
            continue;
        }
        LA_TRY(sb_reserve(b, len));
        for (size_t k = 0; k < len;) {
            if (k + 3 <= len && memcmp(s + k, "\xE2\x96\x81", 3) == 0) { /* U+2581 */
                if (!(first_text && k == 0 && t->add_space_prefix && !(flags & LA_TOK_KEEP_SPACE))) b->s[b->n++] = ' ';
                k += 3;
            } else {
                b->s[b->n++] = s[k++];
            }
        }
        first_text = 0;
    }
    return LA_OK;
}

la_status la_tokenizer_decode(const la_tokenizer *t, const int32_t *ids, int64_t n, int flags,
                              char **text, size_t *len) {
    if (!t || !text || (!ids && n > 0) || n < 0)
        return la_fail(LA_EINVAL, "la_tokenizer_decode: %s", !t ? "tokenizer is NULL" : !text ? "text is NULL"
                       : n < 0 ? "n < 0" : "ids is NULL");
    *text = NULL;
    strbuf b = {0};
    la_status s = sb_reserve(&b, 0);
    if (s == LA_OK) s = decode(t, ids, n, flags, &b);
    if (s != LA_OK) {
        free(b.s);
        return s;
    }
    b.s[b.n] = 0;
    *text = b.s;
    if (len) *len = b.n;
    return LA_OK;
}

/* ---- accessors ---- */

int32_t la_tokenizer_n_vocab(const la_tokenizer *t) { return t ? t->n : 0; }
const char *la_tokenizer_token_text(const la_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n ? t->text[id] : NULL;
}
int32_t la_tokenizer_token_id(const la_tokenizer *t, const char *text) {
    return t && text ? la_tok_lookup(t, text, strlen(text)) : -1;
}
int32_t la_tokenizer_bos(const la_tokenizer *t) { return t ? t->bos : -1; }
int32_t la_tokenizer_eos(const la_tokenizer *t) { return t ? t->eos : -1; }
const char *la_tokenizer_chat_template(const la_tokenizer *t) { return t ? t->chat_template : NULL; }
