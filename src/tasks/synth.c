/* synth.c -- synthetic length-generalisation tasks of Vasylenko et al. 2025 (ASEntmax,
 * arXiv 2506.16640, section "synthetic tasks"): MQMTAR, copy, reverse, sort, flip-flop,
 * as `BOS source SEP target EOS` token sequences (the layout of the paper's data
 * processor: src pattern "{bos} {text} {sep}", trg pattern "{text} {eos}"). The
 * per-task formats are documented in include/longattn.h, section "Synthetic tasks". */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "longattn/experiments.h"

/* MQMTAR content ids (the paper's generator: space 0, kv_sep 1, q_sep 2, ids from 3). */
enum { MQ_SPACE = 0, MQ_KVSEP = 1, MQ_QSEP = 2, MQ_ALPHA0 = 3 };
/* Flip-flop content ids (the paper's generator: bits 0/1, write 2, ignore 3, read 4). */
enum { FF_WRITE = 2, FF_IGNORE = 3, FF_READ = 4, FF_N_CONTENT = 5 };

#define LA_TASK_MAX_LEN (1 << 26) /* keeps every token count well inside int */

static const char *const task_names[LA_TASK_COUNT_] = {"mqmtar", "copy", "reverse", "sort",
                                                       "flipflop"};

la_task_params la_task_params_default(la_task task) {
    la_task_params p;
    memset(&p, 0, sizeof p);
    p.task = task;
    p.n_symbols = 16;
    p.min_len = 32;
    p.max_len = 64;
    p.k_len = 2;
    p.v_len = 2;
    p.kv_frac = 0.8;
    p.n_queries = 4;
    p.write_prob = 0.1;
    return p;
}

const char *la_task_name(la_task task) {
    if ((int)task < 0 || task >= LA_TASK_COUNT_) return "?";
    return task_names[task];
}

la_status la_task_from_name(const char *name, la_task *out) {
    if (!name || !out) return la_fail(LA_EINVAL, "la_task_from_name: name and out must not be NULL");
    const char *key = strcmp(name, "flip-flop") ? name : "flipflop"; /* the alias */
    for (int t = 0; t < LA_TASK_COUNT_; t++)
        if (!strcmp(key, task_names[t])) {
            *out = (la_task)t;
            return LA_OK;
        }
    return la_fail(LA_EINVAL, "unknown task '%s'; valid tasks: mqmtar, copy, reverse, sort, flipflop",
                   name);
}

/* n^k saturated at 2^40 (more distinct keys than any sequence could hold). */
static uint64_t pow_sat(int n, int k) {
    uint64_t r = 1;
    for (int i = 0; i < k; i++) {
        r *= (uint64_t)n;
        if (r > (1ULL << 40)) return 1ULL << 40;
    }
    return r;
}

/* Number of key-value pairs in an MQMTAR region of L tokens (the paper's
 * num_kv = int(seq_len * num_kv // (k_len + v_len + 2)), capped by the distinct words). */
static int mq_n_kv(const la_task_params *p, int L) {
    int unit = p->k_len + p->v_len + 2;
    double n = floor((double)L * p->kv_frac / unit + 1e-9);
    uint64_t cap = pow_sat(p->n_symbols, p->k_len);
    uint64_t capv = pow_sat(p->n_symbols, p->v_len);
    if (capv < cap) cap = capv;
    if (n > (double)cap) n = (double)cap;
    return (int)n;
}

