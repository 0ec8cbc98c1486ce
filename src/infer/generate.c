/* generate.c -- one generation loop and one perplexity loop over a decoding session
 * (issue 32), for every model family: `longattn generate` (byte-level checkpoints and GGUF
 * models) and `longattn perplexity` call these; the CLI only prints. */
#include <math.h>
#include <stdlib.h>

#include "infer/kv_internal.h"
#include "longattn/infer.h"

la_generate_params la_generate_params_default(void) {
    return (la_generate_params){.sample = la_sample_params_default(), .max_new = 256, .seed = 1};
}

static int is_stop(const la_generate_params *gp, int32_t t) {
    for (int i = 0; i < gp->n_stop; i++)
        if (gp->stop[i] == t) return 1;
    return 0;
}

/* every id in [0, V): checked before a session is touched (a bad id in a later chunk
 * would fail only after the earlier chunks were appended) */
static la_status check_ids(const char *who, const int32_t *ids, int64_t n, int V) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return la_fail(LA_EINVAL, "%s: token %d at index %lld is outside the model's vocabulary [0, %d)", who,
                           ids[i], (long long)i, V);
    return LA_OK;
}

la_status la_generate(la_session *s, const int32_t *prompt, int64_t n_prompt, const la_generate_params *gp,
                      la_generate_result *res) {
    if (!s || !prompt || !gp) return la_fail(LA_EINVAL, "la_generate: NULL session, prompt or params");
    const int max_step = la_session_max_step(s), V = la_lm_vocab(la_session_lm(s));
    if (n_prompt < 1) return la_fail(LA_EINVAL, "la_generate: n_prompt = %lld, must be >= 1", (long long)n_prompt);
    if (gp->max_new < 0) return la_fail(LA_EINVAL, "la_generate: max_new = %lld, must be >= 0", (long long)gp->max_new);
    if (gp->prefill_chunk < 0 || gp->prefill_chunk > max_step)
        return la_fail(LA_EINVAL, "la_generate: prefill_chunk = %d, must be in [0, %d] (the session's max_step; 0: "
                       "max_step)", gp->prefill_chunk, max_step);
    if (gp->n_stop > 0 && !gp->stop)
        return la_fail(LA_EINVAL, "la_generate: n_stop = %d but stop is NULL; give the stop tokens or n_stop = 0",
                       gp->n_stop);
    LA_TRY(la_sample_check(&gp->sample, "la_generate"));
    LA_TRY(check_ids("la_generate", prompt, n_prompt, V));
    const la_kv_params *kp = la_kv_get_params(la_session_cache(s));
    if (kp->policy == LA_KV_FULL && la_session_pos(s) + n_prompt > kp->max_tokens) /* before a chunk is appended */
        return la_fail(LA_EINVAL, "la_generate: the prompt's %lld tokens do not fit in the full KV cache (%lld of "
                       "its %lld held); use a larger cache (max_tokens) or an evicting policy", (long long)n_prompt,
                       (long long)la_session_pos(s), (long long)kp->max_tokens);
    const int chunk = gp->prefill_chunk ? gp->prefill_chunk : max_step;
    la_generate_result r = {0};
    float *logits = la_malloc(sizeof(float) * (size_t)V); // (V) the last row
    void *scratch = la_malloc(la_sample_scratch_bytes(V));
    la_status st = logits && scratch ? LA_OK : la_fail(LA_ENOMEM, "la_generate: out of memory");
    double t0 = la_now_s(), t1 = t0;
    for (int64_t i = 0; st == LA_OK && i < n_prompt; i += chunk)
        st = la_session_step(s, prompt + i, (int)(n_prompt - i < chunk ? n_prompt - i : chunk), logits, 0);
    t1 = la_now_s();
    la_rng rng;
    la_rng_seed(&rng, gp->seed);
    for (; st == LA_OK && r.n_new < gp->max_new; r.n_new++) {
        int32_t t;
        if ((st = la_sample_token(logits, V, &gp->sample, la_rng_uniform(&rng), scratch, &t)) != LA_OK) break;
        if (is_stop(gp, t)) {
            r.stopped = 1;
            break;
        }
        if (gp->on_token && (st = gp->on_token(gp->user, t)) != LA_OK) break;
        if (r.n_new + 1 < gp->max_new) st = la_session_step(s, &t, 1, logits, 0);
    }
    r.prefill_s = t1 - t0;
    r.decode_s = la_now_s() - t1;
    if (res) *res = r;
    free(logits);
    free(scratch);
    return st;
}

