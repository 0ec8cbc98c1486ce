/* gguf_writer.c -- GGUF v3 files built by the tests (see gguf_writer.h). */
#include "gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void la_tg_put(la_tg_buf *b, const void *x, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) abort();
        b->p = p, b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, x, n);
    b->n += n;
}

void la_tg_u32(la_tg_buf *b, uint32_t v) { la_tg_put(b, &v, 4); }
void la_tg_u64(la_tg_buf *b, uint64_t v) { la_tg_put(b, &v, 8); }

void la_tg_str(la_tg_buf *b, const char *s) {
    la_tg_u64(b, strlen(s));
    la_tg_put(b, s, strlen(s));
}

void la_tg_free(la_tg_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

void la_tg_kv_str(la_tg_buf *b, const char *k, const char *v) {
    la_tg_str(b, k), la_tg_u32(b, 8), la_tg_str(b, v), b->nkv++;
}

void la_tg_kv_u32(la_tg_buf *b, const char *k, uint32_t v) {
    la_tg_str(b, k), la_tg_u32(b, 4), la_tg_u32(b, v), b->nkv++;
}

void la_tg_kv_f32(la_tg_buf *b, const char *k, float v) {
    la_tg_str(b, k), la_tg_u32(b, 6), la_tg_put(b, &v, 4), b->nkv++;
}

void la_tg_kv_bool(la_tg_buf *b, const char *k, int v) {
    unsigned char c = (unsigned char)(v != 0);
    la_tg_str(b, k), la_tg_u32(b, 7), la_tg_put(b, &c, 1), b->nkv++;
}

void la_tg_kv_strs(la_tg_buf *b, const char *k, const char *const *v, int n) {
    la_tg_str(b, k), la_tg_u32(b, 9), la_tg_u32(b, 8), la_tg_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) la_tg_str(b, v[i]);
    b->nkv++;
}

void la_tg_kv_arr4(la_tg_buf *b, const char *k, uint32_t elem_type, const void *v, int n) {
    la_tg_str(b, k), la_tg_u32(b, 9), la_tg_u32(b, elem_type), la_tg_u64(b, (uint64_t)n);
    la_tg_put(b, v, 4 * (size_t)n), b->nkv++;
}

static void pad32(la_tg_buf *b) {
    static const unsigned char zero[32] = {0};
    la_tg_put(b, zero, (32 - b->n % 32) % 32);
}

static size_t n_elems(const la_tg_tensor *t) { return (size_t)(t->ne[0] * (t->ne[1] > 1 ? t->ne[1] : 1)); }

void la_tg_add_normal(la_tg_tensor *t, int *n, const char *name, int64_t cols, int64_t rows, la_rng *r, double std,
                      double mean) {
    la_tg_tensor *x = &t[(*n)++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->ne[0] = cols, x->ne[1] = rows > 1 ? rows : 1;
    x->data = malloc(sizeof(float) * n_elems(x));
    if (!x->data) abort();
    for (size_t i = 0; i < n_elems(x); i++) x->data[i] = (float)(mean + std * la_rng_normal(r));
}

void la_tg_image(la_tg_buf *b, const la_tg_buf *kv, const la_tg_tensor *t, int nt) {
    la_tg_put(b, "GGUF", 4);
    la_tg_u32(b, 3);
    la_tg_u64(b, (uint64_t)nt);
    la_tg_u64(b, (uint64_t)kv->nkv);
    la_tg_put(b, kv->p, kv->n);
    uint64_t off = 0; /* data offsets relative to the (aligned) start of the data section */
    for (int i = 0; i < nt; i++) {
        const int nd = t[i].ne[1] > 1 ? 2 : 1;
        la_tg_str(b, t[i].name);
        la_tg_u32(b, (uint32_t)nd);
        for (int d = 0; d < nd; d++) la_tg_u64(b, (uint64_t)t[i].ne[d]);
        la_tg_u32(b, 0); /* GGML_TYPE_F32 */
        la_tg_u64(b, off);
        off += (n_elems(&t[i]) * 4 + 31) / 32 * 32;
    }
    pad32(b);
    for (int i = 0; i < nt; i++) {
        la_tg_put(b, t[i].data, n_elems(&t[i]) * 4);
        pad32(b);
    }
}

int la_tg_write_file(const char *path, const la_tg_buf *kv, const la_tg_tensor *t, int nt) {
    la_tg_buf b = {0};
    la_tg_image(&b, kv, t, nt);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(b.p, 1, b.n, f) == b.n;
    if (f && fclose(f) != 0) ok = 0;
    la_tg_free(&b);
    return ok ? 0 : -1;
}
