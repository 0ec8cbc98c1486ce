/*
 * longattn/gguf.h -- GGUF model files (ggml's format, SPEC 9): reader, tensor types,
 * dequantization (io layer, src/io/gguf.c, src/io/gguf_quant.c) and the quantized
 * matrix-vector product of the decode path (model layer, src/model/qmatvec.c).
 * Included by longattn.h.
 *
 * Reader: GGUF versions 2 and 3, little-endian. la_gguf_open maps the whole file
 * read-only (mmap) and validates it completely before returning: every count, length
 * and offset is checked against the file size, so a truncated or hostile file is an
 * LA_EFORMAT error naming the field and its byte offset, never a crash or an
 * out-of-bounds read. Metadata strings are copied (NUL-terminated); numeric arrays and
 * tensor data stay in the map. Every pointer handed out is valid until la_gguf_close.
 *
 * Tensor shapes follow ggml: ne[0] is the fastest-varying dimension (the row length);
 * a 2-D weight with ne = {cols, rows} is a row-major (rows, cols) matrix.
 */
#ifndef LONGATTN_GGUF_H
#define LONGATTN_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "core.h" /* la_status, LA_API */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct la_gguf la_gguf; /* an open file (opaque) */

/* Metadata value types (the numbers are the file's). */
typedef enum {
    LA_GGUF_U8 = 0,
    LA_GGUF_I8 = 1,
    LA_GGUF_U16 = 2,
    LA_GGUF_I16 = 3,
    LA_GGUF_U32 = 4,
    LA_GGUF_I32 = 5,
    LA_GGUF_F32 = 6,
    LA_GGUF_BOOL = 7,
    LA_GGUF_STR = 8,
    LA_GGUF_ARR = 9,
    LA_GGUF_U64 = 10,
    LA_GGUF_I64 = 11,
    LA_GGUF_F64 = 12,
    LA_GGUF_ANY = 255 /* la_gguf_get_arr: accept any element type */
} la_gguf_vtype;

/* "u8", "i32", "f32", "bool", "str", "arr", ...; "?" for anything else. */
LA_API const char *la_gguf_vtype_name(int t);

/* One metadata key/value. Read its value with the la_gguf_kv_* / la_gguf_arr_*
 * accessors; the fields after `offset` are the reader's. */
typedef struct {
    const char *key;        /* NUL-terminated */
    la_gguf_vtype type;     /* value type */
    la_gguf_vtype arr_type; /* element type when type == LA_GGUF_ARR (never ARR: nested
                               arrays are refused at open, as ggml does) */
    uint64_t n;             /* element count of an array; 1 for a scalar */
    uint64_t offset;        /* byte offset of the value in the file (for messages) */
    const uint8_t *raw;     /* numeric value(s): packed little-endian bytes in the map */
    const char *const *str; /* strings (n of them): NUL-terminated copies */
    const uint64_t *len;    /* their byte lengths (a string may contain NUL bytes) */
} la_gguf_kv;

/* One tensor. */
typedef struct {
    const char *name;     /* NUL-terminated */
    uint32_t type;        /* la_ggml_type value (any type ggml defines) */
    int n_dims;           /* 1..4 */
    int64_t ne[4];        /* dims, fastest first; ne[d] = 1 for d >= n_dims */
    uint64_t offset;      /* relative to the data section (a multiple of the alignment) */
    uint64_t nbytes;      /* bytes of data, from type and shape */
    const void *data;     /* in the read-only map, aligned to the file's alignment */
} la_gguf_tensor;

/* Open and validate path. Errors: LA_EINVAL (NULL), LA_EIO (cannot open/map),
 * LA_EFORMAT (bad magic or version, truncated or inconsistent header: the message names
 * the field and byte offset; duplicate key or tensor name; general.alignment not a u32
 * power of two; tensor with an unknown type id, more than 4 dims, a row length that is not
 * a multiple of its type's block size, an offset not a multiple of the alignment, or data
 * beyond the end of the file), LA_EUNSUPPORTED (version 1, big-endian file, nested
 * arrays), LA_ENOMEM. On error *out is NULL. */
LA_API la_status la_gguf_open(const char *path, la_gguf **out);
/* The same checks on a file image in memory (size bytes at data, any alignment; tensor
 * data is then only as aligned as data is). The buffer is not copied: it must outlive g.
 * name is used in messages (NULL: "(memory)"). */
