/* fuzz_safetensors.c -- safetensors reader (la_st_read, internal) on the input written to
 * a file. Invariants: every entry's byte range lies inside the data section and matches
 * its shape; names are unique; metadata values are strings. */
#include "fuzz_util.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    snprintf(path, sizeof path, "%s/in.safetensors", fz_tmpdir());
    fz_write(path, data, size);
    la_st_file f;
    if (la_st_read(path, &f) == LA_OK) {
        for (int i = 0; i < f.n; i++) {
            const la_st_entry *e = &f.e[i];
            FZ_CHECK(e->begin <= e->end && e->end <= f.data_len, "entry %s outside the data", e->name);
            uint64_t n = 1;
            for (int d = 0; d < e->ndim; d++) n *= (uint64_t)e->shape[d];
            FZ_CHECK(n * 4 == e->end - e->begin, "entry %s size mismatch", e->name);
            FZ_CHECK(la_st_find(&f, e->name) == e, "entry %s not found by name, or named twice", e->name);
            volatile uint8_t acc = 0;
            for (size_t j = e->begin; j < e->end; j++) acc ^= f.data[j];
            (void)acc;
        }
        for (int i = 0; i < f.n_meta; i++)
            FZ_CHECK(la_st_meta(&f, f.meta_keys[i]) != NULL, "meta key lost");
        la_st_free(&f);
    }
    return 0;
}
