/* posreg.c -- training-free context extension with two or three relative-position regimes
 * per query row (issue #28, SPEC 10 "Extension methods"). For query position i and key
 * position j (d = i - j), the logit uses RoPE at
 *   SelfExtend (Jin et al. 2024; authors' code datamllab/LongLM, the "group_attention"
 *     merge of neighbour and grouped attention): d for d < W; for d >= W the grouped
 *     positions floor(i/G) + W - floor(W/G) (query) and floor(j/G) (key), so the two ranges
 *     meet at d = W. One softmax over the row: neighbour and grouped parts are two kernel
 *     calls merged by their log-sum-exp, the same as one softmax over the union.
 *   ReRoPE (Su 2023, bojone/rerope): d for d < W, W for d >= W (query rotated by W, key not
 *     rotated). Leaky ReRoPE: W + (d - W)/k for d >= W (query at (i + W(k - 1))/k, key at
 *     j/k). The authors also scale q by log(pos)/log(L_train) (logn); not applied here
 *     (combine with qwen-logn is not possible through this path; stated in docs/longeval.md).
 *   Dual Chunk Attention (An et al. 2024, HKUNLP/ChunkLlama chunkllama_attn_replace.py):
 *     chunk length s = chunk - local (authors' defaults chunk = 3C/4, local = C/16), keys at
 *     j mod s; a query in chunk a = floor(i/s) attends its own chunk causally at i mod s
 *     (intra: distance i - j), chunk a - 1 at min(i mod s + s, chunk) (successive) and
 *     chunks 0..a-2 at min(2s - 1, chunk) (inter).
 * Written from the papers' formulas and SPEC 10; the authors' code was read to check the
 * position maps (not copied). Each regime: positions applied here (RoPE half-split pairs
 * (x_k, x_{k+D/2}), angles pos * theta^(-2k/D) in double), then one call of the fused
 * kernel with "nope" and the regime's visibility (window(W), causal with a shifted pos0, or
 * full over a key slice); the partial outputs merge row by row by log-sum-exp. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "model/posreg.h"

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* la_posreg_parse's refusal: the message (LA_ESPEC), then -1 */
#define REFUSE(...)                     \
    do {                                \
        la_fail(LA_ESPEC, __VA_ARGS__); \
        return -1;                      \
    } while (0)

