/* cli_util.c -- helpers shared by the subcommands: the option tables (cli_parse) and their
 * --help, usage errors, strict number parsing, the KV cache options and a monotonic clock. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/internal.h"
#include "longattn.h"

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

/* one row of a --help table: a group heading when opt is NULL (no blank line before it
 * when it opens the table) */
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

void cli_print_help(FILE *f, const cli_doc *doc, const cli_arg *args) {
    fprintf(f, "usage: ");
    put_indented(f, doc->usage, 7);
    if (doc->about) fprintf(f, "\n%s\n", doc->about);
    fprintf(f, "\noptions:\n");
    int first = 1;
    for (const cli_arg *o = args; o->kind != CLI_END; o++) {
        if (o->kind == CLI_POS) continue;
        help_row(f, o->opt, o->text, first);
        first = 0;
    }
    help_row(f, "--help", "print this help and exit", 0);
    if (doc->notes) fprintf(f, "\n%s\n", doc->notes);
}

/* length of the option of row O (the first word of its OPT) */
static size_t opt_len(const cli_arg *o) { return strcspn(o->opt, " "); }

/* the parsed row of ARGS whose option is the N bytes at A; NULL when none */
static cli_arg *find_arg(cli_arg *args, const char *a, size_t n) {
    for (cli_arg *o = args; o->kind != CLI_END; o++)
        if (o->opt && o->kind != CLI_ALSO && o->kind != CLI_POS && opt_len(o) == n && !strncmp(o->opt, a, n))
            return o;
    return NULL;
}

int cli_given(const cli_arg *args, const char *opt) {
    for (const cli_arg *o = args; o->kind != CLI_END; o++)
        if (o->opt && o->given && opt_len(o) == strlen(opt) && !strncmp(o->opt, opt, opt_len(o))) return o->given;
    return 0;
}

/* "unknown option" naming the table's options */
static int unknown_option(const char *cmd, const cli_arg *args, const char *a) {
    char valid[2048] = "";
    size_t k = 0;
    for (const cli_arg *o = args; o->kind != CLI_END && k < sizeof valid; o++) {
        if (!o->opt || o->kind == CLI_ALSO || o->kind == CLI_POS) continue;
        int dup = 0; /* an option listed twice (two modes) is named once */
        for (const cli_arg *p = args; p < o && !dup; p++) dup = p->opt && p->kind != CLI_ALSO && opt_len(p) == opt_len(o) && !strncmp(p->opt, o->opt, opt_len(o));
        if (!dup) k += (size_t)snprintf(valid + k, sizeof valid - k, " %.*s", (int)opt_len(o), o->opt);
    }
    return cli_usage_error(cmd, "unknown option '%s'; valid:%s --help", a, valid);
}

/* VAL as an integer in [LO, HI] into *OUT, or the usage error naming option OPT */
static int opt_long(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out) {
    long long v;
    if (cli_parse_int(val, lo, hi, &v))
        return cli_usage_error(cmd, "%s expects an integer in [%ld, %ld], got '%s'", opt, lo, hi, val);
    *out = (long)v;
    return 0;
}

/* VAL into row O (not a flag): 0, or the usage error's 2 */
static int take_value(const char *cmd, const cli_arg *o, const char *opt, const char *val) {
    switch (o->kind) {
    case CLI_STR: *(const char **)o->dest = val; return 0;
    case CLI_LONG: return opt_long(cmd, opt, val, o->lo, o->hi, o->dest);
    case CLI_INT: {
        long v = 0;
        int rc = opt_long(cmd, opt, val, o->lo, o->hi, &v);
        if (!rc) *(int *)o->dest = (int)v;
        return rc;
    }
    case CLI_NUM: {
        double v = 0;
        int lo_out = o->ends & CLI_OPEN_LO, hi_out = o->ends & CLI_OPEN_HI;
        if (cli_parse_num(val, o->flo, o->fhi, &v) || (lo_out && v == o->flo) || (hi_out && v == o->fhi)) {
            if (isinf(o->fhi)) return cli_usage_error(cmd, "%s expects a number %s %g, got '%s'", opt, lo_out ? ">" : ">=", o->flo, val);
            return cli_usage_error(cmd, "%s expects a number in %c%g, %g%c, got '%s'", opt, lo_out ? '(' : '[', o->flo,
                                   o->fhi, hi_out ? ')' : ']', val);
        }
        *(double *)o->dest = v;
        return 0;
    }
    case CLI_U64: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(val, &end, 10);
        if (errno || *end || !(*val >= '0' && *val <= '9'))
            return cli_usage_error(cmd, "%s expects a non-negative integer, got '%s'", opt, val);
        *(uint64_t *)o->dest = v;
        return 0;
    }
    case CLI_FN: return o->fn(cmd, opt, val, o->dest);
    default: return cli_usage_error(cmd, "option '%s' cannot take a value", opt); /* not reached */
    }
}

