/* docs.c -- a folder of documents as token ids: byte-level text files, or llm.c GPT-2
 * token shards split at <|endoftext|>. Documents stay apart so that evaluation windows
 * and passkey haystacks can be taken from inside one document. It reads files, so it lives
 * with the runners, not in tasks/ (the generators do no I/O). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "io/files.h"
#include "io/shard.h"
#include "longattn/experiments.h"

#define GPT2_EOT 50256
#define GPT2_VOCAB 50257

typedef struct {
    int32_t *tokens;
    int64_t n, cap;
    int64_t *offset; /* starts of documents */
    int64_t n_off, cap_off;
} builder;

static la_status grow_tokens(builder *b, int64_t need) {
    if (b->n + need <= b->cap) return LA_OK;
    int64_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->n + need) cap *= 2;
    int32_t *t = la_realloc(b->tokens, (size_t)cap * sizeof *t);
    if (!t) return la_fail(LA_ENOMEM, "documents: out of memory for %lld tokens", (long long)cap);
    b->tokens = t;
    b->cap = cap;
    return LA_OK;
}

static la_status start_doc(builder *b) {
    if (b->n_off > 0 && b->offset[b->n_off - 1] == b->n) return LA_OK; /* empty doc: reuse */
    if (b->n_off + 2 > b->cap_off) {
        int64_t cap = b->cap_off ? 2 * b->cap_off : 64;
        int64_t *o = la_realloc(b->offset, (size_t)cap * sizeof *o);
        if (!o) return la_fail(LA_ENOMEM, "documents: out of memory");
        b->offset = o;
        b->cap_off = cap;
    }
    b->offset[b->n_off++] = b->n;
    return LA_OK;
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static la_status read_text(builder *b, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return la_fail(LA_EIO, "cannot open '%s': %s", path, strerror(errno));
    LA_TRY(start_doc(b));
    unsigned char buf[1 << 15];
    size_t got;
    la_status st = LA_OK;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        if ((st = grow_tokens(b, (int64_t)got)) != LA_OK) break;
        for (size_t i = 0; i < got; i++) b->tokens[b->n++] = buf[i];
    }
    if (st == LA_OK && ferror(f)) st = la_fail(LA_EIO, "reading '%s' failed: %s", path, strerror(errno));
    fclose(f);
    return st;
}

/* One llm.c shard (io/shard.c reads and checks it): a document starts at every GPT-2
 * end-of-text token and at the first token. */
static la_status read_shard(builder *b, const char *path) {
    uint16_t *tok = NULL;
    int64_t n = 0;
    LA_TRY(la_shard_read(path, GPT2_VOCAB, &tok, &n));
    la_status st = grow_tokens(b, n);
    for (int64_t i = 0; i < n && st == LA_OK; i++) {
        if (tok[i] == GPT2_EOT || b->n_off == 0) st = start_doc(b);
        b->tokens[b->n++] = tok[i];
    }
    free(tok);
    return st;
}

la_status la_docs_load(const char *dir, la_docs *out) {
    if (!dir || !out) return la_fail(LA_EINVAL, "la_docs_load: NULL argument");
    memset(out, 0, sizeof *out);
    builder b = {0};
    char **names = NULL;
    int n_names = 0, n_bins = 0;
    struct stat sb;
    la_status st = LA_OK;
    errno = 0;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return la_fail(LA_EIO, "cannot open data folder '%s': %s (give a folder of .txt documents, or run "
                       "scripts/setup.sh to build the default corpus)", dir, errno ? strerror(errno) : "not a folder");
    LA_TRY(la_list_files(dir, &names, &n_names));
    /* llm.c shards when the folder holds any *.bin (only those are read), else text files */
    for (int i = 0; i < n_names; i++) n_bins += ends_with(names[i], ".bin");
    int is_bytes = n_bins == 0;
    for (int i = 0; st == LA_OK && i < n_names; i++) {
        if (is_bytes && !ends_with(names[i], "/MANIFEST")) st = read_text(&b, names[i]); /* scripts/prepare_*.sh's list */
        else if (!is_bytes && ends_with(names[i], ".bin")) st = read_shard(&b, names[i]);
    }
    /* drop a trailing empty document, then close the offsets */
    if (st == LA_OK && b.n_off > 0 && b.offset[b.n_off - 1] == b.n) b.n_off--;
    if (st == LA_OK && b.n_off == 0)
        st = la_fail(LA_EFORMAT, "data folder '%s' holds no documents (no non-empty file); put text "
                     "files or llm.c .bin shards in it", dir);
    if (st == LA_OK) st = start_doc(&b); /* appends the end offset */
    if (st == LA_OK && b.offset[b.n_off - 1] != b.n) st = la_fail(LA_EFORMAT, "internal: offsets");
    la_free_paths(names, n_names);
    if (st != LA_OK) {
        free(b.tokens);
        free(b.offset);
        return st;
    }
    out->tokens = b.tokens;
    out->offset = b.offset;
    out->n_tokens = b.n;
    out->n_docs = (int)(b.n_off - 1);
    out->vocab = is_bytes ? 256 : GPT2_VOCAB;
    out->is_bytes = is_bytes;
    return LA_OK;
}

void la_docs_free(la_docs *docs) {
    if (!docs) return;
    free(docs->tokens);
    free(docs->offset);
    memset(docs, 0, sizeof *docs);
}
