/*
 * longattn/infer.h -- inference (layer infer): KV cache with eviction policies and f32 /
 * f16 / bf16 / int8 storage, next-token sampling, one decoding session over any language model
 * (la_lm), generation and perplexity.
 */
#ifndef LONGATTN_INFER_H
#define LONGATTN_INFER_H

#include "attn.h"
#include "core.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* KV cache                                                                 */
/* ======================================================================== */

/* A per-layer, per-kv-head cache of keys and values for incremental decoding, with
 * eviction policies (window, StreamingLLM sinks, H2O heavy hitters) and an element type
 * (f32, f16, bf16 or int8: la_kv_params.storage). Survey: shared/seeds/003 (H2O, StreamingLLM, quantised KV cache).
 *
 * Keys are stored BEFORE any rotary encoding (pre-RoPE). la_kv_attend() hands the kept
 * keys to la_attn_forward() in slot order, and the kernel rotates key slot j by position
 * j and the query by its slot position; so re-indexing after an eviction is exact by
 * construction (no key is ever re-rotated, nothing accumulates rounding).
 *
 * Positions seen by the kernel, per policy:
 *   full            slot j = original position j (nothing is ever evicted; the cache is
 *                   exactly the prefix of the stream). Query i of a T-row call sits at
 *                   position len - T + i (LA_POS0_AUTO).
 *   window/sinks/h2o  re-indexed within the cache (StreamingLLM, Xiao et al. 2024, sec. 3.2):
 *                   the kept keys, in stream order, sit at positions 0..len-1 and the new
 *                   query at len - T + i, i.e. the current token is at position "number of
 *                   cached tokens before it". Distances (RoPE, ALiBi, sinv) and n_q (logn)
 *                   are therefore measured in cache slots. The spec's own visibility
 *                   pattern (window(w), sinks(n,w), ...) also applies to slot positions.
 * Budgets (tokens per layer and kv head; the cache never holds more, at any time):
 *   full            max_tokens (appending past it is LA_EINVAL)
 *   window(w)       w: the last w tokens, the current one included
 *   sinks(n, w)     n + w: the first n tokens of the stream plus the last w
 *   h2o(heavy, recent, sinks=0)  sinks + heavy + recent: the first `sinks` tokens, the last
 *                   `recent` tokens and, per kv head, the `heavy` older tokens with the largest
 *                   cumulative attention mass (H2O, Zhang et al. 2023: score = sum over
 *                   past queries of their attention probability, summed over the query heads
 *                   of a GQA group, from la_attn_opts.key_mass). Ties keep the newer token.
 * Eviction happens inside la_kv_append, BEFORE the new tokens are written, so that after
 * the append the length is at most the budget. Sink tokens and the newest `recent`
 * (window: w) tokens are never evicted; in particular the newest token always survives.
 * int8 storage (combinable with every policy): symmetric absmax quantisation per group of
 * `group` consecutive channels of one token's k (or v) row: scale = max|x| / 127,
 * q = round(x / scale) in [-127, 127], x' = scale * q, so |x - x'| <= scale / 2 (half a
 * step). An all-zero group gets scale 1 (exact zeros); a constant group c gets |c|/127
 * (q = +-127, exact up to float rounding). group = 0 means one scale per token row (D). */

typedef struct la_kv_cache la_kv_cache; /* opaque */

typedef enum {
    LA_KV_FULL = 0, /* keep everything up to max_tokens */
    LA_KV_WINDOW,   /* window(w) */
    LA_KV_SINKS,    /* sinks(n, w), StreamingLLM */
    LA_KV_H2O       /* h2o(heavy, recent, sinks) */
} la_kv_policy;

/* Element type of the cached k/v rows (the "KV type"). Values are stable: LA_KV_F32 and
 * LA_KV_INT8 keep their old numbers. f16 / bf16 rows are rounded to nearest even when
 * appended (src/core/half.h) and converted back exactly when read; arithmetic is float32. */
