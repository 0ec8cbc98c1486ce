/* longattn/tokenizer.h -- tokenizers built from the vocabulary a GGUF file stores
 * (tokenizer.ggml.* metadata), giving the same token ids as the model's reference
 * tokenizer (Hugging Face tokenizers / SentencePiece).
 *
 *   model "gpt2"  : byte-level BPE (GPT-2 byte<->unicode map, ranked merges) after a
 *                   regex pre-tokenizer named by tokenizer.ggml.pre:
 *                   "smollm" (also "starcoder"): each digit alone, then the GPT-2 regex;
 *                   "gpt2" (also "default"): the GPT-2 regex;
 *                   "llama-bpe" (also "llama3"): the Llama 3 regex (digits in runs of
 *                   at most 3), a word found whole in the vocabulary skips the merges;
 *                   "qwen2": the Qwen2 regex (each digit alone).
 *   model "llama" : SentencePiece BPE with scores (Llama 2, TinyLlama): spaces become
 *                   U+2581, a space is put before the text (add_space_prefix), the
 *                   adjacent pair whose concatenation has the best score is merged
 *                   first, characters not in the vocabulary fall back to <0xXX> byte
 *                   tokens.
 * A tokenizer holds scratch buffers: use one tokenizer per thread for encoding. */
#ifndef LONGATTN_TOKENIZER_H
#define LONGATTN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core.h" /* la_status, LA_API */
#include "gguf.h" /* la_gguf */

typedef struct la_gguf la_gguf; /* longattn/gguf.h */

