/* study_report.c -- a study's numbers as files: CSV tables, results.json (cJSON), a
 * markdown summary, and PNG plots drawn by gnuplot from a generated script. Every file is
 * written atomically (temp file + rename), PNGs included. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io/gnuplot.h"
#include "study/study_internal.h"

void la_study_slug(const char *spec, char *buf, size_t n) {
    size_t j = 0;
    int under = 0;
    for (const char *c = spec; *c && j + 1 < n; c++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 *c == '.' || *c == '-';
        if (ok) { buf[j++] = *c; under = 0; }
        else if (!under && j > 0) { buf[j++] = '_'; under = 1; }
    }
    while (j > 0 && buf[j - 1] == '_') j--;
    if (n) buf[j] = '\0';
}

static la_status open_out(la_afile *af, const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return la_afile_open(af, path);
}

/* CSV field: quoted, since spec strings hold commas, e.g. "yarn(s=4,train=128)". */
static void csv_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static double pk_acc_len(const la_study *st, const study_variant *v, int li) {
    int c = 0;
    for (int di = 0; di < st->n_pk_depths; di++) c += v->correct[li][di];
    return (double)c / ((double)st->n_pk_depths * st->pk_trials);
}

static la_status write_csvs(const study_results *r, const char *dir) {
    const la_study *st = r->st;
    const char *unit = r->is_bytes ? "bpb" : "bpt";
    la_afile af;
    int max_b = 0;
    for (int i = 0; i < st->n_eval_lens; i++) {
        int nb = (st->eval_lens[i] + st->seq_len - 1) / st->seq_len;
        if (nb > max_b) max_b = nb;
    }
    LA_TRY(open_out(&af, dir, "results.csv"));
    fprintf(af.f, "spec,eval_len,loss_%s,windows,tokens", unit);
    for (int b = 0; b < max_b; b++) fprintf(af.f, ",pos_%d", b * st->seq_len);
    fputc('\n', af.f);
    for (int vi = 0; vi < st->n_specs; vi++) {
        const study_variant *v = &r->v[vi];
        if (!v->trained) continue;
        for (int i = 0; i < st->n_eval_lens; i++) {
            csv_str(af.f, st->specs[vi]);
            fprintf(af.f, ",%d,%.6f,%d,%lld", st->eval_lens[i], v->loss[i], st->eval_windows, (long long)v->tokens[i]);
            for (int b = 0; b < max_b; b++) {
                if (b < v->n_bucket[i]) fprintf(af.f, ",%.6f", v->bucket[i][b]);
                else fputc(',', af.f);
            }
            fputc('\n', af.f);
        }
    }
    LA_TRY(la_afile_commit(&af));

    LA_TRY(open_out(&af, dir, "passkey.csv"));
    fprintf(af.f, "spec,length,depth,trials,correct,passkey_acc\n");
    for (int vi = 0; vi < st->n_specs && st->pk_trials > 0; vi++) {
        const study_variant *v = &r->v[vi];
        if (!v->passkey_done) continue;
        for (int li = 0; li < st->n_pk_lens; li++)
            for (int di = 0; di < st->n_pk_depths; di++) {
                csv_str(af.f, st->specs[vi]);
                fprintf(af.f, ",%d,%g,%d,%d,%.4f\n", st->pk_lens[li], st->pk_depths[di], st->pk_trials,
                        v->correct[li][di], (double)v->correct[li][di] / st->pk_trials);
            }
    }
    LA_TRY(la_afile_commit(&af));

    LA_TRY(open_out(&af, dir, "training.csv"));
    fprintf(af.f, "spec,step,train_loss_%s,val_loss_%s,elapsed_s\n", unit, unit);
    for (int vi = 0; vi < st->n_specs; vi++) {
        const study_variant *v = &r->v[vi];
        for (int k = 0; k < v->n_log; k++) {
            csv_str(af.f, st->specs[vi]);
            fprintf(af.f, ",%d,%.6f,", v->log[k].step, v->log[k].train_bpb);
            if (!isnan(v->log[k].val_bpb)) fprintf(af.f, "%.6f", v->log[k].val_bpb);
            fprintf(af.f, ",%.3f\n", v->log[k].elapsed_s);
        }
    }
    return la_afile_commit(&af);
}

