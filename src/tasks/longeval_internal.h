/* longeval_internal.h -- shared between longeval.c (tasks, one cell) and longeval_run.c
 * (runner, files). Experiments layer, internal. */
#ifndef LA_TASKS_LONGEVAL_INTERNAL_H
#define LA_TASKS_LONGEVAL_INTERNAL_H

#include "longattn.h"

/* Default documents (scripts/prepare_longdocs.sh: the KJV's six divisions, each longer
 * than 8C tokens of SmolLM2) and the folder used when they were never prepared. */
#define LE_DOCS_DEFAULT "data/longdocs"
#define LE_DOCS_FALLBACK "data/pydoc/val"

/* Long real-text token stream: validation documents joined by blank lines. */
typedef struct {
    int32_t *tokens; /* (n) */
    int32_t *bytes;  /* (n) UTF-8 bytes of each token's text */
    int64_t n, text_bytes;
    int n_docs_used;
} le_stream;

la_status le_stream_build(la_tokenizer *tok, const char *dir, int64_t need, uint64_t seed, le_stream *s);
void le_stream_free(le_stream *s);

typedef struct {
    la_llama *m;
    la_tokenizer *tok;
    la_llama_session *sess; /* per cell */
    le_stream stream;
    int32_t *hay;  /* (n_hay) retrieval haystack tokens: the stream, or the filler */
    int64_t n_hay;
    int32_t *filler_ids; /* owned when the filler is used */
    int64_t C;
    int V, step;
    float *logits; /* (chunk, V) */
} le_ctx;

/* Method text at length L (C the trained context) -> spec and KV policy. */
la_status le_method_parse(la_llama *m, const char *text, int64_t C, int64_t L, la_spec *spec, la_kv_params *kv,
                          int *has_kv);
la_status le_cell_run(le_ctx *c, const la_longeval_opts *o, int mi, int li, la_longeval_cell *cell);

#endif
