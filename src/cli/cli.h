/* cli.h -- one function per `longattn` subcommand. Each returns the process exit code:
 * 0 success, 1 runtime failure, 2 bad usage. They print to stdout/stderr (the library
 * never does). */
#ifndef LA_CLI_H
#define LA_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "longattn/core.h"
#include "longattn/infer.h" /* la_generate_params, la_kv_params */

typedef int (*la_cli_fn)(int argc, char **argv);

typedef struct {
    const char *name;
    const char *summary;
    la_cli_fn fn;
    int ranks; /* 1: splits its work over MPI ranks (src/core/dist.h); 0: one process only */
} la_cli_cmd;

/* ---- src/cli/cli_util.c: helpers shared by the subcommands ---- */
/* One row of a command's option table, which both prints its --help and parses its
 * arguments (cli_parse; every command has one). OPT is the option as typed ("--spec SPEC",
 * "--stats": the first word is the option), TEXT its description ('\n' starts a
 * continuation line); KIND says what the option takes and DEST where it goes (a table with
 * DEST pointers is a local array of the command). Write the rows with the macros below:
 *   CLI_A_STR   a value, stored as the argument string (const char **DEST)
 *   CLI_A_LONG  an integer in [LO, HI] (long *DEST); else "OPT expects an integer in [LO,
 *               HI], got 'x'"
 *   CLI_A_INT   the same into an int (int *DEST)
 *   CLI_A_NUM   a finite number in [LO, HI] (double *DEST); CLI_A_NUM_X with ENDS
 *               CLI_OPEN_LO / CLI_OPEN_HI leaves that bound out ("in (0, 1]"; HI = HUGE_VAL:
 *               "a number > 0")
 *   CLI_A_U64   any non-negative 64-bit integer (uint64_t *DEST; seeds)
 *   CLI_A_FLAG  no value; sets int *DEST to 1
 *   CLI_A_FN    a value handed to FN(cmd, opt, value, DEST), which stores it or returns the
 *               usage error's 2
 *   CLI_A_ALSO  a row of the help only, not parsed: an option listed again under a second
 *               mode (parsed by its first row), or one of another form of the command
 *   CLI_A_POS   the arguments that are not options (cli_pos *DEST, at most DEST->cap; TEXT
 *               names them in the error for more); not printed. Without this row an
 *               argument that is not an option is a usage error
 *   CLI_A_GROUP a group heading; CLI_A_END ends the table
 * cli_parse writes into GIVEN of a row the argv index where its option was last given (0:
 * not given; cli_given reads it), so a table is not const. */
typedef enum { CLI_END = 0, CLI_HEADING, CLI_ALSO, CLI_POS, CLI_STR, CLI_LONG, CLI_INT, CLI_NUM, CLI_U64, CLI_FLAG, CLI_FN } cli_kind;
enum { CLI_OPEN_LO = 1, CLI_OPEN_HI = 2 };
typedef int (*cli_opt_fn)(const char *cmd, const char *opt, const char *val, void *dest);
typedef struct {
    const char *opt;
    const char *text;
    cli_kind kind;
    void *dest;
    long lo, hi;     /* CLI_LONG, CLI_INT */
    double flo, fhi; /* CLI_NUM */
    int ends;        /* CLI_NUM: CLI_OPEN_LO | CLI_OPEN_HI */
    cli_opt_fn fn;
    int given;
} cli_arg;
typedef struct {
    const char **v; /* the arguments, in order */
    int cap, n;
} cli_pos;
/* DEST, which must have type T (a compile error otherwise) */
#define CLI_DEST(dest, T) _Generic((dest), T: (dest))
#define CLI_A_STR(opt, text, dest) {opt, text, CLI_STR, CLI_DEST(dest, const char **), 0, 0, 0, 0, 0, NULL, 0}
#define CLI_A_LONG(opt, text, dest, lo, hi) {opt, text, CLI_LONG, CLI_DEST(dest, long *), lo, hi, 0, 0, 0, NULL, 0}
#define CLI_A_INT(opt, text, dest, lo, hi) {opt, text, CLI_INT, CLI_DEST(dest, int *), lo, hi, 0, 0, 0, NULL, 0}
#define CLI_A_NUM(opt, text, dest, lo, hi) {opt, text, CLI_NUM, CLI_DEST(dest, double *), 0, 0, lo, hi, 0, NULL, 0}
#define CLI_A_NUM_X(opt, text, dest, lo, hi, ends) {opt, text, CLI_NUM, CLI_DEST(dest, double *), 0, 0, lo, hi, ends, NULL, 0}
#define CLI_A_U64(opt, text, dest) {opt, text, CLI_U64, CLI_DEST(dest, uint64_t *), 0, 0, 0, 0, 0, NULL, 0}
#define CLI_A_FLAG(opt, text, dest) {opt, text, CLI_FLAG, CLI_DEST(dest, int *), 0, 0, 0, 0, 0, NULL, 0}
#define CLI_A_FN(opt, text, fn, dest) {opt, text, CLI_FN, dest, 0, 0, 0, 0, 0, fn, 0}
#define CLI_A_ALSO(opt, text) {opt, text, CLI_ALSO, NULL, 0, 0, 0, 0, 0, NULL, 0}
#define CLI_A_POS(text, dest) {NULL, text, CLI_POS, CLI_DEST(dest, cli_pos *), 0, 0, 0, 0, 0, NULL, 0}
#define CLI_A_GROUP(text) {NULL, text, CLI_HEADING, NULL, 0, 0, 0, 0, 0, NULL, 0}
#define CLI_A_END {NULL, NULL, CLI_END, NULL, 0, 0, 0, 0, 0, NULL, 0}
/* What a command's --help says around its option table. EQ: 1 if the options also take
 * the form --opt=VALUE. */
