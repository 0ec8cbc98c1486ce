/* prof.h -- the training step's profile build (docs/benchmarks.md: "Where the trainer's
 * time goes"). Compiled with -DLA_PROFILE, LA_PROF_LAP(phase) adds the wall time since the
 * previous lap to la_prof_s[phase] and the process's CPU time (every thread's) to
 * la_prof_cpu[phase], which a busy shared machine distorts much less; laps are taken on the calling thread between calls
 * (never inside a parallel region), so the phases partition the step. The default build
 * compiles them away. */
#ifndef LA_CORE_PROF_H
#define LA_CORE_PROF_H

enum {
    LA_PROF_OTHER,      /* argument checks, token copies, loops between the phases */
    LA_PROF_MATMUL,     /* la_mm_forward / la_mm_backward (sgemm) */
    LA_PROF_ATTN,       /* la_attn_forward / la_attn_backward (the fused kernel) */
    LA_PROF_EMBED,      /* embedding lookup and its backward */
    LA_PROF_NORM,       /* RMSNorm forward / backward (block and final) */
    LA_PROF_RESID,      /* residual-stream copies and the dres clear */
    LA_PROF_QKNORM,     /* QK-norm forward / backward with the layout permutation */
    LA_PROF_PERMUTE,    /* v, y, dy, dv permutations (B,T,H,D) <-> (B,H,T,D) */
    LA_PROF_ACT,        /* ReLU^2 forward / backward */
    LA_PROF_XENT,       /* softmax cross-entropy forward / backward */
    LA_PROF_ZERO,       /* zeroing the gradients */
    LA_PROF_GNORM,      /* gradient average, norm and clipping */
    LA_PROF_OPTIM,      /* AdamW / Muon updates */
    LA_PROF_N
};

#ifdef LA_PROFILE
#include <omp.h>
#include <time.h>
extern double la_prof_s[LA_PROF_N];   /* wall seconds */
extern double la_prof_cpu[LA_PROF_N]; /* CPU seconds of the whole process (all threads) */
extern double la_prof_last, la_prof_last_cpu;
extern const char *const la_prof_names[LA_PROF_N];
static inline double la_prof_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
#define LA_PROF_START() (la_prof_last = omp_get_wtime(), la_prof_last_cpu = la_prof_cpu_now())
#define LA_PROF_LAP(ph)                                \
    do {                                               \
        double now_ = omp_get_wtime();                 \
        double cpu_ = la_prof_cpu_now();               \
        la_prof_s[ph] += now_ - la_prof_last;          \
        la_prof_cpu[ph] += cpu_ - la_prof_last_cpu;    \
        la_prof_last = now_;                           \
        la_prof_last_cpu = cpu_;                       \
    } while (0)
#else
#define LA_PROF_START() ((void)0)
#define LA_PROF_LAP(ph) ((void)0)
#endif

#endif
