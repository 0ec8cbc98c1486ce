/* posreg.h -- attention with several relative-position regimes per query row (model layer,
 * src/model/posreg.c): SelfExtend, ReRoPE / Leaky ReRoPE, Dual Chunk Attention. Internal. */
#ifndef LA_MODEL_POSREG_H
#define LA_MODEL_POSREG_H

#include "longattn/model.h"

typedef enum { LA_PR_NONE = 0, LA_PR_SELFEXTEND, LA_PR_REROPE, LA_PR_LEAKY, LA_PR_DCA } la_pr_kind;

typedef struct la_posreg {
    la_pr_kind kind;
    int64_t G, W, k;      /* SelfExtend group G, neighbour window W; ReRoPE window W; Leaky slope 1/k */
    int64_t chunk, local; /* DCA chunk size and local window (chunk length s = chunk - local) */
    double theta;         /* RoPE base (the model's) */
    char text[96];
    /* scratch, grown as needed and reused */
    la_spec causal, full, window;
    float *qr, *kr, *ob, *lse;   /* (G, T, D), (S, D), (G, T, D), (G, T) */
    double *lacc;                /* (G, T) running log-sum-exp */
    float *cs;                   /* (n_units, D) cos | sin of position u / den */
    int64_t cs_n, cap_qT, cap_S;
    int den;
    la_workspace *ws;
} la_posreg;

/* Parse "selfextend(G,W)", "rerope(W)", "leaky-rerope(W,k)", "dca(chunk,local)" into r
 * (theta: the model's RoPE base). Returns 0 and leaves r untouched when text names none
 * of them; 1 when parsed; -1 (with la_fail set) for a bad argument. */
int la_posreg_parse(const char *text, double theta, la_posreg *r);
void la_posreg_release(la_posreg *r);

/* One kv head: q (G, T, D) un-rotated queries at positions S - T .. S - 1, k, v (S, D)
 * un-rotated keys and values at 0 .. S - 1; out (G, T, D). Every regime is one call of the
 * fused kernel (positions applied here, "nope" in the kernel) and the partial results are
 * merged row by row by their log-sum-exp (SPEC 10's merge). */
la_status la_posreg_attend(la_posreg *r, int G, int T, int S, int D, const float *q, const float *k, const float *v,
                           float *out, int n_threads);

#endif