typedef enum {
    LA_KV_F32 = 0,  /* float32 rows */
    LA_KV_INT8 = 1, /* int8 rows + one float32 scale per group */
    LA_KV_F16 = 2,  /* IEEE binary16 rows (11-bit significand, max 65504) */
    LA_KV_BF16 = 3  /* bfloat16 rows (8-bit significand, float32's range) */
} la_kv_storage;

typedef struct {
    int n_layers;        /* >= 1, default 1 */
    int H;               /* query heads of la_kv_attend calls, default 1 (H % Hkv == 0) */
    int Hkv;             /* kv heads per layer, default 1 */
    int D;               /* head dimension, default 64 */
    la_kv_policy policy; /* default LA_KV_FULL */
    int64_t max_tokens;  /* capacity of the full policy, default 4096 */
    int window;          /* w of window(w) and sinks(n, w) */
    int sinks;           /* n of sinks(n, w); sinks of h2o (default 0) */
    int heavy;           /* h2o heavy-hitter slots */
    int recent;          /* h2o recent window */
    la_kv_storage storage; /* element type, default LA_KV_F32 (la_kv_params_set_type) */
    int group;           /* int8 group size along D (must divide D); 0 = one scale per row */
} la_kv_params;

/* n_layers = H = Hkv = 1, D = 64, full policy with max_tokens = 4096, f32 storage. */
LA_API la_kv_params la_kv_params_default(void);

/* Set the policy fields of *p from text such as "full", "window(256)", "window(w=256)",
 * "sinks(4,252)", "sinks(n=4,w=252)", "h2o(64,64)", "h2o(heavy=64,recent=64,sinks=4)",
 * optionally joined with an element type "+f32", "+f16", "+bf16", "+int8" or
 * "+int8(group=32)" (e.g. "sinks(4,252)+int8", "full+bf16"); without one the type is f32.
 * Spaces around terms and before '(' are ignored ("window(4) + int8 (group=4)"). Shape
 * fields (n_layers, H, Hkv, D, max_tokens) are left untouched and not checked (they may
 * still be 0; la_kv_params_validate / la_session_new check them). An int8 group must
 * divide p->D; with p->D = 0 (head size not known yet, e.g. options read before the model)
 * it is checked where the cache is made (la_kv_params_validate, la_session_new).
 * Errors: LA_ESPEC naming the bad token and listing the valid forms; LA_EINVAL on NULL.
 * On error *p is untouched. */
LA_API la_status la_kv_policy_parse(const char *text, la_kv_params *p);

/* Set the element type of the cached rows from a la_dtype (f32, f16, bf16, int8); group is
 * the int8 group along D (0: one scale per row; ignored for the other types). The same as
 * writing "+f16", "+bf16", "+int8(group=g)" in the policy text. Errors: LA_EINVAL (NULL,
 * unknown type, group < 0 or, when D > 0, not dividing D). */
LA_API la_status la_kv_params_set_type(la_kv_params *p, la_dtype t, int group);

/* The element type of p as a la_dtype (LA_DTYPE_F32 for NULL). */
LA_API la_dtype la_kv_params_type(const la_kv_params *p);

/* Set the element type from text: "f32", "f16", "bf16", "int8" or "int8(group=g)" (also
 * the la_dtype_parse aliases float32, float16, bfloat16, i8). Policy fields untouched.
 * The group is checked against p->D as in la_kv_policy_parse (not when p->D = 0).
 * Errors: LA_ESPEC naming the text and the valid names; LA_EINVAL on NULL. */
LA_API la_status la_kv_type_parse(const char *text, la_kv_params *p);

/* 1 if the policy text names an element type ("+f16", "+int8(group=32)", "int8", ...), so
 * that a caller applying a default type (GGUF models) can leave an explicit one alone. */
LA_API int la_kv_policy_names_type(const char *text);

/* The KV element type GGUF model sessions use unless told otherwise (`--kv-type`, a type
 * term in the policy): chosen from SmolLM2's bits per token against f32
 * (docs/kv-cache.md). The C API's la_kv_params_default() stays f32. */
LA_API la_dtype la_llama_default_kv_type(void);