int la_posreg_parse(const char *text, double theta, la_posreg *r) {
    if (!text) return 0;
    while (*text == ' ') text++;
    la_posreg t;
    memset(&t, 0, sizeof t);
    double a = 0, b = 0;
    int n = 0;
    if (starts(text, "selfextend(")) t.kind = LA_PR_SELFEXTEND, n = sscanf(text + 11, "%lf,%lf", &a, &b);
    else if (starts(text, "leaky-rerope(")) t.kind = LA_PR_LEAKY, n = sscanf(text + 13, "%lf,%lf", &a, &b);
    else if (starts(text, "rerope(")) t.kind = LA_PR_REROPE, n = sscanf(text + 7, "%lf", &a);
    else if (starts(text, "dca(")) t.kind = LA_PR_DCA, n = sscanf(text + 4, "%lf,%lf", &a, &b);
    else return 0;
    const char *close = strchr(text, ')');
    int tail_ok = close && close[1 + strspn(close + 1, " ")] == '\0';
    if (!tail_ok) REFUSE("'%s': one method with its arguments in parentheses and nothing after it", text);
    /* the arguments become int64 positions and an int divisor: refuse what does not fit (inf too; a NaN
       fails the checks below) instead of converting it, which C leaves undefined */
    if (fabs(a) > INT_MAX || fabs(b) > INT_MAX)
        REFUSE("'%s': an argument is above %d; positions and windows must fit an int", text, INT_MAX);
    switch (t.kind) {
    case LA_PR_SELFEXTEND:
    case LA_PR_LEAKY: /* two whole arguments >= 1: selfextend(G,W), leaky-rerope(W,k) */
        if (n != 2 || a < 1 || b < 1 || a != floor(a) || b != floor(b))
            REFUSE(t.kind == LA_PR_SELFEXTEND
                       ? "'%s': selfextend(G,W) needs whole G >= 1 and W >= 1 (authors: G = 8, W = 1024)"
                       : "'%s': leaky-rerope(W,k) needs whole W >= 1 and k >= 1 (authors: W = 512, k = 16)",
                   text);
        if (t.kind == LA_PR_SELFEXTEND) t.G = (int64_t)a, t.W = (int64_t)b;
        else t.W = (int64_t)a, t.k = (int64_t)b;
        break;
    case LA_PR_REROPE:
        if (n != 1 || a < 1 || a != floor(a))
            REFUSE("'%s': rerope(W) needs a whole window W >= 1 (authors: W = 512)", text);
        t.W = (int64_t)a;
        break;
    default: /* DCA: dca(C) = the authors' defaults for a trained context C, or dca(chunk,local) */
        if (n == 1 && a >= 16 && a == floor(a)) b = floor(a / 16), a = floor(3 * a / 4);
        if (n < 1 || a != floor(a) || b != floor(b) || b < 0 || a - b < 1)
            REFUSE("'%s': dca(C) (chunk 3C/4, local window C/16) or dca(chunk,local) with chunk > local >= 0", text);
        t.chunk = (int64_t)a, t.local = (int64_t)b;
        break;
    }
#undef REFUSE
    t.theta = theta;
    t.den = t.kind == LA_PR_LEAKY ? (int)t.k : 1;
    snprintf(t.text, sizeof t.text, "%.*s", (int)(close - text + 1), text);
    la_posreg_release(r);
    *r = t;
    return 1;
}

void la_posreg_release(la_posreg *r) {
    if (!r) return;
    free(r->qr), free(r->kr), free(r->ob), free(r->lse), free(r->lacc), free(r->cs);
    la_workspace_free(r->ws);
    memset(r, 0, sizeof *r);
}

/* cos | sin table of positions u / den for u < n (den = k for Leaky ReRoPE, else 1) */
static la_status ensure(la_posreg *r, int G, int T, int S, int D, int64_t n_units) {
    if (!r->ws) { /* first call: the kernel specs */
        char w[64];
        LA_TRY(la_spec_parse("softmax+nope+causal", &r->causal));
        LA_TRY(la_spec_parse("softmax+nope+full", &r->full));
        snprintf(w, sizeof w, "softmax+nope+window(%lld)", (long long)(r->W > 0 ? r->W : 1));
        LA_TRY(la_spec_parse(w, &r->window));
        LA_TRY(la_workspace_create(&r->ws));
    }
    if ((int64_t)G * T > r->cap_qT) {
        free(r->qr), free(r->ob), free(r->lse), free(r->lacc);
        r->qr = la_malloc(sizeof(float) * (size_t)G * T * D);
        r->ob = la_malloc(sizeof(float) * (size_t)G * T * D);
        r->lse = la_malloc(sizeof(float) * (size_t)G * T);
        r->lacc = la_malloc(sizeof(double) * (size_t)G * T);
        r->cap_qT = 0;
        if (!r->qr || !r->ob || !r->lse || !r->lacc) return la_fail(LA_ENOMEM, "posreg: out of memory");
        r->cap_qT = (int64_t)G * T;
    }
    if (S > r->cap_S) {
        free(r->kr);
        r->kr = la_malloc(sizeof(float) * (size_t)S * D);
        r->cap_S = 0;
        if (!r->kr) return la_fail(LA_ENOMEM, "posreg: out of memory");
        r->cap_S = S;
    }
    if (n_units > r->cs_n) {
        int64_t nn = n_units + n_units / 2 + 64;
        float *cs = la_realloc(r->cs, sizeof(float) * (size_t)nn * D);
        if (!cs) return la_fail(LA_ENOMEM, "posreg: out of memory for the rotation table");
        r->cs = cs;
        const int h = D / 2;
        for (int64_t u = r->cs_n; u < nn; u++)
            for (int i = 0; i < h; i++) {
                double ang = (double)u / r->den * pow(r->theta, -2.0 * i / D);
                r->cs[u * D + i] = (float)cos(ang);
                r->cs[u * D + h + i] = (float)sin(ang);
            }
        r->cs_n = nn;
    }
    return LA_OK;
}

