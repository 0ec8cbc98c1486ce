/* data_text.c -- plain text as bytes (vocabulary 256): one document per file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data_internal.h"

la_status la_data_text_read_file(const char *path, doc_list *dl) {
    char *bytes;
    size_t n;
    LA_TRY(la_read_file(path, 0, &bytes, &n));
    if (n == 0) {  // empty files contribute no document
        free(bytes);
        return LA_OK;
    }
    uint16_t *tok = la_malloc(n * sizeof(uint16_t));
    if (!tok) {
        free(bytes);
        return la_fail(LA_ENOMEM, "out of memory reading %s (%zu bytes)", path, n);
    }
    for (size_t i = 0; i < n; i++) tok[i] = (uint8_t)bytes[i];
    free(bytes);
    la_status s = la_data_doc_list_add(dl, tok, (int64_t)n, 0);
    if (s != LA_OK) free(tok);
    return s;
}
