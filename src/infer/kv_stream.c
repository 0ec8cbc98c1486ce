/* kv_stream.c -- exact chunked streaming for window(w) and sinks(n, w) caches: T new
 * tokens in one call, each row seeing exactly the keys and the re-indexed positions it
 * would see were the tokens appended and attended one at a time (StreamingLLM, Xiao et
 * al. 2024, sec. 3.2: positions are slots of the cache).
 *
 * Token t of the stream (t0 <= t < t0 + T), when stepped alone, sees the sinks s < min(n,
 * t+1) and the recent tokens j in [max(n, t-w+1), t]; it sits at slot q(t) = min(t, F),
 * F = n + w - 1 (budget - 1), the recent token j at slot q(t) - (t - j), the sink s at
 * slot s. So recent keys keep their stream distance t - j, while a sink's distance is
 * q(t) - s, which depends on the row: a per-query position map. Both are handled without
 * a T x T buffer and without touching the kernel:
 *   recent part  the layer holds the sinks and the newest w - 1 tokens before the chunk
 *                (la_kv_append_stream), then the T new ones; queries and recent keys are
 *                rotated here by their index in that run of non-sink rows (distances =
 *                stream distances) and one kernel call with softmax + nope + window(w)
 *                gives each row's output and log-sum-exp over exactly its recent keys;
 *   sink part    each row's query rotated at q(t) against the sink keys rotated at s,
 *                n dot products per row, merged with the recent part by log-sum-exp.
 * Logit factors a step would apply are applied per row to the query: YaRN's mscale^2,
 * temp, critical's gamma log(n_q) with n_q = min(t+1, budget), qwen-logn's
 * max(1, log(q(t)+1)/log(L_train)). RoPE frequencies use the cache length a step would
 * see, min(t+1, budget) (only dynamic-ntk depends on it; one value per chunk: the last
 * row's, so dynamic-ntk is exact when the chunk lies past the fill or within L_train). */
#define _GNU_SOURCE /* sincos */
#include <math.h>
#include <string.h>

#include "infer/kv_internal.h"
#include "longattn/infer.h"

int la_kv_stream_exact(const la_spec *spec, const la_kv_params *p) {
    if (!spec || !p || (p->policy != LA_KV_WINDOW && p->policy != LA_KV_SINKS)) return 0;
    if (spec->norm != LA_NORM_SOFTMAX || spec->pattern != LA_PAT_CAUSAL) return 0;
    if (spec->sink != LA_SINK_NONE) return 0; /* the merge below has no sink term (issue 31): step instead */
    switch (spec->pos) {
    case LA_POS_NOPE: case LA_POS_ROPE: case LA_POS_PROPE: case LA_POS_NTK:
    case LA_POS_DYNAMIC_NTK: case LA_POS_YARN: case LA_POS_PI: break;
    default: return 0; /* ALiBi / NAPE: additive biases, not rotations */
    }
    switch (spec->xform) {
    case LA_XF_NONE: case LA_XF_TEMP: case LA_XF_CRITICAL: case LA_XF_QWEN_LOGN: return 1;
    default: return 0; /* logn (learned per-head s), sinv (distance-dependent affine) */
    }
}

int la_kv_prefill_exact(const la_spec *spec, const la_kv_params *p) {
    return p && (p->policy == LA_KV_FULL || la_kv_stream_exact(spec, p));
}

int la_kv_prefill_chunk(const la_spec *spec, const la_kv_params *p, int want) {
    if (!p || want < 1) return 1;
    const int64_t mc = la_kv_max_chunk(p);
    int64_t lim = la_kv_prefill_exact(spec, p) ? mc : (mc / 4 > 1 ? mc / 4 : 1);
    return (int)(want < lim ? want : lim);
}

/* Rotate row x (D) in place by table row cs (cos in [0, D/2), sin in [D/2, D)): the
 * kernel's convention (pairs (k, k + D/2), angles in double rounded to float). */
void la_kv_rotate(float *x, const float *cs, int D) {
    const int half = D / 2;
    for (int k = 0; k < half; k++) {
        const float a = x[k], b = x[k + half], co = cs[k], si = cs[half + k];
        x[k] = a * co - b * si;
        x[k + half] = a * si + b * co;
    }
}

/* cos/sin table of positions 0..cap-1 for the frequencies at context length ctx; rebuilt
 * only when the frequencies change (dynamic-ntk while the cache fills). */
