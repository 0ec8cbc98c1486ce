/*
 * longattn/io.h -- file formats: NumPy .npy float32 arrays (layer io).
 */
#ifndef LONGATTN_IO_H
#define LONGATTN_IO_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* NumPy .npy files                                                         */
/* ======================================================================== */

/* Read a little-endian float32 C-order .npy file (format versions 1.0, 2.0, 3.0). On
 * success *data is malloc'ed (free() it; non-NULL even for 0 elements) and
 * shape[0..*ndim) holds the dimensions (at most 8; ndim 0 is a scalar). On error the
 * outputs are untouched. Errors: LA_EIO (cannot open, not a regular file), LA_EFORMAT (bad
 * magic, dtype other than '<f4' -- the message names it and says x.astype(np.float32) --,
 * Fortran order, header over 1 MiB or malformed, truncated data or stray bytes), LA_ENOMEM. */
LA_API la_status la_npy_read_f32(const char *path, float **data, int *ndim, int64_t shape[8]);

/* Write float32 data (ndim 0..8 dimensions, shape >= 0) as a version 1.0 .npy file
 * atomically (temp file, fsync, rename); byte-identical to np.save of the same array.
 * Errors: LA_EINVAL (bad shape, NULL data with elements), LA_EIO. */
LA_API la_status la_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape);

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_IO_H */
