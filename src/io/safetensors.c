/* safetensors.c -- float32 safetensors files (the huggingface/safetensors layout), with the
 * JSON header written and parsed by cJSON. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "io/safetensors.h"

la_status la_st_write_af(la_afile *af_out, const char *path, const la_st_tensor *t, int n,
                         const char *const *meta, int n_meta) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return la_fail(LA_ENOMEM, "safetensors: out of memory");
    /* every cJSON call is checked: a header missing an entry would be a corrupt file
     * written as a success (found by tests/test_alloc_fail) */
    int built = 1;
    if (n_meta > 0) {
        cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");
        built = md != NULL;
        for (int i = 0; i < n_meta && built; i++)
            built = cJSON_AddStringToObject(md, meta[2 * i], meta[2 * i + 1]) != NULL;
    }
    size_t off = 0;
    for (int i = 0; i < n && built; i++) {
        if (t[i].ndim < 0 || t[i].ndim > 4) {
            cJSON_Delete(root);
            return la_fail(LA_EINVAL, "safetensors: tensor %s has ndim %d", t[i].name, t[i].ndim);
        }
        cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
        cJSON *sh = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
        cJSON *of = sh ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
        built = of && cJSON_AddStringToObject(e, "dtype", "F32");
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim && built; d++) {
            cJSON *x = cJSON_CreateNumber((double)t[i].shape[d]);
            built = x && cJSON_AddItemToArray(sh, x);
            if (x && !built) cJSON_Delete(x);
            numel *= (size_t)t[i].shape[d];
        }
        for (int k = 0; k < 2 && built; k++) {
            cJSON *x = cJSON_CreateNumber((double)(k ? off + numel * sizeof(float) : off));
            built = x && cJSON_AddItemToArray(of, x);
            if (x && !built) cJSON_Delete(x);
        }
        off += numel * sizeof(float);
    }
    if (!built) {
        cJSON_Delete(root);
        return la_fail(LA_ENOMEM, "safetensors: out of memory building the header of %s", path);
    }
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!js) return la_fail(LA_ENOMEM, "safetensors: out of memory printing the header");
    size_t hl = strlen(js), padded = (hl + 7) & ~(size_t)7;
    la_afile af;
    la_status s = la_afile_open(&af, path);
    if (s != LA_OK) {
        free(js);
        return s;
    }
    errno = 0;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int ok = fwrite(len8, 1, 8, af.f) == 8 && fwrite(js, 1, hl, af.f) == hl;
    for (size_t i = hl; i < padded && ok; i++) ok = fputc(' ', af.f) != EOF;
    free(js);
    for (int i = 0; i < n && ok; i++) {
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= (size_t)t[i].shape[d];
        ok = fwrite(t[i].data, sizeof(float), numel, af.f) == numel;
    }
    if (!ok) {
        la_afile_abort(&af);
        return la_fail(LA_EIO, "safetensors: cannot write %s: %s (is the disk full?); the previous file is "
                       "untouched", path, strerror(errno ? errno : EIO));
    }
    *af_out = af;
    return LA_OK;
}

void la_st_free(la_st_file *f) {
    if (!f) return;
    free(f->e);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->data);
    memset(f, 0, sizeof *f);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const la_st_entry *)a)->name, ((const la_st_entry *)b)->name);
}