/* Canonical text of the policy (parseable by la_kv_policy_parse), snprintf-style. */
LA_API int la_kv_policy_format(const la_kv_params *p, char *buf, size_t n);

/* Check params: sizes >= 1, H % Hkv == 0, window/recent >= 1, sinks/heavy >= 0,
 * group divides D, ... Errors: LA_EINVAL with the offending field and the fix. */
LA_API la_status la_kv_params_validate(const la_kv_params *p);

/* Tokens per layer and kv head the policy may hold (see Budgets above). */
LA_API int64_t la_kv_budget(const la_kv_params *p);

/* Largest number of new tokens one la_kv_append may add: full: max_tokens; window: w;
 * sinks: w; h2o: recent (a larger chunk would have to evict part of itself). */
LA_API int64_t la_kv_max_chunk(const la_kv_params *p);

/* 1 if a decoding session (la_llama_session_step) under policy p and spec steps T > 1
 * tokens as EXACT streaming -- each of the T rows sees exactly the keys and re-indexed
 * positions it would see were the tokens stepped one at a time (src/infer/kv_stream.c:
 * the window part through the kernel with a window(w) mask, the sinks' per-query position
 * map merged by log-sum-exp; no T x T buffer): policy window or sinks; softmax; NoPE or a
 * RoPE-family encoding; transform none, temp, critical or qwen-logn; causal pattern.
 * (dynamic-ntk takes its frequencies from the last row's cache length, exact once the
 * cache is full or within L_train.) 0 otherwise: h2o, whose eviction depends on every
 * step's attention, and the other specs, where a chunk sees the cache as evicted before
 * it (an approximation). */
LA_API int la_kv_stream_exact(const la_spec *spec, const la_kv_params *p);

/* The prefill chunk (tokens per la_llama_session_step) for a prompt fed to a cache with
 * policy p under spec, at most want (>= 1): full: min(want, max_tokens), exact; window /
 * sinks with la_kv_stream_exact: min(want, la_kv_max_chunk), exact (streamed); otherwise
 * (h2o, or a spec the session cannot stream exactly): min(want, max(1, la_kv_max_chunk / 4)),
 * an APPROXIMATION -- every query of a chunk sees the cache as evicted before the chunk
 * (its own earlier rows included), not the eviction each of its tokens would have caused;
 * a quarter of the recent window keeps the difference small (the rule longeval uses). */
LA_API int la_kv_prefill_chunk(const la_spec *spec, const la_kv_params *p, int want);
/* 1 if la_kv_prefill_chunk's chunk gives exactly the token-by-token result (full, or
 * la_kv_stream_exact), 0 if it is the approximation. */
LA_API int la_kv_prefill_exact(const la_spec *spec, const la_kv_params *p);

/* Bytes of k/v storage (rows and int8 scales) one cached token takes, all layers and kv
 * heads together: f32: 2 * n_layers * Hkv * D * 4; f16, bf16: 2 * n_layers * Hkv * D * 2;
 * int8: 2 * n_layers * Hkv * (D + 4*D/g). */
LA_API double la_kv_bytes_per_token(const la_kv_params *p);

/* Allocate a cache holding budget tokens per layer and kv head: all storage and scratch
 * (dequantisation and gather buffers, H2O scores) is allocated here once; append and
 * attend never allocate (the kernel workspace the cache owns grows to the largest
 * request, then is reused). Errors: LA_EINVAL (bad params), LA_ENOMEM. */
LA_API la_status la_kv_new(const la_kv_params *p, la_kv_cache **out);
LA_API void la_kv_free(la_kv_cache *c);

/* Copy src's state (kept rows, their positions and H2O scores, lengths, exact streaming's
 * table) into dst, a cache created with the same params (and stream chunk): a fork / snapshot
 * from which dst continues exactly as src would (src/infer/kv_fork.c). Copies the kept rows
 * only. Errors: LA_EINVAL (NULL, or the caches differ in shape, storage, policy or its parameters:
 * sinks(2,6) and sinks(4,4) have the same budget but do not evict alike). */
