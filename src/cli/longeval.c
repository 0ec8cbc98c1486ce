/* longeval.c -- `longattn longeval --model FILE.gguf`: long-context evaluation of a
 * pretrained model (la_longeval_run, src/runner/longeval_run.c). Parses, calls, prints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/dist.h"
#include "longattn.h"

static const cli_doc DOC = {
    "longattn longeval --model FILE.gguf [options]",
    "Perplexity by position, passkey and RULER multi-key retrieval for each method x length\n"
    "(lengths are multiples of the model's trained context C).",
    "Under mpirun (mpirun -np N longattn longeval ...) the method x length cells are spread\n"
    "over the ranks by estimated cost (L^2); each rank shows its own cells, rank 0 writes\n"
    "the files, the same as one process's (timings aside). With --seq-parallel the ranks run\n"
    "every cell together instead, each prefill split over them (ring attention, docs/mpi.md).",
    0,
};

/* --haystack text|filler into int *dest (1: filler) */
static int haystack_opt(const char *cmd, const char *opt, const char *val, void *dest) {
    (void)opt;
    if (strcmp(val, "text") && strcmp(val, "filler"))
        return cli_usage_error(cmd, "--haystack must be 'text' or 'filler' (got '%s')", val);
    *(int *)dest = !strcmp(val, "filler");
    return 0;
}

static void on_progress(void *user, const la_longeval_progress *p) {
    const int seqpar = *(const int *)user;
    if (seqpar && la_dist_rank() != 0) return; /* every rank runs the same cells: rank 0 tells */
    if (p->note) {
        if (la_dist_rank() == 0) fprintf(stderr, "longattn longeval: %s\n", p->note);
        return;
    }
    const la_longeval_cell *c = p->cell;
    if (la_dist_size() > 1 && !seqpar) fprintf(stderr, "[rank %d]", la_dist_rank()); /* each rank its own cells */
    fprintf(stderr, "[longeval %d/%d] %-32s L %6lld: %.4f bits/byte, passkey %d/%d, multi-key %d/%d%s (%.0f s; "
                    "elapsed %.0f s, ETA %.0f s)\n",
            p->n_done, p->n_cells, c->method_text, (long long)c->L, c->ppl_bits_byte, c->passkey_hits, c->passkey_n,
            c->multikey_hits, c->multikey_n, c->resumed ? " (resumed)" : "", c->seconds, p->elapsed_s, p->eta_s);
}

/* Split s at sep into at most LA_LONGEVAL_MAX items (spaces around each trimmed) in buf
 * (n bytes): an empty item or one given twice is a usage error naming opt. */
static int split_list(const char *cmd, const char *opt, const char *s, char sep, char *buf, size_t n,
                      const char **items, int *k) {
    snprintf(buf, n, "%s", s);
    *k = 0;
    for (char *t = buf, *e; t; t = e) {
        if ((e = strchr(t, sep))) *e++ = '\0';
        while (*t == ' ') t++;
        for (char *z = t + strlen(t); z > t && z[-1] == ' ';) *--z = '\0';
        if (!*t) return cli_usage_error(cmd, "%s '%s' has an empty item", opt, s);
        if (*k >= LA_LONGEVAL_MAX) return cli_usage_error(cmd, "%s: at most %d values", opt, LA_LONGEVAL_MAX);
        for (int j = 0; j < *k; j++)
            if (!strcmp(items[j], t)) return cli_usage_error(cmd, "%s names '%s' twice", opt, t);
        items[(*k)++] = t;
    }
    return 0;
}

static int parse_list(const char *cmd, const char *opt, const char *s, double *out, int *n, double lo, double hi) {
    char buf[1024];
    const char *items[LA_LONGEVAL_MAX];
    if (split_list(cmd, opt, s, ',', buf, sizeof buf, items, n)) return 2;
    for (int k = 0; k < *n; k++) {
        if (cli_parse_num(items[k], lo, hi, &out[k]))
            return cli_usage_error(cmd, "%s: '%s' is not a number in [%g, %g]", opt, items[k], lo, hi);
        for (int j = 0; j < k; j++)
            if (out[j] == out[k]) return cli_usage_error(cmd, "%s names %g twice", opt, out[k]);
    }
    return 0;
}

