/* kv_params.c -- KV cache parameters: defaults, validation, budgets and the policy text
 * form ("sinks(4,252)+int8(group=32)"). Policies: H2O (Zhang et al. 2023), StreamingLLM
 * (Xiao et al. 2024), sliding window; see the KV cache section of longattn.h. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/kv_internal.h"
#include "longattn/infer.h"

#define KV_FORMS                                                                                        \
    "full | window(w) | sinks(n,w) | h2o(heavy,recent[,sinks]), optionally +f32, +f16, +bf16, +int8 or " \
    "+int8(group=g)"
#define KV_TYPES "f32, f16, bf16, int8, int8(group=g)"

la_kv_params la_kv_params_default(void) {
    la_kv_params p;
    memset(&p, 0, sizeof p);
    p.n_layers = 1;
    p.H = 1;
    p.Hkv = 1;
    p.D = 64;
    p.policy = LA_KV_FULL;
    p.max_tokens = 4096;
    p.storage = LA_KV_F32;
    return p;
}

void la_kv_policy_counts(const la_kv_params *p, int64_t *sinks, int64_t *heavy, int64_t *recent) {
    int64_t s = 0, h = 0, r = 0;
    switch (p->policy) {
    case LA_KV_FULL: r = p->max_tokens; break;
    case LA_KV_WINDOW: r = p->window; break;
    case LA_KV_SINKS: s = p->sinks; r = p->window; break;
    case LA_KV_H2O: s = p->sinks; h = p->heavy; r = p->recent; break;
    }
    *sinks = s;
    *heavy = h;
    *recent = r;
}

la_status la_kv_params_validate(const la_kv_params *p) {
    if (!p) return la_fail(LA_EINVAL, "kv params: NULL pointer; start from la_kv_params_default()");
    if (p->n_layers < 1) return la_fail(LA_EINVAL, "kv params: n_layers = %d, must be >= 1", p->n_layers);
    if (p->H < 1 || p->Hkv < 1)
        return la_fail(LA_EINVAL, "kv params: H = %d, Hkv = %d, both must be >= 1", p->H, p->Hkv);
    if (p->H % p->Hkv != 0)
        return la_fail(LA_EINVAL, "kv params: H = %d is not a multiple of Hkv = %d (grouped-query attention needs H %% Hkv == 0)",
                       p->H, p->Hkv);
    if (p->D < 1) return la_fail(LA_EINVAL, "kv params: D = %d, must be >= 1", p->D);
    switch (p->policy) {
    case LA_KV_FULL:
        if (p->max_tokens < 1 || p->max_tokens > ((int64_t)1 << 31))
            return la_fail(LA_EINVAL, "kv params: full policy needs 1 <= max_tokens <= 2^31, got %lld",
                           (long long)p->max_tokens);
        break;
    case LA_KV_WINDOW:
        if (p->window < 1) return la_fail(LA_EINVAL, "kv params: window(w) needs w >= 1, got %d", p->window);
        break;
    case LA_KV_SINKS:
        if (p->window < 1) return la_fail(LA_EINVAL, "kv params: sinks(n, w) needs w >= 1, got w = %d", p->window);
        if (p->sinks < 0) return la_fail(LA_EINVAL, "kv params: sinks(n, w) needs n >= 0, got n = %d", p->sinks);
        break;
    case LA_KV_H2O:
        if (p->recent < 1)
            return la_fail(LA_EINVAL, "kv params: h2o needs recent >= 1 (the newest token is never evicted), got %d", p->recent);
        if (p->heavy < 0 || p->sinks < 0)
            return la_fail(LA_EINVAL, "kv params: h2o needs heavy >= 0 and sinks >= 0, got heavy = %d, sinks = %d",
                           p->heavy, p->sinks);
        break;
    default:
        return la_fail(LA_EINVAL, "kv params: unknown policy %d; valid: %s", (int)p->policy, KV_FORMS);
    }
    if (p->storage != LA_KV_F32 && p->storage != LA_KV_INT8 && p->storage != LA_KV_F16 && p->storage != LA_KV_BF16)
        return la_fail(LA_EINVAL, "kv params: unknown storage %d; use LA_KV_F32, LA_KV_F16, LA_KV_BF16 or LA_KV_INT8",
                       (int)p->storage);
    if (p->storage == LA_KV_INT8 && (p->group < 0 || (p->group > 0 && p->D % p->group != 0)))
        return la_fail(LA_EINVAL, "kv params: int8 group = %d must divide D = %d (or be 0 for one scale per row)",
                       p->group, p->D);
    if (la_kv_budget(p) > ((int64_t)1 << 31))
        return la_fail(LA_EINVAL, "kv params: budget of %lld tokens is too large (max 2^31)", (long long)la_kv_budget(p));
    return LA_OK;
}

int64_t la_kv_budget(const la_kv_params *p) {
    if (!p) return 0;
    int64_t s, h, r;
    la_kv_policy_counts(p, &s, &h, &r);
    return s + h + r;
}

int64_t la_kv_max_chunk(const la_kv_params *p) {
    if (!p) return 0;
    int64_t s, h, r;
    la_kv_policy_counts(p, &s, &h, &r);
    return r;
}

double la_kv_bytes_per_token(const la_kv_params *p) {
    if (!p) return 0;
    double row;
    if (p->storage == LA_KV_INT8) {
        int g = p->group > 0 ? p->group : p->D;
        row = (double)p->D + 4.0 * (double)(p->D / g);
    } else if (p->storage == LA_KV_F16 || p->storage == LA_KV_BF16) {
        row = 2.0 * p->D;
    } else {
        row = 4.0 * p->D;
    }
    return 2.0 * p->n_layers * p->Hkv * row;
}

/* ---- element type ---- */

