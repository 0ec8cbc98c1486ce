/* data.c -- la_data: documents from text files or llm.c shards, split into train and
 * validation by document with a fixed seed, and window sampling for training. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/files.h"
#include "train/data_internal.h"
#include "longattn/train.h"

struct la_data {
    int vocab;
    uint16_t *tok[2];   /* concatenated documents of each split */
    int64_t ntok[2];
    int ndocs[2];
    int64_t *doc_off[2]; /* (ndocs + 1) start offsets into tok */
    la_rng rng;          /* train window sampler */
    uint64_t n_windows;
};

la_data_config la_data_config_default(void) {
    la_data_config c;
    memset(&c, 0, sizeof c);
    c.val_fraction = 0.1;
    c.split_seed = 1234;
    c.eot = 50256;
    c.vocab = 0;
    return c;
}

la_status la_data_doc_list_add(doc_list *dl, uint16_t *tok, int64_t len, int forced_val) {
    if (dl->n == dl->cap) {
        int cap = dl->cap ? 2 * dl->cap : 64;
        uint16_t **t = la_realloc(dl->tok, cap * sizeof *t);
        if (t) dl->tok = t;
        int64_t *l = la_realloc(dl->len, cap * sizeof *l);
        if (l) dl->len = l;
        int *fv = la_realloc(dl->forced_val, cap * sizeof *fv);
        if (fv) dl->forced_val = fv;
        if (!t || !l || !fv) return la_fail(LA_ENOMEM, "out of memory listing documents");
        dl->cap = cap;
    }
    dl->tok[dl->n] = tok;
    dl->len[dl->n] = len;
    dl->forced_val[dl->n] = forced_val;
    dl->n++;
    return LA_OK;
}

static void doc_list_free(doc_list *dl) {
    for (int i = 0; i < dl->n; i++) free(dl->tok[i]);
    free(dl->tok);
    free(dl->len);
    free(dl->forced_val);
    memset(dl, 0, sizeof *dl);
}

/* The files of path; when path is a directory with a train/ subfolder (the layout of the
 * study corpus, data/pydoc/{train,val}), the files of train/ then those of val/ (if any),
 * with *n_train the number from train/ (else -1): val/ documents are the validation split. */