static cJSON *int_array(const int *a, int n) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) la_json_push(arr, cJSON_CreateNumber(a[i]));
    return arr;
}

static cJSON *study_json(const study_results *r) {
    int saved_json = la_json_begin(); /* a dropped item fails the whole tree */
    const la_study *st = r->st;
    cJSON *root = cJSON_CreateObject();
    cJSON *s = cJSON_AddObjectToObject(root, "study");
    cJSON_AddStringToObject(s, "name", st->name);
    cJSON_AddStringToObject(s, "data", st->data);
    cJSON *m = cJSON_AddObjectToObject(s, "model");
    cJSON_AddNumberToObject(m, "n_layer", st->n_layer);
    cJSON_AddNumberToObject(m, "d_model", st->d_model);
    cJSON_AddNumberToObject(m, "n_head", st->n_head);
    cJSON_AddNumberToObject(m, "n_kv_head", st->n_kv_head);
    cJSON_AddNumberToObject(m, "qk_gain", st->qk_gain);
    cJSON_AddNumberToObject(s, "steps", st->steps);
    cJSON_AddNumberToObject(s, "batch", st->batch);
    cJSON_AddNumberToObject(s, "seq_len", st->seq_len);
    cJSON_AddNumberToObject(s, "lr", st->lr);
    cJSON_AddNumberToObject(s, "warmup", st->warmup);
    cJSON_AddNumberToObject(s, "seed", (double)st->seed);
    la_json_put(s, "eval_lens", int_array(st->eval_lens, st->n_eval_lens));
    cJSON_AddNumberToObject(s, "eval_windows", st->eval_windows);
    cJSON_AddNumberToObject(s, "val_every", st->val_every);
    cJSON *pk = cJSON_AddObjectToObject(s, "passkey");
    cJSON_AddNumberToObject(pk, "pretrain_mix", st->pk_mix);
    cJSON_AddNumberToObject(pk, "finetune_steps", st->pk_steps);
    cJSON_AddNumberToObject(pk, "finetune_lr", st->pk_lr);
    la_json_put(pk, "lens", int_array(st->pk_lens, st->n_pk_lens));
    la_json_put(pk, "depths", cJSON_CreateDoubleArray(st->pk_depths, st->n_pk_depths));
    cJSON_AddNumberToObject(pk, "trials", st->pk_trials);
    cJSON *specs = cJSON_AddArrayToObject(s, "specs");
    for (int vi = 0; vi < st->n_specs; vi++) la_json_push(specs, cJSON_CreateString(st->specs[vi]));

    cJSON_AddStringToObject(root, "loss_unit", r->is_bytes ? "bits per byte" : "bits per token");
    cJSON *d = cJSON_AddObjectToObject(root, "data");
    cJSON_AddNumberToObject(d, "train_docs", r->train_docs);
    cJSON_AddNumberToObject(d, "train_tokens", (double)r->train_tokens);
    cJSON_AddNumberToObject(d, "val_docs", r->val_docs);
    cJSON_AddNumberToObject(d, "val_tokens", (double)r->val_tokens);
    cJSON_AddNumberToObject(d, "vocab", r->vocab);
    cJSON_AddNumberToObject(root, "wall_seconds", r->wall_s);

    cJSON *vars = cJSON_AddArrayToObject(root, "variants");
    cJSON *loss = cJSON_AddArrayToObject(root, "loss");
    cJSON *pks = cJSON_AddArrayToObject(root, "passkey");
    for (int vi = 0; vi < st->n_specs; vi++) {
        const study_variant *v = &r->v[vi];
        if (!v->trained) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "spec", st->specs[vi]);
        cJSON_AddStringToObject(o, "canonical", v->canon);
        cJSON_AddNumberToObject(o, "params", (double)v->n_params);
        cJSON_AddNumberToObject(o, "final_train_loss", v->final_train_bpb);
        cJSON_AddNumberToObject(o, "train_seconds", v->train_s);
        cJSON_AddNumberToObject(o, "eval_seconds", v->eval_s);
        cJSON_AddNumberToObject(o, "passkey_seconds", v->passkey_s);
        if (v->error[0]) cJSON_AddStringToObject(o, "error", v->error);
        if (st->pk_trials > 0 && st->pk_steps > 0 && v->passkey_done) {
            cJSON_AddNumberToObject(o, "finetune_loss_first", v->ft_first_bpb);
            cJSON_AddNumberToObject(o, "finetune_loss_last", v->ft_last_bpb);
        }
        cJSON *log = cJSON_AddArrayToObject(o, "training");
        for (int k = 0; k < v->n_log; k++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "step", v->log[k].step);
            cJSON_AddNumberToObject(e, "train_loss", v->log[k].train_bpb);
            if (!isnan(v->log[k].val_bpb)) cJSON_AddNumberToObject(e, "val_loss", v->log[k].val_bpb);
            la_json_push(log, e);
        }
        la_json_push(vars, o);
        for (int i = 0; i < st->n_eval_lens; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "spec", st->specs[vi]);
            cJSON_AddNumberToObject(e, "eval_len", st->eval_lens[i]);
            cJSON_AddNumberToObject(e, "loss", v->loss[i]);
            cJSON_AddNumberToObject(e, "windows", st->eval_windows);
            cJSON_AddNumberToObject(e, "tokens", (double)v->tokens[i]);
            cJSON *bk = cJSON_AddArrayToObject(e, "buckets");
            for (int b = 0; b < v->n_bucket[i]; b++) {
                cJSON *x = cJSON_CreateObject();
                cJSON_AddNumberToObject(x, "start", b * st->seq_len);
                int end = (b + 1) * st->seq_len;
                cJSON_AddNumberToObject(x, "end", end < st->eval_lens[i] ? end : st->eval_lens[i]);
                cJSON_AddNumberToObject(x, "loss", v->bucket[i][b]);
                cJSON_AddNumberToObject(x, "tokens", (double)v->bucket_tokens[i][b]);
                la_json_push(bk, x);
            }
            la_json_push(loss, e);
        }
        if (!v->passkey_done || st->pk_trials == 0) continue;
        for (int li = 0; li < st->n_pk_lens; li++)
            for (int di = 0; di < st->n_pk_depths; di++) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "spec", st->specs[vi]);
                cJSON_AddNumberToObject(e, "length", st->pk_lens[li]);
                cJSON_AddNumberToObject(e, "depth", st->pk_depths[di]);
                cJSON_AddNumberToObject(e, "trials", st->pk_trials);
                cJSON_AddNumberToObject(e, "correct", v->correct[li][di]);
                cJSON_AddNumberToObject(e, "passkey_acc", (double)v->correct[li][di] / st->pk_trials);
                la_json_push(pks, e);
            }
    }
    return la_json_end(saved_json, root);
}

