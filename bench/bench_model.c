/* bench_model.c -- `longattn bench model`: a pretrained GGUF model end to end. Prefill
 * tokens/s of a prompt of n tokens (chunks of 512 through the full KV cache: sgemm on
 * weights dequantized per matrix, attention kernel over the cache), then decode tokens/s
 * at that context (one token per step: quantized mat-vec products, attention over n keys),
 * peak resident memory. When a Python with llama-cpp-python is given (--python, default
 * python3; skipped when `import llama_cpp` fails), the same file, lengths and thread count
 * are measured with llama.cpp in the same run, interleaved with ours length by length (so
 * that both see the same machine load; our OpenMP team is paused while llama.cpp runs), and
 * the ratios are printed.
 * The limit: decode is bound by memory traffic, so each row also reports the bytes one
 * decoded token reads (all weights + the KV cache at that context and element type) and
 * that traffic per second as a fraction of the streaming read bandwidth measured in the
 * same run (bench_read_bandwidth, the same thread count). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cli/cli.h"
#include "core/internal.h"
#include "model/kv_hook.h"

static const char *LLAMA_CPP_SCRIPT =
    "import random, resource, sys, time\n"
    "from llama_cpp import Llama\n"
    "path, threads, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])\n"
    "llm = Llama(model_path=path, n_ctx=n + k + 16, n_threads=threads, n_threads_batch=threads, n_batch=512,\n"
    "            verbose=False)\n"
    "rng = random.Random(0)\n"
    "toks = [rng.randrange(100, llm.n_vocab()) for _ in range(n)]\n"
    "t0 = time.perf_counter(); llm.eval(toks); t1 = time.perf_counter()\n"
    "for _ in range(k): llm.eval([rng.randrange(100, llm.n_vocab())])\n"
    "t2 = time.perf_counter()\n"
    "print(n / (t1 - t0), k / (t2 - t1), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)\n";

static int parse_list(const char *s, int *v, int max) {
    int n = 0;
    while (*s && n < max) {
        char *e;
        long x = strtol(s, &e, 10);
        if (e == s || x < 1 || x > (1 << 24)) return -1;
        v[n++] = (int)x;
        s = *e == ',' ? e + 1 : e;
        if (*e && *e != ',') return -1;
    }
    return n;
}

/* llama.cpp through python: prefill and decode tok/s and peak RSS; 0 on success */
static int run_llama_cpp(const char *py, const char *script, const char *model, int threads, int n, int k,
                         double *pre, double *dec, double *rss) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' %d %d %d 2>/dev/null", py, script, model, threads, n, k);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int ok = fscanf(p, "%lf %lf %lf", pre, dec, rss) == 3;
    return pclose(p) == 0 && ok ? 0 : -1;
}

/* Weight bytes one decoded token reads: every tensor of the file once, except the token
 * embedding when the model has a separate output matrix (then one row of it is read). */
static double decode_weight_bytes(const la_llama *m) {
    const la_gguf *g = la_llama_gguf(m);
    double b = 0;
    for (int64_t i = 0; i < la_gguf_n_tensors(g); i++) b += (double)la_gguf_tensor_at(g, i)->nbytes;
    const la_gguf_tensor *emb = la_gguf_find_tensor(g, "token_embd.weight");
    if (emb && la_gguf_find_tensor(g, "output.weight")) b -= (double)emb->nbytes;
    return b;
}

static const cli_doc DOC = {
    "longattn bench model [--model FILE.gguf] [--lens 512,4096,16384] [--threads 2]\n"
    "                     [--decode-tokens 16] [--python PY | --no-llama-cpp] [--keep-f32] [--x-q8]\n"
    "                     [--kv-type TYPE]",
    "Prefill tok/s at each length, decode tok/s at that context, peak memory; llama.cpp\n"
    "(llama-cpp-python importable by PY) on the same file and threads, interleaved, with ratios.\n"
    "Decode rows also give the bytes read per token (weights + KV cache) and that traffic as a\n"
    "fraction of the streaming read bandwidth measured in the same run.",
    NULL, 0,
};

