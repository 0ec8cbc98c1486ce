/* longeval.c -- long-context evaluation of a pretrained Llama-family model (issue #15):
 * the tasks (token stream, passkey and RULER multi-key examples), one cell's evaluation
 * (perplexity by position, retrieval by exact match) through the decoding session.
 * The runner (files, resume, report) is in longeval_run.c. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "tasks/longeval_internal.h"

/* ---- examples ---- */

static const char PK_Q[] = "\nWhat is the pass key? The pass key is";
static const char *const WORDS[] = {"apple",  "river",  "copper", "falcon", "garden", "harbor", "island", "jacket",
                                    "lantern", "meadow", "nickel", "orchid", "pepper", "quartz", "saddle", "tunnel",
                                    "velvet", "walnut", "yellow", "zephyr", "anchor", "bishop", "candle", "dragon"};
#define N_WORDS ((int)(sizeof WORDS / sizeof WORDS[0]))

static la_status encode(la_tokenizer *tok, const char *text, la_token_buf *b) {
    b->n = 0;
    return la_tokenizer_encode(tok, text, strlen(text), 0, b);
}

int la_longeval_match(const char *cont, const char *answer) {
    if (!cont || !answer || !*answer) return 0;
    while (*cont == ' ' || *cont == '\n' || *cont == '\t') cont++;
    size_t n = strlen(answer);
    if (strncmp(cont, answer, n)) return 0;
    return !(cont[n] >= '0' && cont[n] <= '9');
}

