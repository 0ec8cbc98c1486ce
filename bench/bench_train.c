/* bench_train.c -- `longattn bench train`: training throughput of the GPT (tokens/s), the
 * share of the step spent in attention (la_attn_forward/backward) vs matrix products
 * (cblas_sgemm), the achieved GFLOP/s as a fraction of the machine's measured FMA peak
 * (bench_peak.c), and, when a Python with PyTorch is given, the same model trained by
 * PyTorch eager (bench/torch_train.py) in the same run, steps interleaved with ours.
 * Random tokens; AdamW steps (la_trainer_step_batch: zero grads, forward, backward, clip,
 * update).
 *
 * FLOPs counted per step (2 per multiply-add; elementwise work, norms, softmax exponentials
 * and the optimizer are not counted):
 *   matrix products  6 N P_mat: forward, input gradient and weight gradient of every
 *                    product, P_mat = L (C HD + 2 C KD + HD C + 2 C F) + C V (q, k, v, o,
 *                    MLP, LM head), N = B T tokens;
 *   attention        12 D per visible (query, key) pair and head: forward S = QK^T, O = PV;
 *                    backward dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q (the minimal
 *                    work: recomputing S or P in the backward is not counted), pairs
 *                    counted exactly from the spec's pattern (causal: T(T+1)/2 per head
 *                    and sequence), times B H L.
 *
 * Reported against wall time (tokens/s, GFLOP/s / FMA peak) and against the process's CPU
 * time (tokens and GFLOP per CPU-second, the latter / (peak / threads)): on a machine shared
 * with other jobs the wall figures measure the scheduler as much as the code.
 *
 * Interleaving: R rounds; each round times `steps` of our steps, then asks the PyTorch
 * process for `steps` of its own, so both see the same machine load; tokens/s of each side
 * are over all its timed steps. With --precision bf16 (issue 29) each round also times
 * `steps` of a float32 trainer of the same model and batch, so the bf16 / f32 ratio comes
 * from the same rounds, and with --python a second PyTorch process runs the same model under
 * torch.autocast("cpu", dtype=torch.bfloat16) in the same rounds (PyTorch's bf16 mixed
 * precision, the peer of our bf16 trainer). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cli/cli.h"
#include "core/internal.h"
#include "core/prof.h"
#include "longattn.h"

static const cli_doc DOC = {
    "longattn bench train [options]",
    "GPT training throughput (tokens/s) and where a step's time goes; OMP_NUM_THREADS sets\n"
    "the threads.",
    NULL, 0,
};

/* ---- the PyTorch process (bench/torch_train.py's line protocol, bench_peer) ---- */

typedef struct {
    bench_peer io;
    char version[64], attn[32];
    int threads;
    double cpu, rmin, rmax; /* CPU seconds over the timed steps; per-round time ratio range */
} torch_peer;

/* Starts `py script --layers ...` and waits for its "ready" line; 0 on success, else -1
 * and the reason in why. */
static int peer_start(torch_peer *p, const char *py, const char *script, const la_model_config *c,
                      int T, int B, int threads, const char *autocast, char *why, size_t n) {
    memset(p, 0, sizeof *p);
    char a[7][16];
    snprintf(a[0], 16, "%d", c->n_layer);
    snprintf(a[1], 16, "%d", c->d_model);
    snprintf(a[2], 16, "%d", c->n_head);
    snprintf(a[3], 16, "%d", T);
    snprintf(a[4], 16, "%d", B);
    snprintf(a[5], 16, "%d", threads);
    snprintf(a[6], 16, "%d", c->vocab);
    char *argv[] = {(char *)py, (char *)script, "--layers", a[0], "--d-model", a[1], "--heads", a[2],
                    "--seq-len", a[3], "--batch", a[4], "--threads", a[5], "--vocab", a[6],
                    "--autocast", (char *)autocast, NULL};
    char line[256];
    if (bench_peer_start(&p->io, argv, line, sizeof line, why, n)) return -1;
    p->rmin = 1e300;
    if (sscanf(line, "ready %63s %31s %d", p->version, p->attn, &p->threads) != 3) {
        snprintf(why, n, "unexpected first line from bench/torch_train.py: %.200s", line);
        bench_peer_stop(&p->io);
        return -1;
    }
    return 0;
}