/* Markdown summary table (the content of results.md). Returns a malloc'ed string. */
static char *study_markdown(const study_results *r) {
    const la_study *st = r->st;
    const char *u = r->is_bytes ? "bpb" : "bits/token";
    la_sbuf b = {0};
    la_sbuf_printf(&b, "## Study \"%s\": trained at L = %d, evaluated up to %d\n\n", st->name, st->seq_len,
              st->eval_lens[st->n_eval_lens - 1]);
    la_sbuf_printf(&b, "Data `%s`: %d training documents (%lld %s), %d validation documents (%lld %s). "
              "Model: %d layers, d_model %d, %d heads (%d kv), %s vocabulary. Training: %d steps of %d x %d, "
              "lr %g, seed %llu; same windows in the same order for every variant.\n\n",
              st->data, r->train_docs, (long long)r->train_tokens, r->is_bytes ? "bytes" : "tokens", r->val_docs,
              (long long)r->val_tokens, r->is_bytes ? "bytes" : "tokens", st->n_layer, st->d_model, st->n_head,
              st->n_kv_head, r->is_bytes ? "byte (256)" : "GPT-2", st->steps, st->batch, st->seq_len, st->lr,
              (unsigned long long)st->seed);
    la_sbuf_printf(&b, "| spec | params | train %s |", u);
    for (int i = 0; i < st->n_eval_lens; i++) la_sbuf_printf(&b, " val %s @%d |", u, st->eval_lens[i]);
    if (st->pk_trials > 0)
        for (int i = 0; i < st->n_pk_lens; i++) la_sbuf_printf(&b, " passkey @%d |", st->pk_lens[i]);
    la_sbuf_printf(&b, "\n|---|---:|---:|");
    for (int i = 0; i < st->n_eval_lens; i++) la_sbuf_printf(&b, "---:|");
    if (st->pk_trials > 0)
        for (int i = 0; i < st->n_pk_lens; i++) la_sbuf_printf(&b, "---:|");
    la_sbuf_printf(&b, "\n");
    for (int vi = 0; vi < st->n_specs; vi++) {
        const study_variant *v = &r->v[vi];
        if (!v->trained) continue;
        la_sbuf_printf(&b, "| `%s` | %zu | %.3f |", st->specs[vi], v->n_params, v->final_train_bpb);
        for (int i = 0; i < st->n_eval_lens; i++) la_sbuf_printf(&b, " %.3f |", v->loss[i]);
        if (st->pk_trials > 0)
            for (int i = 0; i < st->n_pk_lens; i++) {
                if (v->passkey_done) la_sbuf_printf(&b, " %.2f |", pk_acc_len(st, v, i));
                else la_sbuf_printf(&b, " - |");
            }
        la_sbuf_printf(&b, "\n");
    }
    la_sbuf_printf(&b, "\nLosses are %s on %d validation windows per length (lower is better; "
              "val @%d is in-distribution). Passkey: exact-match accuracy of greedy decoding of the 5-digit key, "
              "%d trials x %d depths per length, after %d fine-tune steps at L.\n",
              r->is_bytes ? "bits per byte" : "bits per token", st->eval_windows, st->seq_len, st->pk_trials,
              st->n_pk_depths, st->pk_steps);
    if (st->pk_trials > 0) {
        la_sbuf_printf(&b, "\nPasskey accuracy by needle depth (0 = start of the haystack, 1 = just before the question):\n\n"
                  "| spec | length |");
        for (int di = 0; di < st->n_pk_depths; di++) la_sbuf_printf(&b, " %g |", st->pk_depths[di]);
        la_sbuf_printf(&b, "\n|---|---:|");
        for (int di = 0; di < st->n_pk_depths; di++) la_sbuf_printf(&b, "---:|");
        la_sbuf_printf(&b, "\n");
        for (int vi = 0; vi < st->n_specs; vi++) {
            const study_variant *v = &r->v[vi];
            if (!v->passkey_done) continue;
            for (int li = 0; li < st->n_pk_lens; li++) {
                la_sbuf_printf(&b, "| `%s` | %d |", st->specs[vi], st->pk_lens[li]);
                for (int di = 0; di < st->n_pk_depths; di++)
                    la_sbuf_printf(&b, " %.2f |", (double)v->correct[li][di] / st->pk_trials);
                la_sbuf_printf(&b, "\n");
            }
        }
    }
    for (int vi = 0; vi < st->n_specs; vi++)
        if (r->v[vi].error[0])
            la_sbuf_printf(&b, "\n**`%s` failed**%s: %s\n", st->specs[vi],
                      r->v[vi].trained ? " after its loss evaluation" : "", r->v[vi].error);
    la_sbuf_printf(&b, "\nWall time %.0f s.\n", r->wall_s);
    if (b.oom) { free(b.s); return NULL; }
    return b.s;
}

