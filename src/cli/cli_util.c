/* cli_util.c -- helpers shared by the subcommands: usage errors, strict number parsing,
 * a monotonic clock and a growable string buffer. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/internal.h"

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "longattn %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(run `longattn %s --help` for usage)\n", cmd);
    return 2;
}

/* print S with every line after the first indented by IND spaces */
static void put_indented(FILE *f, const char *s, int ind) {
    for (const char *nl; (nl = strchr(s, '\n')); s = nl + 1) fprintf(f, "%.*s\n%*s", (int)(nl - s), s, ind, "");
    fprintf(f, "%s\n", s);
}

void cli_help_begin(FILE *f, const char *usage, const char *about) {
    fprintf(f, "usage: ");
    put_indented(f, usage, 7);
    if (about) fprintf(f, "\n%s\n", about);
    fprintf(f, "\noptions:\n");
}

/* one row of a --help table: a group heading when opt is NULL (no blank line before it
 * when it opens the first table) */
static void help_row(FILE *f, const char *opt, const char *text, int opens) {
    enum { COL = 24, W = COL - 4 }; /* the description column; the widest OPT on one line */
    if (!opt) {
        fprintf(f, opens ? "%s\n" : "\n%s\n", text); /* a group's heading */
        return;
    }
    if ((int)strlen(opt) > W) fprintf(f, "  %s\n%*s", opt, COL, "");
    else fprintf(f, "  %-*s  ", W, opt);
    put_indented(f, text, COL);
}

void cli_help_rows(FILE *f, const cli_opt *opts, int first) {
    for (const cli_opt *o = opts; o && (o->opt || o->text); o++) help_row(f, o->opt, o->text, first && o == opts);
}

void cli_help_end(FILE *f, const char *notes) {
    static const cli_opt help[] = {{"--help", "print this help and exit"}, {NULL, NULL}};
    cli_help_rows(f, help, 0);
    if (notes) fprintf(f, "\n%s\n", notes);
}

void cli_help(FILE *f, const char *usage, const char *about, const cli_opt *opts, const char *notes) {
    cli_help_begin(f, usage, about);
    cli_help_rows(f, opts, 1);
    cli_help_end(f, notes);
}

/* the row of ARGS whose option (the first word of its OPT) is A; NULL when none */
static const cli_arg *find_arg(const cli_arg *args, const char *a) {
    for (const cli_arg *o = args; o->opt || o->text; o++) {
        if (!o->opt) continue;
        size_t n = strcspn(o->opt, " ");
        if (!strncmp(o->opt, a, n) && a[n] == '\0') return o;
    }
    return NULL;
}

int cli_parse(const char *cmd, const cli_doc *doc, const cli_arg *args, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_help_begin(stdout, doc->usage, doc->about);
            for (const cli_arg *o = args; o->opt || o->text; o++) help_row(stdout, o->opt, o->text, o == args);
            cli_help_end(stdout, doc->notes);
            return 0;
        }
        const cli_arg *o = find_arg(args, a);
        if (o && o->kind == CLI_FLAG) {
            *(int *)o->dest = 1;
            continue;
        }
        /* as the hand-written loops did: the value first, then whether the option exists */
        if (i + 1 >= argc) return cli_usage_error(cmd, "option '%s' needs a value (or is unknown)", a);
        const char *val = argv[++i];
        if (val[0] == '-' && val[1] == '-')
            return cli_usage_error(cmd, "option '%s' needs a value, got the option '%s'", a, val);
        if (!o) return cli_usage_error(cmd, "unknown option '%s'", a);
        int rc = 0;
        if (o->kind == CLI_STR) *(const char **)o->dest = val;
        else if (o->kind == CLI_LONG) rc = cli_opt_long(cmd, a, val, o->lo, o->hi, o->dest);
        else rc = o->fn(cmd, a, val, o->dest);
        if (rc) return rc;
    }
    return -1;
}

int cli_parse_int(const char *s, long long lo, long long hi, long long *out) {
    if (!s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cli_parse_num(const char *s, double lo, double hi, double *out) {
    if (!s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

int cli_opt_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out) {
    long long v;
    if (cli_parse_int(s, lo, hi, &v))
        return cli_usage_error(cmd, "%s expects an integer in [%ld, %ld], got '%s'", opt, lo, hi, s);
    *out = (long)v;
    return 0;
}

int cli_opt_num(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out) {
    if (cli_parse_num(s, lo, hi, out))
        return cli_usage_error(cmd, "%s expects a number in [%g, %g], got '%s'", opt, lo, hi, s);
    return 0;
}

la_generate_params cli_sampling_params(const cli_sampling *s) {
    la_generate_params gp = la_generate_params_default();
    gp.sample.temperature = *s->temperature;
    gp.sample.top_k = (int)*s->top_k;
    gp.sample.top_p = *s->top_p;
    gp.max_new = *s->max_new;
    gp.seed = (uint64_t)*s->seed;
    return gp;
}

int cli_sampling_opt(const char *cmd, const char *opt, const char *val, const cli_sampling *s) {
    if (!strcmp(opt, "--max-new")) return cli_opt_long(cmd, opt, val, 0, 1L << 24, s->max_new);
    if (!strcmp(opt, "--top-k")) return cli_opt_long(cmd, opt, val, 0, 1L << 30, s->top_k);
    if (!strcmp(opt, "--seed")) return cli_opt_long(cmd, opt, val, 0, 0x7fffffffL, s->seed);
    if (!strcmp(opt, "--temperature")) return cli_opt_num(cmd, opt, val, 0, 1e6, s->temperature);
    if (!strcmp(opt, "--top-p")) return cli_opt_num(cmd, opt, val, 1e-9, 1, s->top_p);
    return -1;
}

double cli_now(void) { return la_now_s(); }

int cli_kv_params(const char *cmd, const char *policy, const char *type, la_dtype def_type, la_kv_params *kp) {
    if (la_kv_policy_parse(policy ? policy : "full", kp) != LA_OK) return cli_usage_error(cmd, "--kv: %s", la_errmsg());
    if (type && policy && la_kv_policy_names_type(policy))
        return cli_usage_error(cmd, "--kv-type %s and the type in --kv '%s': give the element type once", type, policy);
    if (type) {
        if (la_kv_type_parse(type, kp) != LA_OK) return cli_usage_error(cmd, "--kv-type: %s", la_errmsg());
    } else if (!(policy && la_kv_policy_names_type(policy))) {
        if (la_kv_params_set_type(kp, def_type, 0) != LA_OK)
            return cli_usage_error(cmd, "--kv-type: %s", la_errmsg());
    }
    return 0;
}

int cli_precision_opt(const char *cmd, const char *val, la_dtype *out) {
    la_dtype t;
    if (la_dtype_parse(val, &t) != LA_OK || (t != LA_DTYPE_F32 && t != LA_DTYPE_BF16))
        return cli_usage_error(cmd, "--precision must be f32 or bf16, got '%s'", val);
    *out = t;
    return 0;
}

const char *cli_precision_note(la_dtype p) {
    if (p != LA_DTYPE_BF16) return "";
    /* the features string is "portable (LA_PORTABLE=1)" when forced, else a list */
    return strstr(la_cpu_features(), "avx512bf16")
               ? "precision bf16: emulated path (operands rounded to bf16, float32 OpenBLAS sgemm and attention "
                 "tiles; this CPU has AVX512-BF16 but this build has no bf16 GEMM backend), slower than f32"
               : "precision bf16: emulated path (operands rounded to bf16, float32 OpenBLAS sgemm and attention "
                 "tiles; this CPU has no AVX512-BF16 bf16 dot product), slower than f32";
}
