/* fuzz_longeval.c -- longeval study files (la_longeval_load: JSON, every key checked) on the
 * input written to a file, loaded twice into the same options (the second load chains its
 * string block onto the first; la_longeval_opts_release frees both: LeakSanitizer checks).
 * Invariant: accepted options have their counts inside the fixed arrays, every method and
 * the docs folder a string, lengths in [1e-3, 1e3], depths in [0, 1], and the whole numbers
 * inside their documented ranges; a refused file leaves a message. */
#include <string.h>

#include "fuzz_util.h"
#include "longattn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    char path[512];
    snprintf(path, sizeof path, "%s/in.json", fz_tmpdir());
    fz_write(path, data, size);
    la_longeval_opts o = la_longeval_opts_default();
    for (int round = 0; round < 2; round++) {
        if (la_longeval_load(path, &o) != LA_OK) {
            FZ_CHECK(la_errmsg()[0] != 0, "la_longeval_load failed without a message");
            break;
        }
        FZ_CHECK(o.n_methods >= 1 && o.n_methods <= LA_LONGEVAL_MAX, "n_methods %d", o.n_methods);
        FZ_CHECK(o.n_lengths >= 1 && o.n_lengths <= LA_LONGEVAL_MAX, "n_lengths %d", o.n_lengths);
        FZ_CHECK(o.n_depths >= 1 && o.n_depths <= LA_LONGEVAL_MAX, "n_depths %d", o.n_depths);
        size_t total = 0;
        for (int i = 0; i < o.n_methods; i++) {
            FZ_CHECK(o.methods[i] != NULL, "method %d is NULL", i);
            total += strlen(o.methods[i]); /* ASan: inside a live block */
        }
        FZ_CHECK(o.docs != NULL, "docs is NULL");
        total += strlen(o.docs);
        (void)total;
        for (int i = 0; i < o.n_lengths; i++)
            FZ_CHECK(o.lengths[i] >= 1e-3 && o.lengths[i] <= 1e3, "length %g", o.lengths[i]);
        for (int i = 0; i < o.n_depths; i++) FZ_CHECK(o.depths[i] >= 0 && o.depths[i] <= 1, "depth %g", o.depths[i]);
        FZ_CHECK(o.trials >= 0 && o.trials <= 1000, "trials %d", o.trials);
        FZ_CHECK(o.distractors >= -1 && o.distractors <= 20, "distractors %d", o.distractors);
        FZ_CHECK(o.buckets >= 1 && o.buckets <= LA_LONGEVAL_MAX, "buckets %d", o.buckets);
        FZ_CHECK(o.chunk >= 1, "chunk %d", o.chunk);
    }
    la_longeval_opts_release(&o);
    return 0;
}
