/* kv_attend.c -- attention of new query rows over the cache (one la_attn_forward call over
 * the kept keys, bottom-right aligned), H2O score accumulation from the kernel's key_mass
 * (Zhang et al. 2023, eq. for the accumulated attention score), and the rotate-by-delta
 * shift path for post-RoPE keys. */
#include <stdlib.h>
#include <string.h>

#include "infer/kv_internal.h"
#include "longattn/infer.h"

la_status la_kv_attend(la_kv_cache *c, int layer, const la_spec *spec, const float *q, int T,
                       float *out, float *row_stat, const la_attn_opts *opts) {
    if (!c || !spec || !q || !out) return la_fail(LA_EINVAL, "la_kv_attend: NULL cache, spec, q or out");
    if (layer < 0 || layer >= c->p.n_layers)
        return la_fail(LA_EINVAL, "la_kv_attend: layer %d out of range [0, %d)", layer, c->p.n_layers);
    la_kv_layer *L = &c->layers[layer];
    if (T < 1) return la_fail(LA_ESHAPE, "la_kv_attend: T = %d query rows, must be >= 1", T);
    if (T > L->len)
        return la_fail(LA_EINVAL,
                       "la_kv_attend: %d query rows but layer %d holds %lld tokens; append the new tokens' k, v "
                       "with la_kv_append before attending",
                       T, layer, (long long)L->len);
    if (opts && opts->doc_ids)
        return la_fail(LA_EINVAL, "la_kv_attend: doc_ids are not supported over a KV cache (one stream per cache); pass NULL");

    la_attn_opts o = opts ? *opts : la_attn_opts_default();
    float *user_mass = o.key_mass;
    const int h2o = c->p.policy == LA_KV_H2O;
    if (T == 1 && c->p.storage != LA_KV_F32 && la_kv_decode_ok(c, spec, opts)) {
        /* one row over a reduced-precision cache: the decode kernel reads the stored rows
         * directly (kv_decode.c); f32 caches keep the fused kernel below, bitwise as before */
        LA_TRY(la_kv_decode_attend(c, layer, spec, q, out, row_stat, (h2o || user_mass) ? c->mass : NULL,
                                   o.n_threads));
    } else {
        const float *k, *v;
        la_kv_gather(c, layer, &k, &v);
        if (!o.ws) o.ws = c->ws;
        if (h2o || user_mass) o.key_mass = c->mass; /* (1, H, len) */
        la_shape sh = {.B = 1, .H = c->p.H, .Hkv = c->p.Hkv, .T = T, .S = (int)L->len, .D = c->p.D, .pos0 = LA_POS0_AUTO};
        LA_TRY(la_attn_forward(spec, &sh, q, k, v, out, row_stat ? row_stat : c->stat, &o));
    }

    const size_t n = (size_t)L->len, C = (size_t)c->cap;
    if (h2o) {
        const int G = c->p.H / c->p.Hkv; /* query heads per kv head */
        for (size_t hk = 0; hk < (size_t)c->p.Hkv; hk++) {
            float *sc = L->score + hk * C;
            for (int g = 0; g < G; g++) {
                const float *m = c->mass + ((size_t)hk * G + (size_t)g) * n;
                for (size_t j = 0; j < n; j++) sc[j] += m[j];
            }
        }
    }
    if (user_mass) memcpy(user_mass, c->mass, (size_t)c->p.H * n * sizeof(float));
    return LA_OK;
}

la_status la_kv_rope_shift(const la_spec *spec, float *x, int N, int D, int64_t delta, int64_t ctx_len) {
    if (!spec || !x) return la_fail(LA_EINVAL, "la_kv_rope_shift: NULL spec or x");
    if (N < 1 || D < 1) return la_fail(LA_ESHAPE, "la_kv_rope_shift: N = %d, D = %d, both must be >= 1", N, D);
    int64_t *pos = la_malloc((size_t)N * sizeof *pos);
    if (!pos) return la_fail(LA_ENOMEM, "la_kv_rope_shift: out of memory");
    for (int i = 0; i < N; i++) pos[i] = delta;
    la_status st = la_rope_apply(spec, x, N, D, pos, ctx_len, 0);
    free(pos);
    return st;
}
