/* kv_eval_run.c -- KV-cache policy evaluation (`longattn kv-eval`, la_kv_eval_run):
 * validation loss and passkey accuracy of a checkpoint decoded through the KV cache under
 * each policy (full, window, sinks, h2o, int8, sinks+int8) at lengths up to 16x the
 * training length, with the cache memory; writes a markdown table, a CSV and a gnuplot
 * PNG. Uses the study's documents, evaluation windows (la_eval_loss over the decoder) and
 * passkey generator; reports progress through a callback and prints nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "io/files.h"
#include "longattn/experiments.h"
#include "longattn/infer.h"
#include "runner/grid.h"
#include "runner/report.h"

#define MAX_POL LA_KV_EVAL_MAX_POLICIES
#define MAX_LEN LA_KV_EVAL_MAX_LENS

la_kv_eval_opts la_kv_eval_opts_default(void) {
    la_kv_eval_opts o;
    memset(&o, 0, sizeof o);
    o.out = "runs/kv-eval";
    o.windows = 4;
    o.trials = 6;
    o.chunk = 1;
    o.seed = 1;
    return o;
}

static void note(la_kv_eval_progress_fn fn, void *user, const char *msg) {
    if (!fn) return;
    la_kv_eval_progress p = {.event = LA_KV_EVAL_NOTE, .message = msg};
    fn(user, &p);
}

typedef struct {
    la_decoder *d;
    float *logits; /* (chunk, V) */
    int chunk, V;
} loss_ctx;

/* Tokens [0..T) streamed through a fresh cache: with targets, loss[t] = lse - logit[target];
 * without, pred[t] = the argmax next token. */
static la_status cached_pass(loss_ctx *c, const int32_t *tokens, const int32_t *targets, int T, float *loss,
                             int32_t *pred) {
    la_decoder_reset(c->d);
    for (int t0 = 0; t0 < T; t0 += c->chunk) {
        int n = T - t0 < c->chunk ? T - t0 : c->chunk;
        LA_TRY(la_decoder_step(c->d, tokens + t0, n, c->logits, 1));
        for (int r = 0; r < n; r++) {
            const float *z = c->logits + (size_t)r * c->V;
            int best = 0;
            double mx = z[0], s = 0;
            for (int i = 1; i < c->V; i++) {
                if (z[i] > z[best]) best = i;
                mx = z[i] > mx ? z[i] : mx;
            }
            if (!targets) {
                pred[t0 + r] = best;
                continue;
            }
            for (int i = 0; i < c->V; i++) s += exp(z[i] - mx);
            loss[t0 + r] = (float)(mx + log(s) - z[targets[t0 + r]]);
        }
    }
    return LA_OK;
}

/* la_token_loss_fn over cached_pass */
static la_status cached_loss(void *vctx, const int32_t *inputs, const int32_t *targets, int T, float *loss) {
    return cached_pass(vctx, inputs, targets, T, loss, NULL);
}

typedef struct {
    char name[128];
    la_kv_params kp;
    double loss[MAX_LEN], acc[MAX_LEN], digit_acc[MAX_LEN];
    int64_t cache_tokens[MAX_LEN];
} pol_result;

/* Writes the CSV, the markdown table, the gnuplot data and script, then runs gnuplot;
 * *plotted = 0 when gnuplot failed (the tables are written). */