/* y = x rotated at position u / den (half-split pairs, as the model's own RoPE) */
static void rot(const la_posreg *r, const float *x, int64_t u, int D, float *y) {
    const float *c = r->cs + u * D, *s = c + D / 2;
    const int h = D / 2;
    for (int i = 0; i < h; i++) {
        float a = x[i], b = x[i + h];
        y[i] = a * c[i] - b * s[i];
        y[i + h] = b * c[i] + a * s[i];
    }
}

typedef int64_t (*pos_fn)(const la_posreg *r, int64_t p);

/* One regime: rows [r0, r1) of the T queries (position P0 + r), keys [k0, k1), query
 * positions qp(P), key positions kp(j) (units of 1/den), visibility spec with pos0 (query
 * r0's position relative to key k0; for full, ignored); merged into out / r->lacc. */
static la_status pass(la_posreg *r, int G, int T, int D, int64_t P0, const float *q, const float *k, const float *v,
                      int r0, int r1, int64_t k0, int64_t k1, pos_fn qp, pos_fn kp, const la_spec *sp, int64_t pos0,
                      float *out, int n_threads) {
    const int Tb = r1 - r0, Sb = (int)(k1 - k0);
    if (Tb < 1 || Sb < 1) return LA_OK;
    for (int64_t j = k0; j < k1; j++) rot(r, k + j * D, kp(r, j), D, r->kr + (j - k0) * D);
    for (int g = 0; g < G; g++)
        for (int i = r0; i < r1; i++)
            rot(r, q + ((size_t)g * T + i) * D, qp(r, P0 + i), D, r->qr + ((size_t)g * Tb + (i - r0)) * D);
    la_shape sh = {.B = 1, .H = G, .Hkv = 1, .T = Tb, .S = Sb, .D = D, .pos0 = pos0};
    la_attn_opts o = la_attn_opts_default();
    o.n_threads = n_threads;
    o.ws = r->ws;
    LA_TRY(la_attn_forward(sp, &sh, r->qr, r->kr, v + k0 * D, r->ob, r->lse, &o));
    for (int g = 0; g < G; g++)
        for (int i = r0; i < r1; i++) {
            const size_t ib = (size_t)g * Tb + (i - r0), ia = (size_t)g * T + i;
            const float lb = r->lse[ib];
            if (!(lb > -INFINITY) || lb == LA_ROW_EMPTY) continue; /* no visible key in this regime */
            const double la = r->lacc[ia], m = la > lb ? la : lb;
            const double ea = la > -INFINITY ? exp(la - m) : 0, eb = exp((double)lb - m), l = ea + eb;
            float *o_ = out + ia * D;
            const float *b_ = r->ob + ib * D;
            for (int d = 0; d < D; d++) o_[d] = (float)((o_[d] * ea + b_[d] * eb) / l);
            r->lacc[ia] = m + log(l);
        }
    return LA_OK;
}

static int64_t id_pos(const la_posreg *r, int64_t p) { return p * r->den; }
static int64_t zero_pos(const la_posreg *r, int64_t p) { (void)r, (void)p; return 0; }
static int64_t se_q(const la_posreg *r, int64_t p) { return p / r->G + r->W - r->W / r->G; }
static int64_t se_k(const la_posreg *r, int64_t p) { return p / r->G; }
static int64_t rr_q(const la_posreg *r, int64_t p) { (void)p; return r->W; }
static int64_t lk_q(const la_posreg *r, int64_t p) { return p + r->W * (r->k - 1); } /* (p + W(k-1)) / k */
static int64_t lk_k(const la_posreg *r, int64_t p) { return p; }                      /* p / k */
static int64_t dca_s(const la_posreg *r) { return r->chunk - r->local; }
static int64_t dca_mod(const la_posreg *r, int64_t p) { return p % dca_s(r); }
static int64_t dca_succ(const la_posreg *r, int64_t p) {
    int64_t u = p % dca_s(r) + dca_s(r);
    return u < r->chunk ? u : r->chunk;
}
static int64_t dca_inter(const la_posreg *r, int64_t p) {
    (void)p;
    int64_t u = 2 * dca_s(r) - 1;
    return u < r->chunk ? u : r->chunk;
}