LA_API la_status la_kv_copy(la_kv_cache *dst, const la_kv_cache *src);

/* Empty every layer (keeps the allocation). */
LA_API void la_kv_reset(la_kv_cache *c);

/* The params the cache was created with. */
LA_API const la_kv_params *la_kv_get_params(const la_kv_cache *c);

/* Number of tokens held by layer (the same for every kv head), and the number of tokens
 * ever appended to it (the stream position of the next token). -1 for a bad layer. */
LA_API int64_t la_kv_len(const la_kv_cache *c, int layer);
LA_API int64_t la_kv_seen(const la_kv_cache *c, int layer);

/* Bytes of k/v storage the cache holds allocated (budget * la_kv_bytes_per_token);
 * constant over the cache's life. */
LA_API size_t la_kv_bytes(const la_kv_cache *c);

/* Append T new tokens to layer: k, v: (Hkv, T, D) PRE-RoPE (un-rotated) keys and values.
 * First evicts by the policy so that len + T <= budget, then writes (quantising for
 * int8). New tokens start with H2O score 0. Errors: LA_EINVAL (NULL, bad layer,
 * T < 1 or T > la_kv_max_chunk, full cache out of room -- use a larger max_tokens or an
 * evicting policy). */
LA_API la_status la_kv_append(la_kv_cache *c, int layer, const float *k, const float *v, int T);

/* Copy out layer's kept tokens, dequantised: k, v: (Hkv, len, D) pre-RoPE, and
 * orig_pos: (Hkv, len) their original stream positions. Any output may be NULL. */
LA_API la_status la_kv_read(const la_kv_cache *c, int layer, float *k, float *v, int64_t *orig_pos);

/* H2O scores of layer: (Hkv, len) cumulative attention mass of each kept token. */
LA_API la_status la_kv_scores(const la_kv_cache *c, int layer, float *scores);

/* Attention of T new query rows over layer's kept keys (the last T of which must be the
 * rows just appended for these queries): one la_attn_forward call with
 *   q: (1, H, T, D) un-rotated   k, v: (1, Hkv, len, D)   pos0 = len - T
 *   out: (1, H, T, D)   row_stat: (1, H, T) or NULL.
 * int8 / f16 / bf16 rows are converted into a buffer reused across calls. One query row
 * (T = 1) over an f16, bf16 or int8 cache with a spec the decode kernel supports (softmax;
 * causal or full; NoPE or RoPE-family except dynamic-ntk; transform none / temp / critical /
 * qwen-logn; no row_entropy / row_support) goes to the decode kernel instead
 * (src/infer/kv_decode.c): the rows read once per kv head for its whole query group, in
 * fixed chunks merged in a fixed order (the same bits for any n_threads); f32 caches keep
 * the fused kernel, bitwise as before. Under h2o, the kernel's
 * key_mass (summed over the query heads of each kv head) is added to the scores.
 * opts may be NULL or carry logn_s, as_beta / as_gamma (1, H, T), n_threads, ws and the
 * optional statistics (row_entropy (1,H,T), key_mass (1,H,len)); doc_ids must be NULL.
 * Errors: LA_EINVAL (NULL, bad layer, T > len, doc_ids given), LA_ESHAPE (T < 1),
 * and those of la_attn_forward. */
LA_API la_status la_kv_attend(la_kv_cache *c, int layer, const la_spec *spec, const float *q, int T,
                              float *out, float *row_stat, const la_attn_opts *opts);

/* The "rotate by the exact position delta on shift" path for callers that keep
 * POST-RoPE keys: rotate x (N, D) in place by angle delta * omega_k on every rotary pair
 * (la_rope_apply with pos = delta for every row; p-RoPE's unrotated pairs and
 * non-RoPE encodings are left unchanged). Because rotations compose, shifting by a then b
 * equals shifting by a + b (up to float rounding of cos/sin). A cache that evicts
 * tokens would shift each kept key by (new slot - old slot). ctx_len as la_rope_apply.
 * Errors: those of la_rope_apply; LA_ENOMEM. */
