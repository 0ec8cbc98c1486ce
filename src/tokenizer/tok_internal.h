/* tok_internal.h -- the tokenizer object shared by the src/tokenizer sources (not public). */
#ifndef LA_TOK_INTERNAL_H
#define LA_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/internal.h"
#include "longattn/tokenizer.h"

typedef enum { LA_TOK_KIND_BPE, LA_TOK_KIND_SPM } la_tok_kind;

#define LA_TOK_MAX_RE 2

/* one merge candidate: key ascending (BPE: merge rank; SPM: -score), then left ascending */
typedef struct {
    double key;
    int32_t left, right;
    int32_t a, b; /* BPE: the pair's ids when pushed; SPM: a = byte length of the pair */
} la_tok_cand;

/* one symbol of the word being merged: a span of the text (a doubly linked list) */
typedef struct {
    int32_t id;          /* BPE: token id (-1 = byte not in the vocabulary); SPM: unused */
    int32_t prev, next;  /* -1 at the ends */
    int32_t start, len;  /* byte span in the word; len 0 = merged away */
} la_tok_sym;

struct la_tokenizer {
    la_tok_kind kind;
    int32_t n;             /* vocabulary size */
    char **text;           /* token texts (pointers into arena) */
    uint32_t *tlen;        /* their byte lengths */
    char *arena;
    float *score;
    uint8_t *type;         /* la_token_type */
    int32_t *smap;         /* open-addressing table text -> id (-1 empty), size smask+1 */
    uint64_t smask;
    uint64_t *pkey;        /* BPE merges: (left << 32 | right) -> rank, merged id */
    int32_t *prank, *pnew;
    uint64_t pmask;
    int32_t bos, eos, unk;
    int add_bos, add_eos, add_space_prefix;
    char *chat_template;

    /* byte-level BPE */
    int32_t byte_id[256];  /* id of the one-character token of byte b (-1 if absent) */
    uint32_t byte_cp[256]; /* GPT-2 byte -> code point */
    int16_t cp_byte[512];  /* code point -> byte (-1: not a byte-level character) */
    int n_re;
    pcre2_code *re[LA_TOK_MAX_RE];
    pcre2_match_data *md;
    pcre2_general_context *pgc; /* PCRE2's allocations go through la_malloc (the test hook) */
    pcre2_compile_context *pcc;
    pcre2_match_context *pmc;
    int ignore_merges;     /* a pre-token found whole in the vocabulary skips the merges */

    /* SentencePiece */
    int32_t byte_tok[256]; /* id of <0xXX> (-1 if absent) */

    /* tokens matched in the text as a whole: ids sorted by length, longest first */
    int32_t *spec;
    int n_spec;

    /* scratch, grown as needed and reused across calls */
    la_tok_sym *sym;
    int64_t sym_cap;
    la_tok_cand *heap;
    int64_t heap_n, heap_cap;
    char *buf;
    size_t buf_cap;
};

/* text -> id, -1 if absent */
int32_t la_tok_lookup(const la_tokenizer *t, const char *s, size_t len);
/* BPE merge of (left, right): rank, or -1 (then *merged is untouched) */
int32_t la_tok_pair_rank(const la_tokenizer *t, int32_t left, int32_t right, int32_t *merged);
/* append one id */
la_status la_tok_push(la_token_buf *out, int32_t id);
/* scratch growth */
la_status la_tok_reserve_sym(la_tokenizer *t, int64_t n);
la_status la_tok_reserve_buf(la_tokenizer *t, size_t n);
/* candidate heap */
la_status la_tok_heap_push(la_tokenizer *t, la_tok_cand c);
la_tok_cand la_tok_heap_pop(la_tokenizer *t);

/* byte length of the UTF-8 sequence starting with byte c (1 for stray bytes) */
static inline int la_tok_utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

/* byte-level BPE (bpe.c) */
la_status la_tok_bpe_init(la_tokenizer *t, const char *pre);
la_status la_tok_bpe_encode(la_tokenizer *t, const char *text, size_t len, la_token_buf *out);
la_status la_tok_bpe_decode_token(const la_tokenizer *t, int32_t id, char *dst, size_t *n);

/* SentencePiece BPE (spm.c) */
la_status la_tok_spm_init(la_tokenizer *t);
la_status la_tok_spm_encode(la_tokenizer *t, const char *text, size_t len, int prefix_space,
                            la_token_buf *out);

/* Tests only (issue 17): 0 makes later tokenizers match with PCRE2's interpreter instead of
 * its JIT (the interpreter allocates its backtracking frames, through la_malloc); 1 (the
 * default) JIT-compiles where PCRE2 can. */
void la_tok_use_jit(int on);

#endif
