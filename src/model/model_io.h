/* model_io.h -- checkpoint helpers shared by the model and the trainer (internal). */
#ifndef LA_MODEL_IO_H
#define LA_MODEL_IO_H

#include "io/safetensors.h"
#include "longattn/model.h"

/* Metadata strings describing a model config (key/value pairs, static storage per call
 * site: buf must hold 16 * 2 entries of 64 bytes plus the spec). Returns the pair count. */
int la_model_config_meta(const la_model *m, char vals[][LA_SPEC_TEXT_MAX], const char **kv);

/* Config from a safetensors file's metadata. Errors: LA_EFORMAT naming the missing key. */
la_status la_model_config_from_meta(const la_st_file *f, const char *path, la_model_config *c);

/* Check that file f holds exactly the tensors of m with the same shapes and, when copy is
 * nonzero, copy them into the parameters. Errors: LA_EFORMAT naming the tensor. */
la_status la_model_weights_from_file(la_model *m, const la_st_file *f, const char *path, int copy);

/* la_model_save without the commit (la_st_write_af): the caller commits or aborts af. */
la_status la_model_save_af(const la_model *m, const char *path, la_afile *af);

/* FNV-1a 64-bit hash of the parameter bytes (pairs a trainer state with its weights). */
uint64_t la_model_weights_hash(const la_model *m);

#endif
