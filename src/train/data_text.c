/* data_text.c -- plain text as bytes (vocabulary 256): one document per file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data_internal.h"

la_status la_data_text_read_file(const char *path, doc_list *dl) {
    FILE *f = fopen(path, "rb");
    if (!f) return la_fail(LA_EIO, "cannot open %s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return la_fail(LA_EIO, "cannot seek in %s: %s", path, strerror(errno));
    }
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n <= 0) {  // empty files contribute no document
        fclose(f);
        return LA_OK;
    }
    uint8_t *bytes = la_malloc((size_t)n);
    uint16_t *tok = la_malloc((size_t)n * sizeof(uint16_t));
    if (!bytes || !tok) {
        free(bytes);
        free(tok);
        fclose(f);
        return la_fail(LA_ENOMEM, "out of memory reading %s (%ld bytes)", path, n);
    }
    size_t got = fread(bytes, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(bytes);
        free(tok);
        return la_fail(LA_EIO, "%s: read %zu of %ld bytes", path, got, n);
    }
    for (long i = 0; i < n; i++) tok[i] = bytes[i];
    free(bytes);
    la_status s = la_data_doc_list_add(dl, tok, n, 0);
    if (s != LA_OK) free(tok);
    return s;
}
