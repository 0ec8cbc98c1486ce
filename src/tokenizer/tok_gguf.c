/* tok_gguf.c -- la_tokenizer_from_gguf: the tokenizer.ggml.* keys of an open GGUF file
 * (src/io/gguf.c) gathered into a la_tokenizer_vocab for la_tokenizer_new. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* an optional array key of the given element type with n elements (n < 0: any count) */
static la_status opt_arr(const la_gguf *g, const char *key, la_gguf_vtype elem, int64_t n,
                         const la_gguf_kv **out) {
    *out = la_gguf_find_kv(g, key);
    if (!*out) return LA_OK;
    if ((*out)->type != LA_GGUF_ARR || (elem != LA_GGUF_ANY && (*out)->arr_type != elem))
        return la_fail(LA_EFORMAT, "tokenizer: GGUF key %s is %s%s%s, expected an array of %s", key,
                       la_gguf_vtype_name((*out)->type), (*out)->type == LA_GGUF_ARR ? " of " : "",
                       (*out)->type == LA_GGUF_ARR ? la_gguf_vtype_name((*out)->arr_type) : "",
                       la_gguf_vtype_name(elem));
    if (n >= 0 && (int64_t)(*out)->n != n)
        return la_fail(LA_EFORMAT, "tokenizer: GGUF key %s has %llu entries but there are %lld tokens", key,
                       (unsigned long long)(*out)->n, (long long)n);
    return LA_OK;
}

static la_status opt_id(const la_gguf *g, const char *key, int32_t *id) {
    if (!la_gguf_find_kv(g, key)) return LA_OK;
    uint32_t v;
    LA_TRY(la_gguf_get_u32(g, key, &v));
    /* 0xFFFFFFFF is -1 stored as u32 (llama.cpp's LLAMA_TOKEN_NULL): no such token; another
     * id out of range: la_tokenizer_new says so */
    *id = v == UINT32_MAX ? -1 : v > (uint32_t)INT32_MAX ? INT32_MAX : (int32_t)v;
    return LA_OK;
}

static la_status opt_bool(const la_gguf *g, const char *key, int *b) {
    if (!la_gguf_find_kv(g, key)) return LA_OK;
    return la_gguf_get_bool(g, key, b);
}

/* NUL-free strings of an array kv (the vocabulary's API takes C strings) */
static la_status strings(const la_gguf_kv *kv, const char *key, const char ***out) {
    const char **s = la_malloc((size_t)kv->n * sizeof *s + 1);
    if (!s) return la_fail(LA_ENOMEM, "tokenizer: cannot allocate %llu strings", (unsigned long long)kv->n);
    for (uint64_t i = 0; i < kv->n; i++) {
        uint64_t len;
        s[i] = la_gguf_arr_str(kv, i, &len);
        if (strlen(s[i]) != len) {
            free(s);
            return la_fail(LA_EFORMAT, "tokenizer: GGUF key %s entry %llu contains a NUL byte", key,
                           (unsigned long long)i);
        }
    }
    *out = s;
    return LA_OK;
}

la_status la_tokenizer_from_gguf(const la_gguf *g, la_tokenizer **out) {
    if (!out) return la_fail(LA_EINVAL, "la_tokenizer_from_gguf: out is NULL");
    *out = NULL;
    if (!g) return la_fail(LA_EINVAL, "la_tokenizer_from_gguf: the GGUF file is NULL");
    la_tokenizer_vocab v = la_tokenizer_vocab_default();
    LA_TRY(la_gguf_get_str(g, "tokenizer.ggml.model", &v.model));
    if (la_gguf_find_kv(g, "tokenizer.ggml.pre")) LA_TRY(la_gguf_get_str(g, "tokenizer.ggml.pre", &v.pre));
    const la_gguf_kv *tokens, *scores, *types, *merges;
    LA_TRY(la_gguf_get_arr(g, "tokenizer.ggml.tokens", LA_GGUF_STR, &tokens));
    if (tokens->n > (uint64_t)INT32_MAX)
        return la_fail(LA_EFORMAT, "tokenizer: %llu tokens is more than 2^31 - 1",
                       (unsigned long long)tokens->n);
    v.n_tokens = (int32_t)tokens->n;
    LA_TRY(opt_arr(g, "tokenizer.ggml.scores", LA_GGUF_F32, v.n_tokens, &scores));
    LA_TRY(opt_arr(g, "tokenizer.ggml.token_type", LA_GGUF_I32, v.n_tokens, &types));
    LA_TRY(opt_arr(g, "tokenizer.ggml.merges", LA_GGUF_STR, -1, &merges));
    if (merges && merges->n > (uint64_t)INT32_MAX)
        return la_fail(LA_EFORMAT, "tokenizer: %llu merges is more than 2^31 - 1", (unsigned long long)merges->n);
    LA_TRY(opt_id(g, "tokenizer.ggml.bos_token_id", &v.bos_id));
    LA_TRY(opt_id(g, "tokenizer.ggml.eos_token_id", &v.eos_id));
    LA_TRY(opt_id(g, "tokenizer.ggml.unknown_token_id", &v.unk_id));
    LA_TRY(opt_id(g, "tokenizer.ggml.padding_token_id", &v.pad_id));
    LA_TRY(opt_bool(g, "tokenizer.ggml.add_bos_token", &v.add_bos));
    LA_TRY(opt_bool(g, "tokenizer.ggml.add_eos_token", &v.add_eos));
    LA_TRY(opt_bool(g, "tokenizer.ggml.add_space_prefix", &v.add_space_prefix));
    if (la_gguf_find_kv(g, "tokenizer.chat_template"))
        LA_TRY(la_gguf_get_str(g, "tokenizer.chat_template", &v.chat_template));

    /* numeric arrays are packed little-endian in the map: copy them out aligned */
    const char **tok = NULL, **mer = NULL;
    float *sc = NULL;
    int32_t *ty = NULL;
    la_status s = strings(tokens, "tokenizer.ggml.tokens", &tok);
    if (s == LA_OK && merges) s = strings(merges, "tokenizer.ggml.merges", &mer);
    if (s == LA_OK && scores) {
        sc = la_malloc((size_t)v.n_tokens * sizeof *sc);
        if (!sc) s = la_fail(LA_ENOMEM, "tokenizer: cannot allocate %d scores", v.n_tokens);
        for (int32_t i = 0; s == LA_OK && i < v.n_tokens; i++) sc[i] = (float)la_gguf_arr_float(scores, (uint64_t)i);
    }
    if (s == LA_OK && types) {
        ty = la_malloc((size_t)v.n_tokens * sizeof *ty);
        if (!ty) s = la_fail(LA_ENOMEM, "tokenizer: cannot allocate %d token types", v.n_tokens);
        for (int32_t i = 0; s == LA_OK && i < v.n_tokens; i++) ty[i] = (int32_t)la_gguf_arr_int(types, (uint64_t)i);
    }
    if (s == LA_OK) {
        v.tokens = tok;
        v.scores = sc;
        v.token_type = ty;
        v.merges = mer;
        v.n_merges = merges ? (int32_t)merges->n : 0;
        s = la_tokenizer_new(&v, out);
    }
    free(tok);
    free(mer);
    free(sc);
    free(ty);
    return s;
}
