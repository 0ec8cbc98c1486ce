/* main.c -- `longattn` command-line program: dispatches to one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* Each subcommand lives in src/cli/<name>.c. Add a row here when one lands. */
static const la_cli_cmd commands[] = {
    {"study", "length-generalisation study: train variants at L, evaluate at L..16L and passkey", cli_study},
    {"attn", "run the attention kernel on .npy files (forward, optional backward)", cli_attn},
    {"train", "train a GPT on text or llm.c shards (longattn train --help)", cli_train},
    {"bench", "benchmarks: longattn bench <name> (see longattn bench --help)", cli_bench},
    {"synth", "train + evaluate synthetic length-generalisation tasks (MQMTAR, copy, ...)", cli_synth},
    {"critical", "critical attention scaling simulation (Chen et al. 2025): angle ratio heatmap", cli_critical},
    {"diagnose", "attention mass and entropy per distance range (--ckpt model on a text, --gaussian model)", cli_diagnose},
    {"generate", "stream text from a checkpoint through the KV cache (greedy/top-k/top-p, any cache policy)", cli_generate},
    {"gguf", "inspect GGUF model files: longattn gguf info FILE (metadata, tensors), dequant, types", cli_gguf},
    {"tokenize", "tokenize a text with a GGUF model's tokenizer (ids and pieces), or decode ids", cli_tokenize},
    {"kv-eval", "KV cache policies: validation loss and passkey accuracy up to 16x the training length", cli_kv_eval},
    {"longeval", "long-context evaluation of a GGUF model: methods x lengths, perplexity, passkey, multi-key", cli_longeval},
    {"perplexity", "bits per token / byte of a GGUF model on a text, by position bucket", cli_perplexity},
    {"llama-logits", "(tests) logits of a GGUF model for token ids, as .npy", cli_llama_logits},
    {NULL, NULL, NULL},
};

static void print_help(FILE *f) {
    fprintf(f, "usage: longattn <command> [options]   (longattn <command> --help for details)\n\ncommands:\n");
    for (const la_cli_cmd *c = commands; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->summary);
}

int main(int argc, char **argv) {
    cli_blas_fix_coretype(argv);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (const la_cli_cmd *c = commands; c->name; c++)
        if (!strcmp(argv[1], c->name)) return c->fn(argc - 1, argv + 1);
    fprintf(stderr, "longattn: unknown command '%s'; valid commands:", argv[1]);
    for (const la_cli_cmd *c = commands; c->name; c++) fprintf(stderr, " %s", c->name);
    fprintf(stderr, "\n");
    return 2;
}
