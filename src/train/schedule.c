/* schedule.c -- learning-rate schedule: linear warm-up, then cosine decay to min_lr
 * (Loshchilov & Hutter 2017, without restarts). */
#include <math.h>

#include "longattn/train.h"

double la_train_lr_factor(const la_train_config *cfg, int step) {
    double floor_f = cfg->lr > 0 ? cfg->min_lr / cfg->lr : 0;
    if (cfg->warmup > 0 && step < cfg->warmup) return (double)(step + 1) / cfg->warmup;
    int decay = cfg->steps - cfg->warmup;
    if (decay <= 0) return 1.0;
    double x = (double)(step - cfg->warmup) / decay;
    if (x > 1) x = 1;
    if (x < 0) x = 0;
    return floor_f + (1 - floor_f) * 0.5 * (1 + cos(M_PI * x));
}