la_status la_task_validate(const la_task_params *p) {
    if (!p) return la_fail(LA_EINVAL, "task params must not be NULL");
    if ((int)p->task < 0 || p->task >= LA_TASK_COUNT_)
        return la_fail(LA_EINVAL, "task %d is not a task; use LA_TASK_MQMTAR .. LA_TASK_FLIPFLOP",
                       (int)p->task);
    if (p->min_len < 4 || p->max_len < p->min_len || p->max_len > LA_TASK_MAX_LEN)
        return la_fail(LA_EINVAL,
                       "task %s: content lengths min_len=%d max_len=%d invalid; need "
                       "4 <= min_len <= max_len <= %d",
                       la_task_name(p->task), p->min_len, p->max_len, LA_TASK_MAX_LEN);
    /* flip-flop has a fixed alphabet and a write probability; the other tasks an alphabet size */
    if (p->task != LA_TASK_FLIPFLOP && (p->n_symbols < 2 || p->n_symbols > (1 << 20)))
        return la_fail(LA_EINVAL, "task %s: n_symbols=%d invalid; need 2 <= n_symbols <= %d",
                       la_task_name(p->task), p->n_symbols, 1 << 20);
    if (p->task == LA_TASK_FLIPFLOP && !(p->write_prob > 0 && p->write_prob < 1))
        return la_fail(LA_EINVAL, "task flipflop: write_prob=%g invalid; need 0 < write_prob < 1",
                       p->write_prob);
    if (p->task == LA_TASK_MQMTAR) {
        if (p->k_len < 1 || p->k_len > 16 || p->v_len < 1 || p->v_len > 16)
            return la_fail(LA_EINVAL, "task mqmtar: k_len=%d v_len=%d invalid; need 1..16 each",
                           p->k_len, p->v_len);
        if (!(p->kv_frac > 0 && p->kv_frac <= 1))
            return la_fail(LA_EINVAL, "task mqmtar: kv_frac=%g invalid; need 0 < kv_frac <= 1",
                           p->kv_frac);
        if (p->n_queries < 1)
            return la_fail(LA_EINVAL, "task mqmtar: n_queries=%d invalid; need >= 1", p->n_queries);
        if (p->mq_layout != LA_MQ_PAPER && p->mq_layout != LA_MQ_INLINE && p->mq_layout != LA_MQ_ECHO)
            return la_fail(LA_EINVAL, "task mqmtar: mq_layout=%d invalid; use LA_MQ_PAPER (0), "
                                      "LA_MQ_INLINE (1) or LA_MQ_ECHO (2)",
                           (int)p->mq_layout);
        int nkv = mq_n_kv(p, p->min_len);
        if (nkv < p->n_queries)
            return la_fail(LA_EINVAL,
                           "task mqmtar: min_len=%d holds only %d key-value pairs (kv_frac=%g, "
                           "%d tokens per pair) but n_queries=%d; raise min_len or kv_frac, or "
                           "lower n_queries",
                           p->min_len, nkv, p->kv_frac, p->k_len + p->v_len + 2, p->n_queries);
    }
    return LA_OK;
}

la_status la_task_get_vocab(const la_task_params *p, la_task_vocab *v) {
    LA_TRY(la_task_validate(p));
    if (!v) return la_fail(LA_EINVAL, "la_task_get_vocab: v must not be NULL");
    int n;
    switch (p->task) {
    case LA_TASK_MQMTAR: n = MQ_ALPHA0 + p->n_symbols; break;
    case LA_TASK_FLIPFLOP: n = FF_N_CONTENT; break;
    default: n = p->n_symbols; break;
    }
    v->n_content = n;
    v->pad = n;
    v->bos = n + 1;
    v->eos = n + 2;
    v->sep = n + 3;
    v->vocab_size = n + 4;
    return LA_OK;
}

/* Source and target sizes at content length L (params already validated). */
static la_status part_sizes(const la_task_params *p, int L, int *src, int *tgt) {
    if (L < 4 || L > LA_TASK_MAX_LEN)
        return la_fail(LA_EINVAL, "task %s: content length %d invalid; need 4 <= L <= %d",
                       la_task_name(p->task), L, LA_TASK_MAX_LEN);
    switch (p->task) {
    case LA_TASK_MQMTAR:
        if (mq_n_kv(p, L) < 1)
            return la_fail(LA_EINVAL, "task mqmtar: content length %d holds no key-value pair; use "
                                      "L >= %d",
                           L, (int)ceil((p->k_len + p->v_len + 2) / p->kv_frac));
        if (p->mq_layout == LA_MQ_INLINE) {
            *src = L;
            *tgt = p->n_queries * (1 + p->k_len + p->v_len);
        } else if (p->mq_layout == LA_MQ_ECHO) {
            *src = L + p->n_queries * (1 + p->k_len);
            *tgt = p->n_queries * (1 + p->k_len + p->v_len);
        } else {
            *src = L + p->n_queries * (1 + p->k_len);
            *tgt = p->n_queries * (1 + p->v_len);
        }
        break;
    case LA_TASK_FLIPFLOP:
        *src = 2 * (L / 2) - 1;
        *tgt = 1;
        break;
    default:
        *src = L;
        *tgt = L;
        break;
    }
    return LA_OK;
}

