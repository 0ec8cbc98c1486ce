/* safetensors.h -- minimal float32 safetensors reader/writer (internal).
 * Format (huggingface/safetensors): u64 little-endian header size N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 *  "__metadata__": {"key": "string value", ...}}, padded with spaces to a multiple of 8,
 * then the raw little-endian tensor bytes; offsets are relative to the byte after the
 * header. */
#ifndef LA_IO_SAFETENSORS_H
#define LA_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h" /* la_afile */
#include "longattn/io.h"

typedef struct {
    const char *name;
    const float *data;
    int ndim;          /* 0..4 */
    int64_t shape[4];
} la_st_tensor;

/* Write tensors (in the given order) and string metadata pairs meta[2*i], meta[2*i+1]
 * to path's temp file af, left open: the caller commits (la_afile_commit, or la_afile_sync
 * + la_afile_publish; the file appears atomically) or aborts. On error the temp file is
 * already removed. Errors: LA_EIO, LA_ENOMEM, LA_EINVAL (bad ndim). */
la_status la_st_write_af(la_afile *af, const char *path, const la_st_tensor *t, int n,
                         const char *const *meta, int n_meta);

typedef struct {
    char name[128];
    int ndim;
    int64_t shape[8];
    size_t begin, end;  /* byte range inside the data section */
} la_st_entry;

typedef struct {
    la_st_entry *e;
    int n;
    char **meta_keys, **meta_vals;
    int n_meta;
    uint8_t *data;      /* the data section */
    size_t data_len;
} la_st_file;

/* Read and validate a whole file: header length within the file, valid JSON object, every
 * tensor F32 with a shape whose element count matches its data_offsets, offsets inside the
 * data section and not overlapping, metadata values strings. Errors: LA_EIO (cannot open
 * or read), LA_EFORMAT (the message names the file and what is wrong), LA_ENOMEM. */
la_status la_st_read(const char *path, la_st_file *f);
void la_st_free(la_st_file *f);
const la_st_entry *la_st_find(const la_st_file *f, const char *name);
/* Metadata value or NULL. */
const char *la_st_meta(const la_st_file *f, const char *key);

#endif
