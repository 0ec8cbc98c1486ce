/* passkey.c -- the passkey / needle-in-a-haystack retrieval task at byte level (SPEC 8).
 * Format of the public passkey task (Mohtashami & Jaggi 2023, "Landmark attention"),
 * which RULER's NIAH task generalises: a needle "The pass key is K. Remember it. K is the
 * pass key." inside filler, then "What is the pass key? The pass key is" and the answer.
 * The filler here is real text (validation documents), as in RULER's essay haystacks,
 * rather than the repeated "The grass is green..." lines. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "longattn/experiments.h"

static const char QUESTION[] = "\nWhat is the pass key? The pass key is ";

static int needle_text(int key, char *buf, size_t n) {
    return snprintf(buf, n, " The pass key is %d. Remember it. %d is the pass key. ", key, key);
}

int la_passkey_min_len(void) {
    char buf[128];
    /* T + 1 tokens = needle + question + digits, so T = that - 1 */
    return needle_text(10000, buf, sizeof buf) + (int)strlen(QUESTION) + LA_PASSKEY_DIGITS - 1;
}

static int is_space(int32_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* 1 if the decimal digits of key occur in hay[0..n) */
static int contains_key(const int32_t *hay, int n, int key) {
    char k[16];
    snprintf(k, sizeof k, "%d", key);
    for (int i = 0; i + LA_PASSKEY_DIGITS <= n; i++) {
        int j = 0;
        while (j < LA_PASSKEY_DIGITS && hay[i + j] == (unsigned char)k[j]) j++;
        if (j == LA_PASSKEY_DIGITS) return 1;
    }
    return 0;
}

la_status la_passkey_make(const la_docs *hay, int T, double depth, uint64_t seed,
                          int32_t *tokens, la_passkey *info) {
    if (!hay || !tokens || !info) return la_fail(LA_EINVAL, "la_passkey_make: NULL argument");
    if (!(depth >= 0.0 && depth <= 1.0))
        return la_fail(LA_EINVAL, "passkey depth %g is outside [0, 1] (0 = start of the haystack, "
                       "1 = just before the question)", depth);
    if (!hay->is_bytes || hay->n_docs < 1 || hay->n_tokens < 1)
        return la_fail(LA_EINVAL, "the passkey task needs byte-level text documents for its haystack "
                       "(token shards cannot spell the question); set passkey trials to 0 for shard data");
    int min_len = la_passkey_min_len();
    if (T < min_len)
        return la_fail(LA_ESHAPE, "passkey length %d is too short: the needle, question and answer alone "
                       "take %d tokens; use lengths >= %d", T, min_len + 1, min_len);
    la_rng rng;
    la_rng_seed(&rng, seed ^ 0x706173736b6579ULL); /* "passkey" */
    char needle[128];
    int needle_len = needle_text(10000, needle, sizeof needle); /* every key has 5 digits */
    int q_len = (int)strlen(QUESTION);
    int H = T + 1 - needle_len - q_len - LA_PASSKEY_DIGITS; /* haystack bytes, >= 0 */

    /* haystack: a contiguous stretch from a seeded document and offset, continuing into
     * the next documents (joined by '\n', wrapping around) when it runs out */
    int32_t *hs = tokens + T + 1 - H; /* build it in the tail, then move into place */
    int d = (int)la_rng_below(&rng, (uint64_t)hay->n_docs);
    int64_t len0 = hay->offset[d + 1] - hay->offset[d];
    int64_t pos = hay->offset[d] + (len0 > H ? (int64_t)la_rng_below(&rng, (uint64_t)(len0 - H + 1)) : 0);
    for (int i = 0; i < H;) {
        if (pos >= hay->offset[d + 1]) {
            d = (d + 1) % hay->n_docs;
            pos = hay->offset[d];
            hs[i++] = '\n';
            continue;
        }
        hs[i++] = hay->tokens[pos++];
    }
    int key = 0;
    for (int tries = 0;; tries++) {
        key = 10000 + (int)la_rng_below(&rng, 90000);
        if (!contains_key(hs, H, key)) break;
        if (tries > 10000) /* every 5-digit number occurs in H bytes: impossible below 450 kB */
            return la_fail(LA_EINVAL, "passkey: no 5-digit key is absent from the haystack");
    }
    /* insertion point, moved back to a word boundary when one is near */
    int p = (int)(depth * H);
    if (p > H) p = H;
    for (int k = p; k > 0 && k > p - 16; k--)
        if (is_space(hs[k - 1])) { p = k; break; }

    /* assemble: hay[0..p) needle hay[p..H) question key. memmove handles the overlap of
     * hs (the tail of tokens) with the destination. */
    memmove(tokens, hs, (size_t)p * sizeof *tokens);
    int32_t *rest = tokens + p + needle_len;
    memmove(rest, hs + p, (size_t)(H - p) * sizeof *tokens);
    needle_text(key, needle, sizeof needle);
    for (int i = 0; i < needle_len; i++) tokens[p + i] = (unsigned char)needle[i];
    int qpos = p + needle_len + (H - p);
    for (int i = 0; i < q_len; i++) tokens[qpos + i] = (unsigned char)QUESTION[i];
    char digits[16];
    snprintf(digits, sizeof digits, "%d", key);
    for (int i = 0; i < LA_PASSKEY_DIGITS; i++) tokens[qpos + q_len + i] = (unsigned char)digits[i];

    info->key = key;
    info->needle_pos = p;
    info->needle_len = needle_len;
    info->answer_pos = qpos + q_len;
    info->depth = H > 0 ? (double)p / H : depth;
    return LA_OK;
}

int la_passkey_exact(const int32_t *pred, const int32_t *tokens, const la_passkey *info) {
    if (!pred || !tokens || !info || info->answer_pos < 1) return 0;
    for (int i = 0; i < LA_PASSKEY_DIGITS; i++)
        if (pred[info->answer_pos - 1 + i] != tokens[info->answer_pos + i]) return 0;
    return 1;
}

/* The passkey grid's example seeds live here, beside the generator, and not in the study
 * runner: the study and `diagnose --passkey` both rebuild the same examples from them, and
 * tasks/ must not call up into study/ (docs/architecture.md). The name keeps its public
 * spelling (experiments.h). */
#define TAG_PK 0x706b5f6576616c5fULL /* "pk_eval_": passkey evaluation grid */

uint64_t la_study_passkey_seed(uint64_t seed, int li, int di, int k) {
    return (seed ^ TAG_PK) + ((uint64_t)li * LA_STUDY_MAX_DEPTHS + (uint64_t)di) * 1000003u + (uint64_t)k;
}