static int cmp_begin(const void *a, const void *b) {
    const la_st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

la_status la_st_read(const char *path, la_st_file *f) {
    memset(f, 0, sizeof *f);
    FILE *fp = la_fopen_regular(path);
    if (!fp) return LA_EIO;
    uint8_t len8[8];
    fseek(fp, 0, SEEK_END);
    long fsize = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    if (fsize < 8 || fread(len8, 1, 8, fp) != 8) {
        fclose(fp);
        return la_fail(LA_EFORMAT, "%s: not a safetensors file (shorter than 8 bytes)", path);
    }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)len8[i] << (8 * i);
    if (hl < 2 || hl > (uint64_t)fsize - 8) {
        fclose(fp);
        return la_fail(LA_EFORMAT, "%s: header length %llu does not fit in a %ld-byte file "
                       "(truncated or not safetensors)", path, (unsigned long long)hl, fsize);
    }
    char *js = la_malloc(hl + 1);
    size_t dl = (size_t)fsize - 8 - hl;
    uint8_t *data = la_malloc(dl ? dl : 1);
    if (!js || !data) {
        free(js);
        free(data);
        fclose(fp);
        return la_fail(LA_ENOMEM, "%s: out of memory", path);
    }
    int rd = fread(js, 1, hl, fp) == hl && fread(data, 1, dl, fp) == dl;
    fclose(fp);
    js[hl] = 0;
    if (!rd) {
        free(js);
        free(data);
        return la_fail(LA_EIO, "%s: read error", path);
    }
    f->data = data;
    f->data_len = dl;
    errno = 0;
    cJSON *root = cJSON_Parse(js);
    int parse_nomem = !root && errno == ENOMEM; /* cJSON cannot tell; the allocator's errno can */
    free(js);
    la_status st = LA_OK;
    la_st_entry *sorted = NULL;
#define BAD(...) LA_FAIL_DONE(LA_EFORMAT, __VA_ARGS__)
    if (parse_nomem) LA_FAIL_DONE(LA_ENOMEM, "%s: out of memory parsing the header", path);
    if (!root || !cJSON_IsObject(root)) BAD("%s: safetensors header is not a JSON object (corrupt file)", path);
    int cnt = cJSON_GetArraySize(root), seen_meta = 0;
    f->e = la_calloc(cnt ? cnt : 1, sizeof *f->e);
    f->meta_keys = la_calloc(cnt ? cnt : 1, sizeof(char *));
    f->meta_vals = la_calloc(cnt ? cnt : 1, sizeof(char *));
    if (!f->e || !f->meta_keys || !f->meta_vals) LA_FAIL_DONE(LA_ENOMEM, "%s: out of memory", path);
    for (cJSON *it = root->child; it; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) {
            if (!cJSON_IsObject(it)) BAD("%s: __metadata__ is not an object", path);
            /* cJSON keeps duplicate keys; a second object would be read over the first's
             * arrays (found by fuzz_checkpoint), and which one counts is not defined */
            if (seen_meta++) BAD("%s: the header has two __metadata__ objects (corrupt file)", path);
            int mc = cJSON_GetArraySize(it);
            free(f->meta_keys);
            free(f->meta_vals);
            f->meta_keys = la_calloc(mc ? mc : 1, sizeof(char *));
            f->meta_vals = la_calloc(mc ? mc : 1, sizeof(char *));
            if (!f->meta_keys || !f->meta_vals) LA_FAIL_DONE(LA_ENOMEM, "%s: out of memory", path);
            for (cJSON *kv = it->child; kv; kv = kv->next) {
                if (!cJSON_IsString(kv)) BAD("%s: metadata value of '%s' is not a string", path, kv->string);
                f->meta_keys[f->n_meta] = la_strdup(kv->string);
                f->meta_vals[f->n_meta] = la_strdup(kv->valuestring);
                f->n_meta++; /* counted before the check: la_st_free frees both (free(NULL) is fine) */
                if (!f->meta_keys[f->n_meta - 1] || !f->meta_vals[f->n_meta - 1])
                    LA_FAIL_DONE(LA_ENOMEM, "%s: out of memory", path);
            }
            continue;
        }
        la_st_entry *e = &f->e[f->n];
        if (strlen(it->string) >= sizeof e->name) BAD("%s: tensor name too long", path);
        snprintf(e->name, sizeof e->name, "%s", it->string);
        cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        cJSON *of = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(dt) || strcmp(dt->valuestring, "F32"))
            BAD("%s: tensor %s has dtype %s; only F32 is supported", path, e->name,
                cJSON_IsString(dt) ? dt->valuestring : "(missing)");
        if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > 8)
            BAD("%s: tensor %s has no valid shape", path, e->name);
        if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2)
            BAD("%s: tensor %s has no valid data_offsets", path, e->name);
        double numel = 1;
        e->ndim = 0;
        for (cJSON *d = sh->child; d; d = d->next) {
            /* a whole number that an int64_t holds exactly (2^53: found by fuzz_safetensors) */
            if (!cJSON_IsNumber(d) || !(d->valuedouble >= 0 && d->valuedouble <= 9007199254740992.0) ||
                d->valuedouble != floor(d->valuedouble))
                BAD("%s: tensor %s has a bad dimension (not a whole number in [0, 2^53])", path, e->name);
            e->shape[e->ndim++] = (int64_t)d->valuedouble;
            numel *= d->valuedouble;
        }
        double b = of->child->valuedouble, en = of->child->next->valuedouble;
        if (!cJSON_IsNumber(of->child) || !cJSON_IsNumber(of->child->next) || b != floor(b) || en != floor(en))
            BAD("%s: tensor %s has data_offsets that are not whole numbers (corrupt file)", path, e->name);
        if (b < 0 || en < b || en > (double)dl)
            BAD("%s: tensor %s has data_offsets [%.0f, %.0f] outside the %zu-byte data section "
                "(truncated file?)", path, e->name, b, en, dl);
        if (en - b != numel * 4)
            BAD("%s: tensor %s: data_offsets span %.0f bytes but its shape needs %.0f",
                path, e->name, en - b, numel * 4);
        e->begin = (size_t)b;
        e->end = (size_t)en;
        f->n++;
    }
    sorted = la_malloc(sizeof *sorted * (f->n ? f->n : 1));
    if (!sorted) LA_FAIL_DONE(LA_ENOMEM, "%s: out of memory", path);
    memcpy(sorted, f->e, sizeof *sorted * f->n);
    qsort(sorted, f->n, sizeof *sorted, cmp_begin);
    for (int i = 1; i < f->n; i++)
        if (sorted[i].begin < sorted[i - 1].end)
            BAD("%s: tensors %s and %s overlap", path, sorted[i - 1].name, sorted[i].name);
    /* cJSON keeps duplicate keys: a name that appears twice is refused */
    qsort(sorted, f->n, sizeof *sorted, cmp_name);
    for (int i = 1; i < f->n; i++)
        if (!strcmp(sorted[i].name, sorted[i - 1].name))
            BAD("%s: tensor %s appears twice in the header (corrupt file)", path, sorted[i].name);
done:
#undef BAD
    free(sorted);
    cJSON_Delete(root);
    if (st != LA_OK) la_st_free(f);
    return st;
}

const la_st_entry *la_st_find(const la_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->e[i].name, name)) return &f->e[i];
    return NULL;
}

const char *la_st_meta(const la_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_vals[i];
    return NULL;
}
