/* data_internal.h -- document lists shared by the text and shard readers (internal). */
#ifndef LA_TRAIN_DATA_INTERNAL_H
#define LA_TRAIN_DATA_INTERNAL_H

#include <stdint.h>

#include "core/internal.h"

/* A growing list of documents read from files, before the train/validation split. */
typedef struct {
    uint16_t **tok;   /* each malloc'ed */
    int64_t *len;
    int *forced_val;  /* 1: from a "_val_" shard, always validation */
    int n, cap;
} doc_list;

la_status la_data_doc_list_add(doc_list *dl, uint16_t *tok, int64_t len, int forced_val);

/* Readers: append the documents of one file. */
la_status la_data_text_read_file(const char *path, doc_list *dl);
la_status la_data_shard_read_file(const char *path, int eot, int vocab, doc_list *dl);

#endif
