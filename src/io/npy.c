/* npy.c -- NumPy .npy files holding little-endian float32 arrays in C order.
 *
 * Format (numpy.lib.format, versions 1.0, 2.0 and 3.0):
 *   "\x93NUMPY" major minor
 *   header length: uint16 LE (1.0) or uint32 LE (2.0, 3.0)
 *   header: a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 *           padded with spaces and ended by '\n' so the data starts 64-byte aligned
 *   data:   prod(shape) values, no trailer
 * We read all three versions and write 1.0 (2.0 when the header would not fit).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "longattn/io.h"

#define NPY_MAX_HEADER (1u << 20) /* NumPy itself refuses headers over 10000 bytes by default */
#define NPY_MAX_DIMS 8

static int host_is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void swap32(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = __builtin_bswap32(u);
        memcpy(&x[i], &u, 4);
    }
}

/* ---- header dict parsing ---- */

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A Python string literal in single or double quotes (no escapes in valid headers). */
static int read_str(cursor *c, char *out, size_t n) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t len = 0;
    while (c->p < c->end && *c->p != q) {
        if (len + 1 < n) out[len++] = *c->p;
        c->p++;
    }
    out[len] = '\0';
    if (c->p >= c->end) return 0;
    c->p++;
    return 1;
}

static const char *dtype_words(const char *descr) {
    static const struct {
        const char *code, *words;
    } names[] = {
        {"f8", "float64"}, {"f2", "float16"}, {"f16", "float128"}, {"i1", "int8"},      {"i2", "int16"},
        {"i4", "int32"},   {"i8", "int64"},   {"u1", "uint8"},     {"u2", "uint16"},    {"u4", "uint32"},
        {"u8", "uint64"},  {"b1", "bool"},    {"c8", "complex64"}, {"c16", "complex128"}, {"O", "object"},
    };
    const char *code = descr;
    if (*code == '<' || *code == '>' || *code == '|' || *code == '=') code++;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(code, names[i].code)) return names[i].words;
    return "not float32";
}

