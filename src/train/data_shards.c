/* data_shards.c -- llm.c token shards: a 256 x int32 header (magic 20240520, version 1,
 * token count N, the rest unused) followed by exactly N uint16 tokens. Documents begin at
 * each end-of-text token (llm.c prefixes every document with it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/data_internal.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_BYTES (256 * 4)

la_status la_data_shard_read_file(const char *path, int eot, int vocab, doc_list *dl) {
    FILE *f = fopen(path, "rb");
    if (!f) return la_fail(LA_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat stt;
    if (fstat(fileno(f), &stt) != 0) {
        fclose(f);
        return la_fail(LA_EIO, "cannot stat %s: %s", path, strerror(errno));
    }
    int64_t fsize = stt.st_size;
    int32_t hdr[256];
    if (fsize < SHARD_HEADER_BYTES || fread(hdr, 4, 256, f) != 256) {
        fclose(f);
        return la_fail(LA_EFORMAT, "%s: %lld bytes, shorter than the 1024-byte llm.c shard header "
                       "(truncated or not a token shard)", path, (long long)fsize);
    }
    if (hdr[0] != SHARD_MAGIC) {
        fclose(f);
        return la_fail(LA_EFORMAT, "%s: magic number %d, expected %d (not an llm.c token shard; "
                       "text files must not end in .bin)", path, hdr[0], SHARD_MAGIC);
    }
    if (hdr[1] != SHARD_VERSION) {
        fclose(f);
        return la_fail(LA_EFORMAT, "%s: shard version %d, only version %d (uint16 tokens) is "
                       "supported", path, hdr[1], SHARD_VERSION);
    }
    int64_t n = hdr[2];
    int64_t want = SHARD_HEADER_BYTES + 2 * n;
    if (n < 0 || fsize != want) {
        fclose(f);
        return la_fail(LA_EFORMAT, "%s: header declares %lld tokens, so the file should be %lld "
                       "bytes, but it is %lld bytes (%s); re-create the shard",
                       path, (long long)n, (long long)want, (long long)fsize,
                       fsize < want ? "truncated" : "wrong size / trailing bytes");
    }
    uint16_t *all = la_malloc((size_t)(n ? n : 1) * sizeof(uint16_t));
    if (!all) {
        fclose(f);
        return la_fail(LA_ENOMEM, "out of memory reading %s", path);
    }
    size_t got = fread(all, 2, (size_t)n, f);
    fclose(f);
    if ((int64_t)got != n) {
        free(all);
        return la_fail(LA_EIO, "%s: read %zu of %lld tokens", path, got, (long long)n);
    }
    for (int64_t i = 0; i < n; i++)
        if (all[i] >= vocab) {
            int v = all[i];
            free(all);
            return la_fail(LA_EFORMAT, "%s: token %d at index %lld is outside the vocabulary "
                           "[0, %d)", path, v, (long long)i, vocab);
        }
    int forced_val = strstr(path, "_val_") != NULL;
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