LA_API la_status la_kv_rope_shift(const la_spec *spec, float *x, int N, int D, int64_t delta,
                                  int64_t ctx_len);

/* ---- next-token sampling ---- */

/* temperature 0 = greedy (argmax, lowest id on ties); top_k 0 = off; top_p 1 = off. */
typedef struct {
    double temperature; /* >= 0, default 1 */
    int top_k;          /* keep the k most likely tokens (Fan et al. 2018); 0 = all */
    double top_p;       /* nucleus (Holtzman et al. 2020): the smallest set of most likely
                           tokens whose probability reaches top_p, in (0, 1]; default 1 */
} la_sample_params;

LA_API la_sample_params la_sample_params_default(void);

/* Bytes of scratch la_sample_token needs for a vocabulary of V. */
LA_API size_t la_sample_scratch_bytes(int V);

/* Draw the next token from logits (V) with p ~ softmax(logits / temperature) restricted
 * to top-k, then to the top-p nucleus, renormalised; u in [0, 1) is the uniform random
 * number that picks it (inverse CDF over tokens sorted by decreasing logit), so the same u
 * gives the same token. scratch: la_sample_scratch_bytes(V) bytes (may be NULL when
 * temperature is 0). Errors: LA_EINVAL (NULL, temperature < 0 or not finite, top_k < 0, top_p outside
 * (0, 1], u outside [0, 1)), LA_ESHAPE (V < 1), LA_ENUMERIC (a NaN or +inf logit, or all
 * -inf). */
LA_API la_status la_sample_token(const float *logits, int V, const la_sample_params *sp, double u,
                                 void *scratch, int32_t *token);

/* ---- one decoding session over a language model (issue 32) ---- */

/* A language model (la_lm: the GPT through la_model_lm, a GGUF model through la_llama_lm)
 * plus a KV cache of any element type and policy (opaque). Each la_session_step runs T
 * new tokens through every block of the model exactly as its cache-less forward does
 * (la_model_forward, la_llama_forward), except that attention goes over the cache: the
 * tokens' (QK-normed, for the GPT) un-rotated k and v are appended to each layer's cache
 * (evicting by the policy) and the queries attend over the kept tokens. With the full
 * policy the logits of a token equal those of one forward over the whole prefix
 * (tests/test_decode.c, tests/test_llama.c); with evicting policies the kept tokens sit at
 * re-indexed positions (StreamingLLM, see the KV cache section above). Window / sinks
 * caches with a spec la_kv_stream_exact accepts: a step of T tokens gives exactly the
 * logits and the kept set of T steps of one token (exact chunked streaming); other
 * evicting cases (h2o, ...) see the cache as evicted before the step. */
typedef struct la_session la_session;

/* Fill the shape fields of p (n_layers, H, Hkv, D) from the model. Errors: LA_EINVAL. */
LA_API la_status la_lm_kv_params(const la_lm *lm, la_kv_params *p);

/* Session over lm (whose model must outlive it) with the policy fields of *policy (shape
 * fields are taken from the model; for full, policy->max_tokens is the longest stream).
 * max_step: the most tokens one step may take, in [1, la_kv_max_chunk]. Errors: LA_EINVAL
 * (NULL, bad policy, bad max_step), LA_ENOMEM. */
LA_API la_status la_session_new(la_lm *lm, const la_kv_params *policy, int max_step, la_session **out);
LA_API void la_session_free(la_session *s);
/* Start a new stream (empties the cache, position 0). */
LA_API void la_session_reset(la_session *s);
LA_API la_kv_cache *la_session_cache(la_session *s);
LA_API la_lm *la_session_lm(const la_session *s);
LA_API int la_session_max_step(const la_session *s);
/* Tokens appended so far (the stream position of the next token); -1 for NULL. */
LA_API int64_t la_session_pos(const la_session *s);
/* Make dst continue exactly where src stands (cache state and position): both sessions of
 * the same model, policy and max_step. A fork of a shared prefix (src/infer/kv_fork.c).
 * Errors: LA_EINVAL (NULL, different model, max_step or cache shape). */
