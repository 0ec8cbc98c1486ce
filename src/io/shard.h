/* shard.h -- llm.c token shards (io layer, internal): a 256 x int32 header (magic
 * 20240520, version 1, token count N, the rest unused) followed by exactly N uint16
 * tokens. The one shard reader of the library: la_data (src/train) and la_docs
 * (src/tasks) both cut documents from what it returns. */
#ifndef LA_IO_SHARD_H
#define LA_IO_SHARD_H

#include <stdint.h>

#include "longattn/io.h"

#define LA_SHARD_MAGIC 20240520
#define LA_SHARD_VERSION 1
#define LA_SHARD_HEADER_BYTES (256 * 4)

/* Reads the whole shard at path: *tokens (malloc'ed, *n of them, at least one element
 * allocated even when *n = 0), every token checked to be < vocab. Errors (messages name
 * the file and the fix): LA_EIO (open/read), LA_EFORMAT (short header, magic, version,
 * file size not matching the header: "truncated" / "wrong size", token outside
 * [0, vocab)), LA_ENOMEM. */
la_status la_shard_read(const char *path, int vocab, uint16_t **tokens, int64_t *n);

#endif