static la_status write_outputs(const char *out, pol_result *res, int np, const int *lens, int nl, int L, int trials,
                               int windows, const char *ckpt, const char *pk_ckpt, int *plotted, int *gp_exit) {
    static const char *const csv_head[] = {"policy", "len", "len_over_train", "val_bits_per_byte", "passkey_acc",
                                           "passkey_digit_acc", "passkey_trials", "kv_bytes_per_token",
                                           "cache_tokens", "cache_bytes"};
    la_table t;
    LA_TRY(la_table_init(&t, 10, csv_head, NULL));
    for (int p = 0; p < np; p++)
        for (int i = 0; i < nl; i++) {
            double bpt = la_kv_bytes_per_token(&res[p].kp);
            la_table_add_quoted(&t, res[p].name);
            la_table_row(&t, "%d\t%g\t%.4f\t%.4f\t%.4f\t%d\t%.0f\t%lld\t%.0f", lens[i], (double)lens[i] / L,
                         res[p].loss[i], res[p].acc[i], res[p].digit_acc[i],
                         lens[i] >= la_passkey_min_len() ? trials : 0, bpt, /* the examples run */
                         (long long)res[p].cache_tokens[i], bpt * (double)res[p].cache_tokens[i]);
        }
    LA_TRY(la_table_write_csv(&t, out, "kv_eval.csv"));

    /* markdown: a row per policy, a column per length */
    LA_TRY(la_table_init(&t, nl + 3, NULL, NULL));
    la_sbuf md = {0};
    la_sbuf_printf(&md, "KV cache policies on `%s` (train_len L = %d; %d validation windows and %d passkey examples per length).\n"
                   "Cells: validation bits per byte / passkey accuracy (whole key) / passkey digit accuracy (teacher-forced\n"
                   "greedy, per digit; chance is about 0.1). Cache = KiB of k/v held at the longest length (all layers).\n\n",
                   ckpt, L, windows, trials);
    if (pk_ckpt) la_sbuf_printf(&md, "Passkey columns from the fine-tuned weights `%s`.\n\n", pk_ckpt);
    la_table_row(&t, "policy\tbytes/token");
    for (int i = 0; i < nl; i++) la_table_add(&t, "%d (%gL)", lens[i], (double)lens[i] / L);
    la_table_add(&t, "cache KiB @%d", lens[nl - 1]);
    for (int p = 0; p < np; p++) {
        double bpt = la_kv_bytes_per_token(&res[p].kp);
        la_table_row(&t, "`%s`\t%.0f", res[p].name, bpt);
        for (int i = 0; i < nl; i++) {
            if (trials > 0) la_table_add(&t, "%.3f / %.2f / %.2f", res[p].loss[i], res[p].acc[i], res[p].digit_acc[i]);
            else la_table_add(&t, "%.3f", res[p].loss[i]);
        }
        la_table_add(&t, "%.1f", bpt * (double)res[p].cache_tokens[nl - 1] / 1024.0);
    }
    la_table_md(&t, &md);
    la_table_free(&t);
    la_status st = la_report_write(out, "kv_eval.md", &md);
    free(md.s);
    if (st != LA_OK) return st;

    /* gnuplot: loss and passkey accuracy against length, one line per policy */
    char dat[1200], gp[1200], png[1200];
    snprintf(dat, sizeof dat, "%s/kv_eval.dat", out);
    snprintf(gp, sizeof gp, "%s/kv_eval.gp", out);
    snprintf(png, sizeof png, "%s/kv_eval.png", out);
    la_afile af;
    LA_TRY(la_afile_open(&af, dat));
    for (int p = 0; p < np; p++) {
        fprintf(af.f, "# %s\n", res[p].name);
        for (int i = 0; i < nl; i++)
            fprintf(af.f, "%d %.5f %.4f %.4f\n", lens[i], res[p].loss[i], res[p].acc[i], res[p].digit_acc[i]);
        fprintf(af.f, "\n\n");
    }
    LA_TRY(la_afile_commit(&af));
    LA_TRY(la_afile_open(&af, gp));
    fprintf(af.f, "set terminal pngcairo size 1200,480 noenhanced\nset output '%s.tmp'\nset multiplot layout 1,2\n", png);
    fprintf(af.f, "set logscale x 2\nset xlabel 'context length (bytes)'\nset grid\nset key top left\n");
    fprintf(af.f, "set arrow from %d, graph 0 to %d, graph 1 nohead dt 2\n", L, L);
    fprintf(af.f, "set title 'validation loss through the KV cache'\nset ylabel 'bits per byte'\nplot ");
    for (int p = 0; p < np; p++)
        fprintf(af.f, "'%s' index %d using 1:2 with linespoints title '%s'%s", dat, p, res[p].name, p + 1 < np ? ", " : "\n");
    fprintf(af.f, "set title 'passkey: whole key (solid), per digit (dashed)'\nset ylabel 'accuracy'\nset yrange [-0.05:1.05]\nplot ");
    for (int p = 0; p < np; p++)
        fprintf(af.f, "'%s' index %d using 1:3 with linespoints lc %d title '%s', '%s' index %d using 1:4 with linespoints dt 2 lc %d notitle%s",
                dat, p, p + 1, res[p].name, dat, p, p + 1, p + 1 < np ? ", " : "\n");
    fprintf(af.f, "unset multiplot\n");
    LA_TRY(la_afile_commit(&af));
    const char *const pngs[] = {png}; /* drawn as kv_eval.png.tmp, moved into place */
    *gp_exit = la_report_plot(NULL, NULL, gp, NULL, pngs, 1, plotted, NULL, 0); /* its messages: dropped */
    return LA_OK;
}

/* ---- the cells on the grid runner (la_grid_run): policy p at length i is cell p * nl + i ---- */
typedef struct {
    pol_result *res;
    const int *lens;
    int nl;
    la_model *m, *mp; /* mp: passkey weights (NULL: m) */
    const la_docs *docs;
    loss_ctx *lc, *lp; /* lp: the passkey decoder */
    int32_t *tok, *pred;
    long windows, trials, chunk_opt;
    uint64_t seed;
    la_kv_eval_progress_fn progress;
    void *user;
    double t_start;
    int hits, n_pk, digit_hits; /* the current cell's passkey counts */
} kv_grid;

static la_status cell_run(void *user, int c, const char *key) {
    kv_grid *G = user;
    const int p = c / G->nl, i = c % G->nl;
    la_kv_params *kp = &G->res[p].kp;
    loss_ctx *lc = G->lc, *lp = G->lp;
    la_status st;
    if (i == 0) { /* a policy's first length: its decoders */
        /* the full cache is exact in chunks (causal attention over the whole prefix);
         * evicting caches stream token by token unless --chunk says otherwise */
        int64_t chunk = kp->policy == LA_KV_FULL ? 256 : G->chunk_opt;
        if (chunk > la_kv_max_chunk(kp)) chunk = la_kv_max_chunk(kp);
        lc->chunk = (int)chunk;
        lp->chunk = lc->chunk;
        if ((st = la_decoder_new(G->m, kp, lc->chunk, &lc->d)) != LA_OK ||
            (G->mp && (st = la_decoder_new(G->mp, kp, lp->chunk, &lp->d)) != LA_OK))
            return la_fail(st, "policy '%s': %s", G->res[p].name, la_errmsg());
    }
    const int T = G->lens[i];
    double bits = NAN;
    st = la_eval_loss(cached_loss, lc, G->docs, T, 0, (int)G->windows, (uint64_t)G->seed, T, &bits, NULL, NULL);
    if (st != LA_OK) return la_fail(st, "policy '%s', length %d: %s", G->res[p].name, T, la_errmsg());
    G->res[p].loss[i] = bits;
    int hits = 0, n_pk = 0, digit_hits = 0;
    for (int tr = 0; tr < G->trials && T >= la_passkey_min_len(); tr++) {
        double depth = G->trials > 1 ? 0.1 + 0.8 * tr / (G->trials - 1) : 0.5;
        la_passkey info;
        if ((st = la_passkey_make(G->docs, T, depth, (uint64_t)G->seed * 1000003u + (uint64_t)tr * 7919u + (uint64_t)T,
                                  G->tok, &info)) != LA_OK ||
            (st = cached_pass(G->mp ? lp : lc, G->tok, NULL, T, NULL, G->pred)) != LA_OK)
            return la_fail(st, "passkey at length %d: %s", T, la_errmsg());
        hits += la_passkey_exact(G->pred, G->tok, &info);
        for (int k = 0; k < LA_PASSKEY_DIGITS; k++) digit_hits += G->pred[info.answer_pos - 1 + k] == G->tok[info.answer_pos + k];
        n_pk++;
    }
    G->res[p].acc[i] = n_pk ? (double)hits / n_pk : NAN;
    G->res[p].digit_acc[i] = n_pk ? (double)digit_hits / (n_pk * LA_PASSKEY_DIGITS) : NAN;
    int64_t budget = la_kv_budget(kp);
    G->res[p].cache_tokens[i] = (kp->policy == LA_KV_FULL || budget > T) ? T : budget;
    G->hits = hits, G->n_pk = n_pk, G->digit_hits = digit_hits;
    return LA_OK;
}

static la_status cell_done(void *user, int c, const char *key, la_status st, int restored) {
    kv_grid *G = user;
    const int p = c / G->nl, i = c % G->nl;
    if (st != LA_OK) return st;
    if (G->progress) {
        la_kv_eval_progress pr = {.event = LA_KV_EVAL_POINT, .policy = G->res[p].name, .len = G->lens[i],
                                  .bits = G->res[p].loss[i], .hits = G->hits, .n_passkey = G->n_pk,
                                  .digit_hits = G->digit_hits, .n_digits = G->n_pk * LA_PASSKEY_DIGITS,
                                  .cache_tokens = G->res[p].cache_tokens[i], .elapsed_s = la_now_s() - G->t_start};
        G->progress(G->user, &pr);
    }
    if (i == G->nl - 1) { /* the policy's last length */
        la_decoder_free(G->lc->d);
        la_decoder_free(G->lp->d);
        G->lc->d = G->lp->d = NULL;
    }
    return LA_OK;
}

la_status la_kv_eval_run(const la_kv_eval_opts *o, la_kv_eval_progress_fn progress, void *user) {
    if (!o) return la_fail(LA_EINVAL, "la_kv_eval_run: NULL options");
    if (!o->ckpt) return la_fail(LA_EINVAL, "kv-eval: a checkpoint (ckpt) is required");
    if (!o->data) return la_fail(LA_EINVAL, "kv-eval: a documents folder (data) is required");
    if (!o->out || !*o->out) return la_fail(LA_EINVAL, "kv-eval: an output folder (out) is required");
    if (o->windows < 1 || o->trials < 0 || o->chunk < 1)
        return la_fail(LA_EINVAL, "kv-eval: windows %d and chunk %d must be >= 1, trials %d >= 0", o->windows,
                       o->chunk, o->trials);
    if (o->n_lens < 0 || o->n_lens > MAX_LEN)
        return la_fail(LA_EINVAL, "kv-eval: n_lens %d outside [0, %d]", o->n_lens, MAX_LEN);
    for (int i = 0; i < o->n_lens; i++)
        if (o->lens[i] < 2 || (i > 0 && o->lens[i] <= o->lens[i - 1]))
            return la_fail(LA_EINVAL, "kv-eval: lengths must be increasing integers >= 2 (length %d is %d)", i,
                           o->lens[i]);
    const char *ckpt = o->ckpt, *pk_ckpt = o->passkey_ckpt, *out = o->out, *pols_s = o->policies;
    long trials = o->trials;
    la_model *m = NULL;
    if (la_model_load(ckpt, &m) != LA_OK) return la_fail(LA_EIO, "cannot load '%s': %s", ckpt, la_errmsg());
    const la_model_config *cfg = la_model_get_config(m);
    const int L = cfg->train_len, V = cfg->vocab;
    /* everything below is released at done */
    la_model *mp = NULL; /* passkey weights; NULL: m */
    pol_result *res = NULL;
    la_docs docs = {0};
    int32_t *tok = NULL, *pred = NULL;
    float *logits = NULL;
    loss_ctx lc = {NULL, NULL, 1, V}, lp = {NULL, NULL, 1, V}; /* lp: passkey decoder */
    la_status st = LA_OK;
    if (pk_ckpt) {
        if (la_model_load(pk_ckpt, &mp) != LA_OK) {
            st = la_fail(LA_EIO, "cannot load the passkey checkpoint '%s': %s", pk_ckpt, la_errmsg());
            goto done;
        }
        const la_model_config *c2 = la_model_get_config(mp);
        if (c2->n_layer != cfg->n_layer || c2->n_head != cfg->n_head || c2->n_kv_head != cfg->n_kv_head ||
            c2->d_model != cfg->d_model || c2->d_ff != cfg->d_ff || c2->vocab != V || c2->train_len != L ||
            strcmp(c2->spec, cfg->spec)) {
            st = la_fail(LA_EINVAL, "passkey checkpoint '%s' (%s, %d layers, d_model %d, L %d) is not the "
                         "same model as the checkpoint '%s' (%s, %d layers, d_model %d, L %d); give the "
                         "fine-tuned weights of the same model",
                         pk_ckpt, c2->spec, c2->n_layer, c2->d_model, c2->train_len, ckpt, cfg->spec,
                         cfg->n_layer, cfg->d_model, L);
            goto done;
        }
    }
    int lens[MAX_LEN], nl = 0;
    if (o->n_lens > 0) {
        for (int i = 0; i < o->n_lens; i++) lens[nl++] = o->lens[i];
    } else {
        for (int f = 1; f <= 16; f *= 2) lens[nl++] = L * f;
    }
    res = la_calloc(MAX_POL, sizeof *res);
    if (!res) {
        st = la_fail(LA_ENOMEM, "la_kv_eval_run: out of memory");
        goto done;
    }
    int np = 0;
    char defaults[512];
    snprintf(defaults, sizeof defaults, "full;window(%d);sinks(4,%d);h2o(%d,%d);int8;sinks(4,%d)+int8", L, L - 4, L / 2,
             L - L / 2, L - 4);
    {
        char buf[1024];
        if (snprintf(buf, sizeof buf, "%s", pols_s ? pols_s : defaults) >= (int)sizeof buf) {
            st = la_fail(LA_ESPEC, "the text of the policies is longer than %zu bytes", sizeof buf - 1);
            goto done;
        }
        char *save = NULL;
        for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
            while (*t == ' ') t++;
            if (np >= MAX_POL) { /* refused, not cut: a dropped policy would be missing from the table */
                st = la_fail(LA_ESPEC, "at most %d policies, got more ('%s' is number %d)", MAX_POL, t, MAX_POL + 1);
                goto done;
            }
            la_kv_params kp = la_kv_params_default();
            la_kv_params_for_model(m, &kp);
            st = la_kv_policy_parse(t, &kp);
            if (st == LA_OK && o->kv_type && !la_kv_policy_names_type(t)) st = la_kv_type_parse(o->kv_type, &kp);
            if (st != LA_OK) goto done; /* la_errmsg() names the policy problem */
            kp.max_tokens = lens[nl - 1] + 1;
            snprintf(res[np].name, sizeof res[np].name, "%s", t);
            res[np++].kp = kp;
        }
    }
    if (np == 0) {
        st = la_fail(LA_ESPEC, "policies '%s' name no policy; give e.g. 'full;window(128);h2o(64,64)'",
                     pols_s ? pols_s : "");
        goto done;
    }
    char valdir[1100];
    struct stat sb;
    snprintf(valdir, sizeof valdir, "%s/val", o->data);
    if (stat(valdir, &sb) != 0 || !S_ISDIR(sb.st_mode)) snprintf(valdir, sizeof valdir, "%s", o->data);
    if ((st = la_docs_load(valdir, &docs)) != LA_OK) {
        st = la_fail(st, "cannot load documents from '%s': %s", valdir, la_errmsg());
        goto done;
    }
    if (docs.vocab != V) {
        st = la_fail(LA_EINVAL, "documents in '%s' have vocabulary %d but the model has %d", valdir, docs.vocab, V);
        goto done;
    }
    if (trials > 0 && !docs.is_bytes) {
        note(progress, user, "passkey needs byte-level documents; running without it (--trials 0)");
        trials = 0;
    }
    if (trials > 0 && lens[0] < la_passkey_min_len()) {
        char msg[160];
        snprintf(msg, sizeof msg, "no passkey at lengths below %d tokens (the shortest example); their "
                 "passkey_trials are 0", la_passkey_min_len());
        note(progress, user, msg);
    }
    if ((st = la_mkdir_p(out)) != LA_OK) goto done;
    tok = la_malloc(sizeof(int32_t) * ((size_t)lens[nl - 1] + 1));
    pred = la_malloc(sizeof(int32_t) * (size_t)lens[nl - 1]);
    lc.logits = lp.logits = logits = la_malloc(sizeof(float) * (size_t)V * 256);
    if (!tok || !pred || !logits) {
        st = la_fail(LA_ENOMEM, "la_kv_eval_run: out of memory");
        goto done;
    }
    {
        /* cells: policy p at length i is cell p * nl + i, run in that order (one process,
         * nothing stored: every run computes them all) */
        kv_grid G = {.res = res, .lens = lens, .nl = nl, .m = m, .mp = mp, .docs = &docs, .lc = &lc, .lp = &lp,
                     .tok = tok, .pred = pred, .windows = o->windows, .trials = trials, .chunk_opt = o->chunk,
                     .seed = o->seed, .progress = progress, .user = user, .t_start = la_now_s()};
        la_grid g;
        if ((st = la_grid_init(&g, "kv-eval", NULL, np * nl, 1, 0)) != LA_OK) goto done;
        const la_grid_fns fns = {.run = cell_run, .done = cell_done};
        st = la_grid_run(&g, &fns, &G);
        la_grid_free(&g);
        if (st != LA_OK) goto done;
    }
    {
        int plotted = 0, gp_exit = 0;
        st = write_outputs(out, res, np, lens, nl, L, (int)trials, o->windows, ckpt, mp ? pk_ckpt : NULL, &plotted,
                           &gp_exit);
        if (st != LA_OK) {
            st = la_fail(st, "cannot write the outputs in '%s': %s", out, la_errmsg());
        } else if (!plotted) {
            char msg[200];
            snprintf(msg, sizeof msg, "gnuplot failed (exit %d); the table and CSV are written. Install gnuplot-nox.",
                     gp_exit);
            note(progress, user, msg);
        }
    }
done:
    la_decoder_free(lc.d);
    la_decoder_free(lp.d);
    la_model_free(mp);
    free(tok);
    free(pred);
    free(logits);
    la_docs_free(&docs);
    free(res);
    la_model_free(m);
    return st;
}