typedef struct {
    const char *usage, *about, *notes;
    int eq;
} cli_doc;
/* Parse argv[1..argc) by the table ARGS of command CMD: --help (or -h) prints the help
 * (cli_print_help) to stdout. Returns -1 when every argument was taken (go on), 0 after
 * --help (exit 0), else the usage error's 2: "unknown option '--x'; valid: ..." (the
 * table's options), "option '--x' needs a value", "option '--x' needs a value, got the
 * option '--y'" (a value never starts with "--"), "option '--x' takes no value", an
 * argument that is not an option without a CLI_A_POS row or beyond its cap, or the row's
 * own. */
int cli_parse(const char *cmd, const cli_doc *doc, cli_arg *args, int argc, char **argv);
/* A command's --help in the one layout every command uses (tests/python/test_cli_help.py
 * checks it, tests/python/test_documentation.py reads the options):
 *
 *   usage: longattn CMD ...            USAGE: its lines separated by '\n'; the first gets
 *          longattn CMD ...            "usage: ", the others are aligned under it
 *
 *   ABOUT                              (optional) what the command does
 *
 *   options:
 *     --opt ARG             text       one row per option, the text at column 24 (on the
 *                           more text  next line when OPT is longer than 20 characters);
 *   heading:                           a group heading (no blank line before it when it
 *     --opt ARG             text       opens the table)
 *     --help                ...        --help is added at the end
 *
 *   NOTES                              (optional) paragraphs after the options
 *
 * ABOUT and NOTES may be NULL; they are printed as given (end them without '\n'). */
void cli_print_help(FILE *f, const cli_doc *doc, const cli_arg *args);
/* the argv index where OPT (its first word, "--steps") was last given in the cli_parse of
 * ARGS; 0 when it was not given */
int cli_given(const cli_arg *args, const char *opt);
/* Value parsers of the cli_opt_fn kind shared by commands: --optimizer adamw|muon into a
 * la_optimizer, --precision f32|bf16 into a la_dtype. */
int cli_optimizer_arg(const char *cmd, const char *opt, const char *val, void *dest);
int cli_precision_arg(const char *cmd, const char *opt, const char *val, void *dest);
/* CLI_A_FN for --kv-type TYPE kept as text (*(const char **)dest) for a library call that
 * resolves it against the model: checked here as la_kv_type_parse reads it, the int8 group
 * against the model's head size later. */
int cli_kv_type_arg(const char *cmd, const char *opt, const char *val, void *dest);
/* the rows of `longattn generate --model FILE.gguf` (src/cli/llama_cli.c) as CLI_A_ALSO
 * rows, which `longattn generate --help` lists too; ROWS holds CLI_GGUF_ROWS rows (the
 * last CLI_A_END) */
enum { CLI_GGUF_ROWS = 20 };
void cli_generate_gguf_rows(cli_arg *rows);

/* Print "longattn <cmd>: <msg>" and the --help hint to stderr and return 2 (usage error). */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Strict parsers: the whole string is one decimal integer / finite number in [lo, hi].
 * 0 on success (*out set), -1 otherwise (*out untouched); they print nothing. */
int cli_parse_int(const char *s, long long lo, long long hi, long long *out);
int cli_parse_num(const char *s, double lo, double hi, double *out);
/* One line saying which bf16 path runs on this CPU and what it costs (issue 29); "" for f32. */
const char *cli_precision_note(la_dtype p);
/* The sampling options both `generate` forms take (--max-new, --temperature, --top-k,
 * --top-p, --seed), written into the caller's variables: CLI_A_SAMPLING(S, ...) are their
 * five rows with each form's help texts. */
typedef struct {
    long *max_new, *top_k, *seed;
    double *temperature, *top_p;
} cli_sampling;
#define CLI_A_SAMPLING(s, max_new_text, temperature_text, top_k_text, top_p_text, seed_text) \
    CLI_A_LONG("--max-new N", max_new_text, (s)->max_new, 0, 1L << 24), \
    CLI_A_NUM("--temperature T", temperature_text, (s)->temperature, 0, 1e6), \
    CLI_A_LONG("--top-k K", top_k_text, (s)->top_k, 0, 1L << 30), \
    CLI_A_NUM("--top-p P", top_p_text, (s)->top_p, 1e-9, 1), \
    CLI_A_LONG("--seed S", seed_text, (s)->seed, 0, 0x7fffffffL)
/* la_generate's parameters with the sampling options' values (both `generate` forms) */
la_generate_params cli_sampling_params(const cli_sampling *s);
/* The KV cache parameters of --kv POLICY (NULL: full) and --kv-type TYPE (NULL: none): the
 * type from TYPE, else from a type term of POLICY, else def. Giving both is a usage error.
 * 0 on success, else the usage error's 2. Shape fields of *kp are left alone but D, set to 0
 * (not known before the model is loaded; cli_kv_fit checks an int8 group once it is). */
int cli_kv_params(const char *cmd, const char *policy, const char *type, la_dtype def_type, la_kv_params *kp);
/* Once the model is loaded: kp against its shape (an int8 group must divide its head size D).
 * 0, or the usage error's 2 naming --kv / --kv-type. */
int cli_kv_fit(const char *cmd, const la_lm *lm, const la_kv_params *kp);
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
