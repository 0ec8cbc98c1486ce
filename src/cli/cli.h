/* cli.h -- one function per `longattn` subcommand. Each returns the process exit code:
 * 0 success, 1 runtime failure, 2 bad usage. They print to stdout/stderr (the library
 * never does). */
#ifndef LA_CLI_H
#define LA_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "longattn.h"
#include "longattn/core.h"

typedef int (*la_cli_fn)(int argc, char **argv);

typedef struct {
    const char *name;
    const char *summary;
    la_cli_fn fn;
    int ranks; /* 1: splits its work over MPI ranks (src/core/dist.h); 0: one process only */
} la_cli_cmd;

/* ---- src/cli/cli_util.c: helpers shared by the subcommands ---- */
/* One row of a command's --help: OPT is the option as typed ("--spec SPEC", "--stats"),
 * TEXT its description ('\n' starts a continuation line). A row with OPT NULL is a group
 * heading (TEXT "model options:"). A table ends with the row {NULL, NULL}. */
typedef struct {
    const char *opt;
    const char *text;
} cli_opt;
/* One row of a command's option table that both prints its --help and parses its
 * arguments (cli_parse; issue 32: the commands converted so far use it, the others a
 * cli_opt table for the help and a loop of their own). OPT and TEXT as in cli_opt; KIND
 * says what the option takes and DEST where it goes (a table with DEST pointers is a local
 * array of the command). Write the rows with the macros below:
 *   CLI_A_STR   a value, stored as the argument string (const char **DEST)
 *   CLI_A_LONG  an integer in [LO, HI] (long *DEST); else "OPT expects an integer in [LO,
 *               HI], got 'x'"
 *   CLI_A_FLAG  no value; sets int *DEST to 1
 *   CLI_A_FN    a value handed to FN(cmd, opt, value, DEST), which stores it or returns the
 *               usage error's 2
 *   CLI_A_GROUP a group heading; CLI_A_END ends the table */
typedef enum { CLI_HEADING = 0, CLI_STR, CLI_LONG, CLI_FLAG, CLI_FN } cli_kind;
typedef int (*cli_opt_fn)(const char *cmd, const char *opt, const char *val, void *dest);
typedef struct {
    const char *opt;
    const char *text;
    cli_kind kind;
    void *dest;
    long lo, hi;
    cli_opt_fn fn;
} cli_arg;
#define CLI_A_STR(opt, text, dest) {opt, text, CLI_STR, dest, 0, 0, NULL}
#define CLI_A_LONG(opt, text, dest, lo, hi) {opt, text, CLI_LONG, dest, lo, hi, NULL}
#define CLI_A_FLAG(opt, text, dest) {opt, text, CLI_FLAG, dest, 0, 0, NULL}
#define CLI_A_FN(opt, text, fn, dest) {opt, text, CLI_FN, dest, 0, 0, fn}
#define CLI_A_GROUP(text) {NULL, text, CLI_HEADING, NULL, 0, 0, NULL}
#define CLI_A_END {NULL, NULL, CLI_HEADING, NULL, 0, 0, NULL}
/* What a command's --help says around its option table. */
typedef struct {
    const char *usage, *about, *notes;
} cli_doc;
/* Parse argv[1..argc) by the table ARGS of command CMD: --help (or -h) prints the help
 * (the layout of cli_help, from DOC and the rows of ARGS) to stdout. Returns -1 when every
 * argument was taken (go on), 0 after --help (exit 0), else the usage error's 2: "option
 * '--x' needs a value (or is unknown)" for a last argument without its value, "option
 * '--x' needs a value, got the option '--y'", "unknown option '--x'", or the row's own. */
int cli_parse(const char *cmd, const cli_doc *doc, const cli_arg *args, int argc, char **argv);
/* Print a command's --help in the one layout every command uses (tests/python/
 * test_cli_help.py checks it, tests/python/test_documentation.py reads the options):
 *
 *   usage: longattn CMD ...            USAGE: its lines separated by '\n'; the first gets
 *          longattn CMD ...            "usage: ", the others are aligned under it
 *
 *   ABOUT                              (optional) what the command does
 *
 *   options:
 *     --opt ARG             text       one row per option, the text at column 24 (on the
 *                           more text  next line when OPT is longer than 20 characters);
 *     --help                ...        --help is added at the end
 *
 *   NOTES                              (optional) paragraphs after the options
 *
 * ABOUT and NOTES may be NULL; they are printed as given (end them without '\n'). */
