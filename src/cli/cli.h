/* cli.h -- one function per `longattn` subcommand. Each returns the process exit code:
 * 0 success, 1 runtime failure, 2 bad usage. They print to stdout/stderr (the library
 * never does). */
#ifndef LA_CLI_H
#define LA_CLI_H

typedef int (*la_cli_fn)(int argc, char **argv);

typedef struct {
    const char *name;
    const char *summary;
    la_cli_fn fn;
} la_cli_cmd;

/* Print "longattn: <msg>" to stderr and return 2 (usage error). */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* `longattn study`: the length-generalisation study (src/cli/study.c). */
int cli_study(int argc, char **argv);
/* longattn attn: run the attention kernel on .npy files (src/cli/attn.c). */
int cli_attn(int argc, char **argv);
/* bench/bench_main.c: `longattn bench <name>` (table in bench/bench.h). */
int cli_bench(int argc, char **argv);
/* src/cli/plot.c: run `gnuplot script_path`; returns its exit status (127: gnuplot not
 * installed, -1: could not start). */
int cli_gnuplot(const char *script_path);

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

/* longattn gguf (src/cli/gguf.c): inspect GGUF files */
int cli_gguf(int argc, char **argv);

/* longattn synth (src/cli/synth.c) */
int cli_synth(int argc, char **argv);

#endif
