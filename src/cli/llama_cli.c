/* llama_cli.c -- pretrained GGUF models on the command line:
 *   longattn generate --model FILE.gguf --prompt TEXT [--chat] ...   (cli_generate_gguf)
 *   longattn perplexity --model FILE.gguf --text FILE --ctx N [--spec S]
 *   longattn llama-logits --model FILE.gguf --ids 1,2,3 --out X.npy   (for the tests)
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/dist.h"
#include "core/internal.h"
#include "longattn.h"

/* open model (+ spec) and tokenizer, printing the error; x_q8: la_llama_params.x_q8 */
static int open_model(const char *cmd, const char *path, const char *spec, int x_q8, la_llama **m,
                      la_tokenizer **tok) {
    *m = NULL;
    if (tok) *tok = NULL;
    la_llama_params lp = la_llama_params_default();
    lp.x_q8 = x_q8;
    if (la_llama_open(path, &lp, m) != LA_OK) {
        fprintf(stderr, "longattn %s: cannot load model '%s': %s\n", cmd, path, la_errmsg());
        return 1;
    }
    la_spec s;
    /* selfextend(G,W) / rerope(W) / leaky-rerope(W,k) / dca(...): the model's own RoPE with
     * the method's position regimes (src/model/posreg.c) */
    int pr = spec && la_llama_is_posreg(spec);
    if ((pr && la_llama_set_posreg(*m, spec) != LA_OK) ||
        la_llama_spec_parse(*m, pr ? NULL : spec, &s) != LA_OK || la_llama_set_spec(*m, &s) != LA_OK) {
        fprintf(stderr, "longattn %s: --spec: %s\n", cmd, la_errmsg());
        la_llama_free(*m);
        *m = NULL;
        return 2;
    }
    if (tok && la_llama_tokenizer(*m, tok) != LA_OK) {
        fprintf(stderr, "longattn %s: tokenizer of '%s': %s\n", cmd, path, la_errmsg());
        la_llama_free(*m);
        *m = NULL;
        return 1;
    }
    return 0;
}

/* the KV element type when neither --kv-type nor the policy names one: the GGUF default,
 * except for position regimes (selfextend, rerope, dca), which need a float32 cache */
static la_dtype gguf_kv_default(const char *spec) {
    return spec && la_llama_is_posreg(spec) ? LA_DTYPE_F32 : la_llama_default_kv_type();
}

