/* fuzz_kv_policy.c -- KV-cache policy strings (la_kv_policy_parse / la_kv_policy_format /
 * la_kv_params_validate). Invariant: an accepted string formats to a canonical text that
 * parses back to the same policy fields, and the canonical text is a fixed point. */
#include <string.h>

#include "fuzz_util.h"
#include "longattn.h"

static int same_policy(const la_kv_params *a, const la_kv_params *b) {
    return a->policy == b->policy && a->max_tokens == b->max_tokens && a->window == b->window &&
           a->sinks == b->sinks && a->heavy == b->heavy && a->recent == b->recent &&
           a->storage == b->storage && a->group == b->group;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = fz_cstr(data, size);
    la_kv_params p = la_kv_params_default();
    if (la_kv_policy_parse(text, &p) == LA_OK) {
        (void)la_kv_params_validate(&p);
        int n = la_kv_policy_format(&p, NULL, 0);
        FZ_CHECK(n > 0, "la_kv_policy_format returned %d for '%s'", n, text);
        char *buf = malloc((size_t)n + 1);
        FZ_CHECK(buf != NULL, "out of memory");
        FZ_CHECK(la_kv_policy_format(&p, buf, (size_t)n + 1) == n, "format length changed");
        la_kv_params p2 = la_kv_params_default();
        la_status st = la_kv_policy_parse(buf, &p2);
        FZ_CHECK(st == LA_OK, "canonical text '%s' of '%s' does not parse: %s", buf, text, la_errmsg());
        FZ_CHECK(same_policy(&p, &p2), "parse(format(p)) != p: input '%s', canonical '%s'", text, buf);
        char buf2[512];
        la_kv_policy_format(&p2, buf2, sizeof buf2);
        FZ_CHECK(strcmp(buf, buf2) == 0, "canonical text not a fixed point: '%s' -> '%s'", buf, buf2);
        free(buf);
    } else {
        FZ_CHECK(la_errmsg()[0] != 0, "la_kv_policy_parse failed without a message on '%s'", text);
    }
    free(text);
    return 0;
}
