/* gguf_quant.c -- ggml tensor types: names and block sizes of every type ggml defines, and
 * dequantization to float32 of F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
 * Q6_K (layouts in io/ggml_types.h).
 *
 * The results are bit-identical to ggml's reference dequantization and gguf-py's
 * gguf.quants.dequantize: the same float32 operations in the same order. That needs this
 * file compiled with -ffp-contract=off (the Makefile sets it), or `d*q + m` may be fused
 * into one differently rounded FMA. */
#include "core/internal.h"
#include "longattn/gguf.h"
#include "io/ggml_types.h"

typedef struct {
    const char *name;
    int64_t block, bytes; /* values per block, bytes per block; 0 = id not defined */
} type_info;

/* ggml's type ids (ggml.h / gguf-py constants.py); gaps are retired ids. */
static const type_info types[] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},
    [2] = {"Q4_0", 32, 18},      [3] = {"Q4_1", 32, 20},
    [6] = {"Q5_0", 32, 22},      [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},      [9] = {"Q8_1", 32, 40},
    [10] = {"Q2_K", 256, 84},    [11] = {"Q3_K", 256, 110},
    [12] = {"Q4_K", 256, 144},   [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},   [15] = {"Q8_K", 256, 292},
    [16] = {"IQ2_XXS", 256, 66}, [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},   [21] = {"IQ3_S", 256, 110},
    [22] = {"IQ2_S", 256, 82},   [23] = {"IQ4_XS", 256, 136},
    [24] = {"I8", 1, 1},         [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},        [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},        [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},       [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},   [39] = {"MXFP4", 32, 17},
    [40] = {"NVFP4", 64, 36},    [41] = {"Q1_0", 128, 18},
};
#define N_TYPES ((uint32_t)(sizeof types / sizeof *types))

int la_ggml_type_known(uint32_t t) { return t < N_TYPES && types[t].block > 0; }

const char *la_ggml_type_name(uint32_t t) { return la_ggml_type_known(t) ? types[t].name : NULL; }

int64_t la_ggml_block_size(uint32_t t) { return la_ggml_type_known(t) ? types[t].block : 0; }

int64_t la_ggml_block_bytes(uint32_t t) { return la_ggml_type_known(t) ? types[t].bytes : 0; }

int la_ggml_type_supported(uint32_t t) {
    switch (t) {
    case LA_GGML_F32: case LA_GGML_F16: case LA_GGML_BF16: case LA_GGML_Q8_0: case LA_GGML_Q4_0:
    case LA_GGML_Q4_1: case LA_GGML_Q5_0: case LA_GGML_Q5_1: case LA_GGML_Q4_K: case LA_GGML_Q5_K:
    case LA_GGML_Q6_K:
        return 1;
    default:
        return 0;
    }
}

int64_t la_ggml_row_bytes(uint32_t t, int64_t n) {
    if (!la_ggml_type_known(t) || n < 0 || n % types[t].block) return -1;
    int64_t r;
    if (__builtin_mul_overflow(n / types[t].block, types[t].bytes, &r)) return -1;
    return r;
}

/* ---- one block each: src -> y (QK or QK_K floats) ---- */

static void deq_q8_0(const uint8_t *b, float *y) {
    const float d = la_f16_to_f32(la_ld16(b));
    for (int j = 0; j < LA_QK; j++) y[j] = d * (float)(int8_t)b[2 + j];
}

static void deq_q4_0(const uint8_t *b, float *y) {
    const float d = la_f16_to_f32(la_ld16(b));
    const uint8_t *qs = b + 2;
    for (int j = 0; j < LA_QK / 2; j++) {
        y[j] = d * (float)((qs[j] & 15) - 8);
        y[j + LA_QK / 2] = d * (float)((qs[j] >> 4) - 8);
    }
}

static void deq_q4_1(const uint8_t *b, float *y) {
    const float d = la_f16_to_f32(la_ld16(b)), m = la_f16_to_f32(la_ld16(b + 2));
    const uint8_t *qs = b + 4;
    for (int j = 0; j < LA_QK / 2; j++) {
        y[j] = d * (float)(qs[j] & 15) + m;
        y[j + LA_QK / 2] = d * (float)(qs[j] >> 4) + m;
    }
}

static void deq_q5_0(const uint8_t *b, float *y) {
    const float d = la_f16_to_f32(la_ld16(b));
    const uint32_t qh = la_ld32(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < LA_QK / 2; j++) {
        int lo = (qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + LA_QK / 2] = d * (float)(hi - 16);
    }
}

static void deq_q5_1(const uint8_t *b, float *y) {
    const float d = la_f16_to_f32(la_ld16(b)), m = la_f16_to_f32(la_ld16(b + 2));
    const uint32_t qh = la_ld32(b + 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < LA_QK / 2; j++) {
        int lo = (qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)lo + m;
        y[j + LA_QK / 2] = d * (float)hi + m;
    }
}

static void deq_q4_k(const uint8_t *b, float *y) {
    const float d = la_f16_to_f32(la_ld16(b)), dmin = la_f16_to_f32(la_ld16(b + 2));
    const uint8_t *scales = b + 4, *qs = b + 16;
    for (int c = 0; c < 4; c++) {
        uint8_t sc0, m0, sc1, m1;
        la_scale_min_k4(2 * c, scales, &sc0, &m0);
        la_scale_min_k4(2 * c + 1, scales, &sc1, &m1);
        const float d0 = d * (float)sc0, dm0 = dmin * (float)m0;
        const float d1 = d * (float)sc1, dm1 = dmin * (float)m1;
        for (int l = 0; l < 32; l++) {
            y[64 * c + l] = d0 * (float)(qs[32 * c + l] & 15) - dm0;
            y[64 * c + 32 + l] = d1 * (float)(qs[32 * c + l] >> 4) - dm1;
        }
    }
}