la_status la_longeval_example(la_tokenizer *tok, const int32_t *stream, int64_t n_stream, int kind, int64_t L,
                              double depth, int distractors, uint64_t seed, int32_t *tokens, char answer[16],
                              int64_t *needle_at) {
    if (!tok || !stream || n_stream < 1 || !tokens || !answer || !needle_at)
        return la_fail(LA_EINVAL, "la_longeval_example: NULL argument or empty stream");
    if (!(depth >= 0 && depth <= 1)) return la_fail(LA_EINVAL, "needle depth %g is outside [0, 1]", depth);
    if (kind == 1 && (distractors < 0 || distractors >= N_WORDS))
        return la_fail(LA_EINVAL, "multi-key distractors = %d must lie in [0, %d]", distractors, N_WORDS - 1);
    la_rng r;
    la_rng_seed(&r, seed ^ (kind ? 0x6d756c74694bULL : 0x706b6579ULL));
    int nn = kind ? distractors + 1 : 1; /* needles; needle 0 is the asked one */
    char text[320];
    la_token_buf nb[LA_LONGEVAL_MAX] = {{0}}, q = {0};
    int words[LA_LONGEVAL_MAX];
    long nums[LA_LONGEVAL_MAX];
    la_status st = LA_OK;
    int64_t need = 0;
    for (int i = 0; i < nn && st == LA_OK; i++) {
        int again;
        do { /* distinct words and numbers: a distractor never repeats the asked key */
            again = 0;
            words[i] = (int)la_rng_below(&r, N_WORDS);
            nums[i] = kind ? 1000000 + (long)la_rng_below(&r, 9000000) : 10000 + (long)la_rng_below(&r, 90000);
            for (int j = 0; j < i; j++)
                if (words[j] == words[i] || nums[j] == nums[i]) again = 1;
        } while (again);
        if (kind) snprintf(text, sizeof text, " One of the special magic numbers for %s is: %ld.", WORDS[words[i]], nums[i]);
        else snprintf(text, sizeof text, " The pass key is %ld. Remember it. %ld is the pass key.", nums[i], nums[i]);
        st = encode(tok, text, &nb[i]);
        need += nb[i].n;
    }
    if (st == LA_OK) {
        if (kind)
            snprintf(text, sizeof text, "\nWhat is the special magic number for %s mentioned in the provided text? "
                     "The special magic number for %s mentioned in the provided text is", WORDS[words[0]], WORDS[words[0]]);
        else snprintf(text, sizeof text, "%s", PK_Q);
        st = encode(tok, text, &q);
        need += q.n;
    }
    if (st == LA_OK && L < need + 1)
        st = la_fail(LA_ESHAPE, "example length %lld is too short: the needles and the question take %lld tokens",
                     (long long)L, (long long)need);
    if (st == LA_OK) {
        int64_t H = L - need; /* haystack tokens */
        /* insertion points in haystack coordinates: the asked needle at depth, others seeded */
        int64_t at[LA_LONGEVAL_MAX];
        at[0] = (int64_t)floor(depth * (double)H);
        for (int i = 1; i < nn; i++) at[i] = (int64_t)la_rng_below(&r, (uint64_t)H + 1);
        int order[LA_LONGEVAL_MAX];
        for (int i = 0; i < nn; i++) order[i] = i;
        for (int i = 1; i < nn; i++) /* insertion sort by point, the asked needle first on ties */
            for (int j = i; j > 0 && (at[order[j]] < at[order[j - 1]] ||
                                       (at[order[j]] == at[order[j - 1]] && order[j] < order[j - 1])); j--) {
                int t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
        int64_t off = (int64_t)la_rng_below(&r, (uint64_t)n_stream), h = 0, w = 0;
        for (int k = 0; k <= nn; k++) {
            int64_t upto = k < nn ? at[order[k]] : H;
            for (; h < upto; h++) tokens[w++] = stream[(off + h) % n_stream];
            if (k < nn) {
                if (order[k] == 0) *needle_at = w;
                memcpy(tokens + w, nb[order[k]].ids, sizeof(int32_t) * (size_t)nb[order[k]].n);
                w += nb[order[k]].n;
            }
        }
        memcpy(tokens + w, q.ids, sizeof(int32_t) * (size_t)q.n);
        w += q.n;
        assert(w == L);
        snprintf(answer, 16, "%ld", nums[0]);
    }
    for (int i = 0; i < nn; i++) la_token_buf_free(&nb[i]);
    la_token_buf_free(&q);
    return st;
}

/* ---- the token stream ---- */

la_status le_stream_build(la_tokenizer *tok, const char *dir, int64_t need, uint64_t seed, le_stream *s) {
    memset(s, 0, sizeof *s);
    la_docs d;
    LA_TRY(la_docs_load(dir, &d));
    la_status st = LA_OK;
    if (!d.is_bytes) st = la_fail(LA_EINVAL, "longeval needs text documents in '%s' (token shards found)", dir);
    la_token_buf b = {0};
    int64_t bytes = 0;
    int first = (int)(seed % (uint64_t)d.n_docs), used = 0;
    char *text = NULL;
    for (int k = 0; st == LA_OK && b.n < need && used < 4 * d.n_docs + 4; k++, used++) {
        int di = (first + k) % d.n_docs;
        int64_t len = d.offset[di + 1] - d.offset[di];
        char *t2 = la_realloc(text, (size_t)len + 3);
        if (!t2) { st = la_fail(LA_ENOMEM, "longeval: out of memory reading documents"); break; }
        text = t2;
        for (int64_t i = 0; i < len; i++) text[i] = (char)d.tokens[d.offset[di] + i];
        text[len] = '\n';
        text[len + 1] = '\n';
        text[len + 2] = '\0';
        st = la_tokenizer_encode(tok, text, (size_t)len + 2, 0, &b);
        bytes += len + 2;
        s->n_docs_used++;
    }
    free(text);
    if (st == LA_OK && b.n < 2) st = la_fail(LA_EINVAL, "longeval: the documents in '%s' give no tokens", dir);
    if (st == LA_OK) {
        s->tokens = b.ids;
        s->n = b.n;
        s->text_bytes = bytes;
        s->bytes = la_malloc(sizeof(int32_t) * (size_t)b.n);
        if (!s->bytes) st = la_fail(LA_ENOMEM, "longeval: out of memory");
        for (int64_t i = 0; st == LA_OK && i < b.n; i++) {
            const char *tt = NULL;
            char *dec = NULL;
            size_t dl = 0;
            (void)tt;
            st = la_tokenizer_decode(tok, &b.ids[i], 1, 0, &dec, &dl);
            s->bytes[i] = (int32_t)dl;
            free(dec);
        }
    } else {
        la_token_buf_free(&b);
    }
    la_docs_free(&d);
    if (st != LA_OK) le_stream_free(s);
    return st;
}

void le_stream_free(le_stream *s) {
    free(s->tokens);
    free(s->bytes);
    memset(s, 0, sizeof *s);
}

/* ---- one cell ---- */

/* Replace {s}, {C}, {L} and {g} in a method text. {g} = 1/ln C: the critical scale's
 * gamma that makes critical(gamma)'s logit factor gamma*ln(n_q) equal 1 at n_q = C, which a
 * model trained without the scaling needs (Chen et al. 2025 give the order, log n, not the
 * constant; with it the factor is Qwen's logn log(n)/log(C), without Qwen's floor of 1). */
static void expand(const char *in, double s, int64_t C, int64_t L, char *out, size_t n) {
    size_t w = 0;
    for (const char *p = in; *p && w + 1 < n;) {
        char num[40] = "";
        if (!strncmp(p, "{s}", 3)) snprintf(num, sizeof num, "%.17g", s), p += 3;
        else if (!strncmp(p, "{g}", 3)) snprintf(num, sizeof num, "%.17g", 1.0 / log((double)C)), p += 3;
        else if (!strncmp(p, "{C}", 3)) snprintf(num, sizeof num, "%lld", (long long)C), p += 3;
        else if (!strncmp(p, "{L}", 3)) snprintf(num, sizeof num, "%lld", (long long)L), p += 3;
        else {
            out[w++] = *p++;
            continue;
        }
        for (char *q = num; *q && w + 1 < n; q++) out[w++] = *q;
    }
    out[w] = '\0';
}

la_status le_method_parse(la_llama *m, const char *text, int64_t C, int64_t L, la_spec *spec, la_kv_params *kv,
                          int *has_kv) {
    char buf[512], sp[512];
    double s = (double)L / (double)C;
    if (s < 1) s = 1;
    expand(text, s, C, L, buf, sizeof buf);
    char *bar = strchr(buf, '|');
    *has_kv = 0;
    *kv = la_kv_params_default();
    LA_TRY(la_llama_kv_params(m, kv));
    kv->policy = LA_KV_FULL;
    if (bar) {
        *bar = '\0';
        LA_TRY(la_kv_policy_parse(bar + 1, kv));
        *has_kv = 1;
    }
    /* trim, and the alias */
    char *b = buf, *e = buf + strlen(buf);
    while (*b == ' ') b++;
    while (e > b && e[-1] == ' ') *--e = '\0';
    snprintf(sp, sizeof sp, "%s", (!*b || !strcmp(b, "as-trained")) ? "softmax+rope+causal" : b);
    la_status st = la_llama_spec_parse(m, sp, spec);
    if (st != LA_OK) return la_fail(st, "method '%s': %s", text, la_errmsg());
    return LA_OK;
}

static double logsumexp_nll(const float *row, int V, int32_t target) {
    float mx = row[0];
    for (int v = 1; v < V; v++)
        if (row[v] > mx) mx = row[v];
    double z = 0;
    for (int v = 0; v < V; v++) z += exp((double)row[v] - mx);
    return log(z) + mx - row[target];
}

static int argmax(const float *row, int V) {
    int b = 0;
    for (int v = 1; v < V; v++)
        if (row[v] > row[b]) b = v;
    return b;
}

/* Prefill tokens[0..L) through the session; if nll_tok is given, the NLL (nats) of every
 * next token (L-1 values) is written there; last (V) receives the last row's logits. */
static la_status prefill(le_ctx *c, const int32_t *tokens, int64_t L, double *nll_tok, float *last) {
    la_llama_session_reset(c->sess);
    int V = c->V;
    for (int64_t p = 0; p < L;) {
        int T = (int)(L - p < c->step ? L - p : c->step);
        int all = nll_tok != NULL;
        LA_TRY(la_llama_session_step(c->sess, tokens + p, T, c->logits, all));
        if (all) {
            for (int i = 0; i < T; i++)
                if (p + i + 1 < L) nll_tok[p + i] = logsumexp_nll(c->logits + (size_t)i * V, V, tokens[p + i + 1]);
            if (p + T == L) memcpy(last, c->logits + (size_t)(T - 1) * V, sizeof(float) * (size_t)V);
        } else if (p + T == L) {
            memcpy(last, c->logits, sizeof(float) * (size_t)V);
        }
        p += T;
    }
    return LA_OK;
}

/* Greedy continuation of at most n tokens after the prefill; returns the decoded text. */
static la_status greedy(le_ctx *c, float *last, int n, char **text) {
    int32_t out[16];
    int k = 0;
    for (; k < n; k++) {
        out[k] = argmax(last, c->V);
        if (k + 1 < n) LA_TRY(la_llama_session_step(c->sess, &out[k], 1, last, 0));
    }
    return la_tokenizer_decode(c->tok, out, k, LA_TOK_SKIP_SPECIAL, text, NULL);
}

la_status le_cell_run(le_ctx *c, const la_longeval_opts *o, int mi, int li, la_longeval_cell *cell) {
    memset(cell, 0, sizeof *cell);
    cell->method = mi;
    cell->length = li;
    snprintf(cell->method_text, sizeof cell->method_text, "%s", o->methods[mi]);
    int64_t L = (int64_t)llround(o->lengths[li] * (double)c->C);
    cell->L = L;
    la_spec spec;
    la_kv_params kv;
    int has_kv;
    LA_TRY(le_method_parse(c->m, o->methods[mi], c->C, L, &spec, &kv, &has_kv));
    la_spec_format(&spec, cell->spec, sizeof cell->spec);
    /* the element type: the method's own (a type term after '|'), else kv_type, else the GGUF default */
    const char *bar = strchr(o->methods[mi], '|');
    if (!(bar && la_kv_policy_names_type(bar + 1))) {
        if (o->kv_type) LA_TRY(la_kv_type_parse(o->kv_type, &kv));
        else LA_TRY(la_kv_params_set_type(&kv, la_llama_default_kv_type(), 0));
    }
    /* a full cache (also "| full+int8", whose parse keeps the default size) holds the whole context */
    if (!has_kv || kv.policy == LA_KV_FULL) kv.max_tokens = L + 16;
    la_kv_policy_format(&kv, cell->kv, sizeof cell->kv);
    LA_TRY(la_llama_set_spec(c->m, &spec));
    /* window/sinks with a spec the session streams exactly: chunks up to the window;
     * otherwise (h2o, ...) the approximation in chunks of a quarter of the window */
    int step = la_kv_prefill_chunk(&spec, &kv, o->chunk);
    if (has_kv && kv.policy != LA_KV_FULL && o->exact_stream) step = 1;
    c->step = step;
    LA_TRY(la_llama_session_new(c->m, &kv, step, &c->sess));
    la_status st = LA_OK;
    /* perplexity by position */
    double *nll = la_malloc(sizeof(double) * (size_t)L);
    float *last = la_malloc(sizeof(float) * (size_t)c->V);
    int32_t *ex = la_malloc(sizeof(int32_t) * (size_t)L);
    if (!nll || !last || !ex) st = la_fail(LA_ENOMEM, "longeval: out of memory for L = %lld", (long long)L);
    int32_t *toks = NULL;
    if (st == LA_OK && L > c->stream.n) {
        toks = la_malloc(sizeof(int32_t) * (size_t)L);
        if (!toks) st = la_fail(LA_ENOMEM, "longeval: out of memory");
        for (int64_t i = 0; toks && i < L; i++) toks[i] = c->stream.tokens[i % c->stream.n];
    }
    const int32_t *pt = toks ? toks : c->stream.tokens;
    if (st == LA_OK) st = prefill(c, pt, L, nll, last);
    if (st == LA_OK) {
        int nb = o->buckets;
        double bt[LA_LONGEVAL_MAX] = {0}, bb[LA_LONGEVAL_MAX] = {0};
        int64_t bn[LA_LONGEVAL_MAX] = {0};
        double tot = 0, totb = 0;
        for (int64_t p = 0; p + 1 < L; p++) { /* predicting token p+1 from the prefix 0..p */
            int b = (int)((p + 1) * nb / L);
            double bits = nll[p] / log(2.0);
            bt[b] += bits;
            bn[b]++;
            bb[b] += c->stream.bytes[(p + 1) % c->stream.n];
            tot += bits;
            totb += c->stream.bytes[(p + 1) % c->stream.n];
        }
        cell->n_buckets = nb;
        for (int b = 0; b < nb; b++) {
            cell->bucket_bits_token[b] = bn[b] ? bt[b] / bn[b] : NAN;
            cell->bucket_bits_byte[b] = bb[b] > 0 ? bt[b] / bb[b] : NAN;
        }
        cell->ppl_bits_token = tot / (double)(L - 1);
        cell->ppl_bits_byte = totb > 0 ? tot / totb : NAN;
    }
    /* retrieval: identical examples for every method (seed from length, depth, trial) */
    for (int kind = 0; kind < 2 && st == LA_OK; kind++) {
        if (kind == 1 && o->distractors < 0) break;
        for (int di = 0; di < o->n_depths && st == LA_OK; di++)
            for (int t = 0; t < o->trials && st == LA_OK; t++) {
                char ans[16], *cont = NULL;
                int64_t at;
                uint64_t seed = o->seed * 1000003ULL + (uint64_t)L * 7919ULL + (uint64_t)di * 131ULL + (uint64_t)t;
                st = la_longeval_example(c->tok, c->hay, c->n_hay, kind, L, o->depths[di],
                                         o->distractors, seed, ex, ans, &at);
                if (st == LA_OK) st = prefill(c, ex, L, NULL, last);
                if (st == LA_OK) st = greedy(c, last, (int)strlen(ans) + 2, &cont);
                if (st == LA_OK) {
                    int hit = la_longeval_match(cont, ans);
                    if (kind == 0) cell->passkey_hits += hit, cell->passkey_n++, cell->depth_hits[di] += hit;
                    else cell->multikey_hits += hit, cell->multikey_n++, cell->depth_mk_hits[di] += hit;
                }
                free(cont);
            }
    }
    free(nll);
    free(last);
    free(ex);
    free(toks);
    la_llama_session_free(c->sess);
    c->sess = NULL;
    return st;
}