la_status la_task_tokens_at(const la_task_params *p, int content_len, int *n_tokens) {
    LA_TRY(la_task_validate(p));
    if (!n_tokens) return la_fail(LA_EINVAL, "la_task_tokens_at: n_tokens must not be NULL");
    int src = 0, tgt = 0;
    LA_TRY(part_sizes(p, content_len, &src, &tgt));
    *n_tokens = src + tgt + 3;
    return LA_OK;
}

/* Draw n distinct integers from [0, space) in random order into out. Small spaces use a
 * partial Fisher-Yates shuffle of the whole space; large ones rejection with a hash set. */
static la_status distinct_draw(la_rng *r, uint64_t space, int n, uint64_t *out) {
    if ((uint64_t)n > space) return la_fail(LA_EINVAL, "cannot draw %d distinct of %llu", n,
                                            (unsigned long long)space);
    if (space <= 4 * (uint64_t)n + 64) {
        uint64_t *all = la_malloc(space * sizeof *all);
        if (!all) return la_fail(LA_ENOMEM, "task generator: out of memory (%llu words)",
                                 (unsigned long long)space);
        for (uint64_t i = 0; i < space; i++) all[i] = i;
        for (int i = 0; i < n; i++) {
            uint64_t j = i + la_rng_below(r, space - i);
            uint64_t t = all[i];
            all[i] = all[j];
            all[j] = t;
            out[i] = all[i];
        }
        free(all);
        return LA_OK;
    }
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap <<= 1;
    uint64_t *set = la_malloc(cap * sizeof *set); /* stores value + 1; 0 marks an empty slot */
    if (!set) return la_fail(LA_ENOMEM, "task generator: out of memory (hash set of %zu)", cap);
    memset(set, 0, cap * sizeof *set);
    int got = 0;
    while (got < n) {
        uint64_t x = la_rng_below(r, space);
        size_t h = (size_t)((x * 0x9e3779b97f4a7c15ULL) >> 20) & (cap - 1);
        while (set[h] && set[h] != x + 1) h = (h + 1) & (cap - 1);
        if (set[h]) continue; /* already drawn */
        set[h] = x + 1;
        out[got++] = x;
    }
    free(set);
    return LA_OK;
}

/* Write word x (base-n_symbols digits, most significant first) as len alphabet tokens. */
static void put_word(int32_t *dst, uint64_t x, int len, int n_symbols) {
    for (int i = len - 1; i >= 0; i--) {
        dst[i] = MQ_ALPHA0 + (int32_t)(x % (uint64_t)n_symbols);
        x /= (uint64_t)n_symbols;
    }
}

