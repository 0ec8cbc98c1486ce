/* fuzz_spec.c -- attention spec strings (la_spec_parse, la_spec_format, la_spec_validate).
 * Invariant checked: for every string la_spec_parse accepts, formatting the result and
 * parsing that text again gives the same spec bit for bit, and the canonical text is a
 * fixed point (format(parse(format(s))) == format(s)). */
#include <math.h>
#include <string.h>

#include "fuzz_util.h"
#include "longattn.h"

static int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static int same_spec(const la_spec *a, const la_spec *b) {
    return a->norm == b->norm && same_double(a->alpha, b->alpha) && same_double(a->as_delta, b->as_delta) &&
           same_double(a->as_gamma_range, b->as_gamma_range) && a->pos == b->pos &&
           same_double(a->theta, b->theta) && same_double(a->rope_p, b->rope_p) &&
           same_double(a->pos_scale, b->pos_scale) && a->train_len == b->train_len &&
           same_double(a->beta_fast, b->beta_fast) && same_double(a->beta_slow, b->beta_slow) &&
           a->xform == b->xform && same_double(a->logn_s, b->logn_s) && same_double(a->tau, b->tau) &&
           same_double(a->gamma, b->gamma) && same_double(a->temp, b->temp) && a->pattern == b->pattern &&
           a->window == b->window && a->sinks == b->sinks && a->global == b->global;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = fz_cstr(data, size);
    la_spec s;
    if (la_spec_parse(text, &s) == LA_OK) {
        (void)la_spec_validate(&s);
        int n = la_spec_format(&s, NULL, 0);
        FZ_CHECK(n > 0, "la_spec_format returned %d for '%s'", n, text);
        char *buf = malloc((size_t)n + 1);
        FZ_CHECK(buf != NULL, "out of memory");
        FZ_CHECK(la_spec_format(&s, buf, (size_t)n + 1) == n, "format length changed");
        FZ_CHECK(strlen(buf) == (size_t)n, "format wrote %zu bytes, said %d", strlen(buf), n);
        la_spec s2;
        la_status st = la_spec_parse(buf, &s2);
        FZ_CHECK(st == LA_OK, "canonical text '%s' of '%s' does not parse: %s", buf, text, la_errmsg());
        FZ_CHECK(same_spec(&s, &s2), "parse(format(s)) != s: input '%s', canonical '%s'", text, buf);
        char buf2[1024];
        la_spec_format(&s2, buf2, sizeof buf2);
        FZ_CHECK(strcmp(buf, buf2) == 0, "canonical text not a fixed point: '%s' -> '%s'", buf, buf2);
        /* a short buffer is truncated but NUL-terminated */
        char small[8];
        la_spec_format(&s, small, sizeof small);
        FZ_CHECK(memchr(small, 0, sizeof small) != NULL, "short buffer not NUL-terminated");
        free(buf);
    } else {
        FZ_CHECK(la_errmsg()[0] != 0, "la_spec_parse failed without a message on '%s'", text);
    }
    free(text);
    return 0;
}
