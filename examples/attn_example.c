/* attn_example.c -- causal attention with scale-invariant logits and p-RoPE, forward and
 * backward, on grouped-query heads. Build: make (-> build/examples/attn_example). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "longattn.h"

int main(void) {
    enum { B = 1, H = 4, HKV = 2, T = 256, S = 256, D = 64 };
    la_spec spec;
    if (la_spec_parse("softmax+sinv(tau=10)+prope(p=0.5)+causal", &spec) != LA_OK) {
        fprintf(stderr, "bad spec: %s\n", la_errmsg());
        return 1;
    }
    la_shape shape = {B, H, HKV, T, S, D, LA_POS0_AUTO}; /* query i at position S - T + i */
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * HKV * S * D;
    float *q = malloc(nq * sizeof *q), *dout = malloc(nq * sizeof *dout);  /* (B, H, T, D) */
    float *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);        /* (B, Hkv, S, D) */
    float *out = malloc(nq * sizeof *out), *lse = malloc((size_t)B * H * T * sizeof *lse);
    float *dq = malloc(nq * sizeof *dq), *dk = malloc(nk * sizeof *dk), *dv = malloc(nk * sizeof *dv);
    for (size_t i = 0; i < nq; i++) q[i] = sinf(0.37f * (float)i), dout[i] = cosf(0.11f * (float)i);
    for (size_t i = 0; i < nk; i++) k[i] = cosf(0.23f * (float)i), v[i] = sinf(0.05f * (float)i);

    la_attn_opts opts = la_attn_opts_default();
    la_status st = la_workspace_create(&opts.ws); /* scratch reused across calls */
    if (st == LA_OK) st = la_attn_forward(&spec, &shape, q, k, v, out, lse, &opts);
    if (st == LA_OK) st = la_attn_backward(&spec, &shape, q, k, v, out, lse, dout, dq, dk, dv, &opts);
    if (st != LA_OK) {
        fprintf(stderr, "%s: %s\n", la_status_name(st), la_errmsg());
        return 1;
    }
    char canon[256];
    la_spec_format(&spec, canon, sizeof canon);
    printf("spec %s\n", canon);
    printf("out[0,0,T-1,0] = %.6f  lse[0,0,T-1] = %.6f  dk[0,0,0,0] = %.6f\n", out[(size_t)(T - 1) * D],
           lse[T - 1], dk[0]);
    la_workspace_free(opts.ws);
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
    return 0;
}