int bench_model(int argc, char **argv) {
    const char *model = "data/models/SmolLM2-135M-Instruct.Q4_1.gguf", *py = "python3", *lens_s = NULL;
    int lens[8] = {512, 4096, 16384}, nlen = 3, threads = 2, k = 16, no_ref = 0, keep_f32 = 0, x_q8 = 0;
    const char *kv_type = NULL;
    cli_arg args[] = {
        CLI_A_STR("--model FILE.gguf", "the model (default data/models/SmolLM2-135M-Instruct.Q4_1.gguf)", &model),
        CLI_A_STR("--lens A,B,...", "context lengths (default 512,4096,16384)", &lens_s),
        CLI_A_INT("--threads N", "threads for both (default 2)", &threads, 1, 1024),
        CLI_A_INT("--decode-tokens K", "tokens decoded one by one at each length (default 16)", &k, 1, 1 << 20),
        CLI_A_STR("--python PY", "a Python that imports llama_cpp (llama-cpp-python; default python3)", &py),
        CLI_A_FLAG("--no-llama-cpp", "do not run llama.cpp", &no_ref),
        CLI_A_FLAG("--keep-f32", "dequantize every weight matrix to float32 at load for prefill\n"
                                 "(faster prefill, ~4 bytes per parameter more memory)", &keep_f32),
        CLI_A_FLAG("--x-q8", "decode products quantize x to 8 bits per 32 values, as llama.cpp\n"
                             "does (la_llama_params.x_q8; faster, less exact)", &x_q8),
        CLI_A_STR("--kv-type TYPE", "KV cache element type: f32 | f16 | bf16 | int8 | int8(group=g)\n"
                                    "(default f16, the GGUF default)", &kv_type),
        CLI_A_END,
    };
    int prc = cli_parse("bench model", &DOC, args, argc, argv);
    if (prc >= 0) return prc;
    if (lens_s && (nlen = parse_list(lens_s, lens, 8)) < 1)
        return cli_usage_error("bench model", "--lens expects a list like 512,4096, got '%s'", lens_s);
    la_kv_params kv0 = la_kv_params_default();
    if (cli_kv_params("bench model", NULL, kv_type, la_llama_default_kv_type(), &kv0)) return 2;
    omp_set_num_threads(threads);
    char script[64] = "";
    int have_ref = 0;
    if (!no_ref) {
        char chk[1024];
        snprintf(chk, sizeof chk, "'%s' -c 'import llama_cpp' >/dev/null 2>&1", py);
        if (system(chk) == 0) {
            snprintf(script, sizeof script, "/tmp/la_bench_llamacpp_%d.py", (int)getpid());
            FILE *f = fopen(script, "w");
            if (f) {
                fputs(LLAMA_CPP_SCRIPT, f);
                fclose(f);
                have_ref = 1;
            }
        } else {
            printf("(llama.cpp not measured: '%s -c \"import llama_cpp\"' failed; pass --python PY)\n", py);
        }
    }
    int64_t base = bench_mem_reset();
    la_llama_params lp = la_llama_params_default();
    lp.keep_f32 = keep_f32;
    lp.x_q8 = x_q8;
    la_llama *m = NULL;
    if (la_llama_open(model, &lp, &m) != LA_OK) {
        fprintf(stderr, "longattn bench model: %s\n", la_errmsg());
        return 1;
    }
    const la_llama_config *c = la_llama_get_config(m);
    FILE *lf = fopen("/proc/loadavg", "r");
    double load = 0;
    if (lf) {
        if (fscanf(lf, "%lf", &load) != 1) load = 0;
        fclose(lf);
    }
    /* the machine's streaming read bandwidth, same threads, 512 MB (>> the caches) */
    const double bw = bench_read_bandwidth(threads, (size_t)512 << 20, 3);
    bench_mem_reset(); /* the probe's 512 MB buffer is freed: not part of the first row's peak */
    printf("model %s (%s, %d layers, %d/%d heads, D %d), %d threads, decode %d tokens after each prefill%s%s, "
           "KV cache %s; load average %.1f; streaming read bandwidth %.1f GB/s\n",
           model, c->arch, c->n_layer, c->n_head, c->n_head_kv, c->head_dim, threads, k,
           keep_f32 ? ", float32 weight copies" : "", x_q8 ? ", x quantized to 8 bits in decode products" : "",
           la_dtype_name(la_kv_params_type(&kv0)), load, bw);
    printf("%8s | %12s %12s %7s | %12s %12s %7s | %10s %10s\n", "tokens", "prefill tok/s", "llama.cpp", "ratio",
           "decode tok/s", "llama.cpp", "ratio", "peak MB", "llama.cpp");
    int rc = 0;
    for (int li = 0; li < nlen; li++) {
        const int n = lens[li];
        int32_t *tok = malloc(sizeof(int32_t) * (size_t)(n + k));
        float *logits = malloc(sizeof(float) * (size_t)c->n_vocab);
        la_rng r;
        la_rng_seed(&r, 1);
        for (int i = 0; i < n + k; i++) tok[i] = 100 + (int32_t)la_rng_below(&r, (uint64_t)(c->n_vocab - 100));
        la_kv_params kp = kv0;
        kp.max_tokens = n + k;
        la_llama_session *s = NULL;
        const int chunk = n < 512 ? n : 512;
        double t0 = 0, t1 = 0, t2 = 0, mm1 = 0, at1 = 0, mm2 = 0, at2 = 0;
        la_status st = la_llama_session_new(m, &kp, chunk, &s);
        if (st == LA_OK) {
            t0 = cli_now();
            for (int i = 0; st == LA_OK && i < n; i += chunk)
                st = la_llama_session_step(s, tok + i, n - i < chunk ? n - i : chunk, logits, 0);
            t1 = cli_now();
            la_llama_timing(m, &mm1, &at1);
            for (int i = 0; st == LA_OK && i < k; i++) st = la_llama_session_step(s, tok + n + i, 1, logits, 0);
            t2 = cli_now();
            la_llama_timing(m, &mm2, &at2);
        }
        int64_t peak = bench_mem_peak();
        la_llama_session_free(s);
        free(tok);
        free(logits);
        if (st != LA_OK) {
            fprintf(stderr, "longattn bench model: %s\n", la_errmsg());
            rc = 1;
            break;
        }
        double pre = n / (t1 - t0), dec = k / (t2 - t1), rpre = 0, rdec = 0, rrss = 0;
        /* our OpenMP workers must not hold the cores while llama.cpp runs: under a spinning
         * wait (OMP_WAIT_POLICY=ACTIVE, a large GOMP_SPINCOUNT) they would spin through the
         * whole child process. A soft pause (OpenMP 5.0) ends them; the next parallel region
         * starts a new team. Without a spinning wait this changes nothing measurable. */
        if (have_ref) omp_pause_resource_all(omp_pause_soft);
        int ref_ok = have_ref && run_llama_cpp(py, script, model, threads, n, k, &rpre, &rdec, &rrss) == 0;
        char a[32] = "-", b[32] = "-", cc[32] = "-", d[32] = "-", e[32] = "-";
        if (ref_ok) {
            snprintf(a, sizeof a, "%.1f", rpre);
            snprintf(b, sizeof b, "%.2fx", pre / rpre);
            snprintf(cc, sizeof cc, "%.1f", rdec);
            snprintf(d, sizeof d, "%.2fx", dec / rdec);
            snprintf(e, sizeof e, "%.0f", rrss / 1e6);
        }
        printf("%8d | %12.1f %12s %7s | %12.1f %12s %7s | %10.0f %10s\n", n, pre, a, b, dec, cc, d,
               peak > 0 ? (double)(peak) / 1e6 : -1.0, e);
        printf("         decode at %d: %.1f%% of the time in weight products, %.1f%% in attention (incl. the "
               "cache append)\n", n, 100 * (mm2 - mm1) / (t2 - t1), 100 * (at2 - at1) / (t2 - t1));
        /* bytes one decoded token reads: every weight once, the cache rows of ~n + k/2 tokens */
        la_kv_params kb = kv0;
        if (la_llama_kv_params(m, &kb) != LA_OK) kb.n_layers = 0;
        const double wbytes = decode_weight_bytes(m), cbytes = la_kv_bytes_per_token(&kb) * (n + k / 2.0);
        const double traffic = (wbytes + cbytes) * dec;
        printf("         decode at %d: reads %.1f MB per token (weights %.1f + KV cache %.1f, %s), %.2f GB/s = "
               "%.0f%% of the measured read bandwidth\n",
               n, (wbytes + cbytes) / 1e6, wbytes / 1e6, cbytes / 1e6, la_dtype_name(la_kv_params_type(&kb)),
               traffic / 1e9, bw > 0 ? 100 * traffic / (bw * 1e9) : -1.0);
        fflush(stdout);
        bench_mem_reset();
    }
    if (base > 0) printf("(peak MB: resident size of the whole process at its peak for that row: mapped weights "
                         "touched + buffers + KV cache)\n");
    if (*script) unlink(script);
    la_llama_free(m);
    return rc;
}
