/* test_exports.c -- the public libraries export exactly the public API.
 *
 * Reads the symbol tables of BUILD/liblongattn.so (nm -D) and of the pre-linked public
 * archive BUILD/liblongattn.a (nm -g), and the public headers (include/longattn.h,
 * include/longattn/<module>.h, read from the working directory: run from the repository root, as
 * tests/run.sh does), and fails naming
 *   - every exported symbol without the la_ prefix (it would clash with users' code),
 *   - every exported la_ symbol that no public header declares with LA_API (an internal
 *     function that lost its hidden visibility),
 *   - every LA_API declaration the libraries do not export (declared, never defined),
 *   - every top-level function prototype in a public header without LA_API (it would be
 *     hidden: users would get "undefined reference"),
 *   - a module header that includes one of a higher or the same layer (docs/architecture.md "Layout").
 * BUILD is the folder above this program's (argv[0] = BUILD/tests/test_exports). */
#include <dirent.h>
#include <dlfcn.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "longattn.h"

static char g_build[1024] = "build";

/* A growable set of names (linear lookup: a few hundred entries). */
typedef struct {
    char **name;
    int n, cap;
} names;

static void names_add(names *s, const char *x) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->name[i], x) == 0) return;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->name = realloc(s->name, (size_t)s->cap * sizeof *s->name);
        assert_non_null(s->name);
    }
    s->name[s->n] = strdup(x);
    assert_non_null(s->name[s->n]);
    s->n++;
}

static int names_has(const names *s, const char *x) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->name[i], x) == 0) return 1;
    return 0;
}

static void names_free(names *s) {
    for (int i = 0; i < s->n; i++) free(s->name[i]);
    free(s->name);
    memset(s, 0, sizeof *s);
}

/* Defined global symbols printed by `nm <flags> path` (lines "value type name"). */
static void read_symbols(const char *flags, const char *lib, names *out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "nm %s '%s/%s' 2>&1", flags, g_build, lib);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char value[256], type[16], name[512];
        if (sscanf(line, "%255s %15s %511s", value, type, name) == 3) names_add(out, name);
    }
    int rc = pclose(f);
    if (rc != 0) fail_msg("`%s` failed (exit %d): build the libraries first (make)", cmd, rc);
    if (out->n == 0) fail_msg("`%s` listed no symbols", cmd);
}

/* Public header files: include/longattn.h and include/longattn/<module>.h. */
static void header_files(names *out) {
    names_add(out, "include/longattn.h");
    DIR *d = opendir("include/longattn");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 2 && strcmp(e->d_name + n - 2, ".h") == 0) {
            char p[600];
            snprintf(p, sizeof p, "include/longattn/%s", e->d_name);
            names_add(out, p);
        }
    }
    closedir(d);
}

/* Names declared LA_API in the public headers; prototypes without LA_API are appended to
 * bad as "file:line: text". */
static void read_declarations(names *decl, names *bad) {
    regex_t api, proto;
    /* LA_API <return type> la_name( */
    assert_int_equal(regcomp(&api, "^LA_API[ \t].*[^A-Za-z0-9_](la_[A-Za-z0-9_]+)[ \t]*\\(",
                             REG_EXTENDED), 0);
    /* a prototype at column 0: type words and stars, then la_name( */
    assert_int_equal(regcomp(&proto, "^[A-Za-z_][A-Za-z0-9_ \t*]*[^A-Za-z0-9_](la_[A-Za-z0-9_]+)[ \t]*\\(",
                             REG_EXTENDED), 0);
    names files = {0};
    header_files(&files);
    for (int i = 0; i < files.n; i++) {
        FILE *f = fopen(files.name[i], "r");
        if (!f) fail_msg("cannot open %s: run this test from the repository root", files.name[i]);
        char line[4096];
        int lineno = 0;
        while (fgets(line, sizeof line, f)) {
            lineno++;
            regmatch_t m[2];
            if (regexec(&api, line, 2, m, 0) == 0) {
                /* the first la_name( on the line is the function (return types such as
                 * la_spec are not followed by '(') */
                char name[256];
                int len = (int)(m[1].rm_eo - m[1].rm_so);
                snprintf(name, sizeof name, "%.*s", len, line + m[1].rm_so);
                names_add(decl, name);
            } else if (regexec(&proto, line, 2, m, 0) == 0 && strncmp(line, "typedef", 7) != 0 &&
                       strncmp(line, "static", 6) != 0 && strncmp(line, "extern", 6) != 0) {
                char msg[4300];
                line[strcspn(line, "\n")] = '\0';
                snprintf(msg, sizeof msg, "%s:%d: %s", files.name[i], lineno, line);
                names_add(bad, msg);
            }
        }
        fclose(f);
    }
    names_free(&files);
    regfree(&api);
    regfree(&proto);
}

/* Fails listing every exported symbol of lib that is not la_ or not declared LA_API, and
 * every LA_API declaration lib does not export. */
static void check_library(const char *nm_flags, const char *lib) {
    names exp = {0}, decl = {0}, bad = {0};
    read_symbols(nm_flags, lib, &exp);
    read_declarations(&decl, &bad);
    int problems = 0;
    for (int i = 0; i < exp.n; i++) {
        const char *s = exp.name[i];
        if (strncmp(s, "la_", 3) != 0) {
            print_error("%s exports '%s' without the la_ prefix: make it static, or rename it "
                        "la_<module>_...\n", lib, s);
            problems++;
        } else if (!names_has(&decl, s)) {
            print_error("%s exports '%s', which no public header declares with LA_API: an "
                        "internal function must stay hidden (compiled with "
                        "-fvisibility=hidden, no LA_API)\n", lib, s);
            problems++;
        }
    }
    for (int i = 0; i < decl.n; i++)
        if (!names_has(&exp, decl.name[i])) {
            print_error("%s does not export '%s', which a public header declares LA_API\n", lib,
                        decl.name[i]);
            problems++;
        }
    if (problems) fail_msg("%d problem(s) with the symbols of %s/%s (listed above)", problems,
                           g_build, lib);
    names_free(&exp);
    names_free(&decl);
    names_free(&bad);
}

static void test_shared_exports_only_public(void **state) {
    (void)state;
    check_library("-D --defined-only", "liblongattn.so");
}

static void test_static_exports_only_public(void **state) {
    (void)state;
    check_library("-g --defined-only", "liblongattn.a");
}

static void test_public_prototypes_have_la_api(void **state) {
    (void)state;
    names decl = {0}, bad = {0};
    read_declarations(&decl, &bad);
    for (int i = 0; i < bad.n; i++)
        print_error("public function declared without LA_API (it would not be exported): %s\n",
                    bad.name[i]);
    if (bad.n) fail_msg("%d public prototype(s) without LA_API", bad.n);
    /* the parse found the API: la_attn_forward and la_version among ~150 functions */
    assert_true(names_has(&decl, "la_attn_forward"));
    assert_true(names_has(&decl, "la_version"));
    assert_true(decl.n > 100);
    names_free(&decl);
    names_free(&bad);
}

/* Module headers follow the layers core -> io -> tokenizer -> attn -> model -> train /
 * infer -> experiments (docs/architecture.md "Layout"): each includes only headers of lower layers.
 * Headers not in this table (new modules) are not checked here. */
static int layer_of(const char *header) {
    static const struct { const char *name; int layer; } t[] = {
        {"core.h", 0},  {"io.h", 1},    {"gguf.h", 1},  {"tokenizer.h", 2},    {"attn.h", 3},
        {"model.h", 4}, {"train.h", 5}, {"infer.h", 5}, {"experiments.h", 6},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(header, t[i].name) == 0) return t[i].layer;
    return -1;
}

static void test_module_headers_follow_layers(void **state) {
    (void)state;
    names files = {0};
    header_files(&files);
    int problems = 0, checked = 0;
    for (int i = 0; i < files.n; i++) {
        const char *base = strrchr(files.name[i], '/') + 1;
        if (strcmp(files.name[i], "include/longattn.h") == 0 || layer_of(base) < 0) continue;
        FILE *f = fopen(files.name[i], "r");
        assert_non_null(f);
        char line[1024], inc[256];
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "#include \"%255[^\"]\"", inc) != 1) continue;
            const char *ib = strrchr(inc, '/') ? strrchr(inc, '/') + 1 : inc;
            checked++;
            if (layer_of(ib) < 0 || layer_of(ib) >= layer_of(base)) {
                print_error("%s includes \"%s\", which is not a lower layer (core -> io -> "
                            "tokenizer -> attn -> model -> train / infer -> experiments)\n",
                            files.name[i], inc);
                problems++;
            }
        }
        fclose(f);
    }
    names_free(&files);
    if (problems) fail_msg("%d include(s) against the layer order", problems);
    assert_true(checked >= 6); /* the module headers exist and include each other */
}

static void test_version(void **state) {
    (void)state;
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", LA_VERSION_MAJOR, LA_VERSION_MINOR, LA_VERSION_PATCH);
    assert_string_equal(LA_VERSION_STRING, want);
    assert_string_equal(la_version(), LA_VERSION_STRING);
}

/* What a dynamic loader (cffi, ctypes) sees: public functions resolve, internal ones do
 * not. */
static void test_shared_library_loads(void **state) {
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/liblongattn.so", g_build);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) fail_msg("dlopen %s: %s", path, dlerror());
    const char *(*version)(void) = (const char *(*)(void))dlsym(h, "la_version");
    assert_non_null(version);
    assert_string_equal(version(), LA_VERSION_STRING);
    la_spec (*spec_default)(void) = (la_spec(*)(void))dlsym(h, "la_spec_default");
    assert_non_null(spec_default);
    assert_int_equal(spec_default().norm, LA_NORM_SOFTMAX);
    assert_null(dlsym(h, "la_mm_forward"));   /* internal (src/model/layers.h) */
    assert_null(dlsym(h, "la_fail"));         /* internal (src/core/internal.h) */
    dlclose(h);
}

int main(int argc, char **argv) {
    (void)argc;
    /* BUILD/tests/test_exports -> BUILD */
    snprintf(g_build, sizeof g_build, "%s", argv[0]);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(g_build, '/');
        if (slash) *slash = '\0';
        else snprintf(g_build, sizeof g_build, up ? "." : "..");
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_exports_only_public),
        cmocka_unit_test(test_static_exports_only_public),
        cmocka_unit_test(test_public_prototypes_have_la_api),
        cmocka_unit_test(test_module_headers_follow_layers),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_shared_library_loads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
