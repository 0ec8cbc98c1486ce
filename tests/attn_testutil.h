/* attn_testutil.h -- shared by the kernel's own tests: a hand-built spec and a naive
 * double-precision attention reference written from SPEC 1-4 pair by pair (no tiles, no
 * ranges), independent of the kernel's visibility and logit code. Only la_rope_freqs is
 * shared with the library; test_posenc.c checks it against closed forms. */
#ifndef LA_ATTN_TESTUTIL_H
#define LA_ATTN_TESTUTIL_H

#include "longattn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline la_spec tu_spec(void) {
    la_spec s;
    memset(&s, 0, sizeof s);
    s.norm = LA_NORM_SOFTMAX;
    s.alpha = 1.5;
    s.as_delta = 1;
    s.as_gamma_range = 2;
    s.pos = LA_POS_NOPE;
    s.theta = 10000;
    s.rope_p = 0.5;
    s.pos_scale = 1;
    s.train_len = 0;
    s.beta_fast = 32;
    s.beta_slow = 1;
    s.xform = LA_XF_NONE;
    s.logn_s = 0;
    s.tau = 10;
    s.gamma = 1;
    s.temp = 1;
    s.pattern = LA_PAT_CAUSAL;
    return s;
}

typedef struct {
    double *out, *lse, *ent, *kmass; /* (B,H,T,D), (B,H,T), (B,H,T), (B,H,S) */
    double *dq, *dk, *dv, *dlogn;    /* gradients (when dout given) */
} tu_ref;

static inline int tu_rotates(la_pos p) {
    return p == LA_POS_ROPE || p == LA_POS_PROPE || p == LA_POS_NTK || p == LA_POS_DYNAMIC_NTK ||
           p == LA_POS_YARN || p == LA_POS_PI;
}

static inline void tu_rot(const double *x, double *y, int D, double pos, const double *om, int inv) {
    int h = D / 2;
    for (int k = 0; k < h; k++) {
        double a = pos * om[k] * (inv ? -1 : 1), c = cos(a), s = sin(a);
        double u = x[k], v = x[k + h];
        y[k] = u * c - v * s;
        y[k + h] = u * s + v * c;
    }
}

static inline int tu_doc_start(const int32_t *ids, int j) {
    while (j > 0 && ids[j - 1] == ids[j]) j--;
    return j;
}
static inline int tu_doc_end(const int32_t *ids, int S, int j) {
    while (j + 1 < S && ids[j + 1] == ids[j]) j++;
    return j + 1;
}

/* Pair visibility straight from SPEC 2 (positions p, kp within the document). */
static inline int tu_visible(const la_spec *sp, long long p, long long kp) {
    long long w = sp->window;
    int inwin = kp >= p - w + 1 && kp <= p;
    switch (sp->pattern) {
    case LA_PAT_CAUSAL: return kp <= p;
    case LA_PAT_WINDOW: return inwin;
    case LA_PAT_SINKS: return (kp < sp->sinks && kp <= p) || inwin;
    case LA_PAT_GLOBAL: return (p >= 0 && p < sp->global) || kp < sp->global || inwin;
    case LA_PAT_FULL: return 1;
    }
    return 0;
}