la_perplexity_params la_perplexity_params_default(void) {
    return (la_perplexity_params){0};
}

/* logits (T, V) of window rows i .. i+T-1 -> the NLL of each next token into res */
static void score_rows(const float *logits, int T, int V, const int32_t *x, int64_t i, int64_t ctx, const int *tb,
                       la_perplexity_result *res) {
    for (int r = 0; r < T; r++) {
        int64_t p = i + r; /* predicts x[p + 1] at window position p + 1 */
        if (p + 1 >= ctx) break;
        const float *lg = logits + (size_t)r * V;
        float mx = lg[0];
        for (int v = 1; v < V; v++) mx = lg[v] > mx ? lg[v] : mx;
        double se = 0;
        for (int v = 0; v < V; v++) se += exp((double)lg[v] - mx);
        double nll = log(se) + mx - lg[x[p + 1]];
        int b = 0;
        while ((2LL << b) <= p + 1 && b < LA_PPL_BUCKETS - 1) b++;
        res->bucket_nll[b] += nll;
        res->bucket_bytes[b] += tb ? tb[x[p + 1]] : 1;
        res->bucket_n[b]++;
    }
}

la_status la_perplexity(la_session *s, const int32_t *ids, int64_t n, const la_perplexity_params *pp,
                        la_perplexity_result *res) {
    if (!s || !ids || !pp || !res) return la_fail(LA_EINVAL, "la_perplexity: NULL session, ids, params or result");
    *res = (la_perplexity_result){0};
    const int max_step = la_session_max_step(s), V = la_lm_vocab(la_session_lm(s));
    const int64_t ctx = pp->ctx;
    if (ctx < 2 || n < ctx)
        return la_fail(LA_EINVAL, "la_perplexity: %lld tokens and a window of ctx = %lld: ctx must be >= 2 and "
                       "the text at least one window long", (long long)n, (long long)ctx);
    if (pp->chunk < 0 || pp->chunk > max_step)
        return la_fail(LA_EINVAL, "la_perplexity: chunk = %d must be in [0, %d] (the session's max_step)", pp->chunk,
                       max_step);
    if (pp->max_windows < 0)
        return la_fail(LA_EINVAL, "la_perplexity: max_windows = %lld, must be >= 0 (0: every window)",
                       (long long)pp->max_windows);
    LA_TRY(check_ids("la_perplexity", ids, n, V));
    for (int v = 0; pp->token_bytes && v < V; v++)
        if (pp->token_bytes[v] < 0)
            return la_fail(LA_EINVAL, "la_perplexity: token_bytes[%d] = %d, must be >= 0", v, pp->token_bytes[v]);
    const int chunk = pp->chunk ? pp->chunk : max_step;
    float *logits = la_malloc(sizeof(float) * (size_t)chunk * V); // (chunk, V)
    if (!logits) return la_fail(LA_ENOMEM, "la_perplexity: out of memory for the logits of %d tokens", chunk);
    int64_t n_win = n / ctx;
    if (pp->max_windows && n_win > pp->max_windows) n_win = pp->max_windows;
    la_status st = LA_OK;
    double t0 = la_now_s();
    for (int64_t w = 0; st == LA_OK && w < n_win; w++) {
        la_session_reset(s);
        const int32_t *x = ids + w * ctx;
        for (int64_t i = 0; st == LA_OK && i < ctx; i += chunk) {
            int T = (int)(ctx - i < chunk ? ctx - i : chunk);
            if ((st = la_session_step(s, x + i, T, logits, 1)) == LA_OK)
                score_rows(logits, T, V, x, i, ctx, pp->token_bytes, res);
        }
        if (st != LA_OK) break;
        res->windows = w + 1; /* scored in full (tokens and nll count a window cut short too) */
        if (pp->progress) pp->progress(pp->user, w + 1, n_win);
    }
    res->seconds = la_now_s() - t0;
    for (int b = 0; b < LA_PPL_BUCKETS; b++)
        res->nll += res->bucket_nll[b], res->bytes += res->bucket_bytes[b], res->tokens += res->bucket_n[b];
    free(logits);
    return st;
}