LA_API la_status la_gguf_open_mem(const void *data, size_t size, const char *name, la_gguf **out);
LA_API void la_gguf_close(la_gguf *g); /* NULL is a no-op */

LA_API uint32_t la_gguf_version(const la_gguf *g);
LA_API uint64_t la_gguf_alignment(const la_gguf *g);   /* general.alignment or 32 */
LA_API uint64_t la_gguf_data_offset(const la_gguf *g); /* file offset of the data section */
LA_API uint64_t la_gguf_file_size(const la_gguf *g);

/* ---- metadata ---- */
LA_API int64_t la_gguf_n_kv(const la_gguf *g);
LA_API const la_gguf_kv *la_gguf_kv_at(const la_gguf *g, int64_t i); /* file order; NULL out of range */
LA_API const la_gguf_kv *la_gguf_find_kv(const la_gguf *g, const char *key); /* NULL when absent */

/* Typed lookups by key. A missing key is LA_EFORMAT naming the key (use la_gguf_find_kv
 * for optional keys). Integers: any integer type whose value fits the requested type
 * (else LA_EFORMAT naming key, stored type and value); floats: f32 or f64; bool: bool;
 * str: a string (the returned pointer lives in g). On error *out is untouched. */
LA_API la_status la_gguf_get_u32(const la_gguf *g, const char *key, uint32_t *out);
LA_API la_status la_gguf_get_i32(const la_gguf *g, const char *key, int32_t *out);
LA_API la_status la_gguf_get_u64(const la_gguf *g, const char *key, uint64_t *out);
LA_API la_status la_gguf_get_i64(const la_gguf *g, const char *key, int64_t *out);
LA_API la_status la_gguf_get_f32(const la_gguf *g, const char *key, float *out);
LA_API la_status la_gguf_get_f64(const la_gguf *g, const char *key, double *out);
LA_API la_status la_gguf_get_bool(const la_gguf *g, const char *key, int *out);
LA_API la_status la_gguf_get_str(const la_gguf *g, const char *key, const char **out);
/* An array whose elements have type elem (LA_GGUF_ANY: any). */
LA_API la_status la_gguf_get_arr(const la_gguf *g, const char *key, la_gguf_vtype elem,
                                 const la_gguf_kv **out);

/* Element i of an array kv (or the value of a scalar kv, i = 0), converted. They assert
 * i < kv->n and a fitting type (integer / float / bool for the numeric ones, string for
 * la_gguf_arr_str): check kv->arr_type (or kv->type) first. */
LA_API int64_t la_gguf_arr_int(const la_gguf_kv *kv, uint64_t i);   /* integer or bool; u64 above INT64_MAX gives INT64_MAX */
LA_API uint64_t la_gguf_arr_uint(const la_gguf_kv *kv, uint64_t i); /* integer or bool; negative gives 0 */
LA_API double la_gguf_arr_float(const la_gguf_kv *kv, uint64_t i);  /* any numeric type */
LA_API const char *la_gguf_arr_str(const la_gguf_kv *kv, uint64_t i, uint64_t *len); /* len may be NULL */

/* ---- tensors ---- */
LA_API int64_t la_gguf_n_tensors(const la_gguf *g);
LA_API const la_gguf_tensor *la_gguf_tensor_at(const la_gguf *g, int64_t i); /* file order */
LA_API const la_gguf_tensor *la_gguf_find_tensor(const la_gguf *g, const char *name); /* NULL when absent */
/* Like la_gguf_find_tensor, but a missing tensor is LA_EFORMAT naming it. */
LA_API la_status la_gguf_get_tensor(const la_gguf *g, const char *name, const la_gguf_tensor **out);
LA_API int64_t la_gguf_tensor_nelem(const la_gguf_tensor *t);
LA_API int64_t la_gguf_tensor_nrows(const la_gguf_tensor *t); /* ne[1] * ne[2] * ne[3] */

/* ======================================================================== */
/* Tensor types (src/io/gguf_quant.c)                                       */
/* ======================================================================== */

/* ggml type ids. All of ggml's ids are known (names, block sizes; a file holding them
 * opens); dequantization and la_qmatvec support the ones listed in LA_GGML_SUPPORTED. */