LA_API la_status la_session_copy(la_session *dst, const la_session *src);
/* Run tokens (T) through the model, appending to the cache. logits: (T, V) if all_rows,
 * else (1, V) for the last token only; may be NULL. Errors: LA_EINVAL (NULL, T outside
 * [1, max_step], token outside the vocabulary, a full cache out of room: the message says
 * how many tokens it holds), others from the model and the kernel (LA_ENUMERIC: a k or v
 * value an f16 / int8 cache cannot hold). A step that fails after some layers appended
 * leaves the session as it was when no layer had to evict for it (always under full,
 * until the cache first fills under window / sinks, and on an empty h2o cache); else the
 * session refuses further steps (LA_EINVAL) until la_session_reset or a la_session_copy
 * into it. */
LA_API la_status la_session_step(la_session *s, const int32_t *tokens, int T, float *logits, int all_rows);
/* Sequence-parallel prefill into an empty session (issue 30; collective: under mpirun every
 * rank calls it with the same tokens, one process runs the whole sequence): T tokens at
 * positions 0..T-1 in one pass whose attention goes around the ring of ranks (the model's
 * prefill_sp: la_llama_prefill_sp), leaving every layer's keys and values in the session's
 * cache on every rank, so that la_session_step continues the stream at position T (a
 * greedy answer after a long prompt). last: the logits (V) of row T - 1, nll (T) as
 * la_llama_prefill_sp; each may be NULL. The same on every rank and bitwise the same for
 * any number of ranks; not bitwise the chunked la_session_step prefill (another summation
 * order). Needs the full policy with room for T tokens (any element type: the cache
 * converts as la_kv_append does) and a model family with such a prefill (the Llama model;
 * LA_EUNSUPPORTED for the GPT and position-regime methods). Errors agreed by
 * every rank: LA_EINVAL (NULL, T < 2, a session not at position 0, another policy, no
 * room), LA_EUNSUPPORTED, LA_ENOMEM, the kernel's. */
LA_API la_status la_session_prefill_sp(la_session *s, const int32_t *tokens, int T, float *last, double *nll);

/* ---- incremental decoding of the GPT (the former decoder: a la_session) ---- */

/* la_decoder is a la_session over la_model_lm(m); the functions below are the la_session_*
 * ones under their former names. One difference, kept from before issue 32: a decoder
 * does not stream exactly -- a step of T > 1 tokens under window / sinks sees the cache as
 * evicted before it (kv-eval --chunk); la_session_new streams exactly. */
typedef struct la_session la_decoder;

/* Fill the shape fields of p (n_layers, H, Hkv, D) from the model's config. */
LA_API la_status la_kv_params_for_model(const la_model *m, la_kv_params *p);

/* Decoder for m (which must outlive it): la_session_new(la_model_lm(m), ...) without exact
 * streaming. Errors: LA_EINVAL (NULL, bad policy, bad max_step), LA_ENOMEM. */
LA_API la_status la_decoder_new(la_model *m, const la_kv_params *policy, int max_step, la_decoder **out);
LA_API void la_decoder_free(la_decoder *d);
/* Start a new stream (empties the cache). */
LA_API void la_decoder_reset(la_decoder *d);
LA_API la_kv_cache *la_decoder_cache(la_decoder *d);
LA_API int la_decoder_max_step(const la_decoder *d);
/* la_session_step. */
LA_API la_status la_decoder_step(la_decoder *d, const int32_t *tokens, int T, float *logits, int all_rows);

/* ---- generation and perplexity over a session, for every model family (issue 32) ---- */

typedef struct {
    la_sample_params sample; /* default la_sample_params_default() */
    int64_t max_new;         /* tokens to generate at most, >= 0; default 256 */
    uint64_t seed;           /* seed of the sampler's la_rng (one uniform draw per token); default 1 */
    int prefill_chunk;       /* prompt tokens per step, in [1, la_session_max_step]; 0 (default): max_step */
    const int32_t *stop;     /* n_stop tokens that end generation (not emitted), or NULL */
    int n_stop;
    /* called with each generated token in order (may be NULL); a status other than LA_OK
     * ends generation and is returned */
    la_status (*on_token)(void *user, int32_t token);
    void *user;
} la_generate_params;

