/* diagnose_passkey.c -- `longattn diagnose --passkey`: where the rows that predict a passkey's
 * answer attend (la_diagnose_passkey_run). The examples are the study's passkey grid
 * (la_study_passkey_seed, haystacks from the validation documents); for each one the model
 * is scored (greedy exact match) and la_model_diagnose_rows gives, per layer and head, the
 * attention mass of the five answer rows on the key's digits where the needle states them
 * (twice: " The pass key is KKKKK. Remember it. KKKKK is the pass key. "), on the one digit
 * the row has to output (its two places: what an induction head copying from the needle
 * attends to) and on the whole needle. Uniform attention over a row's visible keys (i + 1 of them, causal)
 * would put span / (i + 1) there: that is the baseline printed beside each mass.
 * Prints nothing: means go back in the result, every number into two CSV files. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "io/files.h"
#include "runner/diagnose_internal.h"
#include "runner/grid.h"
#include "runner/report.h"

/* key spans: each digit place of the needle on its own (1st statement: spans 0..4, 2nd:
 * 5..9), then the whole needle (span 10) */
enum { NSPAN = 2 * LA_PASSKEY_DIGITS + 1 };

void la_diagnose_passkey_free(la_diagnose_passkey_result *r) {
    if (!r) return;
    free(r->digits_ans), free(r->needle_ans), free(r->digits_q), free(r->needle_q);
    free(r->digits_right), free(r->digits_wrong), free(r->target_ans);
    r->digits_ans = r->needle_ans = r->digits_q = r->needle_q = r->digits_right = r->digits_wrong = NULL;
    r->target_ans = NULL;
}

/* The two places a in the needle where its key's digits stand: every digit as a span of
 * one key, [a + d, a + d + 1), first place then second, into span (2 * 10). */
static la_status digit_spans(const int32_t *ex, const la_passkey *pk, int64_t *span) {
    char k[16];
    snprintf(k, sizeof k, "%d", pk->key);
    int found = 0;
    for (int i = pk->needle_pos; i + LA_PASSKEY_DIGITS <= pk->needle_pos + pk->needle_len && found < 2; i++) {
        int j = 0;
        while (j < LA_PASSKEY_DIGITS && ex[i + j] == (unsigned char)k[j]) j++;
        if (j < LA_PASSKEY_DIGITS) continue;
        for (int dd = 0; dd < LA_PASSKEY_DIGITS; dd++)
            span[2 * (found * LA_PASSKEY_DIGITS + dd)] = i + dd, span[2 * (found * LA_PASSKEY_DIGITS + dd) + 1] = i + dd + 1;
        found++;
    }
    /* la_passkey_make writes the needle text with the key twice: anything else is a broken
     * contract between the two files */
    if (found != 2) return la_fail(LA_EINVAL, "passkey example: the needle at %d holds the key %d %d times, not 2",
                                   pk->needle_pos, pk->key, found);
    return LA_OK;
}

static la_status check_opts(const la_diagnose_passkey_opts *o) {
    if (!o->ckpt || !o->data || !o->out) return la_fail(LA_EINVAL, "la_diagnose_passkey_run: ckpt, data and out are required");
    if (o->n_lens < 1 || o->n_lens > LA_STUDY_MAX_LENS)
        return la_fail(LA_EINVAL, "passkey diagnostics: %d lengths; give 1..%d", o->n_lens, LA_STUDY_MAX_LENS);
    if (o->n_depths < 1 || o->n_depths > LA_STUDY_MAX_DEPTHS)
        return la_fail(LA_EINVAL, "passkey diagnostics: %d depths; give 1..%d", o->n_depths, LA_STUDY_MAX_DEPTHS);
    if (o->trials < 1) return la_fail(LA_EINVAL, "passkey diagnostics: trials %d; give at least 1", o->trials);
    for (int i = 0; i < o->n_lens; i++)
        if (o->lens[i] < la_passkey_min_len() || o->lens[i] > 65536)
            return la_fail(LA_EINVAL, "passkey length %d: give lengths in %d..65536 (the needle, question and answer "
                           "alone take %d bytes)", o->lens[i], la_passkey_min_len(), la_passkey_min_len() + 1);
    for (int i = 0; i < o->n_depths; i++)
        if (!(o->depths[i] >= 0 && o->depths[i] <= 1))
            return la_fail(LA_EINVAL, "passkey depth %g is outside [0, 1] (0 = start of the haystack, 1 = just "
                           "before the question)", o->depths[i]);
    return LA_OK;
}

/* ---- the examples on the grid runner (la_grid_run): example e of length li is cell
 * li * per_len + e (depth e / trials, trial e % trials); one process, nothing stored ---- */
