/* tok_gguf.c -- the tokenizer a GGUF file describes: tokenizer.ggml.* metadata into a
 * la_tokenizer_vocab, then la_tokenizer_new (which copies what it keeps). */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* optional integer key: *out untouched when absent */
static la_status opt_i32(const la_gguf *g, const char *key, int32_t *out) {
    if (!la_gguf_find_kv(g, key)) return LA_OK;
    return la_gguf_get_i32(g, key, out);
}

static la_status opt_bool(const la_gguf *g, const char *key, int *out) {
    if (!la_gguf_find_kv(g, key)) return LA_OK;
    return la_gguf_get_bool(g, key, out);
}

la_status la_tokenizer_from_gguf(const la_gguf *g, la_tokenizer **out) {
    if (!out) return la_fail(LA_EINVAL, "la_tokenizer_from_gguf: out is NULL");
    *out = NULL;
    if (!g) return la_fail(LA_EINVAL, "la_tokenizer_from_gguf: file is NULL");
    la_tokenizer_vocab v = la_tokenizer_vocab_default();
    LA_TRY(la_gguf_get_str(g, "tokenizer.ggml.model", &v.model));
    if (la_gguf_find_kv(g, "tokenizer.ggml.pre")) LA_TRY(la_gguf_get_str(g, "tokenizer.ggml.pre", &v.pre));
    const la_gguf_kv *toks, *scores = NULL, *types = NULL, *merges = NULL;
    LA_TRY(la_gguf_get_arr(g, "tokenizer.ggml.tokens", LA_GGUF_STR, &toks));
    if (toks->n > INT32_MAX) return la_fail(LA_EFORMAT, "tokenizer.ggml.tokens: %llu tokens is too many", (unsigned long long)toks->n);
    if (la_gguf_find_kv(g, "tokenizer.ggml.scores")) LA_TRY(la_gguf_get_arr(g, "tokenizer.ggml.scores", LA_GGUF_ANY, &scores));
    if (la_gguf_find_kv(g, "tokenizer.ggml.token_type"))
        LA_TRY(la_gguf_get_arr(g, "tokenizer.ggml.token_type", LA_GGUF_ANY, &types));
    if (la_gguf_find_kv(g, "tokenizer.ggml.merges")) LA_TRY(la_gguf_get_arr(g, "tokenizer.ggml.merges", LA_GGUF_STR, &merges));
    const int32_t n = (int32_t)toks->n;
    if (scores && (scores->n != toks->n || scores->arr_type == LA_GGUF_STR || scores->arr_type == LA_GGUF_BOOL))
        return la_fail(LA_EFORMAT, "tokenizer.ggml.scores: %llu %s values for %d tokens (want one number per token)",
                       (unsigned long long)scores->n, la_gguf_vtype_name(scores->arr_type), n);
    if (types && (types->n != toks->n || types->arr_type == LA_GGUF_STR || types->arr_type == LA_GGUF_F32 ||
                  types->arr_type == LA_GGUF_F64))
        return la_fail(LA_EFORMAT, "tokenizer.ggml.token_type: %llu %s values for %d tokens (want one integer per token)",
                       (unsigned long long)types->n, la_gguf_vtype_name(types->arr_type), n);
    if (merges && merges->n > INT32_MAX) return la_fail(LA_EFORMAT, "tokenizer.ggml.merges: too many merges");
    LA_TRY(opt_i32(g, "tokenizer.ggml.bos_token_id", &v.bos_id));
    LA_TRY(opt_i32(g, "tokenizer.ggml.eos_token_id", &v.eos_id));
    LA_TRY(opt_i32(g, "tokenizer.ggml.unknown_token_id", &v.unk_id));
    LA_TRY(opt_i32(g, "tokenizer.ggml.padding_token_id", &v.pad_id));
    LA_TRY(opt_bool(g, "tokenizer.ggml.add_bos_token", &v.add_bos));
    LA_TRY(opt_bool(g, "tokenizer.ggml.add_eos_token", &v.add_eos));
    LA_TRY(opt_bool(g, "tokenizer.ggml.add_space_prefix", &v.add_space_prefix));
    if (la_gguf_find_kv(g, "tokenizer.chat_template")) LA_TRY(la_gguf_get_str(g, "tokenizer.chat_template", &v.chat_template));

    const int32_t nm = merges ? (int32_t)merges->n : 0;
    const char **tok_s = malloc(sizeof *tok_s * (size_t)n);
    const char **mer_s = malloc(sizeof *mer_s * (size_t)(nm > 0 ? nm : 1));
    float *sc = scores ? malloc(sizeof *sc * (size_t)n) : NULL;
    int32_t *ty = types ? malloc(sizeof *ty * (size_t)n) : NULL;
    if (!tok_s || !mer_s || (scores && !sc) || (types && !ty)) {
        free(tok_s), free(mer_s), free(sc), free(ty);
        return la_fail(LA_ENOMEM, "la_tokenizer_from_gguf: out of memory for %d tokens", n);
    }
    for (int32_t i = 0; i < n; i++) {
        tok_s[i] = la_gguf_arr_str(toks, (uint64_t)i, NULL);
        if (sc) sc[i] = (float)la_gguf_arr_float(scores, (uint64_t)i);
        if (ty) {
            int64_t t = la_gguf_arr_int(types, (uint64_t)i);
            ty[i] = t < INT32_MIN || t > INT32_MAX ? -1 : (int32_t)t;
        }
    }
    for (int32_t i = 0; i < nm; i++) mer_s[i] = la_gguf_arr_str(merges, (uint64_t)i, NULL);
    v.n_tokens = n;
    v.tokens = tok_s;
    v.scores = sc;
    v.token_type = ty;
    v.n_merges = nm;
    v.merges = mer_s;
    la_status st = la_tokenizer_new(&v, out);
    free(tok_s), free(mer_s), free(sc), free(ty);
    return st;
}
