/* kv_eval.c -- `longattn kv-eval`: validation loss and passkey accuracy of a checkpoint
 * decoded through the KV cache under each policy (full, window, sinks, h2o, int8,
 * sinks+int8) at lengths up to 16x the training length, with the cache memory; writes a
 * markdown table, a CSV and a gnuplot PNG. Uses the study's documents, evaluation windows
 * and passkey generator (src/tasks/). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/internal.h"

#define MAX_POL 12
#define MAX_LEN 12

static void usage(FILE *f) {
    fprintf(f,
            "usage: longattn kv-eval --ckpt FILE --data DIR [options]\n"
            "Evaluate a byte-level checkpoint decoded through the KV cache under several policies:\n"
            "validation loss (bits per byte) and passkey accuracy at each length, and the cache size.\n"
            "  --ckpt FILE        model weights (from `longattn train` or `longattn study`)\n"
            "  --passkey-ckpt F   score the passkey with these weights instead (e.g. the study's\n"
            "                     passkey_<i>_<spec>.safetensors, fine-tuned on the task); same\n"
            "                     model config and spec as --ckpt. Losses always use --ckpt\n"
            "  --data DIR         text documents; DIR/val is used when it exists\n"
            "  --out DIR          output folder (default runs/kv-eval): kv_eval.md, kv_eval.csv, kv_eval.png\n"
            "  --lens A,B,...     context lengths (default L,2L,4L,8L,16L; L = the model's train_len)\n"
            "  --policies P;Q;..  cache policies separated by ';' (default, with L the training length:\n"
            "                     full; window(L); sinks(4,L-4); h2o(L/2,L/2); int8; sinks(4,L-4)+int8)\n"
            "  --windows N        validation windows per length (default 4)\n"
            "  --trials N         passkey examples per length, depths spread over [0.1, 0.9] (default 6; 0 = off)\n"
            "  --chunk N          tokens per decoding step under evicting policies (default 1 = exact\n"
            "                     streaming; larger is faster: queries of a chunk share its eviction)\n"
            "  --seed S           windows and passkeys (default 1)\n");
}

typedef struct {
    la_decoder *d;
    float *logits; /* (chunk, V) */
    int chunk, V;
} loss_ctx;

/* la_token_loss_fn: stream the window through a fresh cache, loss = lse - logit[target]. */
static la_status cached_loss(void *vctx, const int32_t *inputs, const int32_t *targets, int T, float *loss) {
    loss_ctx *c = vctx;
    la_decoder_reset(c->d);
    for (int t0 = 0; t0 < T; t0 += c->chunk) {
        int n = T - t0 < c->chunk ? T - t0 : c->chunk;
        LA_TRY(la_decoder_step(c->d, inputs + t0, n, c->logits, 1));
        for (int r = 0; r < n; r++) {
            const float *z = c->logits + (size_t)r * c->V;
            double mx = z[0], s = 0;
            for (int i = 1; i < c->V; i++) mx = z[i] > mx ? z[i] : mx;
            for (int i = 0; i < c->V; i++) s += exp(z[i] - mx);
            loss[t0 + r] = (float)(mx + log(s) - z[targets[t0 + r]]);
        }
    }
    return LA_OK;
}

/* argmax next token at every position of tokens[0..T) */
static la_status cached_argmax(loss_ctx *c, const int32_t *tokens, int T, int32_t *pred) {
    la_decoder_reset(c->d);
    for (int t0 = 0; t0 < T; t0 += c->chunk) {
        int n = T - t0 < c->chunk ? T - t0 : c->chunk;
        LA_TRY(la_decoder_step(c->d, tokens + t0, n, c->logits, 1));
        for (int r = 0; r < n; r++) {
            const float *z = c->logits + (size_t)r * c->V;
            int best = 0;
            for (int i = 1; i < c->V; i++)
                if (z[i] > z[best]) best = i;
            pred[t0 + r] = best;
        }
    }
    return LA_OK;
}

static int mkdir_p(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return (mkdir(buf, 0755) && errno != EEXIST) ? -1 : 0;
}