la_dtype la_kv_params_type(const la_kv_params *p) {
    if (!p) return LA_DTYPE_F32;
    switch (p->storage) {
    case LA_KV_F16: return LA_DTYPE_F16;
    case LA_KV_BF16: return LA_DTYPE_BF16;
    case LA_KV_INT8: return LA_DTYPE_I8;
    default: return LA_DTYPE_F32;
    }
}

la_status la_kv_params_set_type(la_kv_params *p, la_dtype t, int group) {
    if (!p) return la_fail(LA_EINVAL, "la_kv_params_set_type: NULL params");
    la_kv_storage s;
    switch (t) {
    case LA_DTYPE_F32: s = LA_KV_F32; break;
    case LA_DTYPE_F16: s = LA_KV_F16; break;
    case LA_DTYPE_BF16: s = LA_KV_BF16; break;
    case LA_DTYPE_I8: s = LA_KV_INT8; break;
    default: return la_fail(LA_EINVAL, "la_kv_params_set_type: unknown type %d; valid: %s", (int)t, KV_TYPES);
    }
    if (s == LA_KV_INT8 && (group < 0 || (group > 0 && p->D > 0 && p->D % group != 0)))
        return la_fail(LA_EINVAL, "la_kv_params_set_type: int8 group = %d must divide D = %d (or be 0 for one scale "
                                  "per row)", group, p->D);
    p->storage = s;
    p->group = s == LA_KV_INT8 ? group : 0;
    return LA_OK;
}

/* ---- text form ---- */

/* The name of "name(...)" or "name (...)" ends at lp, the '(': cut there and before the spaces
 * in front of it. */
static void end_name(char *name, char *lp) {
    do *lp = '\0';
    while (lp > name && isspace((unsigned char)*--lp));
}

/* Parse up to `max` integer arguments "a,b" or "k=a,k2=b" of term `name` (text between the
 * parentheses, NUL-terminated in args). keys[i] names argument i; positional arguments
 * fill keys in order. Returns -1 on error (message set). */
static int parse_args(const char *name, char *args, const char *const *keys, int max, long *vals, int *given) {
    int npos = 0;
    char *save = NULL;
    for (char *tok = strtok_r(args, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok)) tok++;
        char *eq = strchr(tok, '=');
        int idx = -1;
        char *num = tok;
        if (eq) {
            *eq = '\0';
            char *key = tok;
            char *end = eq - 1;
            while (end > key && isspace((unsigned char)*end)) *end-- = '\0';
            for (int i = 0; i < max; i++)
                if (!strcmp(key, keys[i])) idx = i;
            if (idx < 0) {
                char list[128] = "";
                for (int i = 0; i < max; i++) {
                    strncat(list, keys[i], sizeof list - strlen(list) - 1);
                    if (i + 1 < max) strncat(list, ", ", sizeof list - strlen(list) - 1);
                }
                la_fail(LA_ESPEC, "kv policy: %s has no parameter '%s' (valid: %s)", name, key, list);
                return -1;
            }
            num = eq + 1;
        } else {
            if (npos >= max) {
                la_fail(LA_ESPEC, "kv policy: %s takes at most %d arguments; valid forms: %s", name, max, KV_FORMS);
                return -1;
            }
            idx = npos++;
        }
        errno = 0;
        char *end;
        long v = strtol(num, &end, 10);
        while (isspace((unsigned char)*end)) end++;
        if (errno || end == num || *end != '\0' || v < 0 || v > (1L << 30)) {
            la_fail(LA_ESPEC, "kv policy: %s(%s=...) has bad value '%s'; expected an integer in [0, 2^30]", name,
                    keys[idx], num);
            return -1;
        }
        if (given[idx]) {
            la_fail(LA_ESPEC, "kv policy: %s sets '%s' twice", name, keys[idx]);
            return -1;
        }
        vals[idx] = v;
        given[idx] = 1;
    }
    return 0;
}

/* a float element type name of la_dtype_parse (f32, f16, bf16 and their aliases) */
static int is_float_type(const char *term) {
    static const char *const names[] = {"f32", "float32", "f16", "float16", "bf16", "bfloat16"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(term, names[i])) return 1;
    return 0;
}

la_status la_kv_policy_parse(const char *text, la_kv_params *out) {
    if (!text || !out) return la_fail(LA_EINVAL, "la_kv_policy_parse: NULL argument");
    size_t n = strlen(text);
    if (n == 0 || n > 255) return la_fail(LA_ESPEC, "kv policy: empty or too long text; valid forms: %s", KV_FORMS);
    char buf[256];
    memcpy(buf, text, n + 1);
    la_kv_params p = *out;
    p.policy = LA_KV_FULL;
    p.window = p.sinks = p.heavy = p.recent = 0;
    p.storage = LA_KV_F32;
    p.group = 0;
    int have_policy = 0, have_storage = 0;
    char *save = NULL;
    for (char *term = strtok_r(buf, "+", &save); term; term = strtok_r(NULL, "+", &save)) {
        while (isspace((unsigned char)*term)) term++;
        char *end = term + strlen(term);
        while (end > term && isspace((unsigned char)end[-1])) *--end = '\0';
        char *args = NULL;
        char *lp = strchr(term, '(');
        if (lp) {
            if (end == term || end[-1] != ')')
                return la_fail(LA_ESPEC, "kv policy: term '%s' has '(' without a closing ')'", term);
            end[-1] = '\0';
            args = lp + 1;
            end_name(term, lp);
        }
        long vals[3] = {0, 0, 0};
        int given[3] = {0, 0, 0};
        if (!strcmp(term, "full") || !strcmp(term, "window") || !strcmp(term, "sinks") || !strcmp(term, "h2o")) {
            if (have_policy) return la_fail(LA_ESPEC, "kv policy: two eviction policies in '%s'; give one of %s", text, KV_FORMS);
            have_policy = 1;
        }
        if (!strcmp(term, "full")) {
            if (args && *args)
                return la_fail(LA_ESPEC, "kv policy: 'full' takes no arguments (it holds the whole context: --ctx "
                               "on the command line, max_tokens in C)");
            p.policy = LA_KV_FULL;
        } else if (!strcmp(term, "window")) {
            static const char *const keys[] = {"w"};
            if (!args) return la_fail(LA_ESPEC, "kv policy: window needs its size, e.g. window(256)");
            if (parse_args("window", args, keys, 1, vals, given)) return LA_ESPEC;
            if (!given[0]) return la_fail(LA_ESPEC, "kv policy: window needs w, e.g. window(256)");
            p.policy = LA_KV_WINDOW;
            p.window = (int)vals[0];
        } else if (!strcmp(term, "sinks")) {
            static const char *const keys[] = {"n", "w"};
            if (!args) return la_fail(LA_ESPEC, "kv policy: sinks needs n and w, e.g. sinks(4,252)");
            if (parse_args("sinks", args, keys, 2, vals, given)) return LA_ESPEC;
            if (!given[0] || !given[1]) return la_fail(LA_ESPEC, "kv policy: sinks needs both n and w, e.g. sinks(n=4,w=252)");
            p.policy = LA_KV_SINKS;
            p.sinks = (int)vals[0];
            p.window = (int)vals[1];
        } else if (!strcmp(term, "h2o")) {
            static const char *const keys[] = {"heavy", "recent", "sinks"};
            if (!args) return la_fail(LA_ESPEC, "kv policy: h2o needs heavy and recent, e.g. h2o(64,64)");
            if (parse_args("h2o", args, keys, 3, vals, given)) return LA_ESPEC;
            if (!given[0] || !given[1])
                return la_fail(LA_ESPEC, "kv policy: h2o needs heavy and recent, e.g. h2o(heavy=64,recent=64,sinks=4)");
            p.policy = LA_KV_H2O;
            p.heavy = (int)vals[0];
            p.recent = (int)vals[1];
            p.sinks = (int)vals[2];
        } else if (!strcmp(term, "int8") || !strcmp(term, "i8")) {
            static const char *const keys[] = {"group"};
            if (have_storage) return la_fail(LA_ESPEC, "kv policy: element type given twice in '%s'; give one of %s", text, KV_TYPES);
            have_storage = 1;
            if (args && *args && parse_args("int8", args, keys, 1, vals, given)) return LA_ESPEC;
            p.storage = LA_KV_INT8;
            p.group = (int)vals[0];
        } else if (is_float_type(term)) {
            if (have_storage) return la_fail(LA_ESPEC, "kv policy: element type given twice in '%s'; give one of %s", text, KV_TYPES);
            if (args) return la_fail(LA_ESPEC, "kv policy: element type '%s' takes no arguments", term);
            have_storage = 1;
            la_dtype t = LA_DTYPE_F32;
            (void)la_dtype_parse(term, &t);
            p.storage = t == LA_DTYPE_F16 ? LA_KV_F16 : t == LA_DTYPE_BF16 ? LA_KV_BF16 : LA_KV_F32;
        } else {
            return la_fail(LA_ESPEC, "kv policy: unknown term '%s'; valid forms: %s", term, KV_FORMS);
        }
    }
    if (!have_policy && !have_storage) return la_fail(LA_ESPEC, "kv policy: nothing in '%s'; valid forms: %s", text, KV_FORMS);
    /* D = 0: the head size is not known yet (a command line read before its model); the int8
     * group is then checked against D where the cache is made */
    la_kv_params q = p;
    if (q.D == 0) q.D = q.group > 0 ? q.group : 1;
    q.n_layers = q.H = q.Hkv = 1; /* the shape is not the parser's: checked where the cache is made */
    q.max_tokens = 1;
    if (la_kv_params_validate(&q) != LA_OK) return la_fail(LA_ESPEC, "kv policy '%s': %s", text, la_errmsg());
    *out = p;
    return LA_OK;
}

int la_kv_policy_format(const la_kv_params *p, char *buf, size_t n) {
    char pol[96] = "", st[48] = "";
    if (!p) return snprintf(buf, n, "%s", "");
    switch (p->policy) {
    case LA_KV_FULL: snprintf(pol, sizeof pol, "full"); break;
    case LA_KV_WINDOW: snprintf(pol, sizeof pol, "window(w=%d)", p->window); break;
    case LA_KV_SINKS: snprintf(pol, sizeof pol, "sinks(n=%d,w=%d)", p->sinks, p->window); break;
    case LA_KV_H2O:
        snprintf(pol, sizeof pol, "h2o(heavy=%d,recent=%d,sinks=%d)", p->heavy, p->recent, p->sinks);
        break;
    }
    if (p->storage == LA_KV_INT8) {
        if (p->group > 0) snprintf(st, sizeof st, "+int8(group=%d)", p->group);
        else snprintf(st, sizeof st, "+int8");
    } else if (p->storage == LA_KV_F16) {
        snprintf(st, sizeof st, "+f16");
    } else if (p->storage == LA_KV_BF16) {
        snprintf(st, sizeof st, "+bf16");
    }
    return snprintf(buf, n, "%s%s", pol, st);
}

la_status la_kv_type_parse(const char *text, la_kv_params *out) {
    if (!text || !out) return la_fail(LA_EINVAL, "la_kv_type_parse: NULL argument");
    size_t n = strlen(text);
    char buf[64];
    if (n == 0 || n >= sizeof buf) return la_fail(LA_ESPEC, "kv type: '%s' is empty or too long; valid: %s", text, KV_TYPES);
    memcpy(buf, text, n + 1);
    char *b = buf, *e = buf + n;
    while (isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) *--e = '\0';
    la_kv_params p = *out;
    char *lp = strchr(b, '(');
    if (lp) end_name(b, lp);
    la_dtype t;
    if (!strcmp(b, "int8") || !strcmp(b, "i8")) {
        t = LA_DTYPE_I8;
    } else if (is_float_type(b)) {
        (void)la_dtype_parse(b, &t);
        if (lp) return la_fail(LA_ESPEC, "kv type '%s': %s takes no arguments; valid: %s", text, b, KV_TYPES);
    } else {
        return la_fail(LA_ESPEC, "kv type: unknown type '%s'; valid: %s", text, KV_TYPES);
    }
    long vals[1] = {0};
    int given[1] = {0};
    if (lp) {
        static const char *const keys[] = {"group"};
        if (e == lp + 1 || e[-1] != ')') return la_fail(LA_ESPEC, "kv type '%s': '(' without a closing ')'", text);
        e[-1] = '\0';
        if (parse_args("int8", lp + 1, keys, 1, vals, given)) return LA_ESPEC;
    }
    if (la_kv_params_set_type(&p, t, (int)vals[0]) != LA_OK)
        return la_fail(LA_ESPEC, "kv type '%s': %s", text, la_errmsg());
    *out = p;
    return LA_OK;
}

int la_kv_policy_names_type(const char *text) {
    if (!text) return 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    for (char *term = strtok_r(buf, "+", &save); term; term = strtok_r(NULL, "+", &save)) {
        while (isspace((unsigned char)*term)) term++;
        char *e = term + strcspn(term, "( \t");
        *e = '\0';
        if (!strcmp(term, "int8") || !strcmp(term, "i8") || is_float_type(term)) return 1;
    }
    return 0;
}