la_status la_kv_rope_table(la_kv_cache *c, const la_spec *spec, int64_t ctx, int *rotates) {
    const int D = c->p.D, half = D / 2;
    double *om = c->s_omega + half;
    *rotates = spec->pos != LA_POS_NOPE;
    if (!*rotates) return LA_OK;
    LA_TRY(la_rope_freqs(spec, D, ctx, om));
    if (c->s_tab_n == c->cap && !memcmp(om, c->s_omega, sizeof(double) * (size_t)half)) return LA_OK;
    memcpy(c->s_omega, om, sizeof(double) * (size_t)half);
    for (int64_t r = 0; r < c->cap; r++) {
        float *row = c->s_cs + (size_t)r * D;
        for (int k = 0; k < half; k++) {
            double sn = 0.0, co = 1.0;
            if (om[k] != 0.0) sincos((double)r * om[k], &sn, &co);
            row[k] = (float)co;
            row[half + k] = (float)sn;
        }
    }
    c->s_tab_n = c->cap;
    return LA_OK;
}

/* q . k in double (the sink logits; a handful per row). */
static double dotf(const float *a, const float *b, int D) {
    double s = 0.0;
    for (int d = 0; d < D; d++) s += (double)a[d] * b[d];
    return s;
}

/* The logit factor token t's own step would apply (transform x YaRN's mscale^2). */
double la_kv_row_factor(const la_spec *spec, int64_t t, int64_t budget) {
    const int64_t nq = t + 1 < budget ? t + 1 : budget, p = t < budget - 1 ? t : budget - 1;
    double f = 1.0;
    switch (spec->xform) {
    case LA_XF_TEMP: f = spec->temp; break;
    case LA_XF_CRITICAL: f = spec->gamma * log((double)nq); break;
    case LA_XF_QWEN_LOGN:
        f = (p + 1 > spec->train_len) ? log((double)(p + 1)) / log((double)spec->train_len) : 1.0;
        break;
    default: break;
    }
    if (spec->pos == LA_POS_YARN && spec->pos_scale > 1.0) {
        const double ms = 0.1 * log(spec->pos_scale) + 1.0; /* YaRN eq. (22), as the kernel */
        f *= ms * ms;
    }
    return f;
}