typedef struct {
    const la_diagnose_passkey_opts *o;
    la_diagnose_passkey_result *r;
    la_model *m;
    const la_docs *val;
    int32_t *ex, *pred;
    double *mass, *nright, *nwrong;
    la_diag **diag;
    la_table *needle; /* passkey_needle.csv: a row per example, layer, head and answer row */
    int LH, NH, per_len;
} pk_grid;

static la_status cell_run(void *user, int c, const char *key) {
    pk_grid *G = user;
    const la_diagnose_passkey_opts *o = G->o;
    la_diagnose_passkey_result *r = G->r;
    const int NR = LA_DIAG_PK_ROWS, LH = G->LH, NH = G->NH, per_len = G->per_len;
    const int li = c / per_len, e = c % per_len, T = o->lens[li];
    const int di = e / o->trials, k = e % o->trials;
    int32_t *ex = G->ex;
    double *mass = G->mass;
    la_passkey pk;
    LA_TRY(la_passkey_make(G->val, T, o->depths[di], la_study_passkey_seed(o->seed, li, di, k), ex, &pk));
    LA_TRY(la_model_eval(G->m, ex, NULL, 1, T, NULL, NULL, G->pred, NULL));
    const int right = la_passkey_exact(G->pred, ex, &pk);
    r->correct[li] += right;
    int rows[LA_DIAG_PK_ROWS];
    int64_t span[2 * NSPAN];
    for (int x = 0; x < NR; x++) rows[x] = pk.answer_pos - 1 + x; /* predict digits x = 0..4 */
    LA_TRY(digit_spans(ex, &pk, span));
    span[2 * (NSPAN - 1)] = pk.needle_pos, span[2 * (NSPAN - 1) + 1] = pk.needle_pos + pk.needle_len;
    la_diag_rows sel = {rows, NR, span, NSPAN, mass};
    LA_TRY(la_model_diagnose_rows(G->m, ex, T, &sel, G->diag));
    for (int x = 0; x < NR; x++) {
        double vis = rows[x] + 1; /* causal: keys 0..row */
        r->uniform_digits[li] += 2.0 * LA_PASSKEY_DIGITS / vis / (NR * per_len);
        r->uniform_target[li] += 2.0 / vis / (NR * per_len);
        r->uniform_needle[li] += pk.needle_len / vis / (NR * per_len);
    }
    for (int i = 0; i < LH; i++) {
        double da = 0, na = 0, ta = 0, dq = 0;
        for (int x = 0; x < NR; x++) {
            const double *mm = mass + ((size_t)i * NR + x) * NSPAN;
            double dg = 0, vis = rows[x] + 1;
            for (int sx = 0; sx < 2 * LA_PASSKEY_DIGITS; sx++) dg += mm[sx];
            double tg = mm[x] + mm[LA_PASSKEY_DIGITS + x]; /* digit x, both places */
            da += dg / NR, na += mm[NSPAN - 1] / NR, ta += tg / NR;
            if (x == 0) dq = dg; /* row 0: the question's last byte */
            la_table_row(G->needle, "%d\t%g\t%.4f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.6g\t%.6g\t%.6g\t"
                         "%.6g\t%.6g\t%.6g", T, o->depths[di], pk.depth, k, pk.key, pk.needle_pos, pk.needle_len, pk.answer_pos, right,
                         i / NH, i % NH, x, vis, dg, tg, mm[NSPAN - 1], 2.0 * LA_PASSKEY_DIGITS / vis, 2.0 / vis,
                         pk.needle_len / vis);
        }
        size_t at = (size_t)li * LH + i;
        r->digits_ans[at] += da / per_len, r->needle_ans[at] += na / per_len, r->target_ans[at] += ta / per_len;
        r->digits_q[at] += dq / per_len, r->needle_q[at] += mass[((size_t)i * NR) * NSPAN + NSPAN - 1] / per_len;
        if (right) r->digits_right[at] += da, G->nright[at]++;
        else r->digits_wrong[at] += da, G->nwrong[at]++;
    }
    for (int i = 0; i < LH; i++) la_diag_reset(G->diag[i]);
    return LA_OK;
}

