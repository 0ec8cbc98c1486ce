/* eval_loss.c -- validation loss at a context length T, overall and per position bucket,
 * on windows taken from inside documents at least T+1 tokens long (SPEC 8). One window at
 * a time (B = 1): memory is O(T) plus what the model needs for one window. The scorer is a
 * callback (la_token_loss_fn) because it differs per caller: the study's model forward,
 * kv-eval's KV-cache decoder, the tests' reference models. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "longattn/experiments.h"

/* The longest document's length in tokens (0 for none). */
int64_t la_docs_longest(const la_docs *docs) {
    int64_t best = 0;
    for (int d = 0; docs && d < docs->n_docs; d++) {
        int64_t len = docs->offset[d + 1] - docs->offset[d];
        if (len > best) best = len;
    }
    return best;
}

la_status la_eval_windows(const la_docs *docs, int T, int n, uint64_t seed, int64_t *start) {
    if (!docs || !start) return la_fail(LA_EINVAL, "la_eval_windows: NULL argument");
    if (T < 1 || n < 1)
        return la_fail(LA_EINVAL, "evaluation needs T >= 1 and at least one window (got T=%d, n=%d)", T, n);
    int n_elig = 0;
    for (int d = 0; d < docs->n_docs; d++)
        if (docs->offset[d + 1] - docs->offset[d] >= (int64_t)T + 1) n_elig++;
    if (n_elig == 0)
        return la_fail(LA_ESHAPE, "no validation document holds %d tokens (a window of %d plus its last "
                       "target); the longest has %lld: lower the evaluation length or add longer documents",
                       T + 1, T, (long long)la_docs_longest(docs));
    int *elig = la_malloc((size_t)n_elig * sizeof *elig);
    if (!elig) return la_fail(LA_ENOMEM, "la_eval_windows: out of memory");
    n_elig = 0;
    for (int d = 0; d < docs->n_docs; d++)
        if (docs->offset[d + 1] - docs->offset[d] >= (int64_t)T + 1) elig[n_elig++] = d;
    la_rng rng;
    la_rng_seed(&rng, seed ^ 0x6576616c5f77696eULL ^ (uint64_t)T); /* "eval_win" */
    for (int i = n_elig - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)la_rng_below(&rng, (uint64_t)i + 1);
        int t = elig[i];
        elig[i] = elig[j];
        elig[j] = t;
    }
    for (int w = 0; w < n; w++) {
        int d = elig[w % n_elig];
        int64_t len = docs->offset[d + 1] - docs->offset[d];
        start[w] = docs->offset[d] + (int64_t)la_rng_below(&rng, (uint64_t)(len - T)); /* 0..len-T-1 */
    }
    free(elig);
    return LA_OK;
}

la_status la_eval_loss(la_token_loss_fn fn, void *ctx, const la_docs *docs, int T, int span, int n,
                       uint64_t seed, int bucket, double *loss, double *bucket_loss,
                       int64_t *bucket_tokens) {
    if (!fn || !loss) return la_fail(LA_EINVAL, "la_eval_loss: NULL argument");
    if (bucket < 1) return la_fail(LA_EINVAL, "la_eval_loss: bucket must be >= 1 (got %d)", bucket);
    if (span == 0) span = T;
    if (T < 1 || span < T)
        return la_fail(LA_EINVAL, "la_eval_loss: need 1 <= T <= span (got T=%d, span=%d)", T, span);
    int64_t *start = la_malloc((size_t)(n > 0 ? n : 1) * sizeof *start);
    if (!start) return la_fail(LA_ENOMEM, "la_eval_loss: out of memory");
    la_status st = la_eval_windows(docs, span, n, seed, start);
    if (st != LA_OK) { free(start); return st; }
    const int chunks = span / T; /* windows of T cut from each span, back to back */
    int n_buckets = (T + bucket - 1) / bucket;
    int32_t *inputs = la_malloc((size_t)T * sizeof *inputs);  // (T)
    int32_t *targets = la_malloc((size_t)T * sizeof *targets); // (T)
    float *tok_loss = la_malloc((size_t)T * sizeof *tok_loss); // (T) nats
    double *bsum = la_calloc((size_t)n_buckets, sizeof *bsum);   // (n_buckets) nats
    int64_t *bcnt = la_calloc((size_t)n_buckets, sizeof *bcnt);  // (n_buckets)
    if (!inputs || !targets || !tok_loss || !bsum || !bcnt) {
        st = la_fail(LA_ENOMEM, "la_eval_loss: out of memory for T=%d", T);
        goto done;
    }
    double total = 0;
    int64_t count = 0;
    for (int w = 0; w < n && st == LA_OK; w++) {
        for (int c = 0; c < chunks && st == LA_OK; c++) {
            const int32_t *src = docs->tokens + start[w] + (int64_t)c * T;
            memcpy(inputs, src, (size_t)T * sizeof *inputs);
            memcpy(targets, src + 1, (size_t)T * sizeof *targets);
            st = fn(ctx, inputs, targets, T, tok_loss);
            for (int t = 0; st == LA_OK && t < T; t++) {
                if (!isfinite(tok_loss[t]))
                    st = la_fail(LA_ENUMERIC, "evaluation at length %d: loss at position %d of window %d is "
                                 "%g; the model diverged (lower the learning rate)", T, t, w, (double)tok_loss[t]);
                bsum[t / bucket] += tok_loss[t];
                bcnt[t / bucket]++;
                total += tok_loss[t];
                count++;
            }
        }
    }
    if (st == LA_OK) {
        const double bits = 1.0 / log(2.0);
        *loss = total / (double)count * bits;
        for (int b = 0; b < n_buckets; b++) {
            if (bucket_loss) bucket_loss[b] = bsum[b] / (double)bcnt[b] * bits;
            if (bucket_tokens) bucket_tokens[b] = bcnt[b];
        }
    }
done:
    free(start);
    free(inputs);
    free(targets);
    free(tok_loss);
    free(bsum);
    free(bcnt);
    return st;
}
