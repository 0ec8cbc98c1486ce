/* kv_quant.c -- symmetric absmax int8 quantisation of cached k/v rows, per group of g
 * channels (one group = the whole row for per-token scales). Survey seed 003 ("quantised
 * KV cache"); the scheme is the absmax int8 of LLM.int8 / KIVI-style per-token groups.
 *   scale = max_i |x_i| / 127,  q_i = round(x_i / scale) in [-127, 127],  x'_i = scale * q_i
 * so |x_i - x'_i| <= scale / 2 (half a quantisation step) up to float rounding.
 * An all-zero group would give scale 0 (0/0 on dequantisation): it gets scale 1 and
 * q = 0, so it round-trips exactly. A constant group c gets |c|/127 and q = +-127. */
#include <math.h>

#include "infer/kv_internal.h"

void la_kv_quant_row(const float *x, int D, int g, int8_t *q, float *scale) {
    for (int g0 = 0, gi = 0; g0 < D; g0 += g, gi++) {
        float amax = 0.0f;
        for (int i = g0; i < g0 + g; i++) {
            float a = fabsf(x[i]);
            if (a > amax) amax = a;
        }
        /* la_kv_append rejects non-finite rows before quantising; stay defined anyway */
        if (!(amax > 0.0f) || !isfinite(amax)) {
            scale[gi] = 1.0f;
            for (int i = g0; i < g0 + g; i++) q[i] = 0;
            continue;
        }
        float s = amax / 127.0f;
        /* a denormal amax could give s = 0 after the division: keep the step positive */
        if (!(s > 0.0f)) s = amax;
        scale[gi] = s;
        for (int i = g0; i < g0 + g; i++) {
            float r = nearbyintf(x[i] / s);
            if (r != r) r = 0.0f;
            if (r > 127.0f) r = 127.0f;
            if (r < -127.0f) r = -127.0f;
            q[i] = (int8_t)r;
        }
    }
}

void la_kv_dequant_row(const int8_t *q, const float *scale, int D, int g, float *x) {
    for (int g0 = 0, gi = 0; g0 < D; g0 += g, gi++) {
        float s = scale[gi];
        for (int i = g0; i < g0 + g; i++) x[i] = s * (float)q[i];
    }
}