la_status la_diagnose_passkey_run(const la_diagnose_passkey_opts *o, la_diagnose_passkey_result *r) {
    if (!o || !r) return la_fail(LA_EINVAL, "la_diagnose_passkey_run: NULL options or result");
    memset(r, 0, sizeof *r);
    LA_TRY(check_opts(o));
    char path[4200];
    la_model *m = NULL;
    la_status st;
    LA_TRY(la_diag_load_byte_model(o->ckpt, "the passkey examples are bytes", &m));
    r->config = *la_model_get_config(m);
    la_docs val = {0};
    snprintf(path, sizeof path, "%s/val", o->data);
    if ((st = la_docs_load(path, &val)) != LA_OK) {
        la_model_free(m);
        return st;
    }
    r->val_docs = val.n_docs, r->val_tokens = val.n_tokens;
    const int NL = r->config.n_layer, NH = r->config.n_head, LH = NL * NH, NR = LA_DIAG_PK_ROWS;
    int Tmax = 0;
    for (int i = 0; i < o->n_lens; i++) Tmax = o->lens[i] > Tmax ? o->lens[i] : Tmax;
    const size_t nper = (size_t)o->n_lens * LH;
    /* buffers for the longest example, allocated once */
    int32_t *ex = la_malloc(sizeof(int32_t) * ((size_t)Tmax + 1)), *pred = la_malloc(sizeof(int32_t) * (size_t)Tmax);
    double *mass = la_malloc(sizeof(double) * (size_t)LH * NR * NSPAN);
    double *nright = la_calloc(nper, sizeof(double)), *nwrong = la_calloc(nper, sizeof(double));
    la_diag **diag = la_calloc((size_t)LH, sizeof *diag);
    double **outs[7] = {&r->digits_ans, &r->needle_ans, &r->digits_q, &r->needle_q, &r->digits_right, &r->digits_wrong,
                        &r->target_ans};
    int ok = ex && pred && mass && nright && nwrong && diag;
    for (int x = 0; x < 7; x++) ok &= (*outs[x] = la_calloc(nper, sizeof(double))) != NULL;
    st = ok ? LA_OK : la_fail(LA_ENOMEM, "la_diagnose_passkey_run: out of memory");
    /* the accumulators only take the rows (the distance ranges are not reported here) */
    for (int i = 0; i < LH && st == LA_OK; i++) st = la_diag_new(Tmax - 1, 10, 1, &diag[i]);
    if (st == LA_OK) st = la_mkdir_p(o->out);
    la_table needle = {0};
    if (st == LA_OK)
        st = la_table_begin(&needle, "length,depth,depth_real,trial,key,needle_pos,needle_len,answer_pos,correct,layer,"
                            "head,row,visible_keys,mass_digits,mass_target,mass_needle,uniform_digits,uniform_target,"
                            "uniform_needle", NULL);
    if (o->threads > 0) la_model_set_threads(m, o->threads);
    double t0 = omp_get_wtime();
    const int per_len = o->n_depths * o->trials;
    if (st == LA_OK) { /* cells: example e of length li is cell li * per_len + e, in that order */
        pk_grid G = {.o = o, .r = r, .m = m, .val = &val, .ex = ex, .pred = pred, .mass = mass, .nright = nright,
                     .nwrong = nwrong, .diag = diag, .needle = &needle, .LH = LH, .NH = NH, .per_len = per_len};
        la_grid g;
        if ((st = la_grid_init(&g, "diagnose", NULL, o->n_lens * per_len, 1, 0)) == LA_OK) {
            const la_grid_fns fns = {.run = cell_run};
            st = la_grid_run(&g, &fns, &G);
            la_grid_free(&g);
        }
    }
    r->seconds = omp_get_wtime() - t0;
    r->n_examples = o->n_lens * per_len;
    for (size_t at = 0; at < nper && r->digits_right; at++) {
        r->digits_right[at] = nright[at] ? r->digits_right[at] / nright[at] : NAN;
        r->digits_wrong[at] = nwrong[at] ? r->digits_wrong[at] / nwrong[at] : NAN;
    }
    if (st == LA_OK) st = la_table_write_csv(&needle, o->out, "passkey_needle.csv"); /* frees it */
    else la_table_free(&needle);
    la_table t;
    if (st == LA_OK &&
        (st = la_table_begin(&t, "length,examples,correct,passkey_acc,layer,head,mass_digits_answer,mass_target_answer,"
                             "mass_needle_answer,mass_digits_qlast,mass_needle_qlast,mass_digits_right,"
                             "mass_digits_wrong,uniform_digits,uniform_target,uniform_needle", NULL)) == LA_OK) {
        for (int li = 0; li < o->n_lens; li++)
            for (int i = 0; i < LH; i++) {
                size_t at = (size_t)li * LH + i;
                la_table_row(&t, "%d\t%d\t%d\t%.4f\t%d\t%d\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g",
                             o->lens[li], per_len, r->correct[li], (double)r->correct[li] / per_len, i / NH, i % NH,
                             r->digits_ans[at], r->target_ans[at], r->needle_ans[at], r->digits_q[at], r->needle_q[at],
                             r->digits_right[at], r->digits_wrong[at], r->uniform_digits[li], r->uniform_target[li],
                             r->uniform_needle[li]);
            }
        st = la_table_write_csv(&t, o->out, "passkey_summary.csv");
    }
    for (int i = 0; diag && i < LH; i++) la_diag_free(diag[i]);
    free(diag), free(ex), free(pred), free(mass), free(nright), free(nwrong);
    la_docs_free(&val);
    la_model_free(m);
    if (st != LA_OK) la_diagnose_passkey_free(r);
    return st;
}
