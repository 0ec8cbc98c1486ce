/* half.c -- f16 / bf16 conversions, portable and dispatched on run-time CPU features
 * (see half.h for the rounding contract). */
#include "core/half.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <strings.h>

#include "core/internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LA_X86 1
#include "core/exp_avx2.h"
#endif

/* ---- CPU detection ---- */

static la_cpu_caps g_caps;
static char g_feat[160];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void detect(void) {
    const char *e = getenv("LA_PORTABLE");
    if (e && *e && strcmp(e, "0") != 0) {
        g_caps.portable_forced = 1;
        snprintf(g_feat, sizeof g_feat, "portable (LA_PORTABLE=1)");
        return;
    }
#ifdef LA_X86
    /* cpuid and xgetbv directly (Intel SDM vol. 2A, CPUID leaf 7): clang 14, which builds
     * the fuzz targets, has no __builtin_cpu_supports name for avx512fp16 or avx512bf16 */
    unsigned a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
    unsigned max_leaf = a;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    g_caps.fma = (c >> 12) & 1;
    g_caps.f16c = (c >> 29) & 1;
    /* XCR0: the OS saves the YMM state (bits 1-2) and the AVX-512 state (bits 5-7) */
    unsigned long long xcr0 = 0;
    if (osxsave) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((unsigned long long)hi << 32) | lo;
    }
    int ymm_os = avx && (xcr0 & 0x6) == 0x6;
    int zmm_os = ymm_os && (xcr0 & 0xe0) == 0xe0;
    if (!ymm_os) g_caps.fma = g_caps.f16c = 0;
    if (max_leaf >= 7) {
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
        unsigned b7 = b, d7 = d, sub = a;
        g_caps.avx2 = ymm_os && ((b7 >> 5) & 1);
        g_caps.avx512f = zmm_os && ((b7 >> 16) & 1);
        g_caps.avx512bw = g_caps.avx512f && ((b7 >> 30) & 1);
        g_caps.avx512vl = g_caps.avx512f && ((b7 >> 31) & 1);
        g_caps.avx512fp16 = g_caps.avx512f && g_caps.avx512vl && ((d7 >> 23) & 1);
        if (sub >= 1) {
            __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
            g_caps.avx512bf16 = g_caps.avx512f && g_caps.avx512vl && ((a >> 5) & 1);
        }
    }
#endif
    size_t o = 0;
    g_feat[0] = 0;
#define FEAT(x)                                                                                \
    if (g_caps.x) o += (size_t)snprintf(g_feat + o, sizeof g_feat - o, "%s" #x, o ? " " : "");
    FEAT(avx2) FEAT(fma) FEAT(f16c) FEAT(avx512f) FEAT(avx512bw) FEAT(avx512vl) FEAT(avx512bf16)
    FEAT(avx512fp16)
#undef FEAT
    if (!o) snprintf(g_feat, sizeof g_feat, "none (portable C paths)");
}

const la_cpu_caps *la_cpu(void) {
    pthread_once(&g_once, detect);
    return &g_caps;
}

const char *la_cpu_features(void) {
    la_cpu();
    return g_feat;
}

/* ---- element types ---- */

const char *la_dtype_name(la_dtype t) {
    switch (t) {
    case LA_DTYPE_F32: return "f32";
    case LA_DTYPE_F16: return "f16";
    case LA_DTYPE_BF16: return "bf16";
    case LA_DTYPE_I8: return "int8";
    }
    return "?";
}

la_status la_dtype_parse(const char *s, la_dtype *out) {
    static const struct { const char *name; la_dtype t; } names[] = {
        {"f32", LA_DTYPE_F32},   {"float32", LA_DTYPE_F32}, {"f16", LA_DTYPE_F16},
        {"float16", LA_DTYPE_F16}, {"bf16", LA_DTYPE_BF16}, {"bfloat16", LA_DTYPE_BF16},
        {"int8", LA_DTYPE_I8},   {"i8", LA_DTYPE_I8},
    };
    if (!s || !out) return la_fail(LA_EINVAL, "la_dtype_parse: NULL argument");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].t;
            return LA_OK;
        }
    return la_fail(LA_EINVAL, "unknown element type '%s': use f32, f16, bf16 or int8", s);
}

size_t la_dtype_size(la_dtype t) {
    switch (t) {
    case LA_DTYPE_F32: return 4;
    case LA_DTYPE_F16:
    case LA_DTYPE_BF16: return 2;
    case LA_DTYPE_I8: return 1;
    }
    return 0;
}

/* ---- scalar conversions ---- */

uint16_t la_f32_to_bf16_s(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    /* round to nearest even on the low 16 bits; overflow carries into the exponent and
     * gives infinity, as IEEE rounding does */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float la_f16_to_f32_s(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        float f = (float)mant * 0x1p-24f; /* zero or subnormal: exact */
        return sign ? -f : f;
    }
    if (exp == 31) bits = sign | 0x7f800000u | mant << 13 | (mant ? 0x400000u : 0); /* inf/qNaN */
    else bits = sign | (exp + 112) << 23 | mant << 13;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t la_f32_to_f16_s(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff)); /* qNaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* >= 65520 (or inf): inf */
    if (a < 0x38800000u) {
        /* below the smallest normal half (2^-14): a subnormal half or zero. Its value is
         * m * 2^-24 for an integer m in [0, 1024]; round |f| * 2^24 to the nearest integer,
         * ties to even. Exact in float: |f| * 2^24 < 2^10 has at most 24 significant bits
         * and the rounding below works on its bits. */
        if (a < 0x33000000u) return sign; /* < 2^-25: rounds to zero (2^-25 is a tie to 0) */
        const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u; /* value = m * 2^(e-150) */
        const uint32_t shift = 126 - e; /* m * 2^(e-150) * 2^24 = m >> (126 - e) */
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (q & 1))) q++;
        return (uint16_t)(sign | q); /* q == 1024 is the smallest normal: still correct */
    }
    /* normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even;
     * a carry propagates into the exponent (and at the top into infinity, excluded above) */
    uint32_t r = a - 0x38000000u; /* exponent 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1);
    return (uint16_t)(sign | (r >> 13));
}

/* ---- bulk conversions ---- */

#ifdef LA_X86
__attribute__((target("avx2,f16c"))) static void f32_to_f16_f16c(uint16_t *d, const float *s,
                                                                   size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = la_f32_to_f16_s(s[i]);
}
__attribute__((target("avx2,f16c"))) static void f16_to_f32_f16c(float *d, const uint16_t *s,
                                                                   size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = la_f16_to_f32_s(s[i]);
}
__attribute__((target("avx512f,avx512vl,avx512bf16"))) static void
f32_to_bf16_avx512(uint16_t *d, const float *s, size_t n) {
    size_t i = 0;
    const __m512i expo = _mm512_set1_epi32(0x7f800000), mant = _mm512_set1_epi32(0x007fffff);
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(s + i);
        /* vcvtneps2bf16 treats subnormal inputs as zero whatever MXCSR says (Intel SDM,
         * VCVTNEPS2BF16: "denormal input values are treated as zeros"); the scalar code
         * rounds them to bf16 subnormals, so a block holding one takes the scalar code */
        __m512i u = _mm512_castps_si512(x);
        __mmask16 sub = _mm512_testn_epi32_mask(u, expo) & _mm512_test_epi32_mask(u, mant);
        if (sub) {
            for (size_t k = i; k < i + 16; k++) d[k] = la_f32_to_bf16_s(s[k]);
            continue;
        }
        __m256bh b = _mm512_cvtneps_pbh(x);
        _mm256_storeu_si256((__m256i *)(d + i), (__m256i)b);
    }
    for (; i < n; i++) d[i] = la_f32_to_bf16_s(s[i]);
}
__attribute__((target("avx2"))) static void bf16_to_f32_avx2(float *d, const uint16_t *s,
                                                             size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_slli_epi32(w, 16));
    }
    for (; i < n; i++) d[i] = la_bf16_to_f32_s(s[i]);
}
#endif

void la_cvt_f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
#ifdef LA_X86
    if (la_cpu()->avx512bf16) {
        f32_to_bf16_avx512(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = la_f32_to_bf16_s(src[i]);
}

void la_cvt_bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
#ifdef LA_X86
    if (la_cpu()->avx2) {
        bf16_to_f32_avx2(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = la_bf16_to_f32_s(src[i]);
}

void la_cvt_f32_to_f16(uint16_t *dst, const float *src, size_t n) {
#ifdef LA_X86
    if (la_cpu()->f16c && la_cpu()->avx2) {
        f32_to_f16_f16c(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = la_f32_to_f16_s(src[i]);
}

void la_cvt_f16_to_f32(float *dst, const uint16_t *src, size_t n) {
#ifdef LA_X86
    if (la_cpu()->f16c && la_cpu()->avx2) {
        f16_to_f32_f16c(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = la_f16_to_f32_s(src[i]);
}

#ifdef LA_X86
__attribute__((target("avx2,fma"))) static float exp_sub_avx2(const float *x, float mx, float *y, size_t n) {
    const __m256 vm = _mm256_set1_ps(mx), lo = _mm256_set1_ps(-87.33654f);
    __m256 acc = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 t = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        __m256 keep = _mm256_cmp_ps(t, lo, _CMP_GE_OQ); /* below: 2^n is no normal float */
        t = _mm256_max_ps(t, lo);
        __m256 nn, p = la_exp_poly8(t, &nn);
        /* 2^n for n in [-126, 127]: the exponent field built directly */
        __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nn), _mm256_set1_epi32(127)), 23);
        p = _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
        _mm256_storeu_ps(y + i, p);
        acc = _mm256_add_ps(acc, p);
    }
    /* fixed order: (0+4, 1+5, 2+6, 3+7) pairwise, then the scalar tail */
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float s = _mm_cvtss_f32(h);
    for (; i < n; i++) {
        y[i] = expf(x[i] - mx);
        s += y[i];
    }
    return s;
}
#endif

float la_exp_sub_f32(const float *x, float mx, float *y, size_t n) {
#ifdef LA_X86
    if (la_cpu()->avx2 && la_cpu()->fma) return exp_sub_avx2(x, mx, y, n);
#endif
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - mx);
        s += y[i];
    }
    return s;
}

void la_round_bf16(float *x, size_t n) {
    /* la_f32_to_bf16_s then back, written without calls or branches so that the compiler
     * vectorises it (the bf16 trainer rounds every matrix operand with it); the same bits */
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
        uint32_t r = (u + 0x7fffu + ((u >> 16) & 1)) & 0xffff0000u;
        uint32_t q = (u | 0x00400000u) & 0xffff0000u;
        u = nan ? q : r;
        memcpy(&x[i], &u, 4);
    }
}

void la_round_f16(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = la_f16_to_f32_s(la_f32_to_f16_s(x[i]));
}