typedef enum {
    LA_GGML_F32 = 0,
    LA_GGML_F16 = 1,
    LA_GGML_Q4_0 = 2,
    LA_GGML_Q4_1 = 3,
    LA_GGML_Q5_0 = 6,
    LA_GGML_Q5_1 = 7,
    LA_GGML_Q8_0 = 8,
    LA_GGML_Q4_K = 12,
    LA_GGML_Q5_K = 13,
    LA_GGML_Q6_K = 14,
    LA_GGML_BF16 = 30
} la_ggml_type;
#define LA_GGML_SUPPORTED "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K"

LA_API const char *la_ggml_type_name(uint32_t type); /* "Q4_K", ...; NULL for an unknown id */
LA_API int la_ggml_type_known(uint32_t type);        /* ggml defines it (block size known) */
LA_API int la_ggml_type_supported(uint32_t type);    /* longattn dequantizes it */
LA_API int64_t la_ggml_block_size(uint32_t type);    /* values per block; 0 if unknown */
LA_API int64_t la_ggml_block_bytes(uint32_t type);   /* bytes per block; 0 if unknown */
/* Bytes of n values (n a multiple of the block size); -1 if not or unknown type. */
LA_API int64_t la_ggml_row_bytes(uint32_t type, int64_t n);

/* Dequantize n values (a multiple of the type's block size) of packed type-`type` data
 * at src (no alignment needed) into dst. Results are exactly the float32 values of
 * ggml's reference dequantization (and gguf-py's). Errors: LA_EINVAL (NULL, n < 0 or not a
 * multiple of the block size), LA_EUNSUPPORTED (type not supported: names it). */
LA_API la_status la_ggml_dequant(uint32_t type, const void *src, float *dst, int64_t n);

/* Rows [row0, row0 + nrows) of a tensor (rows of ne[0] values) into dst
 * (nrows * ne[0] floats), e.g. one embedding row. Errors: LA_EINVAL (range outside the
 * tensor), LA_EUNSUPPORTED naming the tensor and its type. */
LA_API la_status la_gguf_dequant_rows(const la_gguf_tensor *t, int64_t row0, int64_t nrows, float *dst);
/* The whole tensor (nelem floats). */
LA_API la_status la_gguf_dequant(const la_gguf_tensor *t, float *dst);

/* ======================================================================== */
/* Quantized matrix x vector (model layer, src/model/qmatvec.c)             */
/* ======================================================================== */

/* y[r] = sum_c W[r, c] * x[c] for r < rows: W is a row-major (rows, cols) matrix of
 * packed `type` data (cols a multiple of the block size; each row is
 * la_ggml_row_bytes(type, cols) bytes), x (cols) and y (rows) float32. The weights are
 * decoded in registers and multiplied in float32 with x as given (x is not quantized),
 * so the result agrees with dequantize-then-dot up to float summation order. Rows are
 * split over OpenMP threads when the matrix is large enough (not inside a parallel
 * region). Errors: LA_EINVAL (NULL, rows/cols < 0, cols not a multiple of the block
 * size), LA_EUNSUPPORTED (type not supported: names it). */
LA_API la_status la_qmatvec(uint32_t type, const void *W, int64_t rows, int64_t cols, const float *x,
                            float *y);
/* la_qmatvec with x quantized to 8 bits, as llama.cpp's decode does (issue 27): for Q4_0,
 * Q4_1 and Q8_0, x is cut into blocks of 32 values, each stored as signed bytes with scale
 * max|x| / 127 (rounded half to even), and each weight block is dotted with it in exact
 * integers, then scaled (Q4_1's min term keeps the float sum of x). Faster on the decode
 * path than la_qmatvec, less exact: the error is that of rounding x to 8 bits (about
 * 2^-9 of each block's max|x|); docs/real-models.md gives its effect on bits per token.
 * The vectorised and the portable paths give the same bits. Other types go to
 * la_qmatvec unchanged. A NaN or inf in x gives a NaN in y. Errors as la_qmatvec. */
LA_API la_status la_qmatvec_q8x(uint32_t type, const void *W, int64_t rows, int64_t cols,
                                const float *x, float *y);
/* The same for a tensor (ne[0] = cols, nrows = rows); x has ne[0] floats, y nrows. */
LA_API la_status la_gguf_matvec(const la_gguf_tensor *t, const float *x, float *y);

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_GGUF_H */