typedef struct {
    int64_t n_new;            /* tokens generated (emitted) */
    int stopped;              /* 1 if a stop token ended generation before max_new */
    double prefill_s, decode_s; /* wall seconds of the prompt's steps and of the generation loop */
} la_generate_result;

LA_API la_generate_params la_generate_params_default(void);

/* Feed prompt (n_prompt >= 1 tokens) to the session in steps of prefill_chunk (the last
 * row's logits only), then up to max_new times: draw a token from the logits
 * (la_sample_token with the next uniform of la_rng seeded by seed), stop if it is a stop
 * token, hand it to on_token, and (unless it was the last) step it through the session.
 * The session continues from where it stands (la_session_reset it for a new stream).
 * res may be NULL. Errors: LA_EINVAL (NULL, n_prompt < 1, max_new < 0, prefill_chunk
 * outside [0, max_step], stop NULL with n_stop > 0, bad sampling params, a prompt id
 * outside the vocabulary: all checked before the session moves), LA_ENOMEM, those of
 * la_session_step, la_sample_token and on_token. */
LA_API la_status la_generate(la_session *s, const int32_t *prompt, int64_t n_prompt, const la_generate_params *gp,
                             la_generate_result *res);

/* Position buckets of la_perplexity: bucket b holds window positions [2^b, 2^(b+1)). */
#define LA_PPL_BUCKETS 32

typedef struct {
    int64_t ctx;             /* window length in tokens, >= 2 (a full cache needs max_tokens >= ctx) */
    int chunk;               /* tokens per step, in [1, la_session_max_step]; 0 (default): max_step */
    int64_t max_windows;     /* score at most this many windows, >= 0; 0 (default): all */
    const int *token_bytes;  /* (V) bytes each token stands for in the text, or NULL: 1 per token */
    /* called after each window (may be NULL) */
    void (*progress)(void *user, int64_t done, int64_t total);
    void *user;
} la_perplexity_params;

typedef struct {
    int64_t windows, tokens; /* windows scored in full, tokens scored (ctx - 1 per window;
                                after an error, those of a window cut short too) */
    double nll, bytes;       /* summed next-token NLL (nats) and bytes of the scored tokens */
    double seconds;          /* wall time of the windows */
    double bucket_nll[LA_PPL_BUCKETS], bucket_bytes[LA_PPL_BUCKETS];
    int64_t bucket_n[LA_PPL_BUCKETS];
} la_perplexity_result;

LA_API la_perplexity_params la_perplexity_params_default(void);

/* Next-token NLL of ids (n tokens) over non-overlapping windows of ctx tokens (n / ctx of
 * them, at most max_windows): each window starts from an empty cache (la_session_reset)
 * and is fed in steps of chunk tokens with every row's logits; its first token is not
 * scored. nll = log(sum_v exp(z_v - max z)) + max z - z_target, summed in double, overall
 * and by the target's window position p in bucket floor(log2 p). Errors: LA_EINVAL (NULL,
 * ctx < 2, n < ctx, chunk outside [0, max_step], max_windows < 0, an id outside [0, V): checked
 * before any window), LA_ENOMEM, those of la_session_step. */
LA_API la_status la_perplexity(la_session *s, const int32_t *ids, int64_t n, const la_perplexity_params *pp,
                               la_perplexity_result *res);

/* ---- deprecated names: kept so existing programs compile (with a warning naming
 * the replacement); see the naming rule in longattn.h ---- */

LA_DEPRECATED("use la_kv_params_default") static inline la_kv_params la_kv_default_params(void) {
    return la_kv_params_default();
}
LA_DEPRECATED("use la_sample_params_default") static inline la_sample_params la_sample_default_params(void) {
    return la_sample_params_default();
}

#ifdef __cplusplus
}
#endif
#endif /* LONGATTN_INFER_H */