/* MQMTAR source region + queries into src, target into tgt (sizes from part_sizes). */
static la_status gen_mqmtar(const la_task_params *p, int L, la_rng *r, int32_t *src, int32_t *tgt) {
    const int nkv = mq_n_kv(p, L), unit = p->k_len + p->v_len + 2;
    uint64_t *words = la_malloc(2 * (size_t)nkv * sizeof *words);
    if (!words) return la_fail(LA_ENOMEM, "task mqmtar: out of memory (%d pairs)", nkv);
    uint64_t *keys = words, *vals = words + nkv;
    la_status s = distinct_draw(r, pow_sat(p->n_symbols, p->k_len), nkv, keys);
    if (s == LA_OK) s = distinct_draw(r, pow_sat(p->n_symbols, p->v_len), nkv, vals);
    if (s != LA_OK) {
        free(words);
        return s;
    }
    /* blocks: the first L % nkv get one extra token so the region is exactly L long; each
     * block >= floor(L / nkv) >= unit / kv_frac >= unit tokens. */
    for (int i = 0; i < L; i++) src[i] = MQ_SPACE;
    int at = 0;
    for (int i = 0; i < nkv; i++) {
        int b = L / nkv + (i < L % nkv ? 1 : 0);
        int off = at + (int)la_rng_below(r, (uint64_t)(b - unit + 1));
        put_word(src + off, keys[i], p->k_len, p->n_symbols);
        src[off + p->k_len] = MQ_KVSEP;
        put_word(src + off + p->k_len + 1, vals[i], p->v_len, p->n_symbols);
        at += b; /* the token after the value (off + unit - 1 < at) stays SPACE */
    }
    /* paper: QSEP key after the region, QSEP value in the target; inline: QSEP key value in
     * the target; echo: QSEP key after the region and QSEP key value in the target (the same
     * draws, so every layout asks the same queries) */
    const int inl = p->mq_layout == LA_MQ_INLINE, echo = p->mq_layout == LA_MQ_ECHO;
    int32_t *q = src + L;
    for (int j = 0; j < p->n_queries; j++) {
        int i = (int)la_rng_below(r, (uint64_t)nkv);
        if (!inl) {
            q[0] = MQ_QSEP;
            put_word(q + 1, keys[i], p->k_len, p->n_symbols);
            q += 1 + p->k_len;
        }
        tgt[0] = MQ_QSEP;
        tgt += 1;
        if (inl || echo) {
            put_word(tgt, keys[i], p->k_len, p->n_symbols);
            tgt += p->k_len;
        }
        put_word(tgt, vals[i], p->v_len, p->n_symbols);
        tgt += p->v_len;
    }
    free(words);
    return LA_OK;
}

static void gen_flipflop(const la_task_params *p, int L, la_rng *r, int32_t *src, int32_t *tgt) {
    const int P = L / 2;
    int32_t last_bit = 0;
    for (int i = 0; i < P; i++) {
        int32_t cmd;
        if (i == 0) cmd = FF_WRITE;
        else if (i == P - 1) cmd = FF_READ;
        else cmd = la_rng_uniform(r) < p->write_prob ? FF_WRITE : FF_IGNORE;
        int32_t bit = (int32_t)la_rng_below(r, 2);
        src[2 * i] = cmd;
        if (i < P - 1) src[2 * i + 1] = bit; /* the READ's bit is dropped */
        if (cmd == FF_WRITE) last_bit = bit;
    }
    tgt[0] = last_bit;
}

/* Independent stream for example `index` of `seed`. */
static void example_rng(la_rng *r, uint64_t seed, uint64_t index) {
    la_rng_seed(r, seed);
    uint64_t base = la_rng_u64(r);
    la_rng_seed(r, base ^ (index * 0xd1342543de82ef95ULL + 0x632be59bd9b4e019ULL));
}

