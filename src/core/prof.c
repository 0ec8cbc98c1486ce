/* prof.c -- the phase table of the training step's profile build (core/prof.h). */
#include "core/prof.h"

#ifdef LA_PROFILE
double la_prof_s[LA_PROF_N], la_prof_cpu[LA_PROF_N];
double la_prof_last, la_prof_last_cpu;
const char *const la_prof_names[LA_PROF_N] = {
    "other (checks, copies of tokens, loop overhead)",
    "matrix products (sgemm)",
    "attention kernel (forward, backward)",
    "embedding (forward, backward)",
    "RMSNorm (forward, backward)",
    "residual copies, dres clear",
    "QK-norm + permutation (forward, backward)",
    "permutations of v, y, dy, dv",
    "ReLU^2 (forward, backward)",
    "cross-entropy (forward, backward)",
    "zero gradients",
    "gradient average, norm, clip",
    "optimizer update (AdamW)",
};
#else
typedef int la_prof_unused; /* ISO C: a translation unit is not empty */
#endif
