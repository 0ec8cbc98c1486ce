/* gguf_writer.h -- GGUF v3 files and in-memory images built by the tests (tokenizer
 * metadata, tiny F32 Llama models), after ggml's docs/gguf.md: header "GGUF", version 3,
 * tensor count, kv count, the kv pairs, the tensor infos, then the tensor data, each
 * tensor aligned to 32 bytes. Little-endian host assumed (as the reader's tests are). */
#ifndef LA_TEST_GGUF_WRITER_H
#define LA_TEST_GGUF_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h" /* la_rng */

/* A growing byte buffer; nkv counts the pairs added with la_tg_kv_*. Zero-initialise it;
 * la_tg_free releases it. Allocation failure aborts (test support). */
typedef struct {
    unsigned char *p;
    size_t n, cap;
    int nkv;
} la_tg_buf;

void la_tg_put(la_tg_buf *b, const void *x, size_t n);
void la_tg_u32(la_tg_buf *b, uint32_t v);
void la_tg_u64(la_tg_buf *b, uint64_t v);
void la_tg_str(la_tg_buf *b, const char *s); /* u64 length, then the bytes */
void la_tg_free(la_tg_buf *b);

/* One key-value pair each (GGUF type codes: u32 4, i32 5, f32 6, bool 7, string 8, array 9). */
void la_tg_kv_str(la_tg_buf *b, const char *k, const char *v);
void la_tg_kv_u32(la_tg_buf *b, const char *k, uint32_t v);
void la_tg_kv_f32(la_tg_buf *b, const char *k, float v);
void la_tg_kv_bool(la_tg_buf *b, const char *k, int v);
void la_tg_kv_strs(la_tg_buf *b, const char *k, const char *const *v, int n);
/* an array of n 4-byte elements of GGUF type elem_type (5 = i32, 6 = f32, 4 = u32) */
void la_tg_kv_arr4(la_tg_buf *b, const char *k, uint32_t elem_type, const void *v, int n);

/* An F32 tensor: ne[0] columns (the contiguous dimension), ne[1] rows; ne[1] <= 1 is
 * written as a 1-D tensor. */
typedef struct {
    char name[64];
    int64_t ne[2];
    float *data;
} la_tg_tensor;

/* Append tensor name (cols x rows; rows <= 1: a vector) to t[*n], ++*n, with malloc'd
 * entries mean + std * N(0, 1) drawn from r; the caller frees t[i].data. */
void la_tg_add_normal(la_tg_tensor *t, int *n, const char *name, int64_t cols, int64_t rows, la_rng *r, double std,
                      double mean);

/* The whole file for the kv pairs in kv and nt tensors into out (zero-initialised). */
void la_tg_image(la_tg_buf *out, const la_tg_buf *kv, const la_tg_tensor *t, int nt);
/* The same written to path; 0 on success, -1 if the file cannot be written. */
int la_tg_write_file(const char *path, const la_tg_buf *kv, const la_tg_tensor *t, int nt);

#endif