int cli_parse(const char *cmd, const cli_doc *doc, cli_arg *args, int argc, char **argv) {
    cli_pos *pos = NULL;
    const char *pos_name = NULL;
    for (cli_arg *o = args; o->kind != CLI_END; o++) {
        o->given = 0;
        if (o->kind == CLI_POS) pos = o->dest, pos_name = o->text, pos->n = 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(stdout, doc, args);
            return 0;
        }
        if (a[0] != '-' || !a[1]) { /* not an option */
            if (!pos) return cli_usage_error(cmd, "unexpected argument '%s' (options start with --)", a);
            if (pos->n == pos->cap) {
                if (pos->cap == 1) return cli_usage_error(cmd, "give one %s (got '%s' and '%s')", pos_name, pos->v[0], a);
                return cli_usage_error(cmd, "too many arguments ('%s'; at most %d: %s)", a, pos->cap, pos_name);
            }
            pos->v[pos->n++] = a;
            continue;
        }
        const char *eq = doc->eq ? strchr(a, '=') : NULL; /* --opt=VALUE */
        char opt[128];
        snprintf(opt, sizeof opt, "%.*s", (int)(eq ? (size_t)(eq - a) : strlen(a)), a);
        cli_arg *o = find_arg(args, opt, strlen(opt));
        if (!o) return unknown_option(cmd, args, opt);
        o->given = i;
        if (o->kind == CLI_FLAG) {
            if (eq) return cli_usage_error(cmd, "option '%s' takes no value", opt);
            *(int *)o->dest = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!val) return cli_usage_error(cmd, "option '%s' needs a value", opt);
        if (!eq && val[0] == '-' && val[1] == '-')
            return cli_usage_error(cmd, "option '%s' needs a value, got the option '%s'", opt, val);
        int rc = take_value(cmd, o, opt, val);
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

la_generate_params cli_sampling_params(const cli_sampling *s) {
    la_generate_params gp = la_generate_params_default();
    gp.sample.temperature = *s->temperature;
    gp.sample.top_k = (int)*s->top_k;
    gp.sample.top_p = *s->top_p;
    gp.max_new = *s->max_new;
    gp.seed = (uint64_t)*s->seed;
    return gp;
}

double cli_now(void) { return la_now_s(); }

int cli_kv_params(const char *cmd, const char *policy, const char *type, la_dtype def_type, la_kv_params *kp) {
    kp->D = 0; /* not known before the model: cli_kv_fit checks an int8 group against it */
    if (la_kv_policy_parse(policy ? policy : "full", kp) != LA_OK) return cli_usage_error(cmd, "--kv: %s", la_errmsg());
    if (type && policy && la_kv_policy_names_type(policy))
        return cli_usage_error(cmd, "--kv-type %s and the type in --kv '%s': give the element type once", type, policy);
    la_status st = LA_OK;
    if (type) st = la_kv_type_parse(type, kp);
    else if (!(policy && la_kv_policy_names_type(policy))) st = la_kv_params_set_type(kp, def_type, 0);
    return st != LA_OK ? cli_usage_error(cmd, "--kv-type: %s", la_errmsg()) : 0;
}

int cli_kv_fit(const char *cmd, const la_lm *lm, const la_kv_params *kp) {
    la_kv_params p = *kp;
    if (la_lm_kv_params(lm, &p) != LA_OK || la_kv_params_validate(&p) != LA_OK)
        return cli_usage_error(cmd, "--kv / --kv-type: %s", la_errmsg());
    return 0;
}

int cli_kv_type_arg(const char *cmd, const char *opt, const char *val, void *dest) {
    la_kv_params kp = la_kv_params_default();
    kp.D = 0; /* the head size is the model's, not known yet */
    if (la_kv_type_parse(val, &kp) != LA_OK) return cli_usage_error(cmd, "%s: %s", opt, la_errmsg());
    *(const char **)dest = val;
    return 0;
}

int cli_precision_arg(const char *cmd, const char *opt, const char *val, void *dest) {
    la_dtype t;
    if (la_dtype_parse(val, &t) != LA_OK || (t != LA_DTYPE_F32 && t != LA_DTYPE_BF16))
        return cli_usage_error(cmd, "%s must be f32 or bf16, got '%s'", opt, val);
    *(la_dtype *)dest = t;
    return 0;
}

int cli_optimizer_arg(const char *cmd, const char *opt, const char *val, void *dest) {
    if (!strcmp(val, "adamw")) *(la_optimizer *)dest = LA_OPT_ADAMW;
    else if (!strcmp(val, "muon")) *(la_optimizer *)dest = LA_OPT_MUON;
    else return cli_usage_error(cmd, "%s must be adamw or muon, got '%s'", opt, val);
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
