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
#include "longattn/experiments.h"
#include "longattn/llama.h"
#include "longattn/longeval.h"
#include "tasks/longeval_cell.h"

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
    int64_t plain;
    return le_example(tok, stream, n_stream, -1, kind, L, depth, distractors, seed, tokens, answer, needle_at, &plain);
}

/* The example with the haystack read from stream[off ...] (off < 0: a seeded offset, as
 * la_longeval_example); *plain = the number of leading tokens that are haystack only
 * (stream[off .. off + plain), wrapping): the first needle's insertion point. Examples of
 * one haystack (the same stream and off) agree on their first min(plain) tokens. */
la_status le_example(la_tokenizer *tok, const int32_t *stream, int64_t n_stream, int64_t off_in, int kind, int64_t L,
                     double depth, int distractors, uint64_t seed, int32_t *tokens, char answer[16],
                     int64_t *needle_at, int64_t *plain) {
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
        if (off_in >= 0) off = off_in % n_stream; /* drawn above all the same: one stream of draws */
        *plain = at[order[0]];
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

la_status le_stream_build(la_tokenizer *tok, const la_docs *d, const char *dir, int64_t need, int first,
                          le_stream *s) {
    memset(s, 0, sizeof *s);
    la_status st = LA_OK;
    if (!d->is_bytes) st = la_fail(LA_EINVAL, "longeval needs text documents in '%s' (token shards found)", dir);
    la_token_buf b = {0};
    int64_t bytes = 0;
    int used = 0;
    first = d->n_docs > 0 ? first % d->n_docs : 0;
    char *text = NULL;
    for (int k = 0; st == LA_OK && b.n < need && used < 4 * d->n_docs + 4; k++, used++) {
        int di = (first + k) % d->n_docs;
        int64_t full = d->offset[di + 1] - d->offset[di];
        /* a prefix of ~8 bytes per needed token (English BPE text: ~4); the whole document
         * when the prefix gives too few tokens, so a cut never lands inside the tokens used */
        int64_t cap = 8 * (need - b.n) + 4096, len = full < cap ? full : cap;
        int64_t n0 = b.n;
        for (int pass = 0; pass < 2 && st == LA_OK; pass++) {
            char *t2 = la_realloc(text, (size_t)len + 3);
            if (!t2) { st = la_fail(LA_ENOMEM, "longeval: out of memory reading documents"); break; }
            text = t2;
            for (int64_t i = 0; i < len; i++) text[i] = (char)d->tokens[d->offset[di] + i];
            text[len] = '\n';
            text[len + 1] = '\n';
            text[len + 2] = '\0';
            b.n = n0;
            st = la_tokenizer_encode(tok, text, (size_t)(len < full ? len : len + 2), 0, &b);
            if (len == full || b.n >= need + 64) break;
            len = full;
        }
        bytes += len + (len == full ? 2 : 0);
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
            char *dec = NULL;
            size_t dl = 0;
            st = la_tokenizer_decode(tok, &b.ids[i], 1, LA_TOK_KEEP_SPACE, &dec, &dl); /* "\u2581ab": 3 bytes */
            s->bytes[i] = (int32_t)dl;
            free(dec);
        }
    } else {
        la_token_buf_free(&b);
    }
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
                          int *has_kv, char *posreg) {
    char buf[512], sp[512];
    double s = (double)L / (double)C;
    if (s < 1) s = 1;
    expand(text, s, C, L, buf, sizeof buf);
    char *bar = strchr(buf, '|');
    *has_kv = 0;
    *kv = la_kv_params_default();
    LA_TRY(la_llama_kv_params(m, kv));
    kv->policy = LA_KV_FULL;
    if (bar && strchr(bar + 1, '|'))
        return la_fail(LA_ESPEC, "method '%s': one '|' separates the spec from the KV policy (spec | policy); "
                       "this one has two", text);
    if (bar) {
        *bar = '\0';
        la_status st = la_kv_policy_parse(bar + 1, kv);
        if (st != LA_OK) return la_fail(st, "method '%s': %s", text, la_errmsg());
        *has_kv = 1;
    }
    /* trim, and the alias */
    char *b = buf, *e = buf + strlen(buf);
    while (*b == ' ') b++;
    while (e > b && e[-1] == ' ') *--e = '\0';
    /* SelfExtend / ReRoPE / DCA: the model's RoPE with the method's position regimes */
    if (posreg) posreg[0] = '\0';
    if (la_llama_is_posreg(b)) {
        if (!posreg) return la_fail(LA_ESPEC, "method '%s': a position-regime method here is not supported", text);
        if (*has_kv && kv->policy != LA_KV_FULL)
            return la_fail(LA_ESPEC, "method '%s': selfextend / rerope / dca need a full cache (no eviction policy)", text);
        size_t nb = strlen(b);
        if (nb >= 96) return la_fail(LA_ESPEC, "method '%s': the position-regime text is too long", text);
        memcpy(posreg, b, nb + 1);
        la_status st = la_llama_set_posreg(m, b); /* validates the arguments */
        if (st != LA_OK) return la_fail(st, "method '%s': %s", text, la_errmsg());
        LA_TRY(la_llama_set_posreg(m, NULL));
        b = "as-trained";
    }
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

/* Advance session s over tokens[from, to) in chunks on the grid of c->step (a chunk never
 * crosses a multiple of step; `from` is one, or 0), so that a prefix computed once and
 * forked at a grid point is followed by exactly the chunks the unshared prefill runs. With
 * nll (indexed by absolute position) the NLL (nats) of every next token inside [0, L) is
 * written; last (V), if given, receives the logits of row to - 1. */
static la_status advance(le_ctx *c, la_llama_session *s, const int32_t *tokens, int64_t from, int64_t to, int64_t L,
                         double *nll, float *last) {
    int V = c->V;
    for (int64_t p = from; p < to;) {
        int64_t end = (p / c->step + 1) * c->step;
        if (end > to) end = to;
        int T = (int)(end - p);
        int all = nll != NULL;
        LA_TRY(la_llama_session_step(s, tokens + p, T, c->logits, all));
        c->work_tokens += T;
        if (all)
            for (int i = 0; i < T; i++)
                if (p + i + 1 < L) nll[p + i] = logsumexp_nll(c->logits + (size_t)i * V, V, tokens[p + i + 1]);
        if (last && end == to) memcpy(last, c->logits + (size_t)(all ? T - 1 : 0) * V, sizeof(float) * (size_t)V);
        p = end;
    }
    return LA_OK;
}

/* Greedy continuation of at most n tokens after the prefill; returns the decoded text and
 * the first token's logit. */
static la_status greedy(le_ctx *c, la_llama_session *s, float *last, int n, char **text, float *top) {
    int32_t out[16];
    int k = 0;
    for (; k < n; k++) {
        out[k] = argmax(last, c->V);
        if (k == 0) *top = last[out[0]];
        if (k + 1 < n) {
            LA_TRY(la_llama_session_step(s, &out[k], 1, last, 0));
            c->work_tokens += 1;
        }
    }
    return la_tokenizer_decode(c->tok, out, k, LA_TOK_SKIP_SPECIAL, text, NULL);
}

/* One retrieval example of a haystack group: its tokens, answer and fork point. */
typedef struct {
    int kind, di;
    int64_t fork; /* grid point (multiple of step) <= its plain prefix: continue from here */
    int32_t *tok; /* (L) */
    char ans[16];
} le_ex;

static int ex_cmp(const void *a, const void *b) {
    const le_ex *x = a, *y = b;
    if (x->fork != y->fork) return x->fork < y->fork ? -1 : 1;
    if (x->kind != y->kind) return x->kind - y->kind;
    return x->di - y->di;
}

static uint64_t mix(uint64_t h, uint64_t v) { /* splitmix64 step over h ^ v */
    uint64_t z = (h ^ v) + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Perplexity accumulation of document k's first L tokens from nll (L - 1 values). */
static void score_ppl(const le_ctx *c, const la_longeval_opts *o, int k, int64_t L, const double *nll,
                      la_longeval_cell *cell) {
    const le_stream *d = &c->docs[k];
    int nb = o->buckets;
    for (int64_t p = 0; p + 1 < L; p++) { /* predicting token p+1 from the prefix 0..p */
        int b = (int)((p + 1) * nb / L);
        cell->doc_bits[k][b] += nll[p] / log(2.0);
        cell->doc_bytes[k][b] += d->bytes[(p + 1) % d->n];
        cell->doc_n[k][b]++;
    }
}

/* The examples of haystack group t of document k (n_kinds x depths, in ex): each one's
 * tokens, answer and in ->fork its plain prefix (the haystack up to its first needle, not
 * yet put on the step grid); *off the group's haystack offset. */
static la_status make_group(const le_ctx *c, const la_longeval_opts *o, int k, int64_t L, int t, int with_ppl,
                            const int32_t *hay, int64_t n_hay, le_ex *ex, int n_kinds, int64_t *off) {
    const int nd = o->n_depths;
    uint64_t g = mix(mix(mix(o->seed, (uint64_t)L), (uint64_t)k + 1), (uint64_t)t + 1);
    /* a seeded start that leaves L tokens before the stream wraps (when it can) */
    int64_t span = n_hay > L ? n_hay - L + 1 : 1;
    *off = with_ppl ? 0 : (int64_t)(mix(g, 0x6f6666ULL) % (uint64_t)span);
    for (int kind = 0; kind < n_kinds; kind++)
        for (int di = 0; di < nd; di++) {
            le_ex *e = &ex[kind * nd + di];
            int64_t at;
            e->kind = kind;
            e->di = di;
            LA_TRY(le_example(c->tok, hay, n_hay, *off, kind, L, o->depths[di], o->distractors,
                              mix(mix(g, (uint64_t)di + 1), (uint64_t)kind + 1), e->tok, e->ans, &at, &e->fork));
        }
    return LA_OK;
}

/* Example e of group t of document k, prefilled in c->work (last: its last row's logits),
 * answered greedily (cont), scored with the first token's logit top. */
static la_status score_example(le_ctx *c, const la_longeval_opts *o, la_longeval_cell *cell, int k, int t,
                               const le_ex *e, float *last) {
    char *cont = NULL;
    float top = 0;
    LA_TRY(greedy(c, c->work, last, (int)strlen(e->ans) + 2, &cont, &top));
    int hit = la_longeval_match(cont, e->ans);
    free(cont);
    int idx = (k * o->n_depths + e->di) * o->trials + t;
    if (e->kind == 0) {
        cell->passkey_hits += hit, cell->passkey_n++, cell->depth_hits[e->di] += hit;
        cell->pk_hit[idx] = (unsigned char)hit, cell->pk_top[idx] = top;
    } else {
        cell->multikey_hits += hit, cell->multikey_n++, cell->depth_mk_hits[e->di] += hit;
        cell->mk_hit[idx] = (unsigned char)hit, cell->mk_top[idx] = top;
    }
    return LA_OK;
}

/* --seq-parallel (issue 30): each prefill is one pass of all L tokens split over the ranks
 * (la_session_prefill_sp), which every rank calls together: the perplexity text (the
 * document's first L tokens), then every retrieval example from its first token (a pass
 * over the ranks has no fork point: no shared prefix), each answered greedily on every rank
 * from the filled cache. The groups and examples are run_doc's. */
static la_status run_doc_sp(le_ctx *c, const la_longeval_opts *o, int k, int64_t L, la_longeval_cell *cell,
                            double *nll, float *last, le_ex *ex, int n_kinds) {
    const le_stream *d = &c->docs[k];
    const int32_t *hay = o->filler ? c->hay : d->tokens;
    const int64_t n_hay = o->filler ? c->n_hay : d->n;
    const int nex = n_kinds * o->n_depths;
    if (L > INT32_MAX) return la_fail(LA_EINVAL, "longeval --seq-parallel: L = %lld is too long", (long long)L);
    int32_t *toks = la_malloc(sizeof(int32_t) * (size_t)L);
    if (!toks) return la_fail(LA_ENOMEM, "longeval: out of memory for L = %lld", (long long)L);
    for (int64_t i = 0; i < L; i++) toks[i] = d->tokens[i % d->n];
    la_status st = la_llama_prefill_sp(c->m, toks, (int)L, NULL, nll); /* its losses only: no cache to fill */
    free(toks);
    c->work_tokens += (double)L;
    if (st == LA_OK) score_ppl(c, o, k, L, nll, cell);
    for (int t = 0; t < o->trials && st == LA_OK; t++) {
        int64_t off;
        st = make_group(c, o, k, L, t, !o->filler && t == 0, hay, n_hay, ex, n_kinds, &off);
        for (int i = 0; i < nex && st == LA_OK; i++) {
            la_session_reset(c->work);
            st = la_session_prefill_sp(c->work, ex[i].tok, (int)L, last, NULL);
            c->work_tokens += (double)L;
            if (st == LA_OK) st = score_example(c, o, cell, k, t, &ex[i], last);
        }
    }
    if (c->tick) c->tick(c->tick_user, (k + 1.0) / c->n_docs);
    return st;
}

/* The haystack groups of document k: group t (trial) reads hay from offset 0 for t = 0 on a
 * text haystack (the document's start: the perplexity text itself, so that prefill is
 * shared with the perplexity one) and from a seeded offset otherwise. Every example of a
 * group shares the haystack up to its first needle. */
static la_status run_doc(le_ctx *c, const la_longeval_opts *o, int k, int64_t L, la_longeval_cell *cell, double *nll,
                         float *last, le_ex *ex, int n_kinds, int share) {
    const le_stream *d = &c->docs[k];
    const int32_t *hay = o->filler ? c->hay : d->tokens;
    const int64_t n_hay = o->filler ? c->n_hay : d->n;
    const int nd = o->n_depths, nex = n_kinds * nd;
    la_status st = LA_OK;
    int ppl_done = 0;
    for (int t = 0; t < o->trials && st == LA_OK; t++) {
        const int with_ppl = !o->filler && t == 0; /* this group's main prefill is the perplexity text */
        int64_t off, maxfork = 0;
        st = make_group(c, o, k, L, t, with_ppl, hay, n_hay, ex, n_kinds, &off);
        for (int i = 0; i < nex && st == LA_OK; i++) {
            ex[i].fork = share ? ex[i].fork / c->step * c->step : 0;
            if (ex[i].fork > maxfork) maxfork = ex[i].fork;
        }
        if (st != LA_OK) break;
        qsort(ex, (size_t)nex, sizeof *ex, ex_cmp);
        /* the main prefill: the haystack from off (wrapping), as far as the last fork point
         * (or the whole perplexity text) */
        int64_t main_to = with_ppl && share ? L : maxfork;
        int32_t *mt = ex[nex - 1].tok; /* any example: its first `fork` tokens are the haystack; but the
                                          perplexity text needs the document itself */
        int32_t *doc_toks = NULL;
        if (with_ppl || main_to > 0) {
            doc_toks = la_malloc(sizeof(int32_t) * (size_t)(main_to > 0 ? main_to : 1));
            if (!doc_toks) { st = la_fail(LA_ENOMEM, "longeval: out of memory"); break; }
            for (int64_t i = 0; i < main_to; i++) doc_toks[i] = hay[(off + i) % n_hay];
            mt = doc_toks;
        }
        la_llama_session_reset(c->sess);
        int64_t p = 0;
        for (int i = 0; i < nex && st == LA_OK; i++) {
            le_ex *e = &ex[i];
            if (e->fork > p) {
                st = advance(c, c->sess, mt, p, e->fork, L, with_ppl && share ? nll : NULL, NULL);
                p = e->fork;
            }
            if (st != LA_OK) break;
            if (e->fork > 0) st = la_llama_session_copy(c->work, c->sess);
            else la_llama_session_reset(c->work);
            if (st == LA_OK) st = advance(c, c->work, e->tok, e->fork, L, L, NULL, last);
            if (st == LA_OK) st = score_example(c, o, cell, k, t, e, last);
        }
        if (st == LA_OK && with_ppl && share) {
            st = advance(c, c->sess, mt, p, L, L, nll, NULL);
            if (st == LA_OK) score_ppl(c, o, k, L, nll, cell), ppl_done = 1;
        }
        free(doc_toks);
    }
    if (st == LA_OK && !ppl_done) { /* unshared, or no text-haystack group: its own perplexity prefill */
        int32_t *toks = la_malloc(sizeof(int32_t) * (size_t)L);
        if (!toks) return la_fail(LA_ENOMEM, "longeval: out of memory for L = %lld", (long long)L);
        for (int64_t i = 0; i < L; i++) toks[i] = d->tokens[i % d->n];
        la_llama_session_reset(c->sess);
        st = advance(c, c->sess, toks, 0, L, L, nll, NULL);
        if (st == LA_OK) score_ppl(c, o, k, L, nll, cell);
        free(toks);
    }
    if (c->tick) c->tick(c->tick_user, (k + 1.0) / c->n_docs);
    return st;
}

/* Method mi at length L set on the model (spec, position regimes), its KV policy with the
 * element type resolved, and c->step: the set-up of le_cell_run, also le_cell_check's. */
static la_status cell_setup(le_ctx *c, const la_longeval_opts *o, int mi, int64_t L, la_spec *spec, la_kv_params *kv,
                            int *has_kv, char *posreg) {
    LA_TRY(le_method_parse(c->m, o->methods[mi], c->C, L, spec, kv, has_kv, posreg));
    LA_TRY(la_llama_set_posreg(c->m, *posreg ? posreg : NULL));
    /* the element type: the method's own (a type term after '|'), else kv_type, else the GGUF default;
     * position regimes (selfextend, ...) need the f32 cache they were written for */
    const char *bar = strchr(o->methods[mi], '|');
    if (!*posreg && !(bar && la_kv_policy_names_type(bar + 1))) {
        la_status st = o->kv_type ? la_kv_type_parse(o->kv_type, kv)
                                  : la_kv_params_set_type(kv, la_llama_default_kv_type(), 0);
        if (st != LA_OK) return la_fail(st, "method '%s' with --kv-type %s: %s", o->methods[mi],
                                        o->kv_type ? o->kv_type : "(default)", la_errmsg());
    }
    /* a full cache (also "| full+int8", whose parse keeps the default size) holds the whole context */
    if (!*has_kv || kv->policy == LA_KV_FULL) kv->max_tokens = L + 16;
    LA_TRY(la_llama_set_spec(c->m, spec));
    /* window/sinks with a spec the session streams exactly: chunks up to the window;
     * otherwise (h2o, ...) the approximation in chunks of a quarter of the window */
    c->step = la_kv_prefill_chunk(spec, kv, o->chunk);
    if (*has_kv && kv->policy != LA_KV_FULL && o->exact_stream) c->step = 1;
    return LA_OK;
}

la_status le_cell_check(le_ctx *c, const la_longeval_opts *o, int mi, int64_t L, la_kv_params *kv, int *has_kv,
                        char *posreg) {
    la_spec spec;
    la_llama_session *s = NULL;
    const int32_t t = 0;
    la_status st = cell_setup(c, o, mi, L, &spec, kv, has_kv, posreg);
    if (st == LA_OK) { /* one token through the cell's session: the kernels' checks of the spec */
        st = la_llama_session_new(c->m, kv, c->step, &s);
        if (st == LA_OK) st = la_llama_session_step(s, &t, 1, c->logits, 0);
        if (st != LA_OK) st = la_fail(st, "method '%s' at L = %lld: %s", o->methods[mi], (long long)L, la_errmsg());
    }
    if (st != LA_OK && st != LA_ENOMEM) st = la_fail(LA_ESPEC, "%s", la_errmsg()); /* a bad method or --kv-type */
    la_llama_session_free(s);
    la_llama_set_posreg(c->m, NULL);
    return st;
}

la_status le_cell_run(le_ctx *c, const la_longeval_opts *o, la_longeval_cell *cell) {
    const int mi = cell->method;
    const int64_t L = cell->L;
    la_spec spec;
    la_kv_params kv;
    int has_kv;
    char posreg[96];
    LA_TRY(cell_setup(c, o, mi, L, &spec, &kv, &has_kv, posreg));
    la_spec_format(&spec, cell->spec, sizeof cell->spec);
    if (*posreg) { /* the cell's spec names the regimes too */
        size_t n = strlen(cell->spec);
        snprintf(cell->spec + n, sizeof cell->spec - n, " + %s", posreg);
    }
    la_kv_policy_format(&kv, cell->kv, sizeof cell->kv);
    const int step = c->step;
    c->work_tokens = 0;
    const int share = !o->no_share && !o->seq_parallel;
    cell->shared = share;
    cell->n_docs = c->n_docs;
    const int n_kinds = o->trials > 0 ? (o->distractors < 0 ? 1 : 2) : 0;
    cell->n_ex = n_kinds ? c->n_docs * o->n_depths * o->trials : 0;
    /* --seq-parallel prefills without the shared-prefix session: only the examples' one */
    la_status st = o->seq_parallel ? LA_OK : la_llama_session_new(c->m, &kv, step, &c->sess);
    if (st == LA_OK && n_kinds) st = la_llama_session_new(c->m, &kv, step, &c->work);
    double *nll = la_malloc(sizeof(double) * (size_t)L);
    float *last = la_malloc(sizeof(float) * (size_t)c->V);
    le_ex ex[2 * LA_LONGEVAL_MAX];
    memset(ex, 0, sizeof ex);
    if (st == LA_OK && (!nll || !last)) st = la_fail(LA_ENOMEM, "longeval: out of memory for L = %lld", (long long)L);
    for (int i = 0; st == LA_OK && i < n_kinds * o->n_depths; i++)
        if (!(ex[i].tok = la_malloc(sizeof(int32_t) * (size_t)L)))
            st = la_fail(LA_ENOMEM, "longeval: out of memory for the examples of L = %lld", (long long)L);
    for (int k = 0; k < c->n_docs && st == LA_OK; k++)
        st = o->seq_parallel ? run_doc_sp(c, o, k, L, cell, nll, last, ex, n_kinds)
                             : run_doc(c, o, k, L, cell, nll, last, ex, n_kinds, share);
    if (st == LA_OK) { /* totals over documents */
        int nb = o->buckets;
        double tot = 0, totb = 0, totn = 0;
        cell->n_buckets = nb;
        for (int b = 0; b < nb; b++) {
            double bt = 0, bb = 0, bn = 0;
            for (int k = 0; k < c->n_docs; k++) bt += cell->doc_bits[k][b], bb += cell->doc_bytes[k][b], bn += (double)cell->doc_n[k][b];
            cell->bucket_bits_token[b] = bn > 0 ? bt / bn : NAN;
            cell->bucket_bits_byte[b] = bb > 0 ? bt / bb : NAN;
            tot += bt, totb += bb, totn += bn;
        }
        cell->ppl_bits_token = totn > 0 ? tot / totn : NAN;
        cell->ppl_bits_byte = totb > 0 ? tot / totb : NAN;
        cell->prefill_tokens = c->work_tokens;
    }
    for (int i = 0; i < 2 * LA_LONGEVAL_MAX; i++) free(ex[i].tok);
    free(nll);
    free(last);
    la_llama_session_free(c->sess);
    la_llama_session_free(c->work);
    c->sess = c->work = NULL;
    return st;
}