static void deq_q5_k(const uint8_t *b, float *y) {
    const float d = la_f16_to_f32(la_ld16(b)), dmin = la_f16_to_f32(la_ld16(b + 2));
    const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + 48;
    for (int c = 0; c < 4; c++) {
        uint8_t sc0, m0, sc1, m1;
        la_scale_min_k4(2 * c, scales, &sc0, &m0);
        la_scale_min_k4(2 * c + 1, scales, &sc1, &m1);
        const float d0 = d * (float)sc0, dm0 = dmin * (float)m0;
        const float d1 = d * (float)sc1, dm1 = dmin * (float)m1;
        for (int l = 0; l < 32; l++) {
            int q0 = (qs[32 * c + l] & 15) | ((qh[l] >> (2 * c)) & 1) << 4;
            int q1 = (qs[32 * c + l] >> 4) | ((qh[l] >> (2 * c + 1)) & 1) << 4;
            y[64 * c + l] = d0 * (float)q0 - dm0;
            y[64 * c + 32 + l] = d1 * (float)q1 - dm1;
        }
    }
}

static void deq_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = la_f16_to_f32(la_ld16(b + 208));
    for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, y += 128) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q0 = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
            int q1 = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
            int q2 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            int q3 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            y[l] = (d * (float)sc[is]) * (float)q0;
            y[l + 32] = (d * (float)sc[is + 2]) * (float)q1;
            y[l + 64] = (d * (float)sc[is + 4]) * (float)q2;
            y[l + 96] = (d * (float)sc[is + 6]) * (float)q3;
        }
    }
}

la_status la_ggml_dequant(uint32_t type, const void *src, float *dst, int64_t n) {
    if (!src || !dst) return la_fail(LA_EINVAL, "la_ggml_dequant: NULL src or dst");
    if (!la_ggml_type_supported(type)) {
        const char *name = la_ggml_type_name(type);
        if (name) return la_fail(LA_EUNSUPPORTED, "cannot dequantize type %s; supported types: "
                                 LA_GGML_SUPPORTED, name);
        return la_fail(LA_EUNSUPPORTED, "cannot dequantize unknown type id %u; supported types: "
                       LA_GGML_SUPPORTED, type);
    }
    const int64_t bs = types[type].block, nb = types[type].bytes;
    if (n < 0 || n % bs)
        return la_fail(LA_EINVAL, "la_ggml_dequant: %lld values of type %s: not a multiple of its "
                       "block size %lld", (long long)n, types[type].name, (long long)bs);
    const uint8_t *b = src;
    switch (type) {
    case LA_GGML_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return LA_OK;
    case LA_GGML_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = la_f16_to_f32(la_ld16(b + 2 * i));
        return LA_OK;
    case LA_GGML_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = la_bf16_to_f32(la_ld16(b + 2 * i));
        return LA_OK;
    default: break;
    }
    void (*f)(const uint8_t *, float *) = NULL;
    switch (type) {
    case LA_GGML_Q8_0: f = deq_q8_0; break;
    case LA_GGML_Q4_0: f = deq_q4_0; break;
    case LA_GGML_Q4_1: f = deq_q4_1; break;
    case LA_GGML_Q5_0: f = deq_q5_0; break;
    case LA_GGML_Q5_1: f = deq_q5_1; break;
    case LA_GGML_Q4_K: f = deq_q4_k; break;
    case LA_GGML_Q5_K: f = deq_q5_k; break;
    case LA_GGML_Q6_K: f = deq_q6_k; break;
    default: break;
    }
    for (int64_t i = 0; i < n / bs; i++) f(b + i * nb, dst + i * bs);
    return LA_OK;
}

la_status la_gguf_dequant_rows(const la_gguf_tensor *t, int64_t row0, int64_t nrows, float *dst) {
    if (!t || !dst) return la_fail(LA_EINVAL, "la_gguf_dequant_rows: NULL tensor or dst");
    const int64_t rows = la_gguf_tensor_nrows(t);
    if (row0 < 0 || nrows < 0 || row0 > rows || nrows > rows - row0)
        return la_fail(LA_EINVAL, "la_gguf_dequant_rows: rows [%lld, %lld) outside tensor '%s' "
                       "with %lld rows", (long long)row0, (long long)(row0 + nrows), t->name,
                       (long long)rows);
    if (!la_ggml_type_supported(t->type))
        return la_fail(LA_EUNSUPPORTED, "tensor '%s' has type %s, which longattn cannot "
                       "dequantize; supported types: " LA_GGML_SUPPORTED, t->name,
                       la_ggml_type_name(t->type) ? la_ggml_type_name(t->type) : "(unknown)");
    const int64_t rb = la_ggml_row_bytes(t->type, t->ne[0]);
    return la_ggml_dequant(t->type, (const uint8_t *)t->data + row0 * rb, dst, nrows * t->ne[0]);
}

la_status la_gguf_dequant(const la_gguf_tensor *t, float *dst) {
    if (!t) return la_fail(LA_EINVAL, "la_gguf_dequant: NULL tensor");
    return la_gguf_dequant_rows(t, 0, la_gguf_tensor_nrows(t), dst);
}
