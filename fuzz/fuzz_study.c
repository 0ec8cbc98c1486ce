/* fuzz_study.c -- study files (la_study_parse: JSON text, every key checked). Invariant:
 * an accepted study has its counts inside the fixed arrays and NUL-terminated strings. */
#include <string.h>

#include "fuzz_util.h"
#include "longattn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    char *text = fz_cstr(data, size);
    la_study st;
    if (la_study_parse(text, "fuzz.json", &st) == LA_OK) {
        FZ_CHECK(st.n_specs >= 1 && st.n_specs <= LA_STUDY_MAX_SPECS, "n_specs %d", st.n_specs);
        FZ_CHECK(st.n_eval_lens >= 0 && st.n_eval_lens <= LA_STUDY_MAX_LENS, "n_eval_lens %d", st.n_eval_lens);
        FZ_CHECK(st.n_pk_lens >= 0 && st.n_pk_lens <= LA_STUDY_MAX_LENS, "n_pk_lens %d", st.n_pk_lens);
        FZ_CHECK(st.n_pk_depths >= 0 && st.n_pk_depths <= LA_STUDY_MAX_DEPTHS, "n_pk_depths %d", st.n_pk_depths);
        FZ_CHECK(memchr(st.name, 0, sizeof st.name) && memchr(st.data, 0, sizeof st.data), "unterminated string");
        for (int i = 0; i < st.n_specs; i++) {
            la_spec sp;
            FZ_CHECK(memchr(st.specs[i], 0, sizeof st.specs[i]) != NULL, "unterminated spec");
            FZ_CHECK(la_spec_parse(st.specs[i], &sp) == LA_OK, "accepted study holds a bad spec '%s'", st.specs[i]);
        }
        for (int i = 1; i < st.n_eval_lens; i++)
            FZ_CHECK(st.eval_lens[i] > st.eval_lens[i - 1], "eval_lens not increasing");
    } else {
        FZ_CHECK(la_errmsg()[0] != 0, "la_study_parse failed without a message");
    }
    free(text);
    return 0;
}