/* Asks for k timed steps; their seconds into s, the process's CPU seconds over them into
 * *cpu. 0 on success. */
static int peer_steps(torch_peer *p, int k, double *s, double *cpu) {
    char cmd[32], line[8192];
    snprintf(cmd, sizeof cmd, "steps %d", k);
    if (bench_peer_ask(&p->io, cmd, line, sizeof line) || strncmp(line, "seconds", 7)) return -1;
    char *c = line + 7;
    for (int i = 0; i < k; i++) {
        char *e;
        s[i] = strtod(c, &e);
        if (e == c || !(s[i] > 0)) return -1;
        c = e;
    }
    return sscanf(c, " cpu %lf", cpu) == 1 ? 0 : -1;
}

/* One round of k peer steps into u; the ratio of their time to ours (ours_s seconds) joins
 * the peer's range. 0 on success; else the peer is stopped and why says what happened. */
static int peer_round(torch_peer *p, int k, double *u, double ours_s, char *why, size_t n) {
    double pc = 0;
    if (peer_steps(p, k, u, &pc)) {
        bench_peer_reason(&p->io, why, n);
        bench_peer_stop(&p->io);
        return -1;
    }
    p->cpu += pc;
    double s = 0, ratio;
    for (int i = 0; i < k; i++) s += u[i];
    ratio = s / ours_s;
    if (ratio < p->rmin) p->rmin = ratio;
    if (ratio > p->rmax) p->rmax = ratio;
    return 0;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* ---- FLOP count (see the header comment) ---- */

static void count_flops(const la_model_config *c, const la_spec *sp, int B, int T, double *mm,
                        double *attn) {
    double C = c->d_model, D = (double)c->d_model / c->n_head, HD = c->n_head * D,
           KD = c->n_kv_head * D, F = c->d_ff, V = c->vocab, N = (double)B * T;
    double pmat = c->n_layer * (C * HD + 2 * C * KD + HD * C + 2 * C * F) + C * V;
    *mm = 6.0 * N * pmat;
    double pairs = bench_count_pairs(sp, T, T, 0);
    *attn = pairs < 0 ? -1 : 12.0 * D * pairs * B * c->n_head * c->n_layer;
}

static double sum(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return s;
}

int bench_train(int argc, char **argv) {
    la_model_config mc = la_model_config_default();
    mc.n_layer = 4;
    mc.d_model = 256;
    mc.n_head = 8;
    int T = 256, B = 8, steps = 5, rounds = 3, json = 0, no_torch = 0;
    const char *py = "python3", *script_opt = NULL;
    la_optimizer opt = LA_OPT_ADAMW;
    la_dtype prec = LA_DTYPE_F32;
    const char *spec = NULL;
    int study = 0;
    /* --study first, so that the other options change its sizes wherever they stand */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--study")) mc.n_layer = 4, mc.d_model = 128, mc.n_head = 4, T = 128, B = 16;
    enum { MAXI = 1 << 30 };
    cli_arg args[] = {
        CLI_A_INT("--layers N", "transformer blocks (default 4)", &mc.n_layer, 1, MAXI),
        CLI_A_INT("--d-model N", "model width (default 256)", &mc.d_model, 1, MAXI),
        CLI_A_INT("--heads N", "attention heads (default 8)", &mc.n_head, 1, MAXI),
        CLI_A_INT("--seq-len T", "sequence length (default 256)", &T, 1, MAXI),
        CLI_A_INT("--batch B", "sequences per step (default 8)", &B, 1, MAXI),
        CLI_A_STR("--spec TEXT", "attention spec (default softmax+rope+causal)", &spec),
        CLI_A_INT("--steps N", "timed steps per round (default 5)", &steps, 1, MAXI),
        CLI_A_INT("--rounds R", "rounds of interleaved timing, ours then PyTorch's (default 3)", &rounds, 1, MAXI),
        CLI_A_FN("--optimizer NAME", "adamw | muon (default adamw)", cli_optimizer_arg, &opt),
        CLI_A_FN("--precision P", "f32 | bf16 trainer precision (default f32); bf16 also times a float32\n"
                                  "trainer of the same model in the same rounds and reports bf16 / f32",
                 cli_precision_arg, &prec),
        CLI_A_FLAG("--study", "the default study's size: 4 layers, d_model 128, 4 heads, T 128, B 16", &study),
        CLI_A_STR("--python PY", "a Python with PyTorch: also time bench/torch_train.py, the same model\n"
                                 "and step in PyTorch eager (default python3; skipped when torch does\n"
                                 "not import, or for a spec/optimizer the script does not implement);\n"
                                 "with --precision bf16 also under torch.autocast bf16", &py),
        CLI_A_STR("--torch-script FILE", "the PyTorch script (default: bench/torch_train.py next to the build)",
                  &script_opt),
        CLI_A_FLAG("--no-torch", "do not run PyTorch", &no_torch),
        CLI_A_FLAG("--json", "one JSON object: tokens_per_s, step_s, attention_share, matmul_share,\n"
                             "flops_per_step, gflops, fma_peak_gflops, peak_fraction, torch{...}, config", &json),
        CLI_A_END,
    };
    int prc = cli_parse("bench train", &DOC, args, argc, argv);
    if (prc >= 0) return prc;
    if (spec) snprintf(mc.spec, sizeof mc.spec, "%s", spec);
    mc.train_len = T;
    if (la_model_config_validate(&mc) != LA_OK) /* bad options: a usage error, as train's */
        return cli_usage_error("bench train", "--layers / --d-model / --heads / --spec: %s", la_errmsg());
    la_model *m = NULL;
    la_trainer *tr = NULL;
    if (la_model_new(&mc, 1, &m) != LA_OK) {
        fprintf(stderr, "longattn bench train: %s\n", la_errmsg());
        return 1;
    }
    const la_model_config *c = la_model_get_config(m);
    const la_spec *sp = la_model_spec(m);
    la_train_config tc = la_train_config_default();
    tc.B = B;
    tc.T = T;
    tc.steps = steps * rounds + 1;
    tc.optimizer = opt;
    tc.precision = prec;
    if (la_trainer_new(m, NULL, &tc, &tr) != LA_OK) {
        fprintf(stderr, "longattn bench train: %s\n", la_errmsg());
        la_model_free(m);
        return 1;
    }
    /* bf16: the float32 trainer of the same model, timed in the same rounds */
    la_model *m32 = NULL;
    la_trainer *tr32 = NULL;
    if (prec != LA_DTYPE_F32) {
        la_train_config t32 = tc;
        t32.precision = LA_DTYPE_F32;
        if (la_model_new(&mc, 1, &m32) != LA_OK || la_trainer_new(m32, NULL, &t32, &tr32) != LA_OK) {
            fprintf(stderr, "longattn bench train: %s\n", la_errmsg());
            la_trainer_free(tr);
            la_model_free(m);
            la_model_free(m32);
            return 1;
        }
        if (!json) printf("%s\n", cli_precision_note(prec));
    }
    int threads = omp_get_max_threads();

    /* PyTorch: only for the model bench/torch_train.py implements */
    torch_peer peer, peer16; /* PyTorch eager float32; with --precision bf16 also autocast bf16 */
    memset(&peer, 0, sizeof peer);
    memset(&peer16, 0, sizeof peer16);
    int have_torch = 0, have_t16 = 0;
    char why[600] = "", script[4096];
    if (no_torch) {
        snprintf(why, sizeof why, "--no-torch");
    } else {
        la_spec ref;
        char a[LA_SPEC_TEXT_MAX], b[LA_SPEC_TEXT_MAX];
        la_spec_parse("softmax+rope+causal", &ref);
        la_spec_format(&ref, a, sizeof a);
        la_spec_format(sp, b, sizeof b);
        if (script_opt) snprintf(script, sizeof script, "%s", script_opt);
        else bench_find_script("torch_train.py", script, sizeof script);
        if (strcmp(a, b))
            snprintf(why, sizeof why, "bench/torch_train.py implements %s only, not %s", a, b);
        else if (opt != LA_OPT_ADAMW)
            snprintf(why, sizeof why, "bench/torch_train.py implements AdamW only");
        else if (c->n_kv_head != c->n_head)
            snprintf(why, sizeof why, "bench/torch_train.py has no grouped-query attention");
        else if (!script[0])
            snprintf(why, sizeof why, "bench/torch_train.py not found; pass --torch-script FILE");
        else if (peer_start(&peer, py, script, c, T, B, threads, "none", why, sizeof why) == 0)
            have_torch = 1;
        if (have_torch && prec == LA_DTYPE_BF16) {
            char w16[600];
            if (peer_start(&peer16, py, script, c, T, B, threads, "bf16", w16, sizeof w16) == 0) have_t16 = 1;
            else if (!json) printf("(PyTorch bf16 autocast not measured: %s)\n", w16);
        }
    }
    if (!have_torch && !json) printf("(PyTorch not measured: %s)\n", why);

    size_t N = (size_t)B * T;
    int32_t *tok = malloc(N * sizeof(int32_t)), *tgt = malloc(N * sizeof(int32_t));
    double *st = malloc(sizeof(double) * steps * rounds), *pt = malloc(sizeof(double) * steps * rounds);
    double *pt16 = malloc(sizeof(double) * steps * rounds); /* PyTorch autocast bf16's steps */
    double *ft = malloc(sizeof(double) * steps * rounds); /* the float32 trainer's steps (bf16 runs) */
    la_rng r;
    la_rng_seed(&r, 7);
    for (size_t i = 0; i < N; i++) {
        tok[i] = (int32_t)la_rng_below(&r, mc.vocab);
        tgt[i] = (int32_t)la_rng_below(&r, mc.vocab);
    }
    int rc = 0;
    la_step_info info;
    double peak0 = bench_fma_peak(threads, 0.2, NULL);
    /* one untimed step: buffers are allocated and pages touched */
    if (la_trainer_step_batch(tr, tok, tgt, B, T, &info) != LA_OK) rc = 1;
    if (tr32 && la_trainer_step_batch(tr32, tok, tgt, B, T, &info) != LA_OK) rc = 1;
    la_model_reset_timing(m);
#ifdef LA_PROFILE
    memset(la_prof_s, 0, sizeof la_prof_s);
    memset(la_prof_cpu, 0, sizeof la_prof_cpu);
#endif
    double our_cpu = 0;
    double f32_ratio_min = 1e300, f32_ratio_max = 0;
    for (int q = 0; q < rounds && !rc; q++) {
        double *s = st + (size_t)q * steps;
        double c0 = cpu_now();
        for (int k = 0; k < steps && !rc; k++) {
            double a = cli_now();
            if (la_trainer_step_batch(tr, tok, tgt, B, T, &info) != LA_OK) rc = 1;
            s[k] = cli_now() - a;
        }
        our_cpu += cpu_now() - c0;
        if (tr32 && !rc) {
            double *u = ft + (size_t)q * steps;
            for (int k = 0; k < steps && !rc; k++) {
                double a = cli_now();
                if (la_trainer_step_batch(tr32, tok, tgt, B, T, &info) != LA_OK) rc = 1;
                u[k] = cli_now() - a;
            }
            double ratio = sum(u, steps) / sum(s, steps); /* > 1: bf16 faster */
            if (ratio < f32_ratio_min) f32_ratio_min = ratio;
            if (ratio > f32_ratio_max) f32_ratio_max = ratio;
        }
        if (have_torch && !rc && peer_round(&peer, steps, pt + (size_t)q * steps, sum(s, steps), why, sizeof why)) {
            if (!json) printf("(PyTorch stopped: %s)\n", why);
            have_torch = 0;
        }
        if (have_t16 && !rc && peer_round(&peer16, steps, pt16 + (size_t)q * steps, sum(s, steps), why, sizeof why)) {
            if (!json) printf("(PyTorch bf16 autocast stopped: %s)\n", why);
            have_t16 = 0;
        }
    }
    double peak1 = bench_fma_peak(threads, 0.2, NULL), peak = peak0 > peak1 ? peak0 : peak1;
    torch_peer pinfo = peer; /* version, attention, threads: kept for the report */
    if (have_torch) bench_peer_stop(&peer.io);
    if (have_t16) bench_peer_stop(&peer16.io);
    if (rc) {
        fprintf(stderr, "longattn bench train: %s\n", la_errmsg());
    } else {
        int ns = steps * rounds;
        la_model_timing tm;
        la_model_get_timing(m, &tm);
        double wall = sum(st, ns);
        double step_s = bench_median(st, ns);
        double tps = (double)N * ns / wall;
        double attn = tm.attn_s / wall, mm = tm.matmul_s / wall;
        double fmm, fat;
        count_flops(c, sp, B, T, &fmm, &fat);
        double flops = fmm + (fat > 0 ? fat : 0), gflops = flops * ns / wall / 1e9;
        /* per CPU-second against one thread's share of the peak: what the cores did while
         * they ran this process, which a shared machine distorts much less than wall time */
        double gcpu = flops * ns / our_cpu / 1e9;
        double ttps = have_torch ? (double)N * ns / sum(pt, ns) : 0;
        double t16tps = have_t16 ? (double)N * ns / sum(pt16, ns) : 0;
        const char *optn = opt == LA_OPT_MUON ? "muon" : "adamw";
        double f32_tps = tr32 ? (double)N * ns / sum(ft, ns) : 0;
        if (json) {
            printf("{\"tokens_per_s\": %.1f, \"step_s\": %.4f, \"attention_share\": %.4f, "
                   "\"matmul_share\": %.4f, \"flops_per_step\": %.0f, \"flops_matmul_per_step\": %.0f, "
                   "\"flops_attention_per_step\": %.0f, \"gflops\": %.2f, \"fma_peak_gflops\": %.2f, "
                   "\"peak_fraction\": %.4f, \"threads\": %d, \"tokens_per_cpu_s\": %.1f, "
                   "\"gflops_per_cpu_s\": %.2f, \"peak_fraction_cpu\": %.4f, ",
                   tps, step_s, attn, mm, flops, fmm, fat, gflops, peak, peak > 0 ? gflops / peak : 0,
                   threads, (double)N * ns / our_cpu, gcpu, peak > 0 ? gcpu / (peak / threads) : 0);
            if (tr32)
                printf("\"f32\": {\"tokens_per_s\": %.1f, \"ratio\": %.4f, \"round_ratio_min\": %.4f, "
                       "\"round_ratio_max\": %.4f}, ",
                       f32_tps, tps / f32_tps, f32_ratio_min, f32_ratio_max);
            if (have_torch)
                printf("\"torch\": {\"version\": \"%s\", \"attention\": \"%s\", \"threads\": %d, "
                       "\"tokens_per_s\": %.1f, \"ratio\": %.4f, \"round_ratio_min\": %.4f, "
                       "\"round_ratio_max\": %.4f, \"tokens_per_cpu_s\": %.1f, \"cpu_ratio\": %.4f}, ",
                       pinfo.version, pinfo.attn, pinfo.threads, ttps, tps / ttps,
                       pinfo.rmin, pinfo.rmax, (double)N * ns / pinfo.cpu, pinfo.cpu / our_cpu);
            else {
                printf("\"torch\": null, \"torch_skipped\": \"");
                for (const char *p = why; *p; p++)
                    if (*p == '"' || *p == '\\') printf("\\%c", *p);
                    else if ((unsigned char)*p >= 0x20) putchar(*p);
                printf("\", ");
            }
            if (have_t16)
                printf("\"torch_autocast_bf16\": {\"attention\": \"%s\", \"tokens_per_s\": %.1f, \"ratio\": %.4f, "
                       "\"round_ratio_min\": %.4f, \"round_ratio_max\": %.4f, \"cpu_ratio\": %.4f}, ",
                       peer16.attn, t16tps, tps / t16tps, peer16.rmin, peer16.rmax, peer16.cpu / our_cpu);
            printf("\"config\": {\"n_layer\": %d, \"d_model\": %d, "
                   "\"n_head\": %d, \"d_ff\": %d, \"vocab\": %d, \"T\": %d, \"B\": %d, "
                   "\"spec\": \"%s\", \"optimizer\": \"%s\", \"precision\": \"%s\", \"steps\": %d, "
                   "\"rounds\": %d}}\n",
                   c->n_layer, c->d_model, c->n_head, c->d_ff, c->vocab, T, B, c->spec, optn, la_dtype_name(prec),
                   steps, rounds);
        } else {
            printf("train: %d layers, d_model %d, %d heads, T %d, B %d, %s, %s, %s, %d threads\n", c->n_layer,
                   c->d_model, c->n_head, T, B, c->spec, optn, la_dtype_name(prec), threads);
            printf("  %.0f tokens/s, median step %.3f s over %d steps (%d rounds); %.0f tokens per CPU-second\n",
                   tps, step_s, ns, rounds, (double)N * ns / our_cpu);
            printf("  share of step time: attention %.1f%%, matrix products %.1f%%, other %.1f%%\n",
                   100 * attn, 100 * mm, 100 * (1 - attn - mm));
            printf("  %.3g GFLOP per step (matrix products %.3g, attention %.3g%s): %.1f GFLOP/s = "
                   "%.1f%% of the FMA peak %.1f GFLOP/s\n",
                   flops / 1e9, fmm / 1e9, fat > 0 ? fat / 1e9 : 0.0, fat < 0 ? ", pattern not counted" : "",
                   gflops, peak > 0 ? 100 * gflops / peak : 0.0, peak);
            printf("  per CPU-second (all threads): %.1f GFLOP = %.1f%% of one thread's share of the peak (%.1f)\n",
                   gcpu, peak > 0 ? 100 * gcpu / (peak / threads) : 0.0, peak / threads);
#ifdef LA_PROFILE
            printf("  profile (-DLA_PROFILE laps over the timed steps): wall share, wall ms/step, CPU share "
                   "(all threads), CPU ms/step\n");
            double tot = 0, cpu = 0;
            for (int k = 0; k < LA_PROF_N; k++) tot += la_prof_s[k], cpu += la_prof_cpu[k];
            for (int k = 0; k < LA_PROF_N; k++)
                printf("    %-46s %6.1f%% %9.2f %6.1f%% %9.2f\n", la_prof_names[k], 100 * la_prof_s[k] / wall,
                       1e3 * la_prof_s[k] / ns, 100 * la_prof_cpu[k] / cpu, 1e3 * la_prof_cpu[k] / ns);
            printf("    %-46s %6.1f%%\n", "(wall time not covered by the laps)", 100 * (1 - tot / wall));
            printf("    matrix products: %.1f GFLOP per CPU-second; attention: %.1f\n",
                   fmm * ns / la_prof_cpu[LA_PROF_MATMUL] / 1e9,
                   fat > 0 ? fat * ns / la_prof_cpu[LA_PROF_ATTN] / 1e9 : 0.0);
#endif
            if (tr32)
                printf("  float32 trainer, same rounds: %.0f tokens/s; %s / f32: %.2fx tokens/s (rounds: %.2fx .. "
                       "%.2fx)\n", f32_tps, la_dtype_name(prec), tps / f32_tps, f32_ratio_min, f32_ratio_max);
            if (have_torch) {
                printf("  PyTorch %s eager (%s, %d threads): %.0f tokens/s; %.0f tokens per CPU-second\n",
                       pinfo.version, pinfo.attn, pinfo.threads, ttps, (double)N * ns / pinfo.cpu);
                printf("  ours / PyTorch: %.2fx tokens/s (rounds: %.2fx .. %.2fx); %.2fx per CPU-second\n",
                       tps / ttps, pinfo.rmin, pinfo.rmax, pinfo.cpu / our_cpu);
            }
            if (have_t16)
                printf("  PyTorch bf16 autocast (%s): %.0f tokens/s; ours (%s) / autocast: %.2fx tokens/s "
                       "(rounds: %.2fx .. %.2fx); %.2fx per CPU-second\n",
                       peer16.attn, t16tps, la_dtype_name(prec), tps / t16tps, peer16.rmin, peer16.rmax,
                       peer16.cpu / our_cpu);
        }
    }
    free(st);
    free(pt);
    free(pt16);
    free(ft);
    la_trainer_free(tr32);
    la_model_free(m32);
    free(tok);
    free(tgt);
    la_trainer_free(tr);
    la_model_free(m);
    return rc;
}
