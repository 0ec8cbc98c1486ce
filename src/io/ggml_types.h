/* ggml_types.h -- block layouts of ggml's tensor types and half-precision conversion,
 * shared by the dequantizer (src/io/gguf_quant.c) and the quantized matrix-vector product
 * (src/model/qmatvec.c). Internal.
 *
 * Blocks are packed little-endian byte records (ggml-common.h); every reader goes through
 * ld16/ld32 (memcpy), so blocks need no alignment. Values per block (QK) and bytes:
 *   Q8_0  32  34: f16 d | i8 qs[32]                      x = d*q
 *   Q4_0  32  18: f16 d | u8 qs[16]                      x[j] = d*((qs[j]&15)-8), x[j+16] = d*((qs[j]>>4)-8)
 *   Q4_1  32  20: f16 d | f16 m | u8 qs[16]              x = d*q + m (nibbles as Q4_0)
 *   Q5_0  32  22: f16 d | u32 qh | u8 qs[16]             q = nibble | bit j of qh << 4; x = d*(q-16)
 *   Q5_1  32  24: f16 d | f16 m | u32 qh | u8 qs[16]     x = d*q + m
 *   Q4_K 256 144: f16 d | f16 dmin | u8 scales[12] | u8 qs[128]
 *        8 sub-blocks of 32 with 6-bit scale sc and min m (scale_min_k4); chunk c of 64 values
 *        uses qs[32c..32c+32): low nibbles = sub-block 2c, high = 2c+1; x = d*sc*q - dmin*m
 *   Q5_K 256 176: f16 d | f16 dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]
 *        as Q4_K plus bit s of qh[l] = high bit (16) of value l of sub-block s
 *   Q6_K 256 210: u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d
 *        two halves of 128; in half h, l < 32: q0 = ql[l]&15, q1 = ql[l+32]&15, q2 = ql[l]>>4,
 *        q3 = ql[l+32]>>4 with 2 high bits (qh[l] >> 2k) & 3 each; value 32k + l of the half
 *        = d * scales[8h + 2k + l/16] * (q_k - 32)
 */
#ifndef LA_IO_GGML_TYPES_H
#define LA_IO_GGML_TYPES_H

#include <stdint.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#define LA_QK 32
#define LA_QK_K 256

static inline uint16_t la_ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v; /* little-endian hosts only (x86-64, aarch64) */
}

static inline uint32_t la_ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* IEEE half -> float (exact for every input, NaN payloads kept). */
static inline float la_f16_to_f32(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        float f = (float)mant * 0x1p-24f; /* zero or subnormal: exact */
        return sign ? -f : f;
    }
    bits = exp == 31 ? sign | 0x7f800000u | mant << 13 : sign | (exp + 112) << 23 | mant << 13;
    float f;
    memcpy(&f, &bits, 4);
    return f;
#endif
}

static inline float la_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. */
static inline void la_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif
