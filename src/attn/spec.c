/* spec.c -- attention spec strings <-> la_spec (SPEC section 6): parse, validate, print.
 *
 * Grammar (whitespace allowed around tokens, names, '=', ',' and parentheses):
 *   spec   := token ('+' token)*
 *   token  := name | name '(' [arg (',' arg)*] ')'
 *   arg    := value | key '=' value       (positional arguments come first, in the
 *                                          documented order; then key=value ones)
 * At most one token per category (normaliser, transform, position, pattern), except that
 * global(g) must be combined with window(w). Missing categories take softmax, none, nope,
 * causal. The canonical form prints normaliser+transform+position+pattern with every
 * parameter named and each double in the shortest "%.{1..17}g" text that reads back to
 * the same bits, so la_spec_parse(la_spec_format(s)) == s field by field.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "longattn/attn.h"

/* CAT_SINK (issue 31) prints right after the normaliser it modifies: softmax+sink+rope. */
enum { CAT_NORM = 0, CAT_SINK, CAT_XF, CAT_POS, CAT_PAT, N_CAT };
static const char *const cat_name[N_CAT] = {"normaliser", "sink", "transform", "position", "pattern"};
static const char *const cat_plural[N_CAT] = {"normalisers", "sinks", "transforms", "positions", "patterns"};

enum { P_DBL = 0, P_INT };

typedef struct {
    const char *key;
    int type;      /* P_DBL (double field) or P_INT (int field) */
    size_t offset; /* into la_spec */
    int required;  /* 1: the token is meaningless without it */
} param_def;

typedef struct {
    const char *name;
    int cat;
    int kind; /* la_norm / la_xform / la_pos / la_pattern value */
    int nparams;
    param_def p[5];
} token_def;

#define D_(key, field, req) {key, P_DBL, offsetof(la_spec, field), req}
#define I_(key, field, req) {key, P_INT, offsetof(la_spec, field), req}

/* Parameters are listed in their positional order; defaults are la_spec_default()'s. */
static const token_def tokens[] = {
    {"softmax", CAT_NORM, LA_NORM_SOFTMAX, 0, {{0}}},
    {"entmax", CAT_NORM, LA_NORM_ENTMAX, 1, {D_("alpha", alpha, 0)}},
    {"sparsemax", CAT_NORM, LA_NORM_SPARSEMAX, 0, {{0}}},
    {"asentmax", CAT_NORM, LA_NORM_ASENTMAX, 3,
     {D_("alpha", alpha, 0), D_("delta", as_delta, 0), D_("gamma_range", as_gamma_range, 0)}},
    /* sigmoid(b, train): b given, or b = -ln(train) (Ramapuram et al. 2024, SPEC 10); train
     * is the shared training length (the trainer fills it in when 0) */
    {"sigmoid", CAT_NORM, LA_NORM_SIGMOID, 2, {D_("b", sig_b, 0), I_("train", train_len, 0)}},
    {"sigmoid-logn", CAT_NORM, LA_NORM_SIGMOID_LOGN, 0, {{0}}},

    /* sink: learned per-head logits; sink(fixed=v): v for every head (0: softmax plus one) */
    {"sink", CAT_SINK, LA_SINK_LEARNED, 1, {D_("fixed", sink_fixed, 0)}},

    {"none", CAT_XF, LA_XF_NONE, 0, {{0}}},
    {"logn", CAT_XF, LA_XF_LOGN, 2, {D_("s", logn_s, 0), I_("train", train_len, 0)}},
    {"qwen-logn", CAT_XF, LA_XF_QWEN_LOGN, 1, {I_("train", train_len, 1)}},
    {"sinv", CAT_XF, LA_XF_SINV, 1, {D_("tau", tau, 0)}},
    {"critical", CAT_XF, LA_XF_CRITICAL, 1, {D_("gamma", gamma, 0)}},
    {"temp", CAT_XF, LA_XF_TEMP, 1, {D_("x", temp, 1)}},

    {"nope", CAT_POS, LA_POS_NOPE, 0, {{0}}},
    {"rope", CAT_POS, LA_POS_ROPE, 1, {D_("theta", theta, 0)}},
    {"prope", CAT_POS, LA_POS_PROPE, 2, {D_("p", rope_p, 0), D_("theta", theta, 0)}},
    {"ntk", CAT_POS, LA_POS_NTK, 2, {D_("s", pos_scale, 1), D_("theta", theta, 0)}},
    {"dynamic-ntk", CAT_POS, LA_POS_DYNAMIC_NTK, 3,
     {D_("s", pos_scale, 1), I_("train", train_len, 1), D_("theta", theta, 0)}},
    {"yarn", CAT_POS, LA_POS_YARN, 5,
     {D_("s", pos_scale, 1), I_("train", train_len, 1), D_("beta_fast", beta_fast, 0),
      D_("beta_slow", beta_slow, 0), D_("theta", theta, 0)}},
    {"pi", CAT_POS, LA_POS_PI, 2, {D_("s", pos_scale, 1), D_("theta", theta, 0)}},
    {"alibi", CAT_POS, LA_POS_ALIBI, 0, {{0}}},
    {"nape", CAT_POS, LA_POS_NAPE, 0, {{0}}},

    {"causal", CAT_PAT, LA_PAT_CAUSAL, 0, {{0}}},
    {"full", CAT_PAT, LA_PAT_FULL, 0, {{0}}},
    {"window", CAT_PAT, LA_PAT_WINDOW, 1, {I_("w", window, 1)}},
    {"sinks", CAT_PAT, LA_PAT_SINKS, 2, {I_("n", sinks, 1), I_("w", window, 1)}},
    /* global(g) alone is incomplete: it must come with window(w) (checked in parse) */
    {"global", CAT_PAT, LA_PAT_GLOBAL, 1, {I_("g", global, 1)}},
};
#define N_TOKENS ((int)(sizeof tokens / sizeof tokens[0]))

la_spec la_spec_default(void) {
    la_spec s;
    memset(&s, 0, sizeof s); /* also zeroes padding so memcmp-style copies are stable */
    s.norm = LA_NORM_SOFTMAX;
    s.alpha = 1.5;
    s.as_delta = 1.0;
    s.as_gamma_range = 2.0;
    s.pos = LA_POS_NOPE;
    s.theta = 10000.0;
    s.rope_p = 0.5;
    s.pos_scale = 1.0;
    s.train_len = 0;
    s.beta_fast = 32.0;
    s.beta_slow = 1.0;
    s.xform = LA_XF_NONE;
    s.logn_s = 0.0;
    s.tau = 10.0;
    s.gamma = 1.0;
    s.temp = 1.0;
    s.pattern = LA_PAT_CAUSAL;
    s.window = 0;
    s.sinks = 0;
    s.global = 0;
    s.sink = LA_SINK_NONE;
    s.sink_fixed = 0.0;
    s.sig_b = 0.0;
    s.sig_b_set = 0;
    return s;
}

/* ---- small string helpers ---- */

/* "name(a,b)" signature used in the lists of valid choices. */
static void append(char *buf, size_t n, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t n, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(*len < n ? buf + *len : NULL, *len < n ? n - *len : 0, fmt, ap);
    va_end(ap);
    if (w > 0) *len += (size_t)w;
}

static void signature(const token_def *t, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    append(buf, n, &len, "%s", t->name);
    if (t->cat == CAT_PAT && t->kind == LA_PAT_GLOBAL) {
        append(buf, n, &len, "(g)+window(w)");
        return;
    }
    if (t->nparams == 0) return;
    append(buf, n, &len, "(");
    for (int i = 0; i < t->nparams; i++) append(buf, n, &len, "%s%s", i ? "," : "", t->p[i].key);
    append(buf, n, &len, ")");
}

/* "nope, rope(theta), ..." for one category. */
static void valid_list(int cat, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_TOKENS; i++) {
        if (tokens[i].cat != cat) continue;
        char sig[96];
        signature(&tokens[i], sig, sizeof sig);
        append(buf, n, &len, "%s%s", len ? ", " : "", sig);
    }
}

static const char *param_list(const token_def *t, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    if (t->nparams == 0) return "(none: it takes no parameters)";
    for (int i = 0; i < t->nparams; i++) append(buf, n, &len, "%s%s", i ? ", " : "", t->p[i].key);
    return buf;
}

/* Levenshtein distance for short names (did-you-mean suggestions). */
static int edit_distance(const char *a, size_t la_, const char *b) {
    size_t lb = strlen(b);
    if (la_ > 31 || lb > 31) return 99;
    int prev[32], cur[32];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la_; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int c = prev[j - 1] + (tolower((unsigned char)a[i - 1]) != b[j - 1]);
            if (prev[j] + 1 < c) c = prev[j] + 1;
            if (cur[j - 1] + 1 < c) c = cur[j - 1] + 1;
            cur[j] = c;
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb];
}

/* The user's whole text, shortened for messages. */
typedef struct {
    char quoted[208];
} ctx_t;

static la_status spec_fail(const ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static la_status spec_fail(const ctx_t *c, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return la_fail(LA_ESPEC, "spec '%s': %s", c->quoted, msg);
}

/* ---- numbers ---- */

/* A finite decimal double: digits, '.', exponent; no hex, inf, nan or trailing junk. Any
 * length: strtod reads the spec text in place, and a number cannot go on past [s, s + n)
 * (what follows is a space, ',' or ')'), so end must be s + n. */
static int parse_double(const char *s, size_t n, double *out) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789.eE+-", s[i])) return 0;
    char *end;
    double v = strtod(s, &end);
    if (end != s + n || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

static int parse_int(const char *s, size_t n, int *out) {
    char buf[32];
    if (n == 0 || n >= sizeof buf) return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789+-", s[i])) return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    long v = strtol(buf, &end, 10);
    if (end != buf + n || v < -2147483647L || v > 2147483647L) return 0;
    *out = (int)v;
    return 1;
}

/* Whole numbers in plain digits; otherwise the shortest %.Ng (N = 1..17) that reads back
 * to the same double (%.17g always does). */
static void format_double(double v, char *buf, size_t n) {
    if (v == floor(v) && fabs(v) < 1e16) { /* whole numbers: 10000, not 1e+04 */
        snprintf(buf, n, "%.0f", v);
        if (signbit(v) && v == 0) snprintf(buf, n, "-0");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (memcmp(&back, &v, sizeof v) == 0) return;
    }
}

/* ---- validation ---- */

/* check_spec's failure: writes why and returns the failing category cat. */
static int bad(int cat, char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int bad(int cat, char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return cat;
}

/* Check the fields the chosen kinds use. On failure writes why (without the token) and
 * returns the failing category; returns -1 when the spec is consistent. */
static int check_spec(const la_spec *s, char *why, size_t n) {
    if (s->train_len < 0)
        return bad(s->xform == LA_XF_LOGN || s->xform == LA_XF_QWEN_LOGN ? CAT_XF : CAT_POS, why, n,
                   "train must be >= 0 (got %d)", s->train_len);
    switch (s->norm) {
    case LA_NORM_SOFTMAX: break;
    case LA_NORM_ENTMAX:
        if (!(s->alpha >= LA_ENTMAX_ALPHA_MIN) || !isfinite(s->alpha) || s->alpha > LA_ENTMAX_ALPHA_MAX)
            return bad(CAT_NORM, why, n, "alpha must be a number in [%.7g, %g] (got %.10g; alpha = 1 is softmax, use "
                       "'softmax'; closer to 1 or above %g tau is not representable in float64)", LA_ENTMAX_ALPHA_MIN,
                       LA_ENTMAX_ALPHA_MAX, s->alpha, LA_ENTMAX_ALPHA_MAX);
        break;
    case LA_NORM_SPARSEMAX:
        if (s->alpha != 2.0)
            return bad(CAT_NORM, why, n, "sparsemax has alpha = 2 (got %g; use entmax(alpha=...) for other values)",
                       s->alpha);
        break;
    case LA_NORM_ASENTMAX:
        if (!(s->alpha >= LA_ENTMAX_ALPHA_MIN) || !isfinite(s->alpha) || s->alpha > LA_ENTMAX_ALPHA_MAX)
            return bad(CAT_NORM, why, n, "alpha must be a number in [%.7g, %g] (got %.10g)", LA_ENTMAX_ALPHA_MIN,
                       LA_ENTMAX_ALPHA_MAX, s->alpha);
        if (!(s->as_delta >= 0.0) || !isfinite(s->as_delta))
            return bad(CAT_NORM, why, n, "delta must be a finite number >= 0 (got %g)", s->as_delta);
        if (!(s->as_gamma_range >= 0.0) || !isfinite(s->as_gamma_range))
            return bad(CAT_NORM, why, n, "gamma_range must be a finite number >= 0 (got %g)", s->as_gamma_range);
        break;
    case LA_NORM_SIGMOID:
        if (s->sig_b_set && !isfinite(s->sig_b))
            return bad(CAT_NORM, why, n, "b must be a finite number (got %g)", s->sig_b);
        if (!s->sig_b_set && s->train_len == 1)
            return bad(CAT_NORM, why, n, "without b, b = -ln(train) needs train >= 2 (got train = 1)");
        break;
    case LA_NORM_SIGMOID_LOGN: break;
    default: return bad(CAT_NORM, why, n, "unknown normaliser value %d", (int)s->norm);
    }
    switch (s->sink) {
    case LA_SINK_NONE: break;
    case LA_SINK_LEARNED:
    case LA_SINK_FIXED:
        /* the sink is one more term of a softmax denominator: entmax's threshold and
         * sigmoid's unnormalised rows have no denominator to join */
        if (s->norm != LA_NORM_SOFTMAX)
            return bad(CAT_SINK, why, n, "a sink joins the softmax denominator, and the %s normaliser has none; "
                       "drop 'sink' or use softmax+sink",
                       s->norm == LA_NORM_SIGMOID || s->norm == LA_NORM_SIGMOID_LOGN ? "sigmoid" : "entmax-family");
        if (s->sink == LA_SINK_FIXED && !isfinite(s->sink_fixed))
            return bad(CAT_SINK, why, n, "fixed must be a finite number (got %g)", s->sink_fixed);
        break;
    default: return bad(CAT_SINK, why, n, "unknown sink value %d", (int)s->sink);
    }
    switch (s->xform) {
    case LA_XF_NONE: break;
    case LA_XF_LOGN:
        if (!(s->logn_s >= 0.0) || !isfinite(s->logn_s))
            return bad(CAT_XF, why, n, "s must be a finite number >= 0 (got %g; 0 means 1/log(train))", s->logn_s);
        /* s = 0 and train = 0 stays legal: the per-head s_h may come from
         * la_attn_opts.logn_s, or the trainer fills in train_len later. */
        if (s->logn_s == 0.0 && s->train_len == 1)
            return bad(CAT_XF, why, n, "s = 0 means 1/log(train) and needs train >= 2 (got train = 1)");
        break;
    case LA_XF_QWEN_LOGN:
        if (s->train_len < 2)
            return bad(CAT_XF, why, n, "train (the training length, >= 2) is required (got %d)", s->train_len);
        break;
    case LA_XF_SINV:
        if (!(s->tau > 0.0) || !isfinite(s->tau))
            return bad(CAT_XF, why, n, "tau must be a finite number > 0 (got %g)", s->tau);
        break;
    case LA_XF_CRITICAL:
        if (!(s->gamma > 0.0) || !isfinite(s->gamma))
            return bad(CAT_XF, why, n, "gamma must be a finite number > 0 (got %g)", s->gamma);
        break;
    case LA_XF_TEMP:
        if (!(s->temp > 0.0) || !isfinite(s->temp))
            return bad(CAT_XF, why, n, "x must be a finite number > 0 (got %g)", s->temp);
        break;
    default: return bad(CAT_XF, why, n, "unknown transform value %d", (int)s->xform);
    }
    switch (s->pos) {
    case LA_POS_NOPE:
    case LA_POS_ALIBI:
    case LA_POS_NAPE: break;
    case LA_POS_ROPE:
    case LA_POS_PROPE:
    case LA_POS_NTK:
    case LA_POS_DYNAMIC_NTK:
    case LA_POS_YARN:
    case LA_POS_PI:
        if (!(s->theta > 1.0) || !isfinite(s->theta))
            return bad(CAT_POS, why, n, "theta must be a finite number > 1 (got %g)", s->theta);
        if (s->pos == LA_POS_PROPE && !(s->rope_p >= 0.0 && s->rope_p <= 1.0))
            return bad(CAT_POS, why, n, "p must lie in [0, 1] (got %g)", s->rope_p);
        if (s->pos >= LA_POS_NTK && !(s->pos_scale >= 1.0 && isfinite(s->pos_scale)))
            return bad(CAT_POS, why, n, "s (the context extension factor) must be a finite number >= 1 (got %g)",
                       s->pos_scale);
        if ((s->pos == LA_POS_DYNAMIC_NTK || s->pos == LA_POS_YARN) && s->train_len < 1)
            return bad(CAT_POS, why, n, "train (the training length, >= 1) is required (got %d)", s->train_len);
        if (s->pos == LA_POS_YARN &&
            !(isfinite(s->beta_fast) && s->beta_slow > 0.0 && s->beta_fast > s->beta_slow))
            return bad(CAT_POS, why, n, "needs beta_fast > beta_slow > 0 (got beta_fast = %g, beta_slow = %g)",
                       s->beta_fast, s->beta_slow);
        break;
    default: return bad(CAT_POS, why, n, "unknown position value %d", (int)s->pos);
    }
    switch (s->pattern) {
    case LA_PAT_CAUSAL:
    case LA_PAT_FULL: break;
    case LA_PAT_WINDOW:
        if (s->window < 1)
            return bad(CAT_PAT, why, n, "window w must be >= 1 (got %d)", s->window);
        break;
    case LA_PAT_SINKS:
        if (s->sinks < 1 || s->window < 1)
            return bad(CAT_PAT, why, n, "sinks needs n >= 1 and w >= 1 (got n = %d, w = %d)", s->sinks, s->window);
        break;
    case LA_PAT_GLOBAL:
        if (s->global < 1 || s->window < 1)
            return bad(CAT_PAT, why, n, "global(g)+window(w) needs g >= 1 and w >= 1 (got g = %d, w = %d)",
                       s->global, s->window);
        break;
    default: return bad(CAT_PAT, why, n, "unknown pattern value %d", (int)s->pattern);
    }
    return -1;
}

la_status la_spec_validate(const la_spec *spec) {
    if (!spec) return la_fail(LA_EINVAL, "la_spec_validate: spec is NULL");
    char why[256];
    int cat = check_spec(spec, why, sizeof why);
    if (cat < 0) return LA_OK;
    char fmt[256];
    la_spec_format(spec, fmt, sizeof fmt);
    return la_fail(LA_ESPEC, "invalid %s in spec '%s': %s", cat_name[cat], fmt, why);
}

/* ---- parsing ---- */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void trim(const char **b, const char **e) {
    while (*b < *e && is_space(**b)) (*b)++;
    while (*e > *b && is_space((*e)[-1])) (*e)--;
}

static int is_blank(const char *b, const char *e) {
    trim(&b, &e);
    return b == e;
}

/* Parse one token [b, e) into *s. seen[cat] holds the index+1 of the token already seen in
 * each category; global/window may share the pattern category. */
static la_status parse_token(const ctx_t *c, const char *b, const char *e, la_spec *s, int seen[N_CAT],
                             int *train_tok, int *pat_has_window, int *pat_has_global) {
    trim(&b, &e);
    int tlen = (int)(e - b);
    if (tlen == 0) return spec_fail(c, "empty token (two '+' in a row, or a '+' at an end)");
    const char *name_e = b; /* a name starts with a letter: '1.5' or '5' is not one */
    while (name_e < e && (isalpha((unsigned char)*name_e) ||
                          (name_e > b && (isdigit((unsigned char)*name_e) || *name_e == '-' || *name_e == '_'))))
        name_e++;
    size_t nlen = (size_t)(name_e - b);
    const char *rest = name_e;
    while (rest < e && is_space(*rest)) rest++;

    int ti = -1;
    for (int i = 0; i < N_TOKENS; i++)
        if (strlen(tokens[i].name) == nlen && !strncmp(tokens[i].name, b, nlen)) ti = i;
    if (ti < 0) {
        /* suggest a name only when fewer edits than the word has letters ('x' is not 'pi') */
        int best = -1, bestd = nlen < 3 ? (int)nlen : 3;
        for (int i = 0; i < N_TOKENS; i++) {
            int d = edit_distance(b, nlen, tokens[i].name);
            if (d < bestd) bestd = d, best = i;
        }
        int qlen = nlen && rest < e && *rest == '(' ? (int)nlen : tlen; /* the name of name(...), else all */
        char lists[N_CAT][320];
        for (int k = 0; k < N_CAT; k++) valid_list(k, lists[k], sizeof lists[k]);
        if (best >= 0) {
            int k = tokens[best].cat;
            return spec_fail(c, "unknown %s '%.*s' (did you mean '%s'?); valid %s: %s", cat_name[k], qlen, b,
                             tokens[best].name, cat_plural[k], lists[k]);
        }
        return spec_fail(c, "%s '%.*s'%s; valid normalisers: %s; sinks: %s; transforms: %s; positions: %s; "
                            "patterns: %s",
                         nlen ? "unknown word" : "token", qlen, b, nlen ? "" : " does not start with a name",
                         lists[CAT_NORM], lists[CAT_SINK], lists[CAT_XF], lists[CAT_POS], lists[CAT_PAT]);
    }
    const token_def *t = &tokens[ti];
    char sig[96], plist[128];
    signature(t, sig, sizeof sig);

    /* category bookkeeping */
    if (t->cat == CAT_PAT && (t->kind == LA_PAT_WINDOW || t->kind == LA_PAT_GLOBAL)) {
        int is_win = t->kind == LA_PAT_WINDOW;
        int other_ok = is_win ? (*pat_has_global && !*pat_has_window) : (*pat_has_window && !*pat_has_global);
        if (seen[CAT_PAT] && !other_ok)
            return spec_fail(c, "second pattern token '%.*s' after '%s' (at most one pattern; only global(g) and "
                                "window(w) combine)",
                             tlen, b, tokens[seen[CAT_PAT] - 1].name);
        if (is_win) *pat_has_window = 1;
        else *pat_has_global = 1;
        seen[CAT_PAT] = ti + 1;
        s->pattern = (*pat_has_window && *pat_has_global) ? LA_PAT_GLOBAL : (la_pattern)t->kind;
    } else {
        if (seen[t->cat]) {
            char list[320];
            valid_list(t->cat, list, sizeof list);
            return spec_fail(c, "second %s token '%.*s' after '%s' (give at most one of: %s)", cat_name[t->cat],
                             tlen, b, tokens[seen[t->cat] - 1].name, list);
        }
        seen[t->cat] = ti + 1;
        switch (t->cat) {
        case CAT_NORM:
            s->norm = (la_norm)t->kind;
            if (t->kind == LA_NORM_SPARSEMAX) s->alpha = 2.0;
            break;
        case CAT_SINK: s->sink = (la_sink)t->kind; break;
        case CAT_XF: s->xform = (la_xform)t->kind; break;
        case CAT_POS: s->pos = (la_pos)t->kind; break;
        default: s->pattern = (la_pattern)t->kind; break;
        }
    }

    /* arguments */
    int given[5] = {0};
    if (rest < e) {
        if (*rest != '(' || e[-1] != ')')
            return spec_fail(c, "token '%.*s' is not of the form name or name(args); expected %s", tlen, b, sig);
        if (t->nparams == 0)
            return spec_fail(c, "'%s' takes no parameters (got '%.*s')", t->name, tlen, b);
        const char *a = rest + 1, *aend = e - 1;
        for (const char *x = a; x < aend; x++)
            if (*x == '(' || *x == ')')
                return spec_fail(c, "unbalanced or nested parentheses in token '%.*s'", tlen, b);
        const char *tb = a, *te;
        int seen_kw = 0, npos = 0;
        int empty_all = is_blank(a, aend);
        while (!empty_all) {
            te = tb;
            while (te < aend && *te != ',') te++;
            const char *ab = tb, *ae = te;
            trim(&ab, &ae);
            if (ab == ae) return spec_fail(c, "empty argument in token '%.*s'; expected %s", tlen, b, sig);
            const char *eq = memchr(ab, '=', (size_t)(ae - ab));
            int pi = -1;
            const char *vb, *ve = ae;
            if (eq) {
                const char *kb = ab, *ke = eq;
                trim(&kb, &ke);
                for (int i = 0; i < t->nparams; i++)
                    if (strlen(t->p[i].key) == (size_t)(ke - kb) && !strncmp(t->p[i].key, kb, (size_t)(ke - kb)))
                        pi = i;
                if (pi < 0)
                    return spec_fail(c, "unknown parameter '%.*s' of '%s' in token '%.*s'; valid: %s", (int)(ke - kb),
                                     kb, t->name, tlen, b, param_list(t, plist, sizeof plist));
                seen_kw = 1;
                vb = eq + 1;
            } else {
                if (seen_kw)
                    return spec_fail(c, "positional argument '%.*s' after a key=value one in token '%.*s'",
                                     (int)(ae - ab), ab, tlen, b);
                if (npos >= t->nparams)
                    return spec_fail(c, "too many arguments in token '%.*s': '%s' takes %d (%s)", tlen, b, t->name,
                                     t->nparams, param_list(t, plist, sizeof plist));
                pi = npos++;
                vb = ab;
            }
            trim(&vb, &ve);
            if (given[pi])
                return spec_fail(c, "parameter '%s' given twice in token '%.*s'", t->p[pi].key, tlen, b);
            given[pi] = 1;
            const param_def *pd = &t->p[pi];
            if (pd->type == P_DBL) {
                double v;
                if (!parse_double(vb, (size_t)(ve - vb), &v))
                    return spec_fail(c, "bad number '%.*s' for %s in token '%.*s' (expected a finite decimal number "
                                     "such as 0.5 or 1e4)",
                                     (int)(ve - vb), vb, pd->key, tlen, b);
                memcpy((char *)s + pd->offset, &v, sizeof v);
            } else {
                int v;
                if (!parse_int(vb, (size_t)(ve - vb), &v))
                    return spec_fail(c, "bad integer '%.*s' for %s in token '%.*s' (expected a whole number such as "
                                     "512)",
                                     (int)(ve - vb), vb, pd->key, tlen, b);
                if (pd->offset == offsetof(la_spec, train_len)) {
                    /* train is shared by the position and the transform: 0 means unset */
                    if (v != 0 && *train_tok >= 0 && s->train_len != 0 && s->train_len != v)
                        return spec_fail(c, "train = %d in token '%.*s' conflicts with train = %d given to '%s'", v,
                                         tlen, b, s->train_len, tokens[*train_tok].name);
                    if (v != 0 || s->train_len == 0) s->train_len = v;
                    if (v != 0) *train_tok = ti;
                } else {
                    memcpy((char *)s + pd->offset, &v, sizeof v);
                }
            }
            if (te >= aend) break;
            tb = te + 1;
        }
    }
    for (int i = 0; i < t->nparams; i++)
        if (t->p[i].required && !given[i])
            return spec_fail(c, "'%s' needs its parameter '%s' (write %s)", t->name, t->p[i].key, sig);
    /* parameters that choose a variant (issue 31) */
    if (t->cat == CAT_SINK && given[0]) s->sink = LA_SINK_FIXED;
    if (t->cat == CAT_NORM && t->kind == LA_NORM_SIGMOID && given[0]) s->sig_b_set = 1;
    return LA_OK;
}

la_status la_spec_parse(const char *text, la_spec *out) {
    if (!text || !out) return la_fail(LA_EINVAL, "la_spec_parse: %s is NULL", !text ? "text" : "out");
    ctx_t c;
    size_t tl = strlen(text);
    if (tl < sizeof c.quoted) memcpy(c.quoted, text, tl + 1);
    else snprintf(c.quoted, sizeof c.quoted, "%.*s...", (int)sizeof c.quoted - 4, text);

    la_spec s = la_spec_default();
    int seen[N_CAT] = {0};
    int train_tok = -1, has_win = 0, has_glob = 0;
    const char *b = text, *end = text + tl;
    if (is_blank(b, end))
        return la_fail(LA_ESPEC, "empty attention spec; write e.g. 'softmax+rope+causal' (default: "
                                 "softmax+nope+causal)");
    int depth = 0;
    for (const char *x = text; x <= end; x++) {
        if (x < end && *x == '(') depth++;
        if (x < end && *x == ')') {
            if (--depth < 0) return spec_fail(&c, "unbalanced ')'");
        }
        if (x == end || (*x == '+' && depth == 0)) {
            if (x == end && depth != 0) return spec_fail(&c, "unbalanced '(' (missing ')')");
            LA_TRY(parse_token(&c, b, x, &s, seen, &train_tok, &has_win, &has_glob));
            b = x + 1;
        }
    }
    if (has_glob && !has_win)
        return spec_fail(&c, "global(g) must be combined with window(w), e.g. global(g=2)+window(w=512)");

    char why[256];
    int cat = check_spec(&s, why, sizeof why);
    if (cat >= 0) {
        /* name the token that carries the bad value */
        if (s.train_len < 0 && train_tok >= 0) cat = tokens[train_tok].cat; /* the token that set train */
        const char *tok = seen[cat] ? tokens[seen[cat] - 1].name : "(default)";
        if (cat == CAT_PAT && has_win && has_glob) tok = "global/window";
        char list[320];
        valid_list(cat, list, sizeof list);
        return spec_fail(&c, "bad %s '%s': %s (valid %s: %s)", cat_name[cat], tok, why, cat_plural[cat], list);
    }
    *out = s;
    return LA_OK;
}

/* ---- canonical printing ---- */

static void fmt_params(const la_spec *s, const token_def *t, char *buf, size_t n, size_t *len) {
    append(buf, n, len, "%s", t->name);
    if (t->nparams == 0) return;
    append(buf, n, len, "(");
    for (int i = 0; i < t->nparams; i++) {
        const param_def *pd = &t->p[i];
        if (pd->type == P_DBL) {
            double v;
            memcpy(&v, (const char *)s + pd->offset, sizeof v);
            char num[40];
            format_double(v, num, sizeof num);
            append(buf, n, len, "%s%s=%s", i ? "," : "", pd->key, num);
        } else {
            int v;
            memcpy(&v, (const char *)s + pd->offset, sizeof v);
            append(buf, n, len, "%s%s=%d", i ? "," : "", pd->key, v);
        }
    }
    append(buf, n, len, ")");
}

static const token_def *find_def(int cat, int kind) {
    for (int i = 0; i < N_TOKENS; i++)
        if (tokens[i].cat == cat && tokens[i].kind == kind) return &tokens[i];
    return NULL;
}

int la_spec_format(const la_spec *spec, char *buf, size_t n) {
    size_t len = 0;
    if (buf && n) buf[0] = '\0';
    if (!buf) n = 0;
    if (!spec) {
        append(buf, n, &len, "(null)");
        return (int)len;
    }
    const int kinds[N_CAT] = {(int)spec->norm, (int)spec->sink, (int)spec->xform, (int)spec->pos,
                              (int)spec->pattern};
    for (int cat = 0; cat < N_CAT; cat++) {
        if (cat == CAT_XF && spec->xform == LA_XF_NONE) continue; /* 'none' is implied */
        if (cat == CAT_SINK && spec->sink == LA_SINK_NONE) continue;
        /* variants chosen by a parameter's presence (issue 31): "sink" / "sink(fixed=v)",
         * "sigmoid" (b = -ln(train)) / "sigmoid(b=v)", train shown when set */
        if (cat == CAT_NORM && spec->norm == LA_NORM_SIGMOID && !spec->sig_b_set) {
            append(buf, n, &len, "sigmoid(train=%d)", spec->train_len); /* with b: fmt_params below */
            continue;
        }
        if (len) append(buf, n, &len, "+");
        if (cat == CAT_SINK && spec->sink == LA_SINK_LEARNED) {
            append(buf, n, &len, "sink");
            continue;
        }
        if (cat == CAT_SINK && spec->sink == LA_SINK_FIXED) { /* the sink token with its parameter */
            fmt_params(spec, find_def(CAT_SINK, LA_SINK_LEARNED), buf, n, &len);
            continue;
        }
        if (cat == CAT_PAT && spec->pattern == LA_PAT_GLOBAL) {
            append(buf, n, &len, "global(g=%d)+window(w=%d)", spec->global, spec->window);
            continue;
        }
        const token_def *t = find_def(cat, kinds[cat]);
        if (!t) {
            append(buf, n, &len, "?%s%d", cat_name[cat], kinds[cat]);
            continue;
        }
        fmt_params(spec, t, buf, n, &len);
    }
    return (int)len;
}