la_status la_study_write_tables(const study_results *r, const char *dir) {
    LA_TRY(write_csvs(r, dir));
    cJSON *root = study_json(r);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return la_fail(LA_ENOMEM, "study: out of memory for results.json");
    la_afile af;
    la_status s = open_out(&af, dir, "results.json");
    if (s == LA_OK) {
        fputs(text, af.f);
        fputc('\n', af.f);
        s = la_afile_commit(&af);
    }
    free(text);
    if (s != LA_OK) return s;
    char *md = study_markdown(r);
    if (!md) return la_fail(LA_ENOMEM, "study: out of memory for results.md");
    s = open_out(&af, dir, "results.md");
    if (s == LA_OK) {
        fputs(md, af.f);
        s = la_afile_commit(&af);
    }
    free(md);
    return s;
}

/* ---- plots ---- */

/* gnuplot double-quoted string: escape backslash and quote */
static void gp_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int is_png(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char got[8];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(got, 1, 8, f);
    fclose(f);
    return n == 8 && !memcmp(got, sig, 8);
}

/* Write plots.gp for terminal term; fills names[] with the PNGs it makes. */
static la_status write_script(const study_results *r, const char *dir, const char *term,
                              char names[][160], int *n_names) {
    const la_study *st = r->st;
    const char *u = r->is_bytes ? "bits per byte" : "bits per token";
    la_afile af;
    *n_names = 0;
    /* data: one gnuplot block per variant (separated by two blank lines) */
    LA_TRY(open_out(&af, dir, "loss_vs_length.dat"));
    for (int vi = 0; vi < st->n_specs; vi++) {
        fprintf(af.f, "# %s\n", st->specs[vi]);
        for (int i = 0; i < st->n_eval_lens && r->v[vi].trained; i++)
            fprintf(af.f, "%d %.6f\n", st->eval_lens[i], r->v[vi].loss[i]);
        fprintf(af.f, "\n\n");
    }
    LA_TRY(la_afile_commit(&af));
    int last = st->n_eval_lens - 1;
    LA_TRY(open_out(&af, dir, "loss_by_position.dat"));
    for (int vi = 0; vi < st->n_specs; vi++) {
        fprintf(af.f, "# %s at length %d: bucket start, bucket middle, loss\n", st->specs[vi], st->eval_lens[last]);
        for (int b = 0; r->v[vi].trained && b < r->v[vi].n_bucket[last]; b++)
            fprintf(af.f, "%d %.1f %.6f\n", b * st->seq_len, (b + 0.5) * st->seq_len, r->v[vi].bucket[last][b]);
        fprintf(af.f, "\n\n");
    }
    LA_TRY(la_afile_commit(&af));

    LA_TRY(open_out(&af, dir, "plots.gp"));
    FILE *f = af.f;
    fprintf(f, "# generated by `longattn study`; rerun with: cd <this folder> && gnuplot plots.gp\n");
    fprintf(f, "set terminal %s size 960,640\nset termoption noenhanced\nset key below\n"
               "set grid\n", term);
    fprintf(f, "titles = \"");
    for (int vi = 0; vi < st->n_specs; vi++) fprintf(f, "%s%d", vi ? " " : "", vi);
    fprintf(f, "\"\n");
    fprintf(f, "array spec[%d]\n", st->n_specs);
    for (int vi = 0; vi < st->n_specs; vi++) {
        fprintf(f, "spec[%d] = ", vi + 1);
        gp_str(f, st->specs[vi]);
        fprintf(f, "\n");
    }
    snprintf(names[(*n_names)++], 160, "loss_vs_length.png");
    fprintf(f, "set output 'loss_vs_length.png.tmp'\nset logscale x 2\nset xlabel 'evaluation length (tokens)'\n"
               "set ylabel 'validation loss (%s)'\nset title ", u);
    char title[512];
    snprintf(title, sizeof title, "%s: trained at L = %d", st->name, st->seq_len);
    gp_str(f, title);
    fprintf(f, "\nset xtics (");
    for (int i = 0; i < st->n_eval_lens; i++) fprintf(f, "%s\"%d\" %d", i ? ", " : "", st->eval_lens[i], st->eval_lens[i]);
    fprintf(f, ")\nset xrange [%g:%g]\n", st->eval_lens[0] / 1.25, st->eval_lens[st->n_eval_lens - 1] * 1.25);
    fprintf(f, "set arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 2\n", st->seq_len, st->seq_len);
    fprintf(f, "plot for [i=1:%d] 'loss_vs_length.dat' index (i-1) using 1:2 with linespoints lw 2 pt 7 "
               "title spec[i]\n", st->n_specs);
    fprintf(f, "unset arrow 1\nunset logscale x\nset xtics autofreq\nset autoscale x\n");

    snprintf(names[(*n_names)++], 160, "loss_by_position.png");
    fprintf(f, "set output 'loss_by_position.png.tmp'\nset xlabel 'position in the window (tokens)'\n"
               "set ylabel 'loss in buckets of %d positions (%s)'\nset title ", st->seq_len, u);
    snprintf(title, sizeof title, "%s: loss by position at length %d (trained at %d)", st->name,
             st->eval_lens[last], st->seq_len);
    gp_str(f, title);
    fprintf(f, "\nset xrange [0:%d]\nset arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 2\n",
            st->eval_lens[last], st->seq_len, st->seq_len);
    fprintf(f, "plot for [i=1:%d] 'loss_by_position.dat' index (i-1) using 2:3 with linespoints lw 2 pt 7 "
               "title spec[i]\nunset arrow 1\n", st->n_specs);

    if (st->pk_trials > 0) {
        fprintf(f, "set palette defined (0 '#b2182b', 0.5 '#f7f7f7', 1 '#2166ac')\nset cbrange [0:1]\n"
                   "set cblabel 'passkey accuracy'\nunset key\nunset grid\nset xlabel 'length (tokens)'\n"
                   "set ylabel 'needle depth'\n");
        fprintf(f, "set xrange [-0.5:%g]\nset yrange [%g:-0.5]\nset xtics (", st->n_pk_lens - 0.5,
                st->n_pk_depths - 0.5); /* depth 0 at the top, as in NIAH heatmaps */
        for (int i = 0; i < st->n_pk_lens; i++) fprintf(f, "%s\"%d\" %d", i ? ", " : "", st->pk_lens[i], i);
        fprintf(f, ")\nset ytics (");
        for (int i = 0; i < st->n_pk_depths; i++) fprintf(f, "%s\"%g\" %d", i ? ", " : "", st->pk_depths[i], i);
        fprintf(f, ")\n");
        for (int vi = 0; vi < st->n_specs; vi++) {
            if (!r->v[vi].passkey_done) continue;
            char slug[128], dat[160];
            la_study_slug(st->specs[vi], slug, sizeof slug);
            snprintf(names[*n_names], 160, "passkey_%d_%s.png", vi + 1, slug);
            snprintf(dat, sizeof dat, "passkey_%d.dat", vi + 1);
            la_afile df;
            la_status s = open_out(&df, dir, dat);
            if (s != LA_OK) { la_afile_abort(&af); return s; }
            fprintf(df.f, "# %s: length index, depth index, accuracy\n", st->specs[vi]);
            for (int li = 0; li < st->n_pk_lens; li++)
                for (int di = 0; di < st->n_pk_depths; di++)
                    fprintf(df.f, "%d %d %.4f\n", li, di, (double)r->v[vi].correct[li][di] / st->pk_trials);
            if ((s = la_afile_commit(&df)) != LA_OK) { la_afile_abort(&af); return s; }
            fprintf(f, "set output '%s.tmp'\nset title ", names[*n_names]);
            snprintf(title, sizeof title, "passkey accuracy: %s (trained at %d, %d trials per cell)",
                     st->specs[vi], st->seq_len, st->pk_trials);
            gp_str(f, title);
            fprintf(f, "\nplot '%s' using 1:2:3 with image, '' using 1:2:(sprintf('%%.2f', $3)) with labels "
                       "font ',14'\n", dat);
            (*n_names)++;
        }
    }
    fprintf(f, "unset output\n");
    return la_afile_commit(&af);
}

