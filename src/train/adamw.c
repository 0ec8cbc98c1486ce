/* adamw.c -- AdamW with decoupled weight decay (Loshchilov & Hutter 2019, Algorithm 2). */
#include <math.h>

#include "train/optim.h"

void la_adamw_update(float *p, const float *g, float *m, float *v, size_t n, double lr, double b1,
                  double b2, double eps, double wd, long t) {
    float bc1 = (float)(1.0 - pow(b1, (double)t)), bc2 = (float)(1.0 - pow(b2, (double)t));
    float fb1 = (float)b1, fb2 = (float)b2, flr = (float)lr, feps = (float)eps, fwd = (float)wd;
#pragma omp parallel for schedule(static) if (n >= (1u << 20))
    for (size_t i = 0; i < n; i++) {
        m[i] = fb1 * m[i] + (1 - fb1) * g[i];
        v[i] = fb2 * v[i] + (1 - fb2) * g[i] * g[i];
        float mh = m[i] / bc1, vh = v[i] / bc2;
        p[i] -= flr * (mh / (sqrtf(vh) + feps) + fwd * p[i]);
    }
}
