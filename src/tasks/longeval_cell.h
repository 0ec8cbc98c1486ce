/* longeval_cell.h -- shared between longeval.c (tasks: one cell) and runner/longeval_run.c
 * (the runner: files, ranks, resume). Experiments layer, not public. */
#ifndef LA_TASKS_LONGEVAL_CELL_H
#define LA_TASKS_LONGEVAL_CELL_H

#include "longattn/llama.h"    /* la_llama, la_llama_session */
#include "longattn/longeval.h" /* its module header (issue 32: not the umbrella) */

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

/* The documents d (loaded from dir, named in messages) from document `first` (name order)
 * on, joined by blank lines and wrapping, until `need` tokens; each document's text is
 * encoded from a prefix of ~8 bytes per needed token (the whole document when that prefix
 * gives too few tokens). */
la_status le_stream_build(la_tokenizer *tok, const la_docs *d, const char *dir, int64_t need, int first,
                          le_stream *s);
la_status le_example(la_tokenizer *tok, const int32_t *stream, int64_t n_stream, int64_t off, int kind, int64_t L,
                     double depth, int distractors, uint64_t seed, int32_t *tokens, char answer[16],
                     int64_t *needle_at, int64_t *plain);
void le_stream_free(le_stream *s);

typedef struct {
    la_llama *m;
    la_tokenizer *tok;
    la_llama_session *sess; /* per cell: the shared prefix's session */
    la_llama_session *work; /* per cell: the example's session (a fork of sess) */
    le_stream stream;       /* = docs[0] (the folder's first document on) */
    le_stream docs[LA_LONGEVAL_MAX_DOCS]; /* document k from its start (wrapping into the next) */
    int n_docs;
    int n_folder_docs;      /* documents in the folder */
    /* progress inside a cell: frac of the cell done */
    void (*tick)(void *user, double frac);
    void *tick_user;
    int32_t *hay;  /* (n_hay) retrieval haystack tokens: the stream, or the filler */
    int64_t n_hay;
    int32_t *filler_ids; /* owned when the filler is used */
    int64_t C;
    int V, step;
    float *logits; /* (chunk, V) */
    double work_tokens; /* tokens stepped in the current cell */
} le_ctx;

/* Method text at length L (C the trained context) -> spec and KV policy. */
/* posreg (96 chars, may be NULL): receives a SelfExtend / ReRoPE / DCA method's text ("" for
 * none); the spec is then the model's own RoPE. */
la_status le_method_parse(la_llama *m, const char *text, int64_t C, int64_t L, la_spec *spec, la_kv_params *kv,
                          int *has_kv, char *posreg);
/* Check method mi at length L as le_cell_run would run it (spec, position regimes, KV policy
 * and element type: o->kv_type, the method's own or the GGUF default), then one token through
 * its session, so that the kernels' checks run too: before the runner deletes or writes
 * anything. Fills kv, has_kv and posreg as le_method_parse. Errors: LA_ESPEC (named, a bad
 * method or --kv-type for this model), LA_ENOMEM. Uses c->m, c->C, c->logits; sets c->step. */
la_status le_cell_check(le_ctx *c, const la_longeval_opts *o, int mi, int64_t L, la_kv_params *kv, int *has_kv,
                        char *posreg);
/* Run one cell: cell comes zeroed but for its method, length, method_text and L (the
 * runner's cell_begin, which names the cell before it is run or restored). */
la_status le_cell_run(le_ctx *c, const la_longeval_opts *o, la_longeval_cell *cell);

#endif
