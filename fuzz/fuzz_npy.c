/* fuzz_npy.c -- .npy reader (la_npy_read_f32) on the input written to a file.
 * Invariant: on success the shape's element count is what was read (every element is
 * touched, so ASan sees a short buffer). */
#include "fuzz_util.h"
#include "longattn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    snprintf(path, sizeof path, "%s/in.npy", fz_tmpdir());
    fz_write(path, data, size);
    float *x = NULL;
    int ndim = -1;
    int64_t shape[8];
    if (la_npy_read_f32(path, &x, &ndim, shape) == LA_OK) {
        FZ_CHECK(ndim >= 0 && ndim <= 8, "ndim %d", ndim);
        int64_t n = 1;
        for (int i = 0; i < ndim; i++) {
            FZ_CHECK(shape[i] >= 0, "negative dimension");
            n *= shape[i];
        }
        volatile float acc = 0;
        for (int64_t i = 0; i < n; i++) acc += x[i];
        (void)acc;
        free(x);
    }
    return 0;
}