la_status la_posreg_attend(la_posreg *r, int G, int T, int S, int D, const float *q, const float *k, const float *v,
                           float *out, int n_threads) {
    if (!r || r->kind == LA_PR_NONE || !q || !k || !v || !out || T < 1 || S < T || D % 2)
        return la_fail(LA_EINVAL, "la_posreg_attend: bad arguments");
    const int64_t P0 = S - T;
    int64_t units = (int64_t)S * r->den + 1;
    if (r->kind == LA_PR_SELFEXTEND || r->kind == LA_PR_REROPE) units += r->W + 1;
    if (r->kind == LA_PR_LEAKY) units += r->W * r->k + 1;
    if (r->kind == LA_PR_DCA) units = (r->chunk > S ? r->chunk : S) + 1;
    LA_TRY(ensure(r, G, T, S, D, units));
    for (size_t i = 0; i < (size_t)G * T; i++) r->lacc[i] = -INFINITY;
    memset(out, 0, sizeof(float) * (size_t)G * T * D);
    if (r->kind != LA_PR_DCA) {
        /* neighbours, d < W: true positions, the kernel's window(W) over keys from P0 - W + 1 */
        int64_t k0 = P0 - r->W + 1 > 0 ? P0 - r->W + 1 : 0;
        LA_TRY(pass(r, G, T, D, P0, q, k, v, 0, T, k0, S, id_pos, id_pos, &r->window, P0 - k0, out, n_threads));
        /* far, d >= W: rows at P >= W over keys [0, P - W] (causal with pos0 shifted by W) */
        int rf = P0 >= r->W ? 0 : (int)(r->W - P0);
        if (rf < T) {
            pos_fn qp = r->kind == LA_PR_SELFEXTEND ? se_q : r->kind == LA_PR_REROPE ? rr_q : lk_q;
            pos_fn kp = r->kind == LA_PR_SELFEXTEND ? se_k : r->kind == LA_PR_REROPE ? zero_pos : lk_k;
            LA_TRY(pass(r, G, T, D, P0, q, k, v, rf, T, 0, S - r->W, qp, kp, &r->causal, P0 + rf - r->W, out, n_threads));
        }
        return LA_OK;
    }
    /* DCA: rows grouped by their chunk a = floor(P / s) */
    const int64_t s = dca_s(r);
    for (int i0 = 0; i0 < T;) {
        const int64_t a = (P0 + i0) / s;
        int i1 = i0;
        while (i1 < T && (P0 + i1) / s == a) i1++;
        const int64_t c0 = a * s, c1 = (a + 1) * s < S ? (a + 1) * s : S;
        LA_TRY(pass(r, G, T, D, P0, q, k, v, i0, i1, c0, c1, dca_mod, dca_mod, &r->causal, P0 + i0 - c0, out,
                    n_threads));
        if (a >= 1)
            LA_TRY(pass(r, G, T, D, P0, q, k, v, i0, i1, c0 - s, c0, dca_succ, dca_mod, &r->full, LA_POS0_AUTO, out,
                        n_threads));
        if (a >= 2)
            LA_TRY(pass(r, G, T, D, P0, q, k, v, i0, i1, 0, c0 - s, dca_inter, dca_mod, &r->full, LA_POS0_AUTO, out,
                        n_threads));
        i0 = i1;
    }
    return LA_OK;
}