static la_status list_split_files(const char *path, char ***names, int *n, int *n_train) {
    *n_train = -1;
    struct stat st;
    size_t pl = strlen(path) + 8;
    char *sub = la_malloc(pl);
    if (!sub) return la_fail(LA_ENOMEM, "out of memory");
    snprintf(sub, pl, "%s/train", path);
    if (!(stat(path, &st) == 0 && S_ISDIR(st.st_mode) && stat(sub, &st) == 0 && S_ISDIR(st.st_mode))) {
        free(sub);
        return la_list_files(path, names, n);
    }
    la_status s = la_list_files(sub, names, n);
    snprintf(sub, pl, "%s/val", path);
    if (s == LA_OK && stat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
        char **vn = NULL;
        int nv = 0;
        s = la_list_files(sub, &vn, &nv);
        char **all = NULL;
        if (s == LA_OK && nv > 0 && !(all = la_realloc(*names, (size_t)(*n + nv) * sizeof(char *))))
            s = la_fail(LA_ENOMEM, "out of memory");
        if (all) {
            memcpy(all + *n, vn, (size_t)nv * sizeof(char *));
            free(vn);
            *names = all;
            *n_train = *n;
            *n += nv;
        } else {
            la_free_paths(vn, nv);
        }
    }
    if (s != LA_OK) { /* the caller gets nothing to free: release train/'s names too */
        la_free_paths(*names, *n);
        *names = NULL;
        *n = 0;
    }
    free(sub);
    return s;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

void la_data_free(la_data *d) {
    if (!d) return;
    for (int s = 0; s < 2; s++) {
        free(d->tok[s]);
        free(d->doc_off[s]);
    }
    free(d);
}

/* Concatenate the documents flagged for split s. */
static la_status build_split(la_data *d, int s, const doc_list *dl, const uint8_t *is_val) {
    int nd = 0;
    int64_t nt = 0;
    for (int i = 0; i < dl->n; i++)
        if (is_val[i] == s) {
            nd++;
            nt += dl->len[i];
        }
    d->tok[s] = la_malloc((size_t)(nt ? nt : 1) * sizeof(uint16_t));
    d->doc_off[s] = la_malloc((size_t)(nd + 1) * sizeof(int64_t));
    if (!d->tok[s] || !d->doc_off[s]) return la_fail(LA_ENOMEM, "out of memory building the data splits");
    int k = 0;
    int64_t off = 0;
    for (int i = 0; i < dl->n; i++)
        if (is_val[i] == s) {
            d->doc_off[s][k++] = off;
            memcpy(d->tok[s] + off, dl->tok[i], (size_t)dl->len[i] * sizeof(uint16_t));
            off += dl->len[i];
        }
    d->doc_off[s][k] = off;
    d->ndocs[s] = nd;
    d->ntok[s] = nt;
    return LA_OK;
}

la_status la_data_open(const char *path, const la_data_config *cfg_in, la_data **out) {
    if (out) *out = NULL; /* as every constructor: NULL on any failure */
    if (!path || !out) return la_fail(LA_EINVAL, "la_data_open: NULL argument");
    la_data_config cfg = cfg_in ? *cfg_in : la_data_config_default();
    if (!(cfg.val_fraction >= 0 && cfg.val_fraction < 1))
        return la_fail(LA_EINVAL, "data: val_fraction %g must be in [0, 1)", cfg.val_fraction);
    char **names;
    int nf, n_train = -1; /* n_train >= 0: names[n_train..] come from a val/ folder */
    LA_TRY(list_split_files(path, &names, &nf, &n_train));
    la_status st = LA_OK;
    doc_list dl = {0};
    uint8_t *is_val = NULL;
    la_data *d = NULL;
    int nbin = 0;
    for (int i = 0; i < nf; i++) nbin += ends_with(names[i], ".bin");
    if (nf == 0)
        LA_FAIL_DONE(LA_EFORMAT, "%s: no files to read (expected text files or llm.c .bin shards)", path);
    if (nbin && nbin != nf)
        LA_FAIL_DONE(LA_EFORMAT, "%s: mixes %d .bin shards with %d other files; put text and "
                     "shards in separate directories", path, nbin, nf - nbin);
    int shards = nbin > 0;
    int vocab = cfg.vocab ? cfg.vocab : shards ? 50257 : 256;
    if (vocab < 2 || vocab > 65536) LA_FAIL_DONE(LA_EINVAL, "data: vocab %d outside [2, 65536]", vocab);
    if (shards && (cfg.eot < 0 || cfg.eot >= vocab))
        LA_FAIL_DONE(LA_EINVAL, "data: eot id %d outside the vocabulary [0, %d)", cfg.eot, vocab);
    for (int i = 0; i < nf && st == LA_OK; i++) {
        int before = dl.n;
        st = shards ? la_data_shard_read_file(names[i], cfg.eot, vocab, &dl) : la_data_text_read_file(names[i], &dl);
        if (n_train >= 0 && i >= n_train)
            for (int j = before; j < dl.n; j++) dl.forced_val[j] = 1; /* from DIR/val */
    }
    if (st != LA_OK) goto done;
    if (dl.n == 0) LA_FAIL_DONE(LA_EFORMAT, "%s: no tokens (all files empty)", path);
    if (!shards && vocab < 256)
        for (int i = 0; i < dl.n; i++)
            for (int64_t j = 0; j < dl.len[i]; j++)
                if (dl.tok[i][j] >= vocab)
                    LA_FAIL_DONE(LA_EFORMAT, "%s: byte %d is outside the vocabulary [0, %d)", path,
                                 dl.tok[i][j], vocab);
    /* split by document */
    is_val = la_calloc(dl.n + 1, 1);
    d = la_calloc(1, sizeof *d);
    if (!is_val || !d) LA_FAIL_DONE(LA_ENOMEM, "out of memory");
    int any_forced = 0;
    for (int i = 0; i < dl.n; i++) any_forced |= dl.forced_val[i];
    la_rng r;
    la_rng_seed(&r, cfg.split_seed);
    int nval = 0;
    for (int i = 0; i < dl.n; i++) {
        double u = la_rng_uniform(&r);  // drawn for every document: the split of a document
                                        // does not depend on the forced ones
        is_val[i] = dl.forced_val[i] ? 1 : any_forced ? 0 : (u < cfg.val_fraction);
        nval += is_val[i];
    }
    if (any_forced && nval == dl.n)
        LA_FAIL_DONE(LA_EFORMAT, "%s: every file is validation data (%s): the train split is empty; add "
                     "training files", path, shards ? "shards named *_val_*" : "in a val/ folder");
    if (!any_forced && cfg.val_fraction > 0) {
        if (dl.n == 1) {
            /* one document: cut it at (1 - val_fraction) of its length */
            int64_t len = dl.len[0], cut = (int64_t)((1.0 - cfg.val_fraction) * len);
            if (cut > 0 && cut < len) {
                /* out of memory here is an error, not a document without its validation part */
                uint16_t *tail = la_malloc((size_t)(len - cut) * sizeof(uint16_t));
                uint8_t *iv = la_realloc(is_val, 3);
                if (iv) is_val = iv;
                if (!tail || !iv || la_data_doc_list_add(&dl, tail, len - cut, 0) != LA_OK) {
                    free(tail);
                    LA_FAIL_DONE(LA_ENOMEM, "out of memory splitting the document");
                }
                memcpy(tail, dl.tok[0] + cut, (size_t)(len - cut) * sizeof(uint16_t));
                dl.len[0] = cut;
                is_val[0] = 0;
                is_val[1] = 1;
            }
        } else if (nval == 0) {
            is_val[dl.n - 1] = 1;
        } else if (nval == dl.n) {
            is_val[dl.n - 1] = 0;
        }
    }
    d->vocab = vocab;
    st = build_split(d, LA_SPLIT_TRAIN, &dl, is_val);
    if (st == LA_OK) st = build_split(d, LA_SPLIT_VAL, &dl, is_val);
    if (st == LA_OK) {
        la_data_seed(d, 1);
        *out = d;
        d = NULL;
    }
done:
    la_free_paths(names, nf);
    free(is_val);
    doc_list_free(&dl);
    la_data_free(d);
    return st;
}

int la_data_vocab(const la_data *d) { return d->vocab; }
int64_t la_data_num_tokens(const la_data *d, la_split s) { return (s == 0 || s == 1) ? d->ntok[s] : 0; }
int la_data_num_docs(const la_data *d, la_split s) { return (s == 0 || s == 1) ? d->ndocs[s] : 0; }

int64_t la_data_doc_len(const la_data *d, la_split s, int i) {
    if ((s != 0 && s != 1) || i < 0 || i >= d->ndocs[s]) return -1;
    return d->doc_off[s][i + 1] - d->doc_off[s][i];
}

la_status la_data_read(const la_data *d, la_split s, int doc, int64_t offset, int64_t n,
                       int32_t *out) {
    if (!d || !out) return la_fail(LA_EINVAL, "la_data_read: NULL argument");
    int64_t len = la_data_doc_len(d, s, doc);
    if (len < 0) return la_fail(LA_EINVAL, "la_data_read: document %d does not exist in a split of %d documents",
                                doc, (s == 0 || s == 1) ? d->ndocs[s] : 0);
    if (offset < 0 || n < 0 || offset + n > len)
        return la_fail(LA_EINVAL, "la_data_read: tokens [%lld, %lld) outside document %d of %lld tokens",
                       (long long)offset, (long long)(offset + n), doc, (long long)len);
    const uint16_t *src = d->tok[s] + d->doc_off[s][doc] + offset;
    for (int64_t i = 0; i < n; i++) out[i] = src[i];
    return LA_OK;
}

void la_data_seed(la_data *d, uint64_t seed) {
    la_rng_seed(&d->rng, seed);
    d->n_windows = 0;
}

void la_data_get_state(const la_data *d, la_data_state *st) {
    memcpy(st->rng, d->rng.s, sizeof st->rng);
    st->n_windows = d->n_windows;
}

void la_data_set_state(la_data *d, const la_data_state *st) {
    memcpy(d->rng.s, st->rng, sizeof st->rng);
    d->n_windows = st->n_windows;
}

la_status la_data_sample(la_data *d, int B, int T, int32_t *out) {
    if (!d || !out) return la_fail(LA_EINVAL, "la_data_sample: NULL argument");
    if (B < 1 || T < 1) return la_fail(LA_EINVAL, "la_data_sample: B=%d, T=%d must be >= 1", B, T);
    int64_t n = d->ntok[LA_SPLIT_TRAIN];
    if (n < (int64_t)T + 1)
        return la_fail(LA_ESHAPE, "data: the train split has %lld tokens, fewer than one window "
                       "of T+1 = %lld; use a shorter sequence length or more data", (long long)n, (long long)T + 1);
    /* start uniform over [0, n - T - 1]: the window [start, start + T] ends at or before
     * token n - 1, and every such window is drawn with equal probability */
    for (int b = 0; b < B; b++) {
        int64_t start = (int64_t)la_rng_below(&d->rng, (uint64_t)(n - T));
        const uint16_t *src = d->tok[LA_SPLIT_TRAIN] + start;
        for (int t = 0; t <= T; t++) out[(size_t)b * (T + 1) + t] = src[t];
        d->n_windows++;
    }
    return LA_OK;
}

la_status la_data_val_batch(const la_data *d, int index, int B, int T, int32_t *out) {
    if (!d || !out) return la_fail(LA_EINVAL, "la_data_val_batch: NULL argument");
    if (B < 1 || T < 1 || index < 0)
        return la_fail(LA_EINVAL, "la_data_val_batch: B=%d, T=%d must be >= 1 and index=%d >= 0", B, T, index);
    int64_t n = d->ntok[LA_SPLIT_VAL], W = n / ((int64_t)T + 1);
    if (W < 1)
        return la_fail(LA_ESHAPE, "data: the validation split has %lld tokens, fewer than one "
                       "window of T+1 = %lld; use a shorter sequence or a larger val_fraction",
                       (long long)n, (long long)T + 1);
    for (int b = 0; b < B; b++) {
        int64_t w = ((int64_t)index * B + b) % W;
        const uint16_t *src = d->tok[LA_SPLIT_VAL] + w * (T + 1);
        for (int t = 0; t <= T; t++) out[(size_t)b * (T + 1) + t] = src[t];
    }
    return LA_OK;
}