/* length of the longest prefix of s[0..n) that does not end inside a UTF-8 sequence */
static size_t utf8_complete(const char *s, size_t n) {
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--, back++;
    if (i == 0) return n;
    unsigned char c = (unsigned char)s[i - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return back + 1 >= need ? n : i - 1;
}

/* la_generate's on_token for a tokenizer's model: append the token, then print the decoded
 * text of all generated tokens beyond what is out, holding back an incomplete UTF-8
 * sequence (a character split across tokens) */
typedef struct {
    const la_tokenizer *tok;
    la_token_buf *ids;   /* prompt, then the generated tokens */
    int64_t n_prompt;
    char *text;          /* decoded text of the generated tokens (malloc'ed) */
    size_t printed;      /* bytes of it written to stdout */
} text_out;

static la_status put_text(void *user, int32_t t) {
    text_out *o = user;
    la_token_buf *ids = o->ids;
    if (ids->n == ids->cap) {
        int64_t nc = ids->cap * 2 + 16;
        int32_t *ni = realloc(ids->ids, sizeof(int32_t) * (size_t)nc);
        if (!ni) return la_fail(LA_ENOMEM, "out of memory");
        ids->ids = ni, ids->cap = nc;
    }
    ids->ids[ids->n++] = t;
    size_t len = 0;
    free(o->text);
    o->text = NULL;
    LA_TRY(la_tokenizer_decode(o->tok, ids->ids + o->n_prompt, ids->n - o->n_prompt, LA_TOK_SKIP_SPECIAL | LA_TOK_KEEP_SPACE,
                               &o->text, &len));
    size_t ok = utf8_complete(o->text, len);
    if (ok > o->printed) {
        fwrite(o->text + o->printed, 1, ok - o->printed, stdout);
        fflush(stdout);
        o->printed = ok;
    }
    return LA_OK;
}

static const cli_doc GGUF_DOC = {
    "longattn generate --model FILE.gguf --prompt TEXT [options]",
    "Generate text with a pretrained GGUF model (llama, qwen2), streaming it to stdout: prefill\n"
    "through the attention kernel, then decoding through the KV cache.",
    NULL, 0,
};

/* the options of generate --model, with their defaults */
typedef struct {
    const char *path, *prompt, *policy, *spec, *system, *ids_out, *kv_type;
    long max_new, top_k, seed, ctx, pchunk;
    double temperature, top_p;
    int quiet, chat, x_q8;
    cli_sampling samp;
} gguf_gen;

/* the option table of generate --model into ROWS (CLI_GGUF_ROWS rows), pointing into G */
static void gguf_gen_table(gguf_gen *g, cli_arg *rows) {
    g->samp = (cli_sampling){&g->max_new, &g->top_k, &g->seed, &g->temperature, &g->top_p};
    const cli_arg t[] = {
        CLI_A_STR("--model FILE", "GGUF file (e.g. data/models/SmolLM2-135M-Instruct.Q4_1.gguf)", &g->path),
        CLI_A_STR("--prompt TEXT", "prompt (UTF-8)", &g->prompt),
        CLI_A_FLAG("--chat", "wrap the prompt in the model's chat template (ChatML, Llama 2, Llama 3)", &g->chat),
        CLI_A_STR("--system TEXT", "system message for --chat (default: the template's own, if any)", &g->system),
        CLI_A_SAMPLING(&g->samp, "tokens to generate (default 256); stops earlier at EOS / end of turn",
                       "sampling temperature, 0 = greedy (default 0 = greedy)",
                       "keep the K most likely tokens, 0 = off (default 0)", "nucleus mass in (0, 1], 1 = off (default 1)",
                       "sampler seed (default 1)"),
        CLI_A_STR("--kv POLICY", "KV cache policy: full | window(w) | sinks(n,w) | h2o(heavy,recent[,sinks]),\n"
                                 "optionally +TYPE (default full)", &g->policy),
        CLI_A_STR("--policy POLICY", "the same as --kv", &g->policy),
        CLI_A_STR("--kv-type TYPE", "element type of the cached k/v rows: f32 | f16 | bf16 | int8 | int8(group=g)\n"
                                    "(default f16 for GGUF models; see docs/kv-cache.md)", &g->kv_type),
        CLI_A_LONG("--prefill-chunk N", "prompt tokens per prefill step, at most (default 512; 1: token by token).\n"
                                        "Exact for full, window and sinks caches; h2o in chunks of a quarter of\n"
                                        "its recent window (an approximation, docs/kv-cache.md)", &g->pchunk, 1, 1L << 16),
        CLI_A_LONG("--ctx N", "full cache: the longest stream, prompt included (default: the model's\n"
                              "trained context); the prompt must be shorter", &g->ctx, 1, 1L << 30),
        CLI_A_STR("--spec SPEC", "attention spec (default softmax+rope(theta=<file base>)+causal; theta\n"
                                 "defaults to the file's RoPE base)", &g->spec),
        CLI_A_FLAG("--x-q8", "decode products quantize x to 8 bits per 32 values, as llama.cpp does\n"
                                "(faster, less exact; docs/real-models.md)", &g->x_q8),
        CLI_A_FLAG("--quiet", "no prompt echo, no summary on stderr", &g->quiet),
        CLI_A_STR("--ids-out FILE", "write the prompt and generated token ids (one line each, for tests)", &g->ids_out),
        CLI_A_END,
    };
    _Static_assert(sizeof t / sizeof t[0] <= CLI_GGUF_ROWS, "raise CLI_GGUF_ROWS");
    memcpy(rows, t, sizeof t);
}

void cli_generate_gguf_rows(cli_arg *rows) {
    gguf_gen g;
    gguf_gen_table(&g, rows);
    for (cli_arg *r = rows; r->kind != CLI_END; r++) *r = (cli_arg)CLI_A_ALSO(r->opt, r->text);
}

int cli_generate_gguf(int argc, char **argv) {
    const char *cmd = "generate";
    gguf_gen g = {.policy = "full", .max_new = 256, .seed = 1, .pchunk = 512, .top_p = 1};
    cli_arg args[CLI_GGUF_ROWS];
    gguf_gen_table(&g, args);
    int prc = cli_parse(cmd, &GGUF_DOC, args, argc, argv);
    if (prc >= 0) return prc;
    if (!g.path) return cli_usage_error(cmd, "--model FILE.gguf is required");
    if (!g.prompt || !*g.prompt) return cli_usage_error(cmd, "--prompt TEXT is required (not empty)");
    if (g.system && !g.chat) return cli_usage_error(cmd, "--system needs --chat (it is the chat template's system message)");
    la_kv_params kp = la_kv_params_default();
    int urc = cli_kv_params(cmd, g.policy, g.kv_type, gguf_kv_default(g.spec), &kp);
    if (urc) return urc;
    la_llama *m = NULL;
    la_tokenizer *tok = NULL;
    int rc = open_model(cmd, g.path, g.spec, g.x_q8, &m, &tok);
    if (rc) return rc;
    if ((rc = cli_kv_fit(cmd, la_llama_lm(m), &kp))) {
        la_tokenizer_free(tok);
        la_llama_free(m);
        return rc;
    }
    rc = 1;
    const la_llama_config *cfg = la_llama_get_config(m);
    char *text = NULL, *out_text = NULL;
    const char *stop_text = NULL;
    la_token_buf ids = {0};
    la_session *s = NULL;
    if (g.chat && la_chat_apply(la_tokenizer_chat_template(tok), g.system, g.prompt, &text, &stop_text) != LA_OK) {
        fprintf(stderr, "longattn %s: --chat: %s\n", cmd, la_errmsg());
        goto done;
    }
    const char *input = g.chat ? text : g.prompt;
    if (la_tokenizer_encode(tok, input, strlen(input), LA_TOK_ADD_SPECIAL | (g.chat ? LA_TOK_PARSE_SPECIAL : 0), &ids) !=
        LA_OK) {
        fprintf(stderr, "longattn %s: --prompt: %s\n", cmd, la_errmsg());
        goto done;
    }
    /* a template that writes BOS itself (Llama 3's <|begin_of_text|>) gets no second one from
     * add_bos: llama.cpp strips the template's, Hugging Face's apply_chat_template adds none */
    if (g.chat && ids.n >= 2 && ids.ids[0] == la_tokenizer_bos(tok) && ids.ids[1] == ids.ids[0])
        memmove(ids.ids, ids.ids + 1, sizeof(int32_t) * (size_t)--ids.n);
    const int64_t n_prompt = ids.n;
    if (n_prompt < 1) {
        fprintf(stderr, "longattn %s: the prompt encodes to no tokens\n", cmd);
        goto done;
    }
    if (kp.policy == LA_KV_FULL) {
        int64_t cap = g.ctx > 0 ? g.ctx : cfg->n_ctx_train;
        if (n_prompt >= cap) {
            fprintf(stderr,
                    "longattn %s: the prompt is %lld tokens but must be shorter than the KV cache, %lld tokens (--ctx; "
                    "the model's trained context is %lld), to leave room for a new token: shorten the prompt, raise "
                    "--ctx, or use an evicting --kv policy\n",
                    cmd, (long long)n_prompt, (long long)cap, (long long)cfg->n_ctx_train);
            goto done;
        }
        if (n_prompt + g.max_new < cap) cap = n_prompt + g.max_new;
        if (g.max_new > cap - n_prompt) g.max_new = cap - n_prompt; /* what la_generate gets */
        kp.max_tokens = cap;
    }
    /* prefill in chunks: full and window / sinks caches exactly (window / sinks streamed,
     * kv_stream.c), h2o in la_kv_prefill_chunk's approximation (a quarter of its recent window) */
    int chunk = la_kv_prefill_chunk(la_llama_spec(m), &kp, (int)(n_prompt < g.pchunk ? n_prompt : g.pchunk));
    if (la_session_new(la_llama_lm(m), &kp, chunk, &s) != LA_OK) {
        fprintf(stderr, "longattn %s: %s\n", cmd, la_errmsg());
        goto done;
    }
    int32_t stop[2] = {la_tokenizer_eos(tok), stop_text ? la_tokenizer_token_id(tok, stop_text) : -1};
    if (!g.quiet) {
        fputs(g.chat ? "" : g.prompt, stdout);
        fflush(stdout);
    }
    la_generate_params gp = cli_sampling_params(&g.samp);
    gp.stop = stop;
    gp.n_stop = 2;
    gp.on_token = put_text;
    text_out to = {tok, &ids, n_prompt, NULL, 0};
    gp.user = &to;
    la_generate_result gr;
    la_status gst = la_generate(s, ids.ids, n_prompt, &gp, &gr); /* reads the prompt before put_text grows ids */
    out_text = to.text;
    if (gst != LA_OK) {
        fprintf(stderr, "\nlongattn %s: %s\n", cmd, la_errmsg());
        goto done;
    }
    if (out_text) {
        size_t len = strlen(out_text);
        if (len > to.printed) fwrite(out_text + to.printed, 1, len - to.printed, stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);
    if (g.ids_out) { /* written atomically; a failed write is an error, not a short file */
        la_afile af;
        la_status st = la_afile_open(&af, g.ids_out);
        for (int64_t i = 0; st == LA_OK && i < ids.n; i++)
            fprintf(af.f, "%d%s", ids.ids[i], i + 1 == n_prompt || i + 1 == ids.n ? "\n" : " ");
        if (st == LA_OK && ids.n == n_prompt) fputc('\n', af.f);
        if (st == LA_OK) st = la_afile_commit(&af);
        if (st != LA_OK) {
            fprintf(stderr, "longattn %s: --ids-out: %s\n", cmd, la_errmsg());
            goto done;
        }
    }
    if (!g.quiet) {
        char pol[128];
        la_kv_policy_format(&kp, pol, sizeof pol);
        la_kv_cache *c = la_session_cache(s);
        fprintf(stderr,
                "[generate] %s, kv %s: prompt %lld tokens in %.2f s (%.1f tok/s), %ld new tokens at %.1f tok/s; "
                "weights %.1f MB, KV cache %.1f MB\n",
                cfg->arch, pol, (long long)n_prompt, gr.prefill_s, n_prompt / (gr.prefill_s > 0 ? gr.prefill_s : 1e-9),
                (long)gr.n_new, gr.decode_s > 0 ? gr.n_new / gr.decode_s : 0.0, la_llama_weight_bytes(m) / 1e6,
                la_kv_bytes(c) / 1e6);
    }
    rc = 0;
done:
    la_session_free(s);
    la_token_buf_free(&ids);
    la_tokenizer_free(tok);
    la_llama_free(m);
    free(text);
    free(out_text);
    return rc;
}

/* ---- perplexity ---- */

/* la_perplexity's progress: the window count on stderr */
static void window_done(void *user, int64_t done, int64_t total) {
    fprintf(stderr, "\r[perplexity] window %lld/%lld", (long long)done, (long long)total);
}

/* --seq-parallel (issue 30) under mpirun: a rank that fails before the prefill (a file it
 * cannot read) tells the others here, once, so that no rank waits in the ring; the ranks
 * that got through call it once with ok = 1 before the first prefill. 1: go on. */
static int sp_setup_agree(int seqpar, int ok) {
    if (!seqpar) return ok;
    return la_dist_agree(ok ? LA_OK : la_fail(LA_EIO, "%s", la_errmsg())) == LA_OK && ok;
}

/* perplexity --seq-parallel: each window one prefill over the ranks (la_llama_prefill_sp),
 * its token losses bucketed as la_perplexity buckets them. */
static la_status sp_perplexity(la_llama *m, const int32_t *ids, int64_t n, const la_perplexity_params *pp,
                               la_perplexity_result *res) {
    *res = (la_perplexity_result){0};
    const int64_t ctx = pp->ctx;
    int64_t n_win = n / ctx;
    if (pp->max_windows && n_win > pp->max_windows) n_win = pp->max_windows;
    double *nll = malloc(sizeof(double) * (size_t)ctx), t0 = cli_now();
    la_status st = la_dist_agree(nll ? LA_OK : la_fail(LA_ENOMEM, "out of memory for %lld token losses", (long long)ctx));
    for (int64_t w = 0; st == LA_OK && w < n_win; w++) {
        const int32_t *x = ids + w * ctx;
        if ((st = la_llama_prefill_sp(m, x, (int)ctx, NULL, nll)) != LA_OK) break;
        for (int64_t p = 0; p + 1 < ctx; p++) { /* nll[p]: the target x[p + 1] at window position p + 1 */
            int b = 0;
            while ((2LL << b) <= p + 1 && b < LA_PPL_BUCKETS - 1) b++;
            res->bucket_nll[b] += nll[p];
            res->bucket_bytes[b] += pp->token_bytes ? pp->token_bytes[x[p + 1]] : 1;
            res->bucket_n[b]++;
        }
        if (pp->progress) pp->progress(pp->user, w + 1, n_win);
    }
    res->seconds = cli_now() - t0;
    res->windows = n_win;
    for (int b = 0; b < LA_PPL_BUCKETS; b++)
        res->nll += res->bucket_nll[b], res->bytes += res->bucket_bytes[b], res->tokens += res->bucket_n[b];
    free(nll);
    return st;
}

static const cli_doc PPL_DOC = {
    "longattn perplexity --model FILE.gguf --text FILE --ctx N [--spec SPEC] [--windows K]\n"
    "                    [--chunk C] [--kv-type TYPE] [--seq-parallel]",
    "Bits per token and per byte of a GGUF model on a text, over non-overlapping windows of N\n"
    "tokens (each window starts from an empty context; its first token is not scored), overall\n"
    "and by position bucket [2^k, 2^(k+1)) within the window.",
    NULL, 0,
};

int cli_perplexity(int argc, char **argv) {
    const char *cmd = "perplexity", *path = NULL, *text_path = NULL, *spec = NULL, *kv_type = NULL;
    long ctx = 0, max_windows = 0, chunk = 256;
    int seqpar = 0, x_q8 = 0;
    cli_arg args[] = {
        CLI_A_STR("--model FILE.gguf", "GGUF model (llama / qwen2)", &path),
        CLI_A_STR("--text FILE", "the text to score", &text_path),
        CLI_A_LONG("--ctx N", "window length in tokens", &ctx, 2, 1L << 26),
        CLI_A_STR("--spec SPEC", "attention spec (default softmax+rope(theta=<file base>)+causal)", &spec),
        CLI_A_LONG("--windows K", "score at most K windows (default all)", &max_windows, 1, 1L << 30),
        CLI_A_LONG("--chunk C", "prefill chunk (default 256)", &chunk, 1, 1L << 16),
        CLI_A_STR("--kv-type TYPE", "element type of the KV cache: f32 | f16 | bf16 | int8 | int8(group=g)\n"
                                    "(default f16, the GGUF default; see docs/kv-cache.md)", &kv_type),
        CLI_A_FLAG("--x-q8", "products of fewer than 4 rows (--chunk 1 to 3: decode) quantize x to 8\n"
                             "bits per 32 values, as llama.cpp does (docs/real-models.md)", &x_q8),
        CLI_A_FLAG("--seq-parallel", "under mpirun: each window is one prefill split over the ranks (no\n"
                                     "cache, float32 keys and values; the same numbers on any number of\n"
                                     "ranks; not with --chunk or --kv-type; docs/mpi.md)", &seqpar),
        CLI_A_END,
    };
    int prc = cli_parse(cmd, &PPL_DOC, args, argc, argv);
    if (prc >= 0) return prc;
    const int chunk_set = cli_given(args, "--chunk") > 0;
    if (!path) return cli_usage_error(cmd, "--model FILE.gguf is required");
    if (!text_path) return cli_usage_error(cmd, "--text FILE is required");
    if (!ctx) return cli_usage_error(cmd, "--ctx N is required");
    if (la_dist_size() > 1 && !seqpar)
        return cli_usage_error(cmd, "started as %d processes: add --seq-parallel to split each window over them, "
                               "or run without mpirun", la_dist_size());
    if (seqpar && (chunk_set || kv_type))
        return cli_usage_error(cmd, "--seq-parallel prefills each window at once without a cache (float32 keys "
                               "and values); drop %s", chunk_set ? "--chunk" : "--kv-type");
    la_kv_params kp = la_kv_params_default();
    int urc = cli_kv_params(cmd, NULL, kv_type, gguf_kv_default(spec), &kp);
    if (urc) return urc;
    size_t tlen = 0;
    char *text = NULL;
    la_llama *m = NULL;
    la_tokenizer *tok = NULL;
    la_token_buf ids = {0};
    la_session *s = NULL;
    int *tok_bytes = NULL, rc = 1, agreed = 0; /* agreed: sp_setup_agree was called */
    if (la_read_file(text_path, 0, &text, &tlen) != LA_OK) {
        fprintf(stderr, "longattn %s: %s\n", cmd, la_errmsg());
        goto done;
    }
    rc = open_model(cmd, path, spec, x_q8, &m, &tok);
    if (rc || (!seqpar && (rc = cli_kv_fit(cmd, la_llama_lm(m), &kp)))) goto done;
    const int rank0 = la_dist_rank() == 0;
    rc = 1;
    const int V = la_llama_get_config(m)->n_vocab;
    la_perplexity_result pr;
    if (la_tokenizer_encode(tok, text, tlen, 0, &ids) != LA_OK) {
        fprintf(stderr, "longattn %s: %s: %s\n", cmd, text_path, la_errmsg());
        goto done;
    }
    if (ids.n < ctx) {
        fprintf(stderr, "longattn %s: %s has %lld tokens, fewer than one window of --ctx %ld\n", cmd, text_path,
                (long long)ids.n, ctx);
        la_fail(LA_EINVAL, "%s has %lld tokens, fewer than one window", text_path, (long long)ids.n);
        goto done;
    }
    if (chunk > ctx) chunk = ctx;
    tok_bytes = malloc(sizeof(int) * (size_t)V);
    kp.max_tokens = ctx;
    if (!tok_bytes || (!seqpar && la_session_new(la_llama_lm(m), &kp, (int)chunk, &s) != LA_OK)) {
        fprintf(stderr, "longattn %s: %s\n", cmd, tok_bytes ? la_errmsg() : "out of memory");
        goto done;
    }
    agreed = 1;
    if (!sp_setup_agree(seqpar, 1)) { /* --seq-parallel: every rank can start, or none does */
        if (rank0) fprintf(stderr, "longattn %s: %s\n", cmd, la_errmsg());
        goto done;
    }
    for (int32_t v = 0; v < V; v++) { /* bytes each token stands for in the text */
        char *t = NULL;
        size_t l = 0;
        tok_bytes[v] = la_tokenizer_decode(tok, &v, 1, LA_TOK_KEEP_SPACE, &t, &l) == LA_OK ? (int)l : 0;
        free(t);
    }
    la_perplexity_params pp = la_perplexity_params_default();
    pp.ctx = ctx;
    pp.max_windows = max_windows;
    pp.token_bytes = tok_bytes;
    pp.progress = rank0 ? window_done : NULL;
    if ((seqpar ? sp_perplexity(m, ids.ids, ids.n, &pp, &pr) : la_perplexity(s, ids.ids, ids.n, &pp, &pr)) != LA_OK) {
        if (rank0) fprintf(stderr, "longattn %s: %s\n", cmd, la_errmsg());
        goto done;
    }
    rc = 0;
    if (!rank0) goto done; /* --seq-parallel: rank 0 prints */
    fprintf(stderr, "\n");
    char sp[256];
    la_spec_format(la_llama_spec(m), sp, sizeof sp);
    const double el = pr.seconds;
    printf("model %s  spec %s  kv %s  ctx %ld  windows %lld  tokens scored %lld (%.0f bytes)  %.1f tok/s\n", path, sp,
           seqpar ? "none (--seq-parallel, f32)" : la_dtype_name(la_kv_params_type(&kp)), ctx, (long long)pr.windows, (long long)pr.tokens, pr.bytes,
           pr.windows * ctx / (el > 0 ? el : 1e-9));
    printf("overall: %.4f bits/token  %.4f bits/byte  perplexity %.3f\n", pr.nll / pr.tokens / log(2),
           pr.nll / log(2) / pr.bytes, exp(pr.nll / pr.tokens));
    printf("%-18s %10s %12s %12s\n", "positions", "tokens", "bits/token", "bits/byte");
    for (int b = 0; b < LA_PPL_BUCKETS; b++) {
        if (!pr.bucket_n[b]) continue;
        char r[40];
        snprintf(r, sizeof r, "[%lld, %lld)", 1LL << b, (2LL << b) < ctx ? 2LL << b : (long long)ctx);
        printf("%-18s %10lld %12.4f %12.4f\n", r, (long long)pr.bucket_n[b], pr.bucket_nll[b] / pr.bucket_n[b] / log(2),
               pr.bucket_nll[b] / log(2) / pr.bucket_bytes[b]);
    }
    rc = 0;
done:
    if (!agreed) sp_setup_agree(seqpar, 0); /* this rank failed before the first prefill */
    la_session_free(s);
    la_token_buf_free(&ids);
    la_tokenizer_free(tok);
    la_llama_free(m);
    free(text);
    free(tok_bytes);
    return rc;
}

/* ---- raw logits for the tests ---- */

static const cli_doc LOGITS_DOC = {
    "longattn llama-logits --model F.gguf --ids 1,2,3 --out X.npy [--spec S]\n"
    "                      [--kv POLICY [--kv-type TYPE] --step N | --chunk N | --seq-parallel]",
    "Logits (T, V) float32 of every position (for the tests): the cache-less forward in\n"
    "chunks of --chunk tokens, or with --kv a decoding session fed --step tokens at a time.",
    NULL, 0,
};

int cli_llama_logits(int argc, char **argv) {
    const char *cmd = "llama-logits", *path = NULL, *ids_s = NULL, *out = NULL, *spec = NULL, *policy = NULL,
               *kv_type = NULL;
    long step = 0, chunk = 0;
    int seqpar = 0;
    cli_arg args[] = {
        CLI_A_STR("--model FILE.gguf", "GGUF model (llama / qwen2)", &path),
        CLI_A_STR("--ids 1,2,3", "token ids", &ids_s),
        CLI_A_STR("--out X.npy", "the logits (T, V), float32", &out),
        CLI_A_STR("--spec SPEC", "attention spec (default softmax+rope(theta=<file base>)+causal)", &spec),
        CLI_A_STR("--kv POLICY", "decode through a KV cache with this policy instead of the cache-less forward", &policy),
        CLI_A_STR("--kv-type TYPE", "with --kv: the cache's element type, f32 | f16 | bf16 | int8 | int8(group=g)\n"
                                    "(default f16, the GGUF default)", &kv_type),
        CLI_A_LONG("--step N", "with --kv: tokens fed per session step (default: the largest chunk that is\n"
                               "exact, la_kv_prefill_chunk: 512 for full, w for window / sinks, 1 for h2o)",
                   &step, 1, 1L << 20),
        CLI_A_LONG("--chunk N", "without --kv: the forward's chunk (default 512)", &chunk, 1, 1L << 20),
        CLI_A_FLAG("--seq-parallel", "under mpirun: one prefill split over the ranks (no cache; the same\n"
                                     "logits on any number of ranks; not with --kv or --chunk)", &seqpar),
        CLI_A_END,
    };
    int prc = cli_parse(cmd, &LOGITS_DOC, args, argc, argv);
    if (prc >= 0) return prc;
    if (!path || !ids_s || !out) return cli_usage_error(cmd, "--model, --ids and --out are required");
    if ((kv_type || step) && !policy)
        return cli_usage_error(cmd, "%s needs --kv POLICY (the cache-less forward has no cache)", kv_type ? "--kv-type" : "--step");
    if (chunk && policy) return cli_usage_error(cmd, "--chunk is the cache-less forward's; with --kv use --step");
    if (la_dist_size() > 1 && !seqpar)
        return cli_usage_error(cmd, "started as %d processes: add --seq-parallel to split the prefill over them, "
                               "or run without mpirun", la_dist_size());
    if (seqpar && (policy || chunk))
        return cli_usage_error(cmd, "--seq-parallel is one prefill without a cache; drop %s", policy ? "--kv" : "--chunk");
    la_kv_params kp = la_kv_params_default();
    if (policy) {
        int urc = cli_kv_params(cmd, policy, kv_type, gguf_kv_default(spec), &kp);
        if (urc) return urc;
    }
    int64_t T = 1;
    for (const char *c = ids_s; *c; c++) T += *c == ',';
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)T);
    if (!ids) return 1;
    const char *c = ids_s;
    for (int64_t i = 0; i < T; i++) {
        char *end;
        errno = 0;
        long v = strtol(c, &end, 10);
        if (end == c || (*end && *end != ',') || errno || v < INT32_MIN || v > INT32_MAX) {
            free(ids);
            return cli_usage_error(cmd, "--ids: '%.*s' is not a token id (a comma-separated list of integers)",
                                   (int)strcspn(c, ","), c);
        }
        ids[i] = (int32_t)v;
        c = *end ? end + 1 : end;
    }
    la_llama *m = NULL;
    int rc = open_model(cmd, path, spec, 0, &m, NULL);
    if (!sp_setup_agree(seqpar, rc == 0)) { /* --seq-parallel: a rank that cannot load stops every rank */
        if (!rc) fprintf(stderr, "longattn %s: %s\n", cmd, la_errmsg());
        la_llama_free(m);
        free(ids);
        return rc ? rc : 1;
    }
    if (policy && (rc = cli_kv_fit(cmd, la_llama_lm(m), &kp))) {
        la_llama_free(m);
        free(ids);
        return rc;
    }
    rc = 1;
    const int V = la_llama_get_config(m)->n_vocab;
    float *lg = malloc(sizeof(float) * (size_t)T * V);
    la_session *s = NULL;
    la_status st;
    if (!lg) {
        st = la_fail(LA_ENOMEM, "out of memory");
    } else if (seqpar) {
        st = T > INT32_MAX ? la_fail(LA_EINVAL, "too many ids") : la_llama_prefill_sp(m, ids, (int)T, lg, NULL);
    } else if (!policy) {
        st = la_llama_forward(m, ids, T, (int)chunk, lg, 1);
    } else {
        kp.max_tokens = T;
        if (!step) step = la_kv_prefill_exact(la_llama_spec(m), &kp) ? la_kv_prefill_chunk(la_llama_spec(m), &kp, 512) : 1;
        st = la_session_new(la_llama_lm(m), &kp, (int)step, &s);
        for (int64_t i = 0; st == LA_OK && i < T; i += step) {
            int n = (int)(T - i < step ? T - i : step);
            st = la_session_step(s, ids + i, n, lg + (size_t)i * V, 1);
        }
    }
    if (st == LA_OK && la_dist_rank() == 0) { /* --seq-parallel: every rank holds the logits; rank 0 writes */
        int64_t shape[2] = {T, V};
        st = la_npy_write_f32(out, lg, 2, shape);
    }
    if (st != LA_OK) fprintf(stderr, "longattn %s: %s\n", cmd, la_errmsg());
    else rc = 0;
    la_session_free(s);
    la_llama_free(m);
    free(lg);
    free(ids);
    return rc;
}
