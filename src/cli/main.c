/* main.c -- `longattn` command-line program: dispatches to one file per subcommand. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/dist.h"
#include "core/internal.h"
#include "longattn.h"

/* Each subcommand lives in src/cli/<name>.c. Add a row here when one lands. */
static const la_cli_cmd commands[] = {
    {"study", "length-generalisation study: train variants at L, evaluate at L..16L and passkey", cli_study, 1},
    {"attn", "run the attention kernel on .npy files (forward, optional backward)", cli_attn, 1},
    {"train", "train a GPT on text or llm.c shards (longattn train --help)", cli_train, 1},
    {"bench", "benchmarks: longattn bench <name> (see longattn bench --help)", cli_bench, 0},
    {"synth", "train + evaluate synthetic length-generalisation tasks (MQMTAR, copy, ...)", cli_synth, 1},
    {"critical", "critical attention scaling simulation (Chen et al. 2025): angle ratio heatmap", cli_critical, 0},
    {"diagnose", "attention mass and entropy per distance range (--ckpt model on a text, --gaussian model)", cli_diagnose, 0},
    {"generate", "stream text from a checkpoint through the KV cache (greedy/top-k/top-p, any cache policy)", cli_generate, 0},
    {"gguf", "inspect GGUF model files: longattn gguf info FILE (metadata, tensors), dequant, types", cli_gguf, 0},
    {"tokenize", "tokenize a text with a GGUF model's tokenizer (ids and pieces), or decode ids", cli_tokenize, 0},
    {"kv-eval", "KV cache policies: validation loss and passkey accuracy up to 16x the training length", cli_kv_eval, 0},
    {"longeval", "long-context evaluation of a GGUF model: methods x lengths, perplexity, passkey, multi-key", cli_longeval, 1},
    {"perplexity", "bits per token / byte of a GGUF model on a text, by position bucket", cli_perplexity, 1},
    {"llama-logits", "(tests) logits of a GGUF model for token ids, as .npy", cli_llama_logits, 1},
    {NULL, NULL, NULL, 0},
};

/* the help's layout is cli_print_help's (src/cli/cli.h): usage, the commands, then the options */
static void print_help(FILE *f) {
    fprintf(f, "usage: longattn <command> [options]\n\ncommands (longattn <command> --help lists a command's options):\n");
    for (const la_cli_cmd *c = commands; c->name; c++) fprintf(f, "  %-12s %s\n", c->name, c->summary);
    fprintf(f, "\noptions:\n  %-20s  %s\n  %-20s  %s\n", "--version", "print the library version and exit",
            "--help", "print this help and exit");
}

static int run(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("longattn %s\n", la_version());
        return 0;
    }
    /* under mpirun (several processes): join the process group; commands that know about
     * ranks (train, study, synth) split their work, the others refuse */
    if (la_dist_init(&argc, &argv) != LA_OK) {
        fprintf(stderr, "longattn: %s\n", la_errmsg());
        return 1;
    }
    /* every rank must run the same command line: ranks given other options or inputs would
     * exchange different data, or wait for each other in different collectives */
    uint64_t h = LA_FNV0;
    for (int i = 1; i < argc; i++) h = la_fnv1a(h, argv[i], strlen(argv[i]) + 1); /* with each NUL */
    if (!la_dist_same_u64(h)) {
        if (la_dist_rank() == 0)
            fprintf(stderr, "longattn: the %d ranks were started with different command lines; give every rank the "
                    "same command and options\n", la_dist_size());
        la_dist_finalize();
        return 2;
    }
    for (const la_cli_cmd *c = commands; c->name; c++)
        if (!strcmp(argv[1], c->name)) {
            if (la_dist_size() > 1 && !c->ranks) {
                if (la_dist_rank() == 0)
                    fprintf(stderr, "longattn %s: runs as one process; under mpirun only train, study, "
                            "synth, longeval and attn / perplexity / llama-logits --seq-parallel split their work over the ranks (started as %d processes)\n",
                            c->name, la_dist_size());
                la_dist_finalize();
                return 2;
            }
            int rc = c->fn(argc - 1, argv + 1);
            /* every rank's exit status: nonzero on one rank is nonzero on all. A rank that
             * failed before any exchange (a usage error on that rank only) meets the others
             * in their next la_dist_agree, where they are waiting, so they stop too; after
             * an agreed failure every rank has stopped together and nothing is exchanged */
            if (la_dist_size() > 1 && !la_dist_agreed_failure()) {
                if (rc) la_fail(LA_EINVAL, "'longattn %s' stopped with exit status %d (its message is above)", c->name, rc);
                if (la_dist_agree(rc ? LA_EINVAL : LA_OK) != LA_OK && rc == 0) rc = 1;
            }
            la_dist_finalize();
            return rc;
        }
    fprintf(stderr, "longattn: unknown command '%s'; valid commands:", argv[1]);
    for (const la_cli_cmd *c = commands; c->name; c++) fprintf(stderr, " %s", c->name);
    fprintf(stderr, "\n");
    return 2;
}

int main(int argc, char **argv) {
    cli_blas_fix_coretype(argv);
    int rc = run(argc, argv);
    /* what was printed to a full disk or a closed file is a failure, not exit 0 */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) { /* errno is the flush's, or 0 for an earlier write's error */
        fprintf(stderr, "longattn%s%s: writing the standard output failed%s%s\n", argc > 1 ? " " : "",
                argc > 1 ? argv[1] : "", errno ? ": " : " (disk full or output closed?)", errno ? strerror(errno) : "");
        if (rc == 0) rc = 1;
    }
    return rc;
}
