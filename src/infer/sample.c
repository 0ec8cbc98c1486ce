/* sample.c -- next-token sampling from logits: greedy (temperature 0), temperature,
 * top-k (Fan et al. 2018) and nucleus / top-p (Holtzman et al. 2020). Deterministic given
 * the uniform number u the caller draws (la_rng in the CLI), so a seed fixes a generation. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/kv_internal.h"
#include "longattn/infer.h"

la_sample_params la_sample_params_default(void) {
    return (la_sample_params){.temperature = 1.0, .top_k = 0, .top_p = 1.0};
}

size_t la_sample_scratch_bytes(int V) { return V > 0 ? (size_t)V * (sizeof(float) + sizeof(int32_t)) : 0; }

static int cmp_logit_desc(const void *a, const void *b, void *ctx) {
    const float *z = ctx;
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    if (z[i] != z[j]) return z[i] > z[j] ? -1 : 1;
    return i < j ? -1 : 1; /* ties: lower id first (deterministic) */
}

la_status la_sample_check(const la_sample_params *sp, const char *who) {
    if (!(sp->temperature >= 0) || !isfinite(sp->temperature))
        return la_fail(LA_EINVAL, "%s: temperature = %g, must be finite and >= 0 (0 = greedy)", who, sp->temperature);
    if (sp->top_k < 0) return la_fail(LA_EINVAL, "%s: top_k = %d, must be >= 0 (0 = off)", who, sp->top_k);
    if (!(sp->top_p > 0 && sp->top_p <= 1))
        return la_fail(LA_EINVAL, "%s: top_p = %g, must be in (0, 1] (1 = off)", who, sp->top_p);
    return LA_OK;
}

la_status la_sample_token(const float *logits, int V, const la_sample_params *sp, double u, void *scratch,
                          int32_t *token) {
    if (!logits || !sp || !token || (!scratch && sp->temperature != 0))
        return la_fail(LA_EINVAL, "la_sample_token: NULL logits, params, token or scratch");
    if (V < 1) return la_fail(LA_ESHAPE, "la_sample_token: V = %d, must be >= 1", V);
    LA_TRY(la_sample_check(sp, "la_sample_token"));
    if (!(u >= 0 && u < 1)) return la_fail(LA_EINVAL, "la_sample_token: u = %g, must be in [0, 1)", u);
    for (int i = 0; i < V; i++)
        if (isnan(logits[i]) || logits[i] == INFINITY)
            return la_fail(LA_ENUMERIC, "la_sample_token: logit %d is %g; logits must be finite or -inf", i, logits[i]);
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (logits[best] == -INFINITY) return la_fail(LA_ENUMERIC, "la_sample_token: every logit is -inf");
    if (sp->temperature == 0 || sp->top_k == 1) {
        *token = best;
        return LA_OK;
    }
    float *prob = scratch;
    int32_t *idx = (int32_t *)(prob + V);
    for (int i = 0; i < V; i++) idx[i] = i;
    qsort_r(idx, (size_t)V, sizeof *idx, cmp_logit_desc, (void *)logits);
    int n = (sp->top_k > 0 && sp->top_k < V) ? sp->top_k : V;
    /* softmax of logits / temperature over the n best, in double */
    const double zmax = logits[idx[0]];
    double total = 0;
    for (int r = 0; r < n; r++) {
        double e = exp(((double)logits[idx[r]] - zmax) / sp->temperature);
        prob[r] = (float)e;
        total += e;
    }
    /* nucleus: the smallest prefix whose mass reaches top_p (at least one token) */
    if (sp->top_p < 1) {
        double cum = 0;
        int keep = n;
        for (int r = 0; r < n; r++) {
            cum += prob[r] / total;
            if (cum >= sp->top_p) {
                keep = r + 1;
                break;
            }
        }
        n = keep;
        total = 0;
        for (int r = 0; r < n; r++) total += prob[r];
    }
    double target = u * total, cum = 0;
    for (int r = 0; r < n; r++) {
        cum += prob[r];
        if (target < cum) {
            *token = idx[r];
            return LA_OK;
        }
    }
    *token = idx[n - 1]; /* u*total rounded up to the total */
    return LA_OK;
}
