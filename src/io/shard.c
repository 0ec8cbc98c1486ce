/* shard.c -- the llm.c token shard reader (format in io/shard.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "io/shard.h"

la_status la_shard_read(const char *path, int vocab, uint16_t **tokens, int64_t *n_out) {
    if (!path || !tokens || !n_out) return la_fail(LA_EINVAL, "la_shard_read: NULL argument");
    *tokens = NULL;
    *n_out = 0;
    FILE *f = la_fopen_regular(path);
    if (!f) return LA_EIO;
    la_status st = LA_OK;
    uint16_t *all = NULL;
    struct stat stt;
    if (fstat(fileno(f), &stt) != 0) LA_FAIL_DONE(LA_EIO, "cannot stat %s: %s", path, strerror(errno));
    int64_t fsize = stt.st_size;
    int32_t hdr[256];
    if (fsize < LA_SHARD_HEADER_BYTES || fread(hdr, 4, 256, f) != 256)
        LA_FAIL_DONE(LA_EFORMAT, "%s: %lld bytes, shorter than the 1024-byte llm.c shard header "
                     "(truncated or not a token shard)", path, (long long)fsize);
    if (hdr[0] != LA_SHARD_MAGIC)
        LA_FAIL_DONE(LA_EFORMAT, "%s: magic number %d, expected %d (not an llm.c token shard; "
                     "text files must not end in .bin)", path, hdr[0], LA_SHARD_MAGIC);
    if (hdr[1] != LA_SHARD_VERSION)
        LA_FAIL_DONE(LA_EFORMAT, "%s: shard version %d, only version %d (uint16 tokens) is "
                     "supported", path, hdr[1], LA_SHARD_VERSION);
    int64_t n = hdr[2];
    int64_t want = LA_SHARD_HEADER_BYTES + 2 * n;
    if (n < 0 || fsize != want)
        LA_FAIL_DONE(LA_EFORMAT, "%s: header declares %lld tokens, so the file should be %lld "
                     "bytes, but it is %lld bytes (%s); re-create the shard",
                     path, (long long)n, (long long)want, (long long)fsize,
                     fsize < want ? "truncated" : "wrong size / trailing bytes");
    all = la_malloc((size_t)(n ? n : 1) * sizeof(uint16_t));
    if (!all) LA_FAIL_DONE(LA_ENOMEM, "out of memory reading %s", path);
    size_t got = fread(all, 2, (size_t)n, f);
    if ((int64_t)got != n) LA_FAIL_DONE(LA_EIO, "%s: read %zu of %lld tokens", path, got, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (all[i] >= vocab)
            LA_FAIL_DONE(LA_EFORMAT, "%s: token %d at index %lld is outside the vocabulary "
                         "[0, %d)", path, all[i], (long long)i, vocab);
    *tokens = all;
    *n_out = n;
    all = NULL;
done:
    free(all);
    fclose(f);
    return st;
}
