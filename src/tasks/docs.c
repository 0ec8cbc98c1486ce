/* docs.c -- a folder of documents as token ids: byte-level text files, or llm.c GPT-2
 * token shards split at <|endoftext|>. Documents stay apart so that evaluation windows
 * and passkey haystacks can be taken from inside one document. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
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

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* Sorted list of the regular non-hidden files in dir (want_bin: only *.bin). */
static la_status list_files(const char *dir, int want_bin, char ***names, int *count) {
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return la_fail(LA_EIO, "cannot open data folder '%s': %s (run scripts/setup.sh to build "
                       "the default corpus, or point \"data\" at a folder of text files)",
                       dir, strerror(errno));
    int cap = 0;
    la_status st = LA_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (want_bin && !ends_with(e->d_name, ".bin")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = la_realloc(*names, (size_t)cap * sizeof *nn);
            if (!nn) { st = la_fail(LA_ENOMEM, "documents: out of memory"); break; }
            *names = nn;
        }
        if (!((*names)[*count] = la_strdup(e->d_name))) { st = la_fail(LA_ENOMEM, "documents: out of memory"); break; }
        (*count)++;
    }
    closedir(d);
    if (*count > 1) qsort(*names, (size_t)*count, sizeof **names, cmp_str);
    return st;
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

/* An llm.c shard is exactly 1024 + 2 n bytes (n = the header's token count). */
static la_status check_shard_size(FILE *f, const char *path, int32_t n) {
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) return la_fail(LA_EIO, "cannot stat '%s': %s", path, strerror(errno));
    long long want = 1024 + 2 * (long long)n, have = (long long)sb.st_size;
    if (have != want)
        return la_fail(LA_EFORMAT, "'%s': the header declares %d tokens, so the file should be %lld bytes, "
                       "but it is %lld bytes (%s); re-create the shard", path, n, want, have,
                       have < want ? "truncated" : "trailing bytes");
    return LA_OK;
}

static la_status read_shard(builder *b, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return la_fail(LA_EIO, "cannot open '%s': %s", path, strerror(errno));
    int32_t hdr[256];
    la_status st = LA_OK;
    if (fread(hdr, sizeof hdr[0], 256, f) != 256) {
        st = la_fail(LA_EFORMAT, "'%s': shorter than the 1024-byte llm.c shard header", path);
    } else if (hdr[0] != SHARD_MAGIC || hdr[1] != SHARD_VERSION) {
        st = la_fail(LA_EFORMAT, "'%s': not an llm.c token shard (magic %d version %d; expected "
                     "magic %d version %d)", path, hdr[0], hdr[1], SHARD_MAGIC, SHARD_VERSION);
    } else if (hdr[2] < 0) {
        st = la_fail(LA_EFORMAT, "'%s': negative token count %d in the header", path, hdr[2]);
    } else if ((st = check_shard_size(f, path, hdr[2])) != LA_OK) {
        /* the count must match the file before anything is allocated for it */
    } else if ((st = grow_tokens(b, hdr[2])) == LA_OK) {
        uint16_t buf[1 << 14];
        int64_t left = hdr[2];
        while (left > 0) {
            size_t want = left < (int64_t)(sizeof buf / sizeof buf[0]) ? (size_t)left : sizeof buf / sizeof buf[0];
            size_t got = fread(buf, sizeof buf[0], want, f);
            if (got != want) {
                st = la_fail(LA_EFORMAT, "'%s': truncated: the header promises %d tokens, the file "
                             "holds %lld", path, hdr[2], (long long)(hdr[2] - left + (int64_t)got));
                break;
            }
            for (size_t i = 0; i < got && st == LA_OK; i++) {
                if (buf[i] == GPT2_EOT || b->n_off == 0) st = start_doc(b);
                if (buf[i] >= GPT2_VOCAB)
                    st = la_fail(LA_EFORMAT, "'%s': token id %u is outside the GPT-2 vocabulary (%d)",
                                 path, buf[i], GPT2_VOCAB);
                b->tokens[b->n++] = buf[i];
            }
            if (st != LA_OK) break;
            left -= (int64_t)got;
        }
    }
    fclose(f);
    return st;
}

la_status la_docs_load(const char *dir, la_docs *out) {
    if (!dir || !out) return la_fail(LA_EINVAL, "la_docs_load: NULL argument");
    memset(out, 0, sizeof *out);
    char **bins = NULL, **all = NULL;
    int n_bins = 0, n_all = 0;
    builder b = {0};
    la_status st = list_files(dir, 1, &bins, &n_bins);
    int is_bytes = n_bins == 0;
    if (st == LA_OK && is_bytes) st = list_files(dir, 0, &all, &n_all);
    char **names = is_bytes ? all : bins;
    int n_names = is_bytes ? n_all : n_bins;
    for (int i = 0; st == LA_OK && i < n_names; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        st = is_bytes ? read_text(&b, path) : read_shard(&b, path);
    }
    /* drop a trailing empty document, then close the offsets */
    if (st == LA_OK && b.n_off > 0 && b.offset[b.n_off - 1] == b.n) b.n_off--;
    if (st == LA_OK && b.n_off == 0)
        st = la_fail(LA_EFORMAT, "data folder '%s' holds no documents (no non-empty file); put text "
                     "files or llm.c .bin shards in it", dir);
    if (st == LA_OK) st = start_doc(&b); /* appends the end offset */
    if (st == LA_OK && b.offset[b.n_off - 1] != b.n) st = la_fail(LA_EFORMAT, "internal: offsets");
    for (int i = 0; i < n_bins; i++) free(bins[i]);
    for (int i = 0; i < n_all; i++) free(all[i]);
    free(bins);
    free(all);
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

int64_t la_docs_longest(const la_docs *docs) {
    int64_t best = 0;
    for (int d = 0; docs && d < docs->n_docs; d++) {
        int64_t len = docs->offset[d + 1] - docs->offset[d];
        if (len > best) best = len;
    }
    return best;
}