typedef struct {
    char name[128];
    la_kv_params kp;
    double loss[MAX_LEN], acc[MAX_LEN], digit_acc[MAX_LEN];
    int64_t cache_tokens[MAX_LEN];
} pol_result;

static int write_outputs(const char *out, pol_result *res, int np, const int *lens, int nl, int L, int trials,
                         int windows, const char *ckpt, const char *pk_ckpt) {
    char path[1200];
    la_afile af;
    snprintf(path, sizeof path, "%s/kv_eval.csv", out);
    if (la_afile_open(&af, path) != LA_OK) return -1;
    fprintf(af.f, "policy,len,len_over_train,val_bits_per_byte,passkey_acc,passkey_digit_acc,passkey_trials,kv_bytes_per_token,cache_tokens,cache_bytes\n");
    for (int p = 0; p < np; p++)
        for (int i = 0; i < nl; i++) {
            double bpt = la_kv_bytes_per_token(&res[p].kp);
            fprintf(af.f, "\"%s\",%d,%g,%.4f,%.4f,%.4f,%d,%.0f,%lld,%.0f\n", res[p].name, lens[i], (double)lens[i] / L,
                    res[p].loss[i], res[p].acc[i], res[p].digit_acc[i], trials, bpt, (long long)res[p].cache_tokens[i],
                    bpt * (double)res[p].cache_tokens[i]);
        }
    if (la_afile_commit(&af) != LA_OK) return -1;

    snprintf(path, sizeof path, "%s/kv_eval.md", out);
    if (la_afile_open(&af, path) != LA_OK) return -1;
    fprintf(af.f, "KV cache policies on `%s` (train_len L = %d; %d validation windows and %d passkey examples per length).\n"
                  "Cells: validation bits per byte / passkey accuracy (whole key) / passkey digit accuracy (teacher-forced\n"
                  "greedy, per digit; chance is about 0.1). Cache = KiB of k/v held at the longest length (all layers).\n\n",
            ckpt, L, windows, trials);
    if (pk_ckpt) fprintf(af.f, "Passkey columns from the fine-tuned weights `%s`.\n\n", pk_ckpt);
    fprintf(af.f, "| policy | bytes/token |");
    for (int i = 0; i < nl; i++) fprintf(af.f, " %d (%gL) |", lens[i], (double)lens[i] / L);
    fprintf(af.f, " cache KiB @%d |\n|---|---:|", lens[nl - 1]);
    for (int i = 0; i < nl; i++) fprintf(af.f, "---:|");
    fprintf(af.f, "---:|\n");
    for (int p = 0; p < np; p++) {
        double bpt = la_kv_bytes_per_token(&res[p].kp);
        fprintf(af.f, "| `%s` | %.0f |", res[p].name, bpt);
        for (int i = 0; i < nl; i++) {
            if (trials > 0) fprintf(af.f, " %.3f / %.2f / %.2f |", res[p].loss[i], res[p].acc[i], res[p].digit_acc[i]);
            else fprintf(af.f, " %.3f |", res[p].loss[i]);
        }
        fprintf(af.f, " %.1f |\n", bpt * (double)res[p].cache_tokens[nl - 1] / 1024.0);
    }
    if (la_afile_commit(&af) != LA_OK) return -1;

    /* gnuplot: loss and passkey accuracy against length, one line per policy */
    char dat[1200], gp[1200], png[1200], tmp_png[1300];
    snprintf(dat, sizeof dat, "%s/kv_eval.dat", out);
    snprintf(gp, sizeof gp, "%s/kv_eval.gp", out);
    snprintf(png, sizeof png, "%s/kv_eval.png", out);
    snprintf(tmp_png, sizeof tmp_png, "%s/kv_eval.png.tmp", out);
    if (la_afile_open(&af, dat) != LA_OK) return -1;
    for (int p = 0; p < np; p++) {
        fprintf(af.f, "# %s\n", res[p].name);
        for (int i = 0; i < nl; i++)
            fprintf(af.f, "%d %.5f %.4f %.4f\n", lens[i], res[p].loss[i], res[p].acc[i], res[p].digit_acc[i]);
        fprintf(af.f, "\n\n");
    }
    if (la_afile_commit(&af) != LA_OK) return -1;
    if (la_afile_open(&af, gp) != LA_OK) return -1;
    fprintf(af.f, "set terminal pngcairo size 1200,480 noenhanced\nset output '%s'\nset multiplot layout 1,2\n", tmp_png);
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
    if (la_afile_commit(&af) != LA_OK) return -1;
    int rc = cli_gnuplot(gp);
    if (rc != 0 || rename(tmp_png, png) != 0) {
        fprintf(stderr, "longattn kv-eval: gnuplot failed (exit %d); the table and CSV are written. Install gnuplot-nox.\n", rc);
        unlink(tmp_png);
        return 1;
    }
    return 0;
}

int cli_kv_eval(int argc, char **argv) {
    const char *cmd = "kv-eval", *ckpt = NULL, *pk_ckpt = NULL, *data = NULL, *out = "runs/kv-eval", *lens_s = NULL, *pols_s = NULL;
    long windows = 4, trials = 6, chunk_opt = 1, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) return cli_usage_error(cmd, "option '%s' needs a value (or is unknown)", a);
        const char *val = argv[++i];
        if (val[0] == '-' && val[1] == '-')
            return cli_usage_error(cmd, "option '%s' needs a value, got the option '%s'", a, val);
        char *end;
        if (!strcmp(a, "--ckpt")) ckpt = val;
        else if (!strcmp(a, "--passkey-ckpt")) pk_ckpt = val;
        else if (!strcmp(a, "--data")) data = val;
        else if (!strcmp(a, "--out")) out = val;
        else if (!strcmp(a, "--lens")) lens_s = val;
        else if (!strcmp(a, "--policies")) pols_s = val;
        else if (!strcmp(a, "--windows") || !strcmp(a, "--trials") || !strcmp(a, "--chunk") || !strcmp(a, "--seed")) {
            long v = strtol(val, &end, 10);
            long lo = !strcmp(a, "--trials") || !strcmp(a, "--seed") ? 0 : 1;
            if (*val == '\0' || *end != '\0' || v < lo || v > 1000000)
                return cli_usage_error(cmd, "%s expects an integer in [%ld, 1000000], got '%s'", a, lo, val);
            if (!strcmp(a, "--windows")) windows = v;
            else if (!strcmp(a, "--trials")) trials = v;
            else if (!strcmp(a, "--chunk")) chunk_opt = v;
            else seed = v;
        } else return cli_usage_error(cmd, "unknown option '%s'", a);
    }
    if (!ckpt) return cli_usage_error(cmd, "--ckpt FILE is required");
    if (!data) return cli_usage_error(cmd, "--data DIR is required");

    la_model *m = NULL;
    if (la_model_load(ckpt, &m) != LA_OK) {
        fprintf(stderr, "longattn kv-eval: cannot load '%s': %s\n", ckpt, la_errmsg());
        return 1;
    }
    const la_model_config *cfg = la_model_get_config(m);
    const int L = cfg->train_len, V = cfg->vocab;
    la_model *mp = NULL; /* passkey weights; NULL: m */
    if (pk_ckpt) {
        if (la_model_load(pk_ckpt, &mp) != LA_OK) {
            fprintf(stderr, "longattn kv-eval: cannot load --passkey-ckpt '%s': %s\n", pk_ckpt, la_errmsg());
            la_model_free(m);
            return 1;
        }
        const la_model_config *c2 = la_model_get_config(mp);
        if (c2->n_layer != cfg->n_layer || c2->n_head != cfg->n_head || c2->n_kv_head != cfg->n_kv_head ||
            c2->d_model != cfg->d_model || c2->d_ff != cfg->d_ff || c2->vocab != V || c2->train_len != L ||
            strcmp(c2->spec, cfg->spec)) {
            fprintf(stderr, "longattn kv-eval: --passkey-ckpt '%s' (%s, %d layers, d_model %d, L %d) is not the same "
                    "model as --ckpt '%s' (%s, %d layers, d_model %d, L %d); give the fine-tuned weights of the same model\n",
                    pk_ckpt, c2->spec, c2->n_layer, c2->d_model, c2->train_len, ckpt, cfg->spec, cfg->n_layer,
                    cfg->d_model, L);
            la_model_free(mp);
            la_model_free(m);
            return 1;
        }
    }
    int lens[MAX_LEN], nl = 0;
    if (lens_s) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", lens_s);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *end;
            long v = strtol(t, &end, 10);
            if (*end != '\0' || v < 2 || v > (1L << 24) || nl >= MAX_LEN || (nl > 0 && v <= lens[nl - 1])) {
                la_model_free(m);
                la_model_free(mp);
                return cli_usage_error(cmd, "--lens: '%s' must be increasing integers >= 2 (at most %d)", lens_s, MAX_LEN);
            }
            lens[nl++] = (int)v;
        }
    } else {
        for (int f = 1; f <= 16; f *= 2) lens[nl++] = L * f;
    }
    if (nl == 0) {
        la_model_free(m);
        la_model_free(mp);
        return cli_usage_error(cmd, "--lens is empty");
    }
    pol_result *res = calloc(MAX_POL, sizeof *res);
    int np = 0;
    char defaults[512];
    snprintf(defaults, sizeof defaults, "full;window(%d);sinks(4,%d);h2o(%d,%d);int8;sinks(4,%d)+int8", L, L - 4, L / 2,
             L - L / 2, L - 4);
    {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", pols_s ? pols_s : defaults);
        char *save = NULL;
        for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
            while (*t == ' ') t++;
            if (np >= MAX_POL) break;
            la_kv_params kp = la_kv_params_default();
            la_kv_params_for_model(m, &kp);
            if (la_kv_policy_parse(t, &kp) != LA_OK) {
                fprintf(stderr, "longattn kv-eval: --policies: %s\n", la_errmsg());
                free(res);
                la_model_free(m);
                la_model_free(mp);
                return 2;
            }
            kp.max_tokens = lens[nl - 1] + 1;
            snprintf(res[np].name, sizeof res[np].name, "%s", t);
            res[np++].kp = kp;
        }
    }
    if (np == 0) {
        free(res);
        la_model_free(m);
        la_model_free(mp);
        return cli_usage_error(cmd, "--policies '%s' names no policy; give e.g. 'full;window(128);h2o(64,64)'",
                               pols_s ? pols_s : "");
    }
    char valdir[1100];
    struct stat sb;
    snprintf(valdir, sizeof valdir, "%s/val", data);
    if (stat(valdir, &sb) != 0 || !S_ISDIR(sb.st_mode)) snprintf(valdir, sizeof valdir, "%s", data);
    la_docs docs;
    if (la_docs_load(valdir, &docs) != LA_OK) {
        fprintf(stderr, "longattn kv-eval: cannot load documents from '%s': %s\n", valdir, la_errmsg());
        free(res);
        la_model_free(m);
        la_model_free(mp);
        return 1;
    }
    if (docs.vocab != V) {
        fprintf(stderr, "longattn kv-eval: documents in '%s' have vocabulary %d but the model has %d\n", valdir, docs.vocab, V);
        la_docs_free(&docs);
        free(res);
        la_model_free(m);
        la_model_free(mp);
        return 1;
    }
    if (trials > 0 && !docs.is_bytes) {
        fprintf(stderr, "longattn kv-eval: passkey needs byte-level documents; running without it (--trials 0)\n");
        trials = 0;
    }
    if (mkdir_p(out) != 0) {
        fprintf(stderr, "longattn kv-eval: cannot create '%s': %s\n", out, strerror(errno));
        la_docs_free(&docs);
        free(res);
        la_model_free(m);
        la_model_free(mp);
        return 1;
    }
    int rc = 1;
    int32_t *tok = malloc(sizeof(int32_t) * ((size_t)lens[nl - 1] + 1)), *pred = malloc(sizeof(int32_t) * (size_t)lens[nl - 1]);
    float *logits = malloc(sizeof(float) * (size_t)V * 256);
    loss_ctx lc = {NULL, logits, 1, V}, lp = {NULL, logits, 1, V}; /* lp: passkey decoder */
    if (!tok || !pred || !logits) {
        fprintf(stderr, "longattn kv-eval: out of memory\n");
        goto done;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int p = 0; p < np; p++) {
        la_kv_params *kp = &res[p].kp;
        /* the full cache is exact in chunks (causal attention over the whole prefix);
         * evicting caches stream token by token unless --chunk says otherwise */
        int64_t chunk = kp->policy == LA_KV_FULL ? 256 : chunk_opt;
        if (chunk > la_kv_max_chunk(kp)) chunk = la_kv_max_chunk(kp);
        lc.chunk = (int)chunk;
        lp.chunk = lc.chunk;
        if (la_decoder_new(m, kp, lc.chunk, &lc.d) != LA_OK ||
            (mp && la_decoder_new(mp, kp, lp.chunk, &lp.d) != LA_OK)) {
            fprintf(stderr, "longattn kv-eval: policy '%s': %s\n", res[p].name, la_errmsg());
            goto done;
        }
        for (int i = 0; i < nl; i++) {
            const int T = lens[i];
            double bits = NAN;
            la_status st = la_eval_loss(cached_loss, &lc, &docs, T, 0, (int)windows, (uint64_t)seed, T, &bits, NULL, NULL);
            if (st != LA_OK) {
                fprintf(stderr, "longattn kv-eval: policy '%s', length %d: %s\n", res[p].name, T, la_errmsg());
                la_decoder_free(lc.d);
                la_decoder_free(lp.d);
                lc.d = lp.d = NULL;
                goto done;
            }
            res[p].loss[i] = bits;
            int hits = 0, n_pk = 0, digit_hits = 0;
            for (int tr = 0; tr < trials && T >= la_passkey_min_len(); tr++) {
                double depth = trials > 1 ? 0.1 + 0.8 * tr / (trials - 1) : 0.5;
                la_passkey info;
                if (la_passkey_make(&docs, T, depth, (uint64_t)seed * 1000003u + (uint64_t)tr * 7919u + (uint64_t)T, tok,
                                    &info) != LA_OK ||
                    cached_argmax(mp ? &lp : &lc, tok, T, pred) != LA_OK) {
                    fprintf(stderr, "longattn kv-eval: passkey at length %d: %s\n", T, la_errmsg());
                    la_decoder_free(lc.d);
                    la_decoder_free(lp.d);
                    lc.d = lp.d = NULL;
                    goto done;
                }
                hits += la_passkey_exact(pred, tok, &info);
                for (int k = 0; k < LA_PASSKEY_DIGITS; k++) digit_hits += pred[info.answer_pos - 1 + k] == tok[info.answer_pos + k];
                n_pk++;
            }
            res[p].acc[i] = n_pk ? (double)hits / n_pk : NAN;
            res[p].digit_acc[i] = n_pk ? (double)digit_hits / (n_pk * LA_PASSKEY_DIGITS) : NAN;
            int64_t budget = la_kv_budget(kp);
            res[p].cache_tokens[i] = (kp->policy == LA_KV_FULL || budget > T) ? T : budget;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            fprintf(stderr, "[kv-eval] %-28s len %6d: %.4f bits/byte, passkey %d/%d (digits %d/%d), cache %lld tokens (%.0f s)\n",
                    res[p].name, T, bits, hits, n_pk, digit_hits, n_pk * LA_PASSKEY_DIGITS, (long long)res[p].cache_tokens[i],
                    (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
        }
        la_decoder_free(lc.d);
        la_decoder_free(lp.d);
        lc.d = lp.d = NULL;
    }
    rc = write_outputs(out, res, np, lens, nl, L, (int)trials, (int)windows, ckpt, mp ? pk_ckpt : NULL) < 0 ? 1 : 0;
    if (rc == 0) printf("wrote %s/kv_eval.md, %s/kv_eval.csv, %s/kv_eval.png\n", out, out, out);
    else fprintf(stderr, "longattn kv-eval: cannot write the outputs in '%s': %s\n", out, la_errmsg());
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
    return rc;
}