int cli_longeval(int argc, char **argv) {
    const char *cmd = "longeval", *study = NULL, *methods = NULL, *lengths = NULL, *depths = NULL;
    la_longeval_opts o = la_longeval_opts_default();
    o.out_dir = "runs/longeval";
    const char *kv_type = NULL;
    int resume = 0, exact = 0, filler = -1, no_share = 0;
    long seed = 0;
    cli_arg args[] = {
        CLI_A_STR("--model FILE", "GGUF model (llama / qwen2)", &o.model),
        CLI_A_STR("--study FILE", "study file (default studies/longeval.json when it exists;\n"
                                  "studies/longeval-full.json: every method at 0.5C-4C;\n"
                                  "studies/longeval-long.json: the same plus 8C)", &study),
        CLI_A_STR("--methods \"a;b\"", "methods separated by ';': a spec, or 'spec | kv-policy'; {s} = L/C,\n"
                                     "{C} = C; 'as-trained' = the model's own RoPE; selfextend(G,W),\n"
                                     "rerope(W), leaky-rerope(W,k), dca(C): position-regime methods", &methods),
        CLI_A_STR("--lengths A,B", "lengths as multiples of C (e.g. 0.5,1,2,4)", &lengths),
        CLI_A_STR("--depths A,B", "needle depths in [0,1]", &depths),
        CLI_A_INT("--trials N", "examples per depth and document (0: no retrieval)", &o.trials, 0, 1000),
        CLI_A_INT("--distractors N", "multi-key distractor needles (-1: no multi-key)", &o.distractors, -1, 20),
        CLI_A_INT("--buckets N", "perplexity position buckets", &o.buckets, 1, LA_LONGEVAL_MAX),
        CLI_A_INT("--chunk N", "prefill chunk (default 512)", &o.chunk, 1, 65536),
        CLI_A_FLAG("--exact-stream", "evicting KV policies step one token at a time (exact, slow)", &exact),
        CLI_A_FN("--kv-type TYPE", "KV element type of methods whose policy names none: f32 | f16 | bf16 |\n"
                                    "int8 | int8(group=g) (default f16, the GGUF default; f32 for position-\n"
                                    "regime methods; study key kv_type)", cli_kv_type_arg, &kv_type),
        CLI_A_FN("--haystack MODE", "retrieval haystacks: 'text' (real text) or 'filler' (Mohtashami &\n"
                                    "Jaggi's repeated \"The grass is green. ...\"; the study files' choice)",
                 haystack_opt, &filler),
        CLI_A_INT("--documents N", "documents scored and used as haystacks, in name order (default 6;\n"
                                   "0: every document of the folder, at most 16)", &o.n_docs, 0,
                  LA_LONGEVAL_MAX_DOCS),
        CLI_A_FLAG("--no-share", "prefill every retrieval example from its first token (the unshared\n"
                                 "computation: the same results, slower; for checking and timing)", &no_share),
        CLI_A_INT("--resamples N", "bootstrap resamples of the perplexity differences (>= 1000, default 2000)",
                  &o.resamples, 1000, 1000000),
        CLI_A_LONG("--train-ctx N", "override C (default: the file's context_length)", &o.train_ctx, 2, 1L << 30),
        CLI_A_STR("--docs DIR", "text documents (default data/longdocs; data/pydoc/val when absent)", &o.docs),
        CLI_A_STR("--out DIR", "output folder (default runs/longeval)", &o.out_dir),
        CLI_A_FLAG("--resume", "skip cells already stored in DIR/cells", &resume),
        CLI_A_FLAG("--seq-parallel", "under mpirun: every prefill is one pass split over the ranks\n"
                                     "(no shared prefixes; not with evicting KV policies or\n"
                                     "selfextend / rerope / dca)", &o.seq_parallel),
        CLI_A_INT("--threads N", "OpenMP / BLAS threads", &o.threads, 1, 1024),
        CLI_A_LONG("--seed S", "seed of the haystacks, needles and keys", &seed, 0, 1L << 30),
        CLI_A_END,
    };
    int prc = cli_parse(cmd, &DOC, args, argc, argv);
    if (prc >= 0) return prc;
    if (!o.model) return cli_usage_error(cmd, "--model FILE.gguf is required");
    if (!study && access("studies/longeval.json", R_OK) == 0) study = "studies/longeval.json";
    if (study && la_longeval_load(study, &o) != LA_OK) {
        fprintf(stderr, "longattn longeval: %s\n", la_errmsg());
        la_longeval_opts_release(&o);
        return 1;
    }
    /* the options again, over the study file's values (the same arguments: no error now) */
    if (study) cli_parse(cmd, &DOC, args, argc, argv);
    if (cli_given(args, "--seed")) o.seed = (uint64_t)seed;
    static char mbuf[8192];
    if ((methods && split_list(cmd, "--methods", methods, ';', mbuf, sizeof mbuf, o.methods, &o.n_methods)) ||
        (lengths && parse_list(cmd, "--lengths", lengths, o.lengths, &o.n_lengths, 1e-3, 1e3)) ||
        (depths && parse_list(cmd, "--depths", depths, o.depths, &o.n_depths, 0, 1))) {
        la_longeval_opts_release(&o); /* the study file's strings */
        return 2;
    }
    if (kv_type) o.kv_type = kv_type;
    o.resume = resume;
    o.exact_stream = exact;
    if (no_share) o.no_share = 1;
    if (filler >= 0) o.filler = filler;
    int nc = o.n_methods * o.n_lengths;
    la_longeval_cell *cells = calloc((size_t)nc, sizeof *cells);
    if (!cells) return 1;
    double t0 = cli_now();
    la_status st = la_longeval_run(&o, on_progress, &o.seq_parallel, cells);
    if (st == LA_ESPEC && la_dist_rank() == 0) /* a bad --methods, --kv-type or --lengths: found before any file */
        cli_usage_error(cmd, "%s", la_errmsg());
    else if (st != LA_OK && la_dist_rank() == 0)
        fprintf(stderr, "longattn longeval: %s\n", la_errmsg()); /* the same on every rank */
    if (st == LA_OK && la_dist_rank() == 0) { /* rank 0 wrote and prints the results */
        int64_t C = o.train_ctx;
        if (!C) C = (int64_t)llround(cells[0].L / o.lengths[0]);
        size_t tn = 65536;
        char *tab = malloc(tn);
        if (tab) {
            la_longeval_table(&o, cells, C, tab, tn);
            printf("\nbits per byte / passkey accuracy / multi-key accuracy (C = %lld), wall %.0f s:\n\n%s",
                   (long long)C, cli_now() - t0, tab);
            printf("\nfiles in %s: results.json, longeval.csv, longeval.md, ppl_by_position.png, retrieval.png, "
                   "passkey_<i>.png\n",
                   o.out_dir);
        }
        free(tab);
    }
    free(cells);
    la_longeval_opts_release(&o);
    return st == LA_ESPEC ? 2 : st != LA_OK;
}
