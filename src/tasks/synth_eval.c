/* synth_eval.c -- exact-match evaluation of a GPT model on the synthetic tasks
 * (ASEntmax paper's metric: the whole target must be right). An evaluation loop of the
 * experiments layer: it calls the model directly (one scorer), unlike la_eval_loss
 * (eval_loss.c), whose scorers differ and come in as a callback. */
#include <stdlib.h>

#include "core/internal.h"
#include "longattn/experiments.h"

la_status la_task_eval(la_model *m, const la_task_params *p, int content_len, int n,
                       uint64_t seed, int64_t max_batch_tokens, int *n_correct) {
    la_task_vocab voc;
    LA_TRY(la_task_get_vocab(p, &voc));
    if (!m || !n_correct) return la_fail(LA_EINVAL, "la_task_eval: model and n_correct must not be NULL");
    if (content_len < 1 || n < 1)
        return la_fail(LA_EINVAL, "la_task_eval: content_len=%d n=%d; both must be >= 1", content_len, n);
    const la_model_config *mc = la_model_get_config(m);
    if (mc->vocab < voc.vocab_size)
        return la_fail(LA_EINVAL, "la_task_eval: model vocabulary %d is smaller than task %s's %d",
                       mc->vocab, la_task_name(p->task), voc.vocab_size);
    int n_tok = 0;
    LA_TRY(la_task_tokens_at(p, content_len, &n_tok));
    const int T = n_tok - 1; /* every example at a fixed L has the same size */
    int64_t be = max_batch_tokens / T;
    if (be < 1) be = 1;
    if (be > n) be = n;
    const int B = (int)be;
    int32_t *in = la_malloc((size_t)B * T * sizeof *in);
    int32_t *tg = la_malloc((size_t)B * T * sizeof *tg);
    int32_t *am = la_malloc((size_t)B * T * sizeof *am);
    la_status s = LA_OK;
    if (!in || !tg || !am) s = la_fail(LA_ENOMEM, "la_task_eval: out of memory (%d x %d tokens)", B, T);
    int correct = 0;
    for (int i0 = 0; i0 < n && s == LA_OK; i0 += B) {
        int b = n - i0 < B ? n - i0 : B;
        s = la_task_batch(p, content_len, seed, (uint64_t)i0, b, T, in, tg, NULL);
        if (s == LA_OK) s = la_model_eval(m, in, NULL, b, T, NULL, NULL, am, NULL);
        for (int r = 0; r < b && s == LA_OK; r++)
            correct += la_task_exact_match(am + (size_t)r * T, tg + (size_t)r * T, T);
    }
    free(in);
    free(tg);
    free(am);
    if (s == LA_OK) *n_correct = correct;
    return s;
}