la_status la_kv_stream_attend(la_kv_cache *c, int layer, const la_spec *spec, const float *q, const float *k,
                              const float *v, int T, float *out, const la_attn_opts *opts) {
    if (!c || !spec || !q || !k || !v || !out)
        return la_fail(LA_EINVAL, "la_kv_stream_attend: NULL cache, spec, q, k, v or out");
    if (layer < 0 || layer >= c->p.n_layers)
        return la_fail(LA_EINVAL, "la_kv_stream_attend: layer %d out of range [0, %d)", layer, c->p.n_layers);
    if (!la_kv_stream_exact(spec, &c->p))
        return la_fail(LA_EUNSUPPORTED,
                       "la_kv_stream_attend: exact chunked streaming needs a window or sinks cache and a softmax spec "
                       "without a sink logit "
                       "with NoPE or a RoPE-family encoding, transform none/temp/critical/qwen-logn and the causal "
                       "pattern; step such a spec one token at a time");
    if (!c->s_k)
        return la_fail(LA_EINVAL, "la_kv_stream_attend: the cache has no streaming scratch; create it with "
                                  "la_kv_new_stream and a chunk > 1");
    if (opts && (opts->doc_ids || opts->key_mass))
        return la_fail(LA_EINVAL, "la_kv_stream_attend: doc_ids and key_mass are not supported; pass NULL");
    la_kv_layer *L = &c->layers[layer];
    const int64_t t0 = L->seen;
    LA_TRY(la_kv_append_stream(c, layer, k, v, T));

    const int D = c->p.D, G = c->p.H / c->p.Hkv;
    const size_t cap = (size_t)c->cap, Dz = (size_t)D;
    const int64_t n = c->p.policy == LA_KV_SINKS ? c->p.sinks : 0, w = c->p.window, budget = c->C;
    const int64_t F = budget - 1;                 /* a full cache's query slot */
    const int64_t len = L->len;
    const int64_t ns = n < len ? n : len;         /* sink rows held: slots [0, ns) */
    const int64_t SR = len - ns;                  /* recent rows: slots [ns, len), consecutive stream positions */
    const int i_r = t0 >= n ? 0 : (int)(n - t0 < T ? n - t0 : T); /* rows before i_r are sinks: no recent key */
    const int TR = T - i_r;
    int rotates;
    const int64_t ctx = t0 + T < budget ? t0 + T : budget;
    LA_TRY(la_kv_rope_table(c, spec, ctx, &rotates));
    const double inv_sqrt_d = 1.0 / sqrt((double)D);

    la_spec win = la_spec_default(); /* softmax + nope + none; the window over recent slots */
    win.pattern = LA_PAT_WINDOW;
    win.window = (int)w;
    la_attn_opts o = la_attn_opts_default();
    o.n_threads = opts ? opts->n_threads : 0;
    o.ws = c->ws;

    for (int hk = 0; hk < c->p.Hkv; hk++) {
        /* keys: recent rows rotated by their index b in [0, SR), sinks (after them in s_k)
         * rotated by their slot s; values as float */
        float *kr = c->s_k, *ks = c->s_k + (size_t)SR * Dz;
        la_kv_rows_f32(c, L, 0, (size_t)hk, (size_t)ns, (size_t)SR, kr);
        la_kv_rows_f32(c, L, 0, (size_t)hk, 0, (size_t)ns, ks);
        if (rotates) {
            for (int64_t b = 0; b < SR; b++) la_kv_rotate(kr + (size_t)b * Dz, c->s_cs + (size_t)b * Dz, D);
            for (int64_t s = 0; s < ns; s++) la_kv_rotate(ks + (size_t)s * Dz, c->s_cs + (size_t)s * Dz, D);
        }
        const float *vv;
        if (c->p.storage == LA_KV_F32) {
            vv = (const float *)L->v + (size_t)hk * cap * Dz; /* (len, D): sinks then recent */
        } else {
            la_kv_rows_f32(c, L, 1, (size_t)hk, 0, (size_t)len, c->s_v);
            vv = c->s_v;
        }
        /* recent part: one kernel call over the SR recent rows, queries at SR - T + i */
        if (TR > 0) {
            for (int g = 0; g < G; g++)
                for (int i = i_r; i < T; i++) {
                    const float *src = q + (((size_t)hk * G + g) * T + i) * Dz;
                    float *dst = c->s_q + ((size_t)g * TR + (i - i_r)) * Dz;
                    const float f = (float)la_kv_row_factor(spec, t0 + i, budget);
                    memcpy(dst, src, Dz * sizeof(float));
                    if (rotates) la_kv_rotate(dst, c->s_cs + (size_t)(SR - T + i) * Dz, D);
                    for (int d = 0; d < D; d++) dst[d] *= f;
                }
            la_shape sh = {.B = 1, .H = G, .Hkv = 1, .T = TR, .S = (int)SR, .D = D, .pos0 = LA_POS0_AUTO};
            LA_TRY(la_attn_forward(&win, &sh, c->s_q, kr, vv + (size_t)ns * Dz, c->s_out, c->s_lse, &o));
        }
        /* sink part and the merge, row by row */
        for (int g = 0; g < G; g++)
            for (int i = 0; i < T; i++) {
                const int64_t t = t0 + i;
                float *dst = out + (((size_t)hk * G + g) * T + i) * Dz;
                const float *orow = i >= i_r ? c->s_out + ((size_t)g * TR + (i - i_r)) * Dz : NULL;
                const int64_t nv = ns < t + 1 ? ns : t + 1; /* sinks this row sees */
                if (nv == 0) {
                    memcpy(dst, orow, Dz * sizeof(float));
                    continue;
                }
                float *qrow = c->s_qrow;
                double *acc = c->s_acc;
                memcpy(qrow, q + (((size_t)hk * G + g) * T + i) * Dz, Dz * sizeof(float));
                if (rotates) la_kv_rotate(qrow, c->s_cs + (size_t)(t < F ? t : F) * Dz, D);
                const double f = la_kv_row_factor(spec, t, budget) * inv_sqrt_d;
                const double lr = orow ? (double)c->s_lse[(size_t)g * TR + (i - i_r)] : -INFINITY;
                /* two passes over the (few) sinks: their logits' maximum with the recent
                 * part's log-sum-exp, then the weighted sum */
                double mx = lr;
                for (int64_t s = 0; s < nv; s++) {
                    const double ls = f * dotf(qrow, ks + (size_t)s * Dz, D);
                    if (ls > mx) mx = ls;
                }
                double Z = 0.0;
                for (int d = 0; d < D; d++) acc[d] = 0.0;
                if (orow && lr > -INFINITY) {
                    const double wr = exp(lr - mx);
                    Z += wr;
                    for (int d = 0; d < D; d++) acc[d] += wr * (double)orow[d];
                }
                for (int64_t s = 0; s < nv; s++) {
                    const double ws = exp(f * dotf(qrow, ks + (size_t)s * Dz, D) - mx);
                    const float *vs = vv + (size_t)s * Dz;
                    Z += ws;
                    for (int d = 0; d < D; d++) acc[d] += ws * (double)vs[d];
                }
                for (int d = 0; d < D; d++) dst[d] = (float)(acc[d] / Z);
            }
    }
    la_kv_evict_to(c, layer, budget); /* the sinks and the newest w: what token t0 + T - 1 leaves */
    return LA_OK;
}