la_status la_task_sample(const la_task_params *p, int content_len, uint64_t seed,
                         uint64_t index, int32_t *tokens, int cap, la_task_example *ex) {
    la_task_vocab voc;
    LA_TRY(la_task_get_vocab(p, &voc));
    if (!tokens) return la_fail(LA_EINVAL, "la_task_sample: tokens must not be NULL");
    if (content_len < 0)
        return la_fail(LA_EINVAL, "la_task_sample: content_len=%d; use 0 (training range) or >= 4",
                       content_len);
    la_rng r;
    example_rng(&r, seed, index);
    int L = content_len;
    if (L == 0) L = p->min_len + (int)la_rng_below(&r, (uint64_t)(p->max_len - p->min_len + 1));
    int src_len = 0, tgt_len = 0;
    LA_TRY(part_sizes(p, L, &src_len, &tgt_len));
    int n = src_len + tgt_len + 3;
    if (cap < n)
        return la_fail(LA_ESHAPE, "task %s at content length %d needs %d tokens, buffer holds %d",
                       la_task_name(p->task), L, n, cap);
    int32_t *src = tokens + 1, *tgt = tokens + 2 + src_len;
    tokens[0] = voc.bos;
    tokens[1 + src_len] = voc.sep;
    tokens[n - 1] = voc.eos;
    switch (p->task) {
    case LA_TASK_MQMTAR: LA_TRY(gen_mqmtar(p, L, &r, src, tgt)); break;
    case LA_TASK_FLIPFLOP: gen_flipflop(p, L, &r, src, tgt); break;
    case LA_TASK_COPY:
    case LA_TASK_REVERSE:
    case LA_TASK_SORT: {
        for (int i = 0; i < L; i++) src[i] = (int32_t)la_rng_below(&r, (uint64_t)p->n_symbols);
        if (p->task == LA_TASK_COPY) {
            memcpy(tgt, src, (size_t)L * sizeof *tgt);
        } else if (p->task == LA_TASK_REVERSE) {
            for (int i = 0; i < L; i++) tgt[i] = src[L - 1 - i];
        } else { /* counting sort, ascending */
            int *count = la_calloc((size_t)p->n_symbols, sizeof *count);
            if (!count) return la_fail(LA_ENOMEM, "task sort: out of memory");
            for (int i = 0; i < L; i++) count[src[i]]++;
            int o = 0;
            for (int s = 0; s < p->n_symbols; s++)
                for (int c = 0; c < count[s]; c++) tgt[o++] = s;
            free(count);
        }
        break;
    }
    default: return la_fail(LA_EINVAL, "unknown task %d", (int)p->task);
    }
    if (ex) {
        ex->n_tokens = n;
        ex->content_len = L;
        ex->src_start = 1;
        ex->src_len = src_len;
        ex->sep = 1 + src_len;
        ex->tgt_start = 2 + src_len;
        ex->tgt_len = tgt_len;
        ex->eos = n - 1;
    }
    return LA_OK;
}

la_status la_task_batch(const la_task_params *p, int content_len, uint64_t seed,
                        uint64_t first_index, int B, int T, int32_t *inputs,
                        int32_t *targets, la_task_example *ex) {
    la_task_vocab voc;
    LA_TRY(la_task_get_vocab(p, &voc));
    if (!inputs || !targets)
        return la_fail(LA_EINVAL, "la_task_batch: inputs and targets must not be NULL");
    if (B < 1 || T < 1) return la_fail(LA_ESHAPE, "la_task_batch: B=%d T=%d; both must be >= 1", B, T);
    int32_t *row = la_malloc(((size_t)T + 1) * sizeof *row);
    if (!row) return la_fail(LA_ENOMEM, "la_task_batch: out of memory (T=%d)", T);
    la_status s = LA_OK;
    for (int b = 0; b < B && s == LA_OK; b++) {
        la_task_example e;
        s = la_task_sample(p, content_len, seed, first_index + (uint64_t)b, row, T + 1, &e);
        if (s == LA_ESHAPE) {
            int need = 0;
            la_task_tokens_at(p, content_len ? content_len : p->max_len, &need);
            s = la_fail(LA_ESHAPE, "la_task_batch: task %s needs T >= %d (tokens - 1), got T=%d",
                        la_task_name(p->task), need - 1, T);
        }
        if (s != LA_OK) break;
        int32_t *in = inputs + (size_t)b * T, *tg = targets + (size_t)b * T;
        const int unit = 1 + p->k_len + p->v_len; /* LA_MQ_INLINE: QSEP key value */
        const int given_keys = p->task == LA_TASK_MQMTAR && p->mq_layout == LA_MQ_INLINE;
        for (int t = 0; t < T; t++) {
            if (t < e.n_tokens - 1) {
                in[t] = row[t];
                /* position t predicts token t+1: loss on target tokens and EOS only */
                tg[t] = t >= e.sep ? row[t + 1] : -1;
                if (given_keys && t + 1 < e.eos) { /* query keys are given, not predicted */
                    int j = (t + 1 - e.tgt_start) % unit;
                    if (j >= 1 && j <= p->k_len) tg[t] = -1;
                }
            } else {
                in[t] = voc.pad;
                tg[t] = -1;
            }
        }
        if (ex) ex[b] = e;
    }
    free(row);
    return s;
}

int la_task_exact_match(const int32_t *pred, const int32_t *targets, int T) {
    if (!pred || !targets) return 0;
    for (int t = 0; t < T; t++)
        if (targets[t] >= 0 && pred[t] != targets[t]) return 0;
    return 1;
}
