/* test_corpus.c -- tiny generated text corpora for tests. */
#define _GNU_SOURCE
#include "test_corpus.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static const char *const WORDS[] = {
    "the", "a", "function", "returns", "list", "of", "values", "module", "object", "is",
    "and", "to", "in", "file", "string", "with", "for", "that", "when", "class", "method",
    "attribute", "error", "raised", "if", "not", "an", "argument", "default", "python",
    "name", "type", "can", "be", "used", "this", "new", "data", "call", "set"};

int la_test_write_corpus(const char *dir, int n_docs, const int *sizes, uint64_t seed) {
    uint64_t s = seed * 0x2545F4914F6CDD1DULL + 7;
    const int n_words = (int)(sizeof WORDS / sizeof WORDS[0]);
    for (int d = 0; d < n_docs; d++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/doc_%03d.txt", dir, d);
        FILE *f = fopen(path, "wb");
        if (!f) return -1;
        int written = 0, in_sentence = 0;
        char word[32];
        while (written < sizes[d]) {
            uint64_t r = next(&s);
            if (r % 23 == 0) snprintf(word, sizeof word, "%d", 10000 + (int)(r % 90000));
            else snprintf(word, sizeof word, "%s", WORDS[(r >> 8) % (uint64_t)n_words]);
            if (!in_sentence && word[0] >= 'a') word[0] = (char)(word[0] - 'a' + 'A');
            char piece[48];
            int end = (r >> 20) % 9 == 0;
            snprintf(piece, sizeof piece, "%s%s%s", word, end ? "." : ((r >> 24) % 11 == 0 ? "," : ""),
                     end && (r >> 28) % 4 == 0 ? "\n" : " ");
            in_sentence = !end;
            int len = (int)strlen(piece);
            if (written + len > sizes[d]) len = sizes[d] - written;
            fwrite(piece, 1, (size_t)len, f);
            written += len;
        }
        if (fclose(f) != 0) return -1;
    }
    return 0;
}

int la_test_write_split_corpus(const char *root, int n_train, int train_base, int train_step, uint64_t train_seed,
                               int n_val, const int *val_sizes, uint64_t val_seed) {
    char p[4096];
    int tr[64];
    if (n_train > 64) return -1;
    for (int i = 0; i < n_train; i++) tr[i] = train_base + train_step * i;
    snprintf(p, sizeof p, "%s/data", root);
    if (mkdir(p, 0777) && errno != EEXIST) return -1;
    snprintf(p, sizeof p, "%s/data/train", root);
    if ((mkdir(p, 0777) && errno != EEXIST) || la_test_write_corpus(p, n_train, tr, train_seed)) return -1;
    snprintf(p, sizeof p, "%s/data/val", root);
    if ((mkdir(p, 0777) && errno != EEXIST) || la_test_write_corpus(p, n_val, val_sizes, val_seed)) return -1;
    return 0;
}

char *la_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)n + 1)) != NULL) {
        if (fread(b, 1, (size_t)n, f) == (size_t)n) b[n] = '\0';
        else free(b), b = NULL;
    }
    fclose(f);
    if (b && len) *len = (size_t)n;
    return b;
}

int la_test_mkdtemp(const char *prefix, char *buf, int n) {
    snprintf(buf, (size_t)n, "/tmp/%sXXXXXX", prefix);
    return mkdtemp(buf) ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

int la_test_write_repeated(const char *dir, const char *name, int reps) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    for (int i = 0; i < reps; i++) fputs("the quick brown fox jumps over the lazy dog. ", f);
    return fclose(f) ? -1 : 0;
}

void la_test_rmtree(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }
