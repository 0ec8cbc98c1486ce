/* ref_attn.c -- naive double-precision attention reference (see ref_attn.h for the
 * semantics). Deliberately simple: one row at a time, every logit materialised, no tiles,
 * no float anywhere. */
#include "ref_attn.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char ref_err[512];
const char *ref_attn_error(void) { return ref_err; }
static int ref_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ref_err, sizeof ref_err, fmt, ap);
    va_end(ap);
    return -1;
}

/* ALiBi slopes as in Press et al.'s reference code: for a power of two n, the geometric
 * sequence starting at 2^(-8/n) with that ratio; otherwise the slopes of the closest lower
 * power of two c followed by the even-indexed slopes of get_slopes(2c). */
static void slopes_pow2(int n, double *m) {
    double start = pow(2.0, -pow(2.0, -(log2((double)n) - 3.0)));
    for (int i = 0; i < n; i++) m[i] = start * pow(start, (double)i);
}
void ref_alibi_slopes(int n, double *m) {
    if (n <= 0) return;
    double l = log2((double)n);
    if (l == floor(l)) {
        slopes_pow2(n, m);
        return;
    }
    int c = 1 << (int)floor(l);
    slopes_pow2(c, m);
    double *m2 = malloc(sizeof(double) * (size_t)(2 * c));
    ref_alibi_slopes(2 * c, m2);
    for (int i = 0; i < n - c; i++) m[c + i] = m2[2 * i];
    free(m2);
}

/* sinv closed form (Anson et al.; SPEC 4): alpha = beta = e^0.5,
 * a_t = sqrt(2[log(t/tau + 1) - log alpha + beta/alpha]), m_t = -a_t^2 + beta/alpha. */
void ref_sinv(double t, double tau, double *a, double *m) {
    if (t < 0) t = 0;
    double alpha = exp(0.5), beta = exp(0.5);
    double a2 = 2.0 * (log(t / tau + 1.0) - log(alpha) + beta / alpha);
    *a = sqrt(a2);
    *m = -a2 + beta / alpha;
}

double ref_yarn_mscale2(const la_spec *spec) {
    if (spec->pos != LA_POS_YARN || spec->pos_scale <= 1.0) return 1.0;
    double ms = 0.1 * log(spec->pos_scale) + 1.0;
    return ms * ms;
}

void ref_rope_omega(const la_spec *spec, int D, int64_t ctx_len, double *omega) {
    int half = D / 2;
    double theta = spec->theta;
    switch (spec->pos) {
    case LA_POS_ROPE:
    case LA_POS_PROPE:
    case LA_POS_YARN:
    case LA_POS_PI:
        break;
    case LA_POS_NTK:
        theta = spec->theta * pow(spec->pos_scale, (double)D / (double)(D - 2));
        break;
    case LA_POS_DYNAMIC_NTK:
        if (ctx_len > spec->train_len) {
            double s2 = spec->pos_scale * (double)ctx_len / (double)spec->train_len - (spec->pos_scale - 1.0);
            theta = spec->theta * pow(s2, (double)D / (double)(D - 2));
        }
        break;
    default:
        for (int i = 0; i < half; i++) omega[i] = 0.0;
        return;
    }
    for (int i = 0; i < half; i++) omega[i] = 1.0 / pow(theta, (2.0 * i) / D);
    if (spec->pos == LA_POS_PROPE) {
        int m = (int)floor(spec->rope_p * D / 2.0); /* the m highest frequencies rotate */
        for (int i = m; i < half; i++) omega[i] = 0.0;
    }
    if (spec->pos == LA_POS_PI) /* position interpolation: angle (p/s) omega_i */
        for (int i = 0; i < half; i++) omega[i] = omega[i] / spec->pos_scale;
    if (spec->pos == LA_POS_YARN) {
        /* correction range (YaRN reference code): dims whose wavelength is shorter than
         * L/beta_fast keep omega, longer than L/beta_slow are interpolated to omega/s, linear
         * ramp between, range clamped to [0, D-1]. */
        double L = spec->train_len, lt = log(spec->theta);
        double lo = floor(D * log(L / (spec->beta_fast * 2.0 * M_PI)) / (2.0 * lt));
        double hi = ceil(D * log(L / (spec->beta_slow * 2.0 * M_PI)) / (2.0 * lt));
        lo = fmax(lo, 0.0);
        hi = fmin(hi, (double)(D - 1));
        if (lo == hi) hi += 0.001;
        for (int i = 0; i < half; i++) {
            double r = fmin(fmax((i - lo) / (hi - lo), 0.0), 1.0);
            double extrap = 1.0 - r; /* weight of the original frequency */
            omega[i] = (omega[i] / spec->pos_scale) * (1.0 - extrap) + omega[i] * extrap;
        }
    }
}

/* Rotate x (D) by angle pos*omega on pairs (i, i+D/2); sign -1 rotates back. */
static void rotate(const double *x, double *y, const double *omega, int D, double pos, double sign) {
    int half = D / 2;
    for (int i = 0; i < half; i++) {
        double c = cos(pos * omega[i]), s = sign * sin(pos * omega[i]);
        double a = x[i], b = x[i + half];
        y[i] = a * c - b * s;
        y[i + half] = a * s + b * c;
    }
}

/* Everything one call needs. */
typedef struct {
    const la_spec *sp;
    int B, H, Hkv, T, S, D;
    int64_t pos0, ctx;
    const int32_t *docs;
    double *omega;  /* (D/2) */
    double *slope;  /* (H) */
    double *s_h;    /* (H) */
    int rot;
    const ref_attn_opts *o;
} call_t;

static int setup(call_t *c, const la_spec *spec, const la_shape *sh, const ref_attn_opts *o) {
    memset(c, 0, sizeof *c);
    c->sp = spec;
    c->B = sh->B, c->H = sh->H, c->Hkv = sh->Hkv, c->T = sh->T, c->S = sh->S, c->D = sh->D;
    if (c->B < 1 || c->H < 1 || c->Hkv < 1 || c->T < 1 || c->S < 1 || c->D < 1 || c->H % c->Hkv)
        return ref_fail("bad shape");
    if (c->D > 1024) return ref_fail("the reference handles D <= 1024");
    if (spec->norm == LA_NORM_SIGMOID && !spec->sig_b_set && spec->train_len < 2)
        return ref_fail("sigmoid without b needs train >= 2");
    if (spec->norm != LA_NORM_SOFTMAX && spec->norm != LA_NORM_SIGMOID && spec->norm != LA_NORM_SIGMOID_LOGN) {
        double a = spec->norm == LA_NORM_SPARSEMAX ? 2.0 : spec->alpha;
        if (!(a > 1.0)) return ref_fail("entmax needs alpha > 1");
        if (spec->norm == LA_NORM_ASENTMAX && (!o || !o->as_beta || !o->as_gamma))
            return ref_fail("asentmax needs as_beta and as_gamma");
    }
    c->o = o;
    c->pos0 = sh->pos0 == LA_POS0_AUTO ? (int64_t)c->S - c->T : sh->pos0;
    c->docs = o ? o->doc_ids : NULL;
    c->ctx = o && o->ctx_len > 0 ? o->ctx_len : c->S;
    if (c->docs && (c->pos0 < 0 || c->pos0 + c->T > c->S))
        return ref_fail("with doc_ids every query position pos0+i must lie in [0, S)");
    c->rot = spec->pos == LA_POS_ROPE || spec->pos == LA_POS_PROPE || spec->pos == LA_POS_NTK ||
             spec->pos == LA_POS_DYNAMIC_NTK || spec->pos == LA_POS_YARN ||
             spec->pos == LA_POS_PI;
    if (c->rot && c->D % 2) return ref_fail("odd D with a rotary encoding");
    c->omega = calloc((size_t)(c->D / 2 + 1), sizeof(double));
    c->slope = calloc((size_t)c->H, sizeof(double));
    c->s_h = calloc((size_t)c->H, sizeof(double));
    if (c->rot) ref_rope_omega(spec, c->D, c->ctx, c->omega);
    if (spec->pos == LA_POS_ALIBI) ref_alibi_slopes(c->H, c->slope);
    if (spec->pos == LA_POS_NAPE && c->H / 2 > 0) ref_alibi_slopes(c->H / 2, c->slope);
    for (int h = 0; h < c->H; h++) {
        if (o && o->logn_s) c->s_h[h] = o->logn_s[h];
        else if (spec->logn_s != 0) c->s_h[h] = spec->logn_s;
        else if (spec->xform == LA_XF_LOGN) {
            if (spec->train_len < 2) return ref_fail("logn with s = 0 needs train >= 2");
            c->s_h[h] = 1.0 / log((double)spec->train_len);
        }
    }
    return 0;
}

static void teardown(call_t *c) {
    free(c->omega);
    free(c->slope);
    free(c->s_h);
}

/* Document run [st, en) holding index a of batch b (the whole [0, S) without docs). */
static void doc_run(const call_t *c, int b, int64_t a, int64_t *st, int64_t *en) {
    if (!c->docs) {
        *st = 0;
        *en = c->S;
        return;
    }
    const int32_t *d = c->docs + (size_t)b * c->S;
    int64_t s = a, e = a + 1;
    while (s > 0 && d[s - 1] == d[a]) s--;
    while (e < c->S && d[e] == d[a]) e++;
    *st = s;
    *en = e;
}

static int visible(const la_spec *sp, int64_t p, int64_t kp) {
    switch (sp->pattern) {
    case LA_PAT_CAUSAL: return kp <= p;
    case LA_PAT_FULL: return 1;
    case LA_PAT_WINDOW: return kp <= p && kp >= p - sp->window + 1;
    case LA_PAT_SINKS: return kp <= p && (kp < sp->sinks || kp >= p - sp->window + 1);
    case LA_PAT_GLOBAL:
        if (p >= 0 && p < sp->global) return 1; /* a global query (one of the first g) */
        return kp < sp->global || (kp <= p && kp >= p - sp->window + 1);
    }
    return 0;
}

/* One row: visible mask vis (S), logits L (S), the row factor c_row and per-key dL/dS
 * multiplier mult (S) so that L = mult * S + bias; dmult_ds (S) = d mult / d s_h. */
typedef struct {
    int64_t p, st, en;
    int nq;
    double *rq;      /* (D) rotated query */
    double *score;   /* (S) S_j */
    double *L;       /* (S) logits, -inf if invisible */
    double *mult;    /* (S) dL/dS */
    double *dmds;    /* (S) d mult / d s_h */
    double *P;       /* (S) probabilities */
    double lse;      /* softmax: log-sum-exp; entmax family: tau; sigmoid: sum p */
    double psink;    /* softmax+sink: the sink's probability */
    double as_s, as_ln; /* asentmax query scale s and log n (s = 1 otherwise) */
    int as_on;       /* this row's query is scaled */
} row_t;

static void row_logits(const call_t *c, int b, int h, int i, const double *qrow, const double *rk /* (S,D) */,
                       const int64_t *kpos, const int64_t *kst, row_t *r) {
    const la_spec *sp = c->sp;
    int S = c->S, D = c->D;
    int64_t qa = c->pos0 + i;
    if (c->docs) doc_run(c, b, qa, &r->st, &r->en);
    else r->st = 0, r->en = S;
    r->p = qa - r->st;
    r->nq = 0;
    for (int j = 0; j < S; j++) {
        int vis = j >= r->st && j < r->en && kst[j] == r->st && visible(sp, r->p, kpos[j]);
        r->L[j] = vis ? 0.0 : -INFINITY;
        r->nq += vis;
    }
    double qs[1024];
    r->as_s = 1.0, r->as_ln = 0.0, r->as_on = 0;
    if (sp->norm == LA_NORM_ASENTMAX && !(sp->pos == LA_POS_NAPE && c->H >= 2 && h < c->H / 2)) {
        size_t ri = ((size_t)b * c->H + h) * c->T + i;
        r->as_ln = log((double)(r->p + 2 > 2 ? r->p + 2 : 2));
        r->as_s = sp->as_delta + c->o->as_beta[ri] * pow(r->as_ln, c->o->as_gamma[ri]);
        r->as_on = 1;
    }
    for (int d = 0; d < D; d++) qs[d] = r->as_s * qrow[d];
    if (c->rot) rotate(qs, r->rq, c->omega, D, (double)r->p, 1.0);
    else memcpy(r->rq, qs, sizeof(double) * (size_t)D);
    double scale = ref_yarn_mscale2(sp) / sqrt((double)D);
    double logn = r->nq > 0 ? log((double)r->nq) : 0.0;
    double xf = 1.0, dxf = 0.0;
    switch (sp->xform) {
    case LA_XF_NONE: break;
    case LA_XF_LOGN: xf = c->s_h[h] * logn, dxf = logn; break;
    case LA_XF_QWEN_LOGN: {
        double f = r->p + 1 > 1 ? log((double)(r->p + 1)) / log((double)sp->train_len) : 1.0;
        xf = f > 1.0 ? f : 1.0;
        break;
    }
    case LA_XF_SINV: break;
    case LA_XF_CRITICAL: xf = sp->gamma * logn; break;
    case LA_XF_TEMP: xf = sp->temp; break;
    }
    for (int j = 0; j < S; j++) {
        if (r->L[j] == -INFINITY) {
            r->score[j] = r->mult[j] = r->dmds[j] = 0.0;
            continue;
        }
        double dot = 0.0;
        for (int d = 0; d < D; d++) dot += r->rq[d] * rk[(size_t)j * D + d];
        double s = dot * scale;
        int64_t t = r->p - kpos[j];
        double a = 1.0, m = 0.0;
        if (sp->xform == LA_XF_SINV) ref_sinv((double)t, sp->tau, &a, &m);
        r->score[j] = s;
        r->mult[j] = xf * a;
        r->dmds[j] = dxf * a;
        r->L[j] = xf * a * s + m - c->slope[h] * fabs((double)t);
    }
    /* softmax over the visible keys */
    double mx = -INFINITY;
    for (int j = 0; j < S; j++)
        if (r->L[j] > mx) mx = r->L[j];
    r->psink = 0.0;
    if (r->nq == 0) {
        r->lse = -INFINITY;
        for (int j = 0; j < S; j++) r->P[j] = 0.0;
        return;
    }
    if (sp->norm == LA_NORM_SIGMOID || sp->norm == LA_NORM_SIGMOID_LOGN) {
        double bias = sp->norm == LA_NORM_SIGMOID_LOGN ? -log((double)r->nq)
                      : sp->sig_b_set                  ? sp->sig_b
                                                       : -log((double)sp->train_len);
        r->lse = 0.0;
        for (int j = 0; j < S; j++) {
            r->P[j] = r->L[j] == -INFINITY ? 0.0 : 1.0 / (1.0 + exp(-(r->L[j] + bias)));
            r->lse += r->P[j];
        }
        return;
    }
    if (sp->norm != LA_NORM_SOFTMAX) {
        /* entmax: bisection on tau in [am1 mx - 1, am1 mx - nq^(1-alpha)] */
        double alpha = sp->norm == LA_NORM_SPARSEMAX ? 2.0 : sp->alpha, am1 = alpha - 1.0;
        double lo = am1 * mx - 1.0, hi = am1 * mx - pow((double)r->nq, 1.0 - alpha);
        for (int it = 0; it < 200; it++) {
            double mid = 0.5 * (lo + hi), f = -1.0;
            if (!(mid > lo && mid < hi)) break;
            for (int j = 0; j < S; j++) {
                double x = am1 * r->L[j] - mid;
                if (x > 0.0) f += am1 == 1.0 ? x : am1 == 0.5 ? x * x : pow(x, 1.0 / am1);
            }
            if (f > 0.0) lo = mid;
            else hi = mid;
        }
        double tau = 0.5 * (lo + hi), z = 0.0;
        for (int j = 0; j < S; j++) {
            double x = am1 * r->L[j] - tau;
            r->P[j] = x > 0.0 ? pow(x, 1.0 / am1) : 0.0;
            z += r->P[j];
        }
        for (int j = 0; j < S; j++) r->P[j] /= z;
        r->lse = tau;
        return;
    }
    double sig = sp->sink == LA_SINK_FIXED ? sp->sink_fixed : c->o && c->o->sinks ? c->o->sinks[h] : 0.0;
    if (sp->sink != LA_SINK_NONE && sig > mx) mx = sig;
    double z = 0.0;
    for (int j = 0; j < S; j++) z += r->L[j] == -INFINITY ? 0.0 : exp(r->L[j] - mx);
    if (sp->sink != LA_SINK_NONE) z += exp(sig - mx);
    r->lse = mx + log(z);
    for (int j = 0; j < S; j++) r->P[j] = r->L[j] == -INFINITY ? 0.0 : exp(r->L[j] - r->lse);
    if (sp->sink != LA_SINK_NONE) r->psink = exp(sig - r->lse);
}

/* Per (b, hkv): rotated keys (S, D), in-document key positions and run starts. */
static void keys_of(const call_t *c, int b, int hkv, const double *k, double *rk, int64_t *kpos, int64_t *kst) {
    int S = c->S, D = c->D;
    for (int j = 0; j < S; j++) {
        int64_t st, en;
        doc_run(c, b, j, &st, &en);
        kst[j] = st;
        kpos[j] = j - st;
        const double *kr = k + (((size_t)b * c->Hkv + hkv) * S + j) * D;
        if (c->rot) rotate(kr, rk + (size_t)j * D, c->omega, D, (double)kpos[j], 1.0);
        else memcpy(rk + (size_t)j * D, kr, sizeof(double) * (size_t)D);
    }
}

typedef struct {
    row_t r;
    double *rk;
    int64_t *kpos, *kst;
} bufs_t;

static void bufs_alloc(bufs_t *w, int S, int D) {
    w->r.rq = calloc((size_t)D, sizeof(double));
    w->r.score = calloc((size_t)S, sizeof(double));
    w->r.L = calloc((size_t)S, sizeof(double));
    w->r.mult = calloc((size_t)S, sizeof(double));
    w->r.dmds = calloc((size_t)S, sizeof(double));
    w->r.P = calloc((size_t)S, sizeof(double));
    w->rk = calloc((size_t)S * D, sizeof(double));
    w->kpos = calloc((size_t)S, sizeof(int64_t));
    w->kst = calloc((size_t)S, sizeof(int64_t));
}

static void bufs_free(bufs_t *w) {
    free(w->r.rq);
    free(w->r.score);
    free(w->r.L);
    free(w->r.mult);
    free(w->r.dmds);
    free(w->r.P);
    free(w->rk);
    free(w->kpos);
    free(w->kst);
}

int ref_attn_forward(const la_spec *spec, const la_shape *shape, const double *q, const double *k,
                     const double *v, const ref_attn_opts *o, double *out, double *lse, double *entropy,
                     double *key_mass) {
    call_t c;
    if (setup(&c, spec, shape, o)) {
        teardown(&c);
        return -1;
    }
    int T = c.T, S = c.S, D = c.D, grp = c.H / c.Hkv;
    bufs_t w;
    bufs_alloc(&w, S, D);
    if (key_mass) memset(key_mass, 0, sizeof(double) * (size_t)c.B * c.H * S);
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < c.H; h++) {
            int hkv = h / grp;
            keys_of(&c, b, hkv, k, w.rk, w.kpos, w.kst);
            const double *vb = v + ((size_t)b * c.Hkv + hkv) * S * D;
            for (int i = 0; i < T; i++) {
                size_t ri = ((size_t)b * c.H + h) * T + i;
                row_logits(&c, b, h, i, q + ri * D, w.rk, w.kpos, w.kst, &w.r);
                double *o_ = out + ri * D;
                for (int d = 0; d < D; d++) o_[d] = 0.0;
                double ent = 0.0;
                for (int j = 0; j < S; j++) {
                    double pj = w.r.P[j];
                    if (pj == 0.0) continue;
                    for (int d = 0; d < D; d++) o_[d] += pj * vb[(size_t)j * D + d];
                    ent -= pj * log(pj);
                    if (key_mass) key_mass[((size_t)b * c.H + h) * S + j] += pj;
                }
                lse[ri] = w.r.lse;
                if (w.r.psink > 0.0) ent -= w.r.psink * log(w.r.psink);
                if ((spec->norm == LA_NORM_SIGMOID || spec->norm == LA_NORM_SIGMOID_LOGN) && w.r.nq > 0)
                    ent = log(w.r.lse) - (-ent) / w.r.lse; /* entropy of p / M: log M - sum p log p / M */
                if (entropy) entropy[ri] = ent;
                if (o && o->row_support) {
                    int ns = 0;
                    for (int j = 0; j < S; j++) ns += w.r.P[j] > 0.0;
                    o->row_support[ri] = ns;
                }
            }
        }
    bufs_free(&w);
    teardown(&c);
    return 0;
}

int ref_attn_backward(const la_spec *spec, const la_shape *shape, const double *q, const double *k,
                      const double *v, const ref_attn_opts *o, const double *dout, double *dq, double *dk,
                      double *dv, double *dlogn_s) {
    call_t c;
    if (setup(&c, spec, shape, o)) {
        teardown(&c);
        return -1;
    }
    int T = c.T, S = c.S, D = c.D, grp = c.H / c.Hkv;
    bufs_t w;
    bufs_alloc(&w, S, D);
    memset(dq, 0, sizeof(double) * (size_t)c.B * c.H * T * D);
    memset(dk, 0, sizeof(double) * (size_t)c.B * c.Hkv * S * D);
    memset(dv, 0, sizeof(double) * (size_t)c.B * c.Hkv * S * D);
    if (dlogn_s) memset(dlogn_s, 0, sizeof(double) * (size_t)c.H);
    if (o && o->dsinks) memset(o->dsinks, 0, sizeof(double) * (size_t)c.H);
    const int sigm = spec->norm == LA_NORM_SIGMOID || spec->norm == LA_NORM_SIGMOID_LOGN;
    double *drk = calloc((size_t)S * D, sizeof(double)); /* d loss / d rotated key (S, D) */
    double *drq = calloc((size_t)D, sizeof(double));
    double *dl = calloc((size_t)S, sizeof(double));
    double scale = ref_yarn_mscale2(spec) / sqrt((double)D);
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < c.H; h++) {
            int hkv = h / grp;
            keys_of(&c, b, hkv, k, w.rk, w.kpos, w.kst);
            const double *vb = v + ((size_t)b * c.Hkv + hkv) * S * D;
            double *dvb = dv + ((size_t)b * c.Hkv + hkv) * S * D;
            memset(drk, 0, sizeof(double) * (size_t)S * D);
            for (int i = 0; i < T; i++) {
                size_t ri = ((size_t)b * c.H + h) * T + i;
                row_logits(&c, b, h, i, q + ri * D, w.rk, w.kpos, w.kst, &w.r);
                if (o && o->das_beta) o->das_beta[ri] = 0.0;
                if (o && o->das_gamma) o->das_gamma[ri] = 0.0;
                if (w.r.nq == 0) continue; /* empty row: zero gradients */
                const double *g = dout + ri * D;
                /* out = sum_j P_j v_j  ->  dv_j += P_j g ; dP_j = g . v_j */
                double gdot_out = 0.0;
                for (int j = 0; j < S; j++) {
                    double pj = w.r.P[j];
                    dl[j] = 0.0;
                    if (w.r.L[j] == -INFINITY) continue;
                    double dp = 0.0;
                    for (int d = 0; d < D; d++) {
                        dvb[(size_t)j * D + d] += pj * g[d];
                        dp += g[d] * vb[(size_t)j * D + d];
                    }
                    dl[j] = dp;
                    gdot_out += pj * dp;
                }
                /* the sink: a key of value 0, so dP_sink = 0 and dL_sink = p_sink (0 - gdot_out) */
                if (o && o->dsinks && spec->sink == LA_SINK_LEARNED) o->dsinks[h] -= w.r.psink * gdot_out;
                /* P = softmax(L) -> dL_j = P_j (dP_j - sum_k P_k dP_k);
                 * entmax: dL_j = u_j (dP_j - sum u dP / sum u), u = p^(2-alpha) on the support */
                double em_a = spec->norm == LA_NORM_SPARSEMAX ? 2.0 : spec->alpha, em_q = 0.0;
                if (spec->norm != LA_NORM_SOFTMAX && !sigm) {
                    double su = 0.0, sug = 0.0;
                    for (int j = 0; j < S; j++)
                        if (w.r.P[j] > 0.0) {
                            double u = pow(w.r.P[j], 2.0 - em_a);
                            su += u, sug += u * dl[j];
                        }
                    em_q = su > 0.0 ? sug / su : 0.0;
                }
                for (int d = 0; d < D; d++) drq[d] = 0.0;
                for (int j = 0; j < S; j++) {
                    if (w.r.L[j] == -INFINITY) continue;
                    double dL = sigm                            ? dl[j] * w.r.P[j] * (1.0 - w.r.P[j])
                                : spec->norm == LA_NORM_SOFTMAX ? w.r.P[j] * (dl[j] - gdot_out)
                                : w.r.P[j] > 0.0 ? pow(w.r.P[j], 2.0 - em_a) * (dl[j] - em_q) : 0.0;
                    /* L = mult * S + bias -> dS = dL mult ; d s_h += dL * dmds * S */
                    if (dlogn_s && spec->xform == LA_XF_LOGN) dlogn_s[h] += dL * w.r.dmds[j] * w.r.score[j];
                    double ds = dL * w.r.mult[j] * scale; /* S = scale * rq . rk */
                    for (int d = 0; d < D; d++) {
                        drq[d] += ds * w.rk[(size_t)j * D + d];
                        drk[(size_t)j * D + d] += ds * w.r.rq[d];
                    }
                }
                /* rq = R(p) q -> dq = R(p)^T drq = R(-p) drq */
                if (c.rot) rotate(drq, dq + ri * D, c.omega, D, (double)w.r.p, -1.0);
                else memcpy(dq + ri * D, drq, sizeof(double) * (size_t)D);
                if (w.r.as_on) { /* q_s = s q: dq = s dq_s, ds = q . dq_s */
                    double ds = 0.0, *g2 = dq + ri * D;
                    for (int d = 0; d < D; d++) ds += q[ri * D + d] * g2[d], g2[d] *= w.r.as_s;
                    double lp = pow(w.r.as_ln, o->as_gamma[ri]);
                    if (o->das_beta) o->das_beta[ri] = ds * lp;
                    if (o->das_gamma) o->das_gamma[ri] = ds * o->as_beta[ri] * lp * log(w.r.as_ln);
                }
            }
            double *dkb = dk + ((size_t)b * c.Hkv + hkv) * S * D;
            double tmp[1024];
            for (int j = 0; j < S; j++) {
                double *src = drk + (size_t)j * D;
                if (c.rot) {
                    rotate(src, tmp, c.omega, D, (double)w.kpos[j], -1.0);
                    src = tmp;
                }
                for (int d = 0; d < D; d++) dkb[(size_t)j * D + d] += src[d];
            }
        }
    free(drk);
    free(drq);
    free(dl);
    bufs_free(&w);
    teardown(&c);
    return 0;
}
