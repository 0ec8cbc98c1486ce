/* adamw.c -- AdamW with decoupled weight decay (Loshchilov & Hutter 2019, Algorithm 2). */
#include <math.h>

#include "train/optim.h"

la_adamw_k la_adamw_consts(double lr, double b1, double b2, double eps, long t) {
    la_adamw_k k = {(float)b1, (float)b2, (float)lr, (float)eps, (float)(1.0 - pow(b1, (double)t)),
                    (float)(1.0 - pow(b2, (double)t))};
    return k;
}

void la_adamw_update(float *p, const float *g, float *m, float *v, size_t n, double lr, double b1,
                  double b2, double eps, double wd, long t) {
    la_adamw_k k = la_adamw_consts(lr, b1, b2, eps, t);
    float fwd = (float)wd;
#pragma omp parallel for schedule(static) if (n >= (1u << 17))
    for (size_t i = 0; i < n; i++) la_adamw_elem(p + i, g[i], m + i, v + i, &k, fwd);
}