void cli_help(FILE *f, const char *usage, const char *about, const cli_opt *opts, const char *notes);
/* cli_help in three parts, for a help made of several tables: begin (usage, about,
 * "options:"), rows (FIRST: 1 for the first table after "options:"), end (--help, notes). */
void cli_help_begin(FILE *f, const char *usage, const char *about);
void cli_help_rows(FILE *f, const cli_opt *opts, int first);
void cli_help_end(FILE *f, const char *notes);
/* the options of `longattn generate --model FILE.gguf` (src/cli/llama_cli.c), which
 * `longattn generate --help` lists too */
extern const cli_opt cli_generate_gguf_opts[];

/* Print "longattn <cmd>: <msg>" and the --help hint to stderr and return 2 (usage error). */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Strict parsers: the whole string is one decimal integer / finite number in [lo, hi].
 * 0 on success (*out set), -1 otherwise (*out untouched); they print nothing. */
int cli_parse_int(const char *s, long long lo, long long hi, long long *out);
int cli_parse_num(const char *s, double lo, double hi, double *out);
/* Training precision option (--precision f32|bf16): 0 and *out set, else cli_usage_error's 2. */
int cli_precision_opt(const char *cmd, const char *val, la_dtype *out);
/* One line saying which bf16 path runs on this CPU and what it costs (issue 29); "" for f32. */
const char *cli_precision_note(la_dtype p);
/* The same for the value S of option OPT, reporting a bad value as a usage error naming the
 * option and the range ("--top-p expects a number in [1e-09, 1], got 'x'"): 0 on success,
 * else cli_usage_error's 2. */
int cli_opt_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int cli_opt_num(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);
/* The sampling options both `generate` forms take (--max-new, --top-k, --seed, --temperature,
 * --top-p), written into the caller's variables. cli_sampling_opt returns -1 when OPT is
 * not one of them, else 0 or the usage error's 2 for a bad VAL. */
typedef struct {
    long *max_new, *top_k, *seed;
    double *temperature, *top_p;
} cli_sampling;
int cli_sampling_opt(const char *cmd, const char *opt, const char *val, const cli_sampling *s);
/* la_generate's parameters with the sampling options' values (both `generate` forms) */
la_generate_params cli_sampling_params(const cli_sampling *s);
/* The KV cache parameters of --kv POLICY (NULL: full) and --kv-type TYPE (NULL: none): the
 * type from TYPE, else from a type term of POLICY, else def. Giving both is a usage error.
 * 0 on success, else the usage error's 2. Shape fields of *kp are left alone. */
int cli_kv_params(const char *cmd, const char *policy, const char *type, la_dtype def_type, la_kv_params *kp);
/* Monotonic clock, seconds. */
double cli_now(void);

/* `longattn study`: the length-generalisation study (src/cli/study.c). */
int cli_study(int argc, char **argv);
/* longattn attn: run the attention kernel on .npy files (src/cli/attn.c). */
int cli_attn(int argc, char **argv);
/* bench/bench_main.c: `longattn bench <name>` (table in bench/bench.h). */
int cli_bench(int argc, char **argv);

/* src/cli/critical.c, src/cli/diagnose.c */
int cli_critical(int argc, char **argv);
int cli_diagnose(int argc, char **argv);

/* src/cli/blas_coretype.c: fix OPENBLAS_CORETYPE (when OpenBLAS fell back to SSE3 kernels),
 * OPENBLAS_NUM_THREADS=1 and OMP_WAIT_POLICY=passive unless the user set them, by
 * re-executing once (returns when nothing needs changing or exec fails). */
void cli_blas_fix_coretype(char **argv);

/* src/cli/train.c: `longattn train` (GPT trainer). */
int cli_train(int argc, char **argv);

/* src/cli/generate.c, src/cli/kv_eval.c: text generation and KV cache policy evaluation. */
int cli_generate(int argc, char **argv);
int cli_kv_eval(int argc, char **argv);
int cli_longeval(int argc, char **argv);

/* src/cli/llama_cli.c: pretrained GGUF models (generate --model, perplexity, llama-logits) */
int cli_generate_gguf(int argc, char **argv);
int cli_perplexity(int argc, char **argv);
int cli_llama_logits(int argc, char **argv);

/* longattn gguf (src/cli/gguf.c): inspect GGUF files */
int cli_gguf(int argc, char **argv);

/* longattn tokenize (src/cli/tokenize.c): a GGUF model's tokenizer on a text */
int cli_tokenize(int argc, char **argv);

/* longattn synth (src/cli/synth.c) */
int cli_synth(int argc, char **argv);

#endif