la_status la_study_write_plots(const study_results *r, const char *dir, const char *gnuplot, int *ok,
                            char *warn, size_t warn_n) {
    *ok = 0;
    warn[0] = '\0';
    char names[2 + LA_STUDY_MAX_SPECS][160];
    int n = 0, rc = 0;
    static const char *const terms[] = {"pngcairo", "png"};
    for (int t = 0; t < 2; t++) {
        LA_TRY(write_script(r, dir, terms[t], names, &n));
        rc = la_gnuplot_run(gnuplot, dir, "plots.gp", "gnuplot.log");
        if (rc == 0 || rc == 127) break; /* done, or no gnuplot at all */
    }
    char tmp[4096], fin[4096];
    int good = 0;
    for (int i = 0; i < n; i++) {
        snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, names[i]);
        snprintf(fin, sizeof fin, "%s/%s", dir, names[i]);
        if (rc == 0 && is_png(tmp) && rename(tmp, fin) == 0) good++;
        else unlink(tmp);
    }
    if (rc == 127)
        snprintf(warn, warn_n, "no plots: could not run '%s' (install gnuplot-nox, e.g. with scripts/setup.sh); "
                 "the tables are complete, and %s/plots.gp draws the plots later", gnuplot, dir);
    else if (rc != 0 || good != n)
        snprintf(warn, warn_n, "gnuplot failed (exit %d, %d of %d PNGs made): see %s/gnuplot.log", rc, good, n, dir);
    *ok = rc == 0 && good == n;
    return LA_OK;
}