static la_status parse_header(const char *path, const char *h, size_t hlen, int *ndim, int64_t shape[8]) {
    cursor c = {h, h + hlen};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    if (!eat(&c, '{'))
        return la_fail(LA_EFORMAT, "%s: .npy header is not a Python dict (starts with '%.10s')", path, h);
    for (;;) {
        if (eat(&c, '}')) break;
        char key[32];
        if (!read_str(&c, key, sizeof key) || !eat(&c, ':'))
            return la_fail(LA_EFORMAT, "%s: malformed .npy header near '%.20s'", path, c.p);
        if (!strcmp(key, "descr")) {
            char descr[64];
            skip_ws(&c);
            if (c.p < c.end && *c.p == '[')
                return la_fail(LA_EFORMAT, "%s: structured dtype (record array); convert with x.astype(np.float32)",
                               path);
            if (!read_str(&c, descr, sizeof descr))
                return la_fail(LA_EFORMAT, "%s: malformed 'descr' in .npy header", path);
            if (!strcmp(descr, ">f4"))
                return la_fail(LA_EFORMAT, "%s: dtype '>f4' is big-endian float32; convert with x.astype('<f4')",
                               path);
            if (strcmp(descr, "<f4") != 0 && !(strcmp(descr, "=f4") == 0 && host_is_little_endian()))
                return la_fail(LA_EFORMAT, "%s: dtype '%s' (%s), expected '<f4' (float32); convert with "
                               "x.astype(np.float32)",
                               path, descr, dtype_words(descr));
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            skip_ws(&c);
            if ((size_t)(c.end - c.p) >= 4 && !strncmp(c.p, "True", 4)) {
                return la_fail(LA_EFORMAT, "%s: array is stored in Fortran (column-major) order; save "
                               "np.ascontiguousarray(x) instead",
                               path);
            } else if ((size_t)(c.end - c.p) >= 5 && !strncmp(c.p, "False", 5)) {
                c.p += 5;
            } else {
                return la_fail(LA_EFORMAT, "%s: malformed 'fortran_order' in .npy header", path);
            }
            have_fortran = 1;
        } else if (!strcmp(key, "shape")) {
            if (!eat(&c, '(')) return la_fail(LA_EFORMAT, "%s: malformed 'shape' in .npy header", path);
            int nd = 0;
            for (;;) {
                if (eat(&c, ')')) break;
                skip_ws(&c);
                if (c.p >= c.end || *c.p < '0' || *c.p > '9')
                    return la_fail(LA_EFORMAT, "%s: malformed 'shape' in .npy header near '%.20s'", path, c.p);
                int64_t v = 0;
                while (c.p < c.end && *c.p >= '0' && *c.p <= '9') {
                    if (v > (INT64_MAX - 9) / 10)
                        return la_fail(LA_EFORMAT, "%s: absurd dimension in .npy shape", path);
                    v = v * 10 + (*c.p++ - '0');
                }
                if (c.p < c.end && *c.p == 'L') c.p++; /* Python 2 long suffix */
                if (nd >= NPY_MAX_DIMS)
                    return la_fail(LA_EFORMAT, "%s: more than %d dimensions in .npy shape", path, NPY_MAX_DIMS);
                shape[nd++] = v;
                if (eat(&c, ')')) break;
                if (!eat(&c, ',')) return la_fail(LA_EFORMAT, "%s: malformed 'shape' in .npy header", path);
            }
            *ndim = nd;
            have_shape = 1;
        } else {
            return la_fail(LA_EFORMAT, "%s: unexpected key '%s' in .npy header", path, key);
        }
        if (eat(&c, '}')) break;
        if (!eat(&c, ',')) return la_fail(LA_EFORMAT, "%s: malformed .npy header near '%.20s'", path, c.p);
    }
    if (!have_descr || !have_fortran || !have_shape)
        return la_fail(LA_EFORMAT, "%s: .npy header lacks '%s'", path,
                       !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
    return LA_OK;
}

la_status la_npy_read_f32(const char *path, float **data, int *ndim, int64_t shape[8]) {
    if (!path || !data || !ndim || !shape) return la_fail(LA_EINVAL, "la_npy_read_f32: NULL argument");
    FILE *f = la_fopen_regular(path); /* a FIFO is refused, not waited on */
    if (!f) return LA_EIO;
    struct stat sb;
    fstat(fileno(f), &sb);
    la_status st = LA_OK;
    char *hdr = NULL;
    float *buf = NULL;
    int64_t fsize = (int64_t)sb.st_size;
    unsigned char pre[12];
    if (fsize < 10 || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
        LA_FAIL_DONE(LA_EFORMAT, "%s is not a NumPy .npy file (bad magic; expected \\x93NUMPY; save it with np.save)",
                     path);
    int major = pre[6], minor = pre[7];
    uint64_t hlen;
    int64_t hstart;
    if (major == 1) {
        hlen = (uint64_t)pre[8] | ((uint64_t)pre[9] << 8);
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) LA_FAIL_DONE(LA_EFORMAT, "%s: truncated .npy preamble", path);
        hlen = (uint64_t)pre[8] | ((uint64_t)pre[9] << 8) | ((uint64_t)pre[10] << 16) | ((uint64_t)pre[11] << 24);
        hstart = 12;
    } else {
        LA_FAIL_DONE(LA_EFORMAT, "%s: unsupported .npy format version %d.%d (1.0, 2.0, 3.0 are read)", path, major,
                     minor);
    }
    if (hlen > NPY_MAX_HEADER)
        LA_FAIL_DONE(LA_EFORMAT, "%s: absurd .npy header length %llu bytes (limit %u); the file is corrupt", path,
                     (unsigned long long)hlen, NPY_MAX_HEADER);
    if ((int64_t)hlen > fsize - hstart)
        LA_FAIL_DONE(LA_EFORMAT, "%s: truncated .npy header (%llu bytes announced, %lld present)", path,
                     (unsigned long long)hlen, (long long)(fsize - hstart));
    hdr = la_malloc(hlen + 1);
    if (!hdr) LA_FAIL_DONE(LA_ENOMEM, "%s: cannot allocate the .npy header", path);
    if (fread(hdr, 1, hlen, f) != hlen) LA_FAIL_DONE(LA_EIO, "%s: read error in .npy header", path);
    hdr[hlen] = '\0';
    int nd = 0;
    int64_t shp[NPY_MAX_DIMS];
    st = parse_header(path, hdr, hlen, &nd, shp);
    if (st != LA_OK) goto done;

    uint64_t count = 1;
    for (int i = 0; i < nd; i++)
        if (__builtin_mul_overflow(count, (uint64_t)shp[i], &count) || count > (uint64_t)INT64_MAX / 4)
            LA_FAIL_DONE(LA_EFORMAT, "%s: absurd .npy shape (element count overflows)", path);
    int64_t need = (int64_t)count * 4, have = fsize - hstart - (int64_t)hlen;
    if (have < need)
        LA_FAIL_DONE(LA_EFORMAT, "%s: truncated .npy data: shape needs %lld bytes, the file holds %lld", path,
                     (long long)need, (long long)have);
    if (have > need)
        LA_FAIL_DONE(LA_EFORMAT, "%s: %lld stray bytes after the .npy data (shape needs %lld); the file is corrupt",
                     path, (long long)(have - need), (long long)need);
    buf = la_malloc(need > 0 ? (size_t)need : 1);
    if (!buf) LA_FAIL_DONE(LA_ENOMEM, "%s: cannot allocate %lld bytes for the array", path, (long long)need);
    if (need > 0 && fread(buf, 1, (size_t)need, f) != (size_t)need)
        LA_FAIL_DONE(LA_EIO, "%s: read error in .npy data", path);
    if (!host_is_little_endian()) swap32(buf, (int64_t)count);
    *data = buf;
    buf = NULL;
    *ndim = nd;
    for (int i = 0; i < nd; i++) shape[i] = shp[i];
done:
    free(buf);
    free(hdr);
    fclose(f);
    return st;
}

la_status la_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape) {
    if (!path) return la_fail(LA_EINVAL, "la_npy_write_f32: path is NULL");
    if (ndim < 0 || ndim > NPY_MAX_DIMS) return la_fail(LA_EINVAL, "%s: ndim %d outside 0..%d", path, ndim, NPY_MAX_DIMS);
    if (ndim > 0 && !shape) return la_fail(LA_EINVAL, "%s: shape is NULL", path);
    uint64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return la_fail(LA_EINVAL, "%s: negative dimension %lld", path, (long long)shape[i]);
        if (__builtin_mul_overflow(count, (uint64_t)shape[i], &count) || count > (uint64_t)INT64_MAX / 4)
            return la_fail(LA_EINVAL, "%s: element count overflows", path);
    }
    if (count > 0 && !data) return la_fail(LA_EINVAL, "%s: data is NULL", path);

    char dict[512];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < ndim; i++)
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%lld%s", (long long)shape[i],
                        ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    /* pad with spaces and a final '\n' so that preamble + header is a multiple of 64 */
    int pre = 10;
    int total = pre + len + 1;
    int padded = (total + 63) / 64 * 64;
    int hlen = padded - pre;
    unsigned char head[640];
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (unsigned char)(hlen & 0xff);
    head[9] = (unsigned char)(hlen >> 8);
    memcpy(head + pre, dict, (size_t)len);
    memset(head + pre + len, ' ', (size_t)(hlen - len - 1));
    head[padded - 1] = '\n';

    la_afile af;
    LA_TRY(la_afile_open(&af, path));
    int ok = fwrite(head, 1, (size_t)padded, af.f) == (size_t)padded;
    if (ok && count > 0) {
        if (host_is_little_endian()) {
            ok = fwrite(data, 4, (size_t)count, af.f) == (size_t)count;
        } else {
            float chunk[1024];
            for (uint64_t i = 0; ok && i < count; i += 1024) {
                uint64_t m = count - i < 1024 ? count - i : 1024;
                memcpy(chunk, data + i, m * 4);
                swap32(chunk, (int64_t)m);
                ok = fwrite(chunk, 4, m, af.f) == m;
            }
        }
    }
    if (!ok) {
        la_afile_abort(&af);
        return la_fail(LA_EIO, "cannot write %s: %s", path, strerror(errno));
    }
    return la_afile_commit(&af);
}
