/* optim.h -- optimiser steps on flat parameter arrays (internal). */
#ifndef LA_TRAIN_OPTIM_H
#define LA_TRAIN_OPTIM_H

#include <math.h>
#include <stddef.h>

/* AdamW (Loshchilov & Hutter 2019) on n entries, step t >= 1 (bias correction):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   p -= lr * (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd * p) */
void la_adamw_update(float *p, const float *g, float *m, float *v, size_t n, double lr, double b1,
                  double b2, double eps, double wd, long t);

/* The same update as float constants, for the trainer's one fused pass over all tensors:
 * la_adamw_consts once per step, then la_adamw_elem per entry (la_adamw_update is exactly
 * this, so both give the same bits). */
typedef struct { float b1, b2, lr, eps, bc1, bc2; } la_adamw_k;
la_adamw_k la_adamw_consts(double lr, double b1, double b2, double eps, long t);
static inline void la_adamw_elem(float *p, float g, float *m, float *v, const la_adamw_k *k, float wd) {
    *m = k->b1 * *m + (1 - k->b1) * g;
    *v = k->b2 * *v + (1 - k->b2) * g * g;
    float mh = *m / k->bc1, vh = *v / k->bc2;
    *p -= k->lr * (mh / (sqrtf(vh) + k->eps) + wd * *p);
}

/* Muon (K. Jordan 2024) on one (rows, cols) matrix:
 *   mom = mu mom + g;  u = g + mu mom (Nesterov)
 *   O = NewtonSchulz5(u)  (quintic iteration, (a,b,c) = (3.4445, -4.7750, 2.0315), on the
 *                           wide orientation, after dividing by the Frobenius norm)
 *   p = p (1 - lr wd) - lr sqrt(max(1, rows/cols)) O
 * scratch: at least 3*rows*cols + 2*min(rows,cols)^2 floats. */
void la_muon_update(float *p, const float *g, float *mom, int rows, int cols, double lr, double mu,
                 double wd, float *scratch);

/* The Newton-Schulz part alone: X (rows, cols) -> orthogonalised in place.
 * scratch: 2*rows*cols + 2*min(rows,cols)^2 floats. */
void la_muon_newton_schulz5(float *X, int rows, int cols, float *scratch);

#endif