#ifdef __cplusplus
extern "C" {
#endif

/* tokenizer.ggml.token_type values (the GGUF / llama.cpp numbering) */
typedef enum {
    LA_TOKEN_UNDEFINED = 0,
    LA_TOKEN_NORMAL = 1,
    LA_TOKEN_UNKNOWN = 2,
    LA_TOKEN_CONTROL = 3,      /* <|im_start|>, <s>: matched in text only with LA_TOK_PARSE_SPECIAL */
    LA_TOKEN_USER_DEFINED = 4, /* always matched in text as a whole token */
    LA_TOKEN_UNUSED = 5,
    LA_TOKEN_BYTE = 6          /* <0xXX> byte-fallback tokens (model "llama") */
} la_token_type;

/* What a GGUF file stores about its tokenizer. The tokenizer copies everything it needs:
 * the arrays may be freed after la_tokenizer_new returns. */
typedef struct {
    const char *model;         /* tokenizer.ggml.model: "gpt2" or "llama" */
    const char *pre;           /* tokenizer.ggml.pre; NULL = "default" (model "gpt2" only) */
    int32_t n_tokens;          /* length of tokens / scores / token_type */
    const char *const *tokens; /* tokenizer.ggml.tokens, NUL-terminated UTF-8 */
    const float *scores;       /* tokenizer.ggml.scores; NULL = all 0 (needed by "llama") */
    const int32_t *token_type; /* tokenizer.ggml.token_type (la_token_type); NULL = all normal */
    int32_t n_merges;          /* length of merges */
    const char *const *merges; /* tokenizer.ggml.merges, "left right", rank = index ("gpt2") */
    int32_t bos_id, eos_id, unk_id, pad_id; /* tokenizer.ggml.*_token_id; -1 = none */
    int add_bos, add_eos;      /* tokenizer.ggml.add_bos_token / add_eos_token (0/1) */
    int add_space_prefix;      /* tokenizer.ggml.add_space_prefix; -1 = the model's default
                                  (1 for "llama", 0 for "gpt2", which ignores it) */
    const char *chat_template; /* tokenizer.chat_template; NULL = none */
} la_tokenizer_vocab;

/* "Nothing given": NULL arrays, ids -1, add_bos/add_eos 0, add_space_prefix -1. */
LA_API la_tokenizer_vocab la_tokenizer_vocab_default(void);

typedef struct la_tokenizer la_tokenizer;

/* Build a tokenizer from v. Errors: LA_EINVAL (NULL v/out, n_tokens < 1, a NULL token, a
 * token type outside 0..6, an id out of range, add_bos/add_eos without that id, unknown
 * model type or pre-tokenizer name -- the message lists the supported ones --, model
 * "gpt2" without merges), LA_EFORMAT (a merge that is not "left right" or names a token,
 * or makes one, not in the vocabulary), LA_ENOMEM. A text listed twice maps to its last
 * id (as in llama.cpp). On error *out is NULL. */
LA_API la_status la_tokenizer_new(const la_tokenizer_vocab *v, la_tokenizer **out);
/* Build the tokenizer a GGUF file describes (its tokenizer.ggml.* keys and
 * tokenizer.chat_template). Errors: LA_EFORMAT naming the key (tokenizer.ggml.model or
 * tokenizer.ggml.tokens missing, a key of the wrong type, an array whose length differs
 * from the token count, a token with a NUL byte), then those of la_tokenizer_new. */
LA_API la_status la_tokenizer_from_gguf(const la_gguf *g, la_tokenizer **out);
LA_API void la_tokenizer_free(la_tokenizer *t);

/* A growable id buffer that la_tokenizer_encode appends to. Start from {0}; free with
 * la_token_buf_free. Reusing one buffer across calls avoids reallocations. */
typedef struct {
    int32_t *ids;
    int64_t n, cap;
} la_token_buf;
LA_API void la_token_buf_free(la_token_buf *b);

enum {
    LA_TOK_ADD_SPECIAL = 1,   /* encode: add BOS / EOS as the vocabulary asks (add_bos/add_eos) */
    LA_TOK_PARSE_SPECIAL = 2, /* encode: control tokens written in the text (<|im_start|>)
                                 become their ids, as Hugging Face tokenizers do; without it
                                 they are tokenized as plain text (user-defined tokens are
                                 always matched) */
    LA_TOK_SKIP_SPECIAL = 4,  /* decode: leave control tokens (BOS, EOS, <|im_end|>) out */
    LA_TOK_KEEP_SPACE = 8     /* decode: keep the space of the first word piece (SentencePiece
                                 "\u2581ab" -> " ab"), which a whole text drops as the prefix
                                 the encoder added; for ids that continue a text (generated
                                 tokens) and the bytes each token stands for */
};

/* Append the ids of text[0..len) to out. flags: LA_TOK_ADD_SPECIAL | LA_TOK_PARSE_SPECIAL.
 * Errors: LA_EINVAL (NULL t/out, text NULL with len > 0, text not valid UTF-8 -- the
 * message names the byte offset --), LA_ENOMEM. On error out->n is unchanged. */
LA_API la_status la_tokenizer_encode(la_tokenizer *t, const char *text, size_t len, int flags,
                                     la_token_buf *out);

/* Text of ids[0..n): byte-level tokens mapped back to bytes; SentencePiece U+2581 back to
 * spaces, <0xXX> tokens to their byte, the prefix space removed (kept with
 * LA_TOK_KEEP_SPACE). *text is malloc'ed, NUL-terminated (free() it), *len excludes the
 * NUL (len may be NULL). flags: LA_TOK_SKIP_SPECIAL | LA_TOK_KEEP_SPACE. Errors: LA_EINVAL (NULL, n < 0, an id out of range), LA_ENOMEM. */
LA_API la_status la_tokenizer_decode(const la_tokenizer *t, const int32_t *ids, int64_t n, int flags,
                                     char **text, size_t *len);

LA_API int32_t la_tokenizer_n_vocab(const la_tokenizer *t);
/* the vocabulary text of a token (NULL if id is out of range) */
LA_API const char *la_tokenizer_token_text(const la_tokenizer *t, int32_t id);
/* the id of a token text, -1 if none */
LA_API int32_t la_tokenizer_token_id(const la_tokenizer *t, const char *text);
LA_API int32_t la_tokenizer_bos(const la_tokenizer *t); /* -1 if none */
LA_API int32_t la_tokenizer_eos(const la_tokenizer *t); /* -1 if none */
/* tokenizer.chat_template, or NULL */
LA_API const char *la_tokenizer_chat_template(const la_tokenizer *t);

/* ---- deprecated names: kept so existing programs compile (with a warning naming
 * the replacement); see the naming rule in longattn.h ---- */

LA_DEPRECATED("use v = la_tokenizer_vocab_default()")
static inline void la_tokenizer_vocab_init(la_tokenizer_vocab *v) {
    *v = la_tokenizer_vocab_default();
}

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_TOKENIZER_H */
