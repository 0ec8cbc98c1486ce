/* generate.c -- `longattn generate`: stream text from a checkpoint through the KV cache
 * (greedy, temperature, top-k, top-p sampling; any cache policy). Byte-level models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/internal.h"

static const cli_doc DOC = {
    "longattn generate --ckpt FILE --prompt TEXT [options]\n"
    "longattn generate --model FILE.gguf --prompt TEXT [--chat] ...",
    "Generate text from a byte-level checkpoint (written by `longattn train`), streaming it\n"
    "to stdout, with incremental decoding through a KV cache.",
    NULL, 0,
};

/* la_generate's on_token: the byte, streamed */
static la_status put_byte(void *user, int32_t tok) {
    fputc(tok, stdout);
    fflush(stdout);
    return LA_OK;
}

/* GGUF files (pretrained models) go to cli_generate_gguf: --model FILE, or --ckpt naming a
 * file that starts with the GGUF magic; -1: both --ckpt and --model */
static int is_gguf_request(int argc, char **argv) {
    int model = 0, ckpt = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model")) model = i;
        if (!strcmp(argv[i], "--ckpt") && i + 1 < argc) ckpt = i;
    }
    if (model) return ckpt ? -1 : 1;
    if (!ckpt) return 0;
    FILE *f = la_fopen_regular(argv[ckpt + 1]); /* a FIFO is left to la_model_load's message */
    char magic[4] = {0};
    int gguf = f && fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    if (f) fclose(f);
    if (gguf) argv[ckpt] = "--model";
    return gguf;
}

int cli_generate(int argc, char **argv) {
    int gguf = is_gguf_request(argc, argv);
    if (gguf < 0) return cli_usage_error("generate", "give --ckpt FILE or --model FILE.gguf, not both");
    if (gguf) return cli_generate_gguf(argc, argv);
    const char *cmd = "generate", *ckpt = NULL, *prompt = NULL, *policy = "full", *kv_type = NULL;
    long max_new = 200, top_k = 0, seed = 1;
    double temperature = 0.8, top_p = 0.95;
    const cli_sampling samp = {&max_new, &top_k, &seed, &temperature, &top_p};
    int quiet = 0;
    const cli_arg own[] = { /* this form's rows and a heading; then the GGUF form's, listed in the help only */
        CLI_A_STR("--ckpt FILE", "model weights (safetensors from la_model_save / longattn train)", &ckpt),
        CLI_A_STR("--prompt TEXT", "prompt (bytes); it is echoed before the continuation", &prompt),
        CLI_A_SAMPLING(&samp, "bytes to generate (default 200)", "sampling temperature, 0 = greedy (default 0.8)",
                       "keep the K most likely bytes, 0 = off (default 0)",
                       "nucleus sampling mass in (0, 1], 1 = off (default 0.95)", "random seed of the sampler (default 1)"),
        CLI_A_STR("--policy SPEC", "KV cache policy: full | window(w) | sinks(n,w) | h2o(heavy,recent[,sinks]),\n"
                                   "optionally +TYPE (default full)", &policy),
        CLI_A_STR("--kv-type TYPE", "element type of the cached k/v rows: f32 | f16 | bf16 | int8 | int8(group=g)\n"
                                    "(default f32 for checkpoints; see docs/kv-cache.md)", &kv_type),
        CLI_A_FLAG("--quiet", "do not print the prompt nor the summary on stderr", &quiet),
        CLI_A_GROUP("pretrained GGUF models (--model; alone: longattn generate --model x --help):"),
    };
    enum { OWN = sizeof own / sizeof own[0] };
    cli_arg args[OWN + CLI_GGUF_ROWS];
    memcpy(args, own, sizeof own);
    cli_generate_gguf_rows(args + OWN);
    int rc = cli_parse(cmd, &DOC, args, argc, argv);
    if (rc >= 0) return rc;
    if (!ckpt) return cli_usage_error(cmd, "--ckpt FILE is required");
    if (!prompt || !*prompt) return cli_usage_error(cmd, "--prompt TEXT is required (at least one byte)");

    la_kv_params kp = la_kv_params_default();
    int urc = cli_kv_params(cmd, policy, kv_type, LA_DTYPE_F32, &kp);
    if (urc) return urc;
    la_model *m = NULL;
    if (la_model_load(ckpt, &m) != LA_OK) {
        fprintf(stderr, "longattn generate: cannot load '%s': %s\n", ckpt, la_errmsg());
        return 1;
    }
    const la_model_config *cfg = la_model_get_config(m);
    if (cfg->vocab != 256) {
        fprintf(stderr, "longattn generate: '%s' has a vocabulary of %d; generate handles byte-level models (vocab 256) only\n",
                ckpt, cfg->vocab);
        la_model_free(m);
        return 1;
    }
    if ((rc = cli_kv_fit(cmd, la_model_lm(m), &kp))) {
        la_model_free(m);
        return rc;
    }
    const int n_prompt = (int)strlen(prompt);
    kp.max_tokens = (int64_t)n_prompt + max_new + 1;
    /* prefill: the full cache takes the prompt in chunks; an evicting cache takes it one
     * token at a time, so that every prompt token sees exactly the policy's kept set */
    int64_t chunk = kp.policy == LA_KV_FULL ? (n_prompt < 512 ? n_prompt : 512) : 1;
    la_session *d = NULL;
    rc = 1;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)n_prompt);
    if (!toks) {
        fprintf(stderr, "longattn generate: out of memory\n");
        goto done;
    }
    if (la_session_new(la_model_lm(m), &kp, (int)chunk, &d) != LA_OK) {
        fprintf(stderr, "longattn generate: %s\n", la_errmsg());
        goto done;
    }
    for (int i = 0; i < n_prompt; i++) toks[i] = (unsigned char)prompt[i];
    if (!quiet) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    la_generate_params gp = cli_sampling_params(&samp);
    gp.on_token = put_byte;
    la_generate_result gr;
    if (la_generate(d, toks, n_prompt, &gp, &gr) != LA_OK) {
        fprintf(stderr, "\nlongattn generate: %s\n", la_errmsg());
        goto done;
    }
    fputc('\n', stdout);
    if (!quiet) {
        char pol[128];
        la_kv_policy_format(&kp, pol, sizeof pol);
        la_kv_cache *c = la_session_cache(d);
        fprintf(stderr,
                "[generate] policy %s: prompt %d bytes in %.3f s, %ld new bytes at %.1f bytes/s; cache holds %lld tokens/layer "
                "(%.0f bytes/token, %zu bytes allocated)\n",
                pol, n_prompt, gr.prefill_s, max_new, gr.decode_s > 0 ? max_new / gr.decode_s : 0.0, (long long)la_kv_len(c, 0),
                la_kv_bytes_per_token(la_kv_get_params(c)), la_kv_bytes(c));
    }
    rc = 0;
done:
    la_session_free(d);
    la_model_free(m);
    free(toks);
    return rc;
}