/* Naive reference. dout may be NULL (forward only). logn_s per head may be NULL. */
static inline void tu_reference(const la_spec *sp, const la_shape *sh, const float *q,
                                const float *k, const float *v, const int32_t *docs,
                                const float *logn_s, const float *dout, tu_ref *R) {
    int B = sh->B, H = sh->H, Hkv = sh->Hkv, T = sh->T, S = sh->S, D = sh->D, G = H / Hkv;
    long long pos0 = sh->pos0 == LA_POS0_AUTO ? (long long)S - T : sh->pos0;
    double *om = calloc((size_t)D, sizeof(double));
    int rot = tu_rotates(sp->pos);
    if (rot) la_rope_freqs(sp, D, S, om); /* dynamic-ntk context n = S */
    double myarn = 1;
    if (sp->pos == LA_POS_YARN && sp->pos_scale > 1) {
        double ms = 0.1 * log(sp->pos_scale) + 1;
        myarn = ms * ms;
    }
    float slopes[64] = {0};
    if (sp->pos == LA_POS_ALIBI) la_alibi_slopes(H, slopes);
    if (sp->pos == LA_POS_NAPE && H >= 2) la_alibi_slopes(H / 2, slopes);
    double *qr = malloc(sizeof(double) * D), *kr = malloc(sizeof(double) * (size_t)S * D);
    double *L = malloc(sizeof(double) * S), *P = malloc(sizeof(double) * S), *dots = malloc(sizeof(double) * S);
    double *cf = malloc(sizeof(double) * S);
    char *vis = malloc((size_t)S);
    memset(R->kmass, 0, sizeof(double) * (size_t)B * H * S);
    if (dout) {
        memset(R->dq, 0, sizeof(double) * (size_t)B * H * T * D);
        memset(R->dk, 0, sizeof(double) * (size_t)B * Hkv * S * D);
        memset(R->dv, 0, sizeof(double) * (size_t)B * Hkv * S * D);
        memset(R->dlogn, 0, sizeof(double) * H);
    }
    double *dkr = malloc(sizeof(double) * (size_t)S * D), *dqr = malloc(sizeof(double) * D);
    double *tmp = malloc(sizeof(double) * D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int hk = h / G;
            const float *kb = k + ((size_t)b * Hkv + hk) * S * D, *vb = v + ((size_t)b * Hkv + hk) * S * D;
            const int32_t *ids = docs ? docs + (size_t)b * S : NULL;
            for (int j = 0; j < S; j++) {
                double x[512];
                for (int d = 0; d < D; d++) x[d] = kb[(size_t)j * D + d];
                long long kp = ids ? j - tu_doc_start(ids, j) : j;
                if (rot) tu_rot(x, kr + (size_t)j * D, D, (double)kp, om, 0);
                else memcpy(kr + (size_t)j * D, x, sizeof(double) * D);
            }
            memset(dkr, 0, sizeof(double) * (size_t)S * D);
            for (int i = 0; i < T; i++) {
                size_t row = ((size_t)b * H + h) * T + i;
                long long qa = pos0 + i, ds = 0, de = S;
                if (ids) { ds = tu_doc_start(ids, (int)qa); de = tu_doc_end(ids, S, (int)qa); }
                long long p = qa - ds;
                int nq = 0;
                for (int j = 0; j < S; j++) {
                    vis[j] = j >= ds && j < de && tu_visible(sp, p, j - ds);
                    nq += vis[j];
                }
                double x[512];
                for (int d = 0; d < D; d++) x[d] = q[row * D + d];
                if (rot) tu_rot(x, qr, D, (double)p, om, 0);
                else memcpy(qr, x, sizeof(double) * D);
                double hs = 1;
                if (sp->xform == LA_XF_LOGN)
                    hs = logn_s ? logn_s[h] : sp->logn_s != 0 ? sp->logn_s : 1 / log((double)sp->train_len);
                double rowf = 1, ln = nq > 0 ? log((double)nq) : 0;
                switch (sp->xform) {
                case LA_XF_LOGN: rowf = hs * ln; break;
                case LA_XF_CRITICAL: rowf = sp->gamma * ln; break;
                case LA_XF_QWEN_LOGN: rowf = fmax(1.0, log((double)(p + 1)) / log((double)sp->train_len)); break;
                case LA_XF_TEMP: rowf = sp->temp; break;
                default: break;
                }
                double mx = -INFINITY;
                for (int j = 0; j < S; j++) {
                    if (!vis[j]) continue;
                    double dot = 0;
                    for (int d = 0; d < D; d++) dot += qr[d] * kr[(size_t)j * D + d];
                    double t = (double)(qa - j), a = 1, m = 0;
                    if (sp->xform == LA_XF_SINV) {
                        double tt = t > 0 ? t : 0;
                        a = sqrt(1 + 2 * log1p(tt / sp->tau));
                        m = -2 * log1p(tt / sp->tau);
                    }
                    dots[j] = dot;
                    cf[j] = rowf * a * myarn / sqrt((double)D);
                    L[j] = cf[j] * dot + m - slopes[h] * fabs(t);
                    if (L[j] > mx) mx = L[j];
                }
                double l = 0;
                for (int j = 0; j < S; j++) if (vis[j]) { P[j] = exp(L[j] - mx); l += P[j]; }
                double *o = R->out + row * D;
                memset(o, 0, sizeof(double) * D);
                if (nq == 0) {
                    R->lse[row] = -INFINITY;
                    R->ent[row] = 0;
                    continue;
                }
                double ent = 0;
                for (int j = 0; j < S; j++) {
                    if (!vis[j]) continue;
                    P[j] /= l;
                    if (P[j] > 0) ent -= P[j] * log(P[j]);
                    R->kmass[((size_t)b * H + h) * S + j] += P[j];
                    for (int d = 0; d < D; d++) o[d] += P[j] * vb[(size_t)j * D + d];
                }
                R->lse[row] = mx + log(l);
                R->ent[row] = ent;
                if (!dout) continue;
                const float *g = dout + row * D;
                double Di = 0;
                for (int d = 0; d < D; d++) Di += g[d] * o[d];
                memset(dqr, 0, sizeof(double) * D);
                for (int j = 0; j < S; j++) {
                    if (!vis[j]) continue;
                    double dP = 0;
                    for (int d = 0; d < D; d++) dP += g[d] * vb[(size_t)j * D + d];
                    double dL = P[j] * (dP - Di);
                    double *dvj = R->dv + (((size_t)b * Hkv + hk) * S + j) * D;
                    for (int d = 0; d < D; d++) dvj[d] += P[j] * g[d];
                    double dd = dL * cf[j];
                    for (int d = 0; d < D; d++) {
                        dqr[d] += dd * kr[(size_t)j * D + d];
                        dkr[(size_t)j * D + d] += dd * qr[d];
                    }
                    if (sp->xform == LA_XF_LOGN) R->dlogn[h] += dL * ln * myarn / sqrt((double)D) * dots[j];
                }
                if (rot) tu_rot(dqr, tmp, D, (double)p, om, 1);
                else memcpy(tmp, dqr, sizeof(double) * D);
                memcpy(R->dq + row * D, tmp, sizeof(double) * D);
            }
            if (dout)
                for (int j = 0; j < S; j++) {
                    long long kp = ids ? j - tu_doc_start(ids, j) : j;
                    if (rot) tu_rot(dkr + (size_t)j * D, tmp, D, (double)kp, om, 1);
                    else memcpy(tmp, dkr + (size_t)j * D, sizeof(double) * D);
                    double *dkj = R->dk + (((size_t)b * Hkv + hk) * S + j) * D;
                    for (int d = 0; d < D; d++) dkj[d] += tmp[d];
                }
        }
    free(om); free(qr); free(kr); free(L); free(P); free(dots); free(cf); free(vis);
    free(dkr); free(dqr); free(tmp);
}

static inline tu_ref tu_ref_alloc(const la_shape *s) {
    tu_ref r;
    size_t bht = (size_t)s->B * s->H * s->T, kv = (size_t)s->B * s->Hkv * s->S * s->D;
    r.out = malloc(sizeof(double) * bht * s->D);
    r.lse = malloc(sizeof(double) * bht);
    r.ent = malloc(sizeof(double) * bht);
    r.kmass = malloc(sizeof(double) * (size_t)s->B * s->H * s->S);
    r.dq = malloc(sizeof(double) * bht * s->D);
    r.dk = malloc(sizeof(double) * kv);
    r.dv = malloc(sizeof(double) * kv);
    r.dlogn = malloc(sizeof(double) * s->H);
    return r;
}
static inline void tu_ref_free(tu_ref *r) {
    free(r->out); free(r->lse); free(r->ent); free(r->kmass);
    free(r->dq); free(r->dk); free(r->dv); free(r->dlogn);
}

#endif
