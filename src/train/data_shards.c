/* data_shards.c -- the documents of one llm.c token shard (read by io/shard.c): documents
 * begin at each end-of-text token (llm.c prefixes every document with it). */
#include <stdlib.h>
#include <string.h>

#include "io/shard.h"
#include "train/data_internal.h"

la_status la_data_shard_read_file(const char *path, int eot, int vocab, doc_list *dl) {
    uint16_t *all = NULL;
    int64_t n = 0;
    LA_TRY(la_shard_read(path, vocab, &all, &n));
    const char *base = strrchr(path, '/'); /* the file's name: not a folder's (my_val_dir/) */
    int forced_val = strstr(base ? base + 1 : path, "_val_") != NULL;
    /* cut at every eot that is not the first token: each document starts with its eot */
    int64_t start = 0;
    la_status s = LA_OK;
    for (int64_t i = 1; i <= n && s == LA_OK; i++) {
        if (i < n && all[i] != eot) continue;
        int64_t len = i - start;
        uint16_t *d = la_malloc((size_t)len * sizeof(uint16_t));
        if (!d) {
            s = la_fail(LA_ENOMEM, "out of memory splitting %s", path);
            break;
        }
        memcpy(d, all + start, (size_t)len * sizeof(uint16_t));
        s = la_data_doc_list_add(dl, d, len, forced_val);
        if (s != LA_OK) free(d);
        start = i;
    }
    free(all);
    return s;
}
