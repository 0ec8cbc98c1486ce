/*
 * longattn/core.h -- status codes, error messages, version, export macro (layer core).
 *
 * Every function that can fail returns la_status. On failure la_errmsg() returns a
 * thread-local message that names the problem and the fix. The library never prints
 * and never calls exit().
 */
#ifndef LONGATTN_CORE_H
#define LONGATTN_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* LA_API marks every public function: the library is compiled with -fvisibility=hidden,
 * so only declarations carrying LA_API are exported from liblongattn.so and stay global in
 * the pre-linked liblongattn.a (tests/test_exports.c checks both). */
#if defined(__GNUC__) || defined(__clang__)
#define LA_API __attribute__((visibility("default")))
#else
#define LA_API
#endif

/* Version of this header; la_version() returns the library's LA_VERSION_STRING, so a
 * program can check that it runs against the library it was compiled for. */
#define LA_VERSION_MAJOR 0
#define LA_VERSION_MINOR 1
#define LA_VERSION_PATCH 0
#define LA_VERSION_STR_(x) #x
#define LA_VERSION_XSTR_(x) LA_VERSION_STR_(x)
#define LA_VERSION_STRING                                                                      \
    LA_VERSION_XSTR_(LA_VERSION_MAJOR) "." LA_VERSION_XSTR_(LA_VERSION_MINOR) "."              \
    LA_VERSION_XSTR_(LA_VERSION_PATCH)

/* LA_DEPRECATED(msg) marks an old name kept for existing callers (a static inline alias of
 * the canonical function, see the naming rule in longattn.h): it still compiles, with a
 * warning that names the replacement. */
#if defined(__GNUC__) || defined(__clang__)
#define LA_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define LA_DEPRECATED(msg)
#endif

/* ======================================================================== */
/* Status codes                                                             */
/* ======================================================================== */

typedef enum {
    LA_OK = 0,
    LA_EINVAL,        /* an argument has a bad value (NULL pointer, negative size, ...) */
    LA_ESHAPE,        /* tensor shapes do not agree with each other */
    LA_ESPEC,         /* an attention spec string could not be parsed */
    LA_ENOMEM,        /* an allocation failed */
    LA_EIO,           /* the operating system refused a file operation */
    LA_EFORMAT,       /* a file exists but its content is malformed */
    LA_EUNSUPPORTED,  /* a valid request this build does not support */
    LA_EINTERRUPTED,  /* the operation was interrupted (e.g. SIGINT); state was saved */
    LA_ENUMERIC       /* a numerical failure (non-finite loss, no convergence) */
} la_status;

/* Short stable name of a status code, e.g. "LA_ESHAPE". Never NULL. */
LA_API const char *la_status_name(la_status s);

/* Message of the last error raised on this thread ("" if none). Valid until the next
 * failing call on the same thread. */
LA_API const char *la_errmsg(void);

/* Version of the library binary, "MAJOR.MINOR.PATCH" (LA_VERSION_STRING when it was built).
 * Never NULL. */
LA_API const char *la_version(void);

/* ======================================================================== */
/* Element types                                                            */
/* ======================================================================== */

/* Storage types of the reduced-precision paths (KV cache, attention tiles, training
 * products). Arithmetic always accumulates in float32; these say how operands are stored. */
typedef enum {
    LA_DTYPE_F32 = 0, /* IEEE binary32 */
    LA_DTYPE_F16 = 1, /* IEEE binary16 (rounded to nearest even) */
    LA_DTYPE_BF16 = 2, /* bfloat16: the top 16 bits of a float32 (rounded to nearest even) */
    LA_DTYPE_I8 = 3   /* int8 with a float32 scale per group (KV cache only) */
} la_dtype;

/* "f32", "f16", "bf16", "int8"; "?" for a value outside the enum. Never NULL. */
LA_API const char *la_dtype_name(la_dtype t);

/* Parse a type name: the names above, also "float32", "float16", "bfloat16", "i8".
 * Errors: LA_EINVAL naming the accepted names. */
LA_API la_status la_dtype_parse(const char *s, la_dtype *out);

/* The CPU features the reduced-precision paths use on this machine, detected at run time,
 * as a space-separated list ("avx2 fma f16c avx512f avx512bf16 ..."), or "portable
 * (LA_PORTABLE=1)" when the environment forces the portable C paths. Never NULL. */
LA_API const char *la_cpu_features(void);

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_CORE_H */
