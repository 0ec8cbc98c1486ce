/* bench_util.c -- median and peak-RSS probes shared by the benchmarks. */
#include "bench.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longattn.h"
#include <omp.h>

#include "cli/cli.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Value in bytes of a "Key:   1234 kB" line of /proc/self/status, or -1. */
static int64_t status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    size_t klen = strlen(key);
    int64_t out = -1;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, key, klen) && line[klen] == ':') {
            long long kb;
            if (sscanf(line + klen + 1, "%lld", &kb) == 1) out = (int64_t)kb * 1024;
            break;
        }
    }
    fclose(f);
    return out;
}

int64_t bench_mem_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok) return -1;
    /* after the reset VmHWM equals the current VmRSS */
    return status_kb("VmHWM");
}

int64_t bench_mem_peak(void) { return status_kb("VmHWM"); }

/* Visible (query, key) pairs of one head, from SPEC 2, for query positions pos0 .. pos0+T-1
 * and keys 0 .. S-1. Exact integer count (double holds it exactly below 2^53). */
double bench_count_pairs(const la_spec *sp, int T, int S, int64_t pos0) {
    double total = 0;
    for (int i = 0; i < T; i++) {
        int64_t p = pos0 + i, lo = 0, hi = S - 1, n;
        switch (sp->pattern) {
        case LA_PAT_FULL:
            n = S;
            break;
        case LA_PAT_CAUSAL:
            hi = p < hi ? p : hi;
            n = hi >= lo ? hi - lo + 1 : 0;
            break;
        case LA_PAT_WINDOW:
            hi = p < hi ? p : hi;
            lo = p - sp->window + 1 > 0 ? p - sp->window + 1 : 0;
            n = hi >= lo ? hi - lo + 1 : 0;
            break;
        case LA_PAT_SINKS: {
            hi = p < hi ? p : hi;
            lo = p - sp->window + 1 > 0 ? p - sp->window + 1 : 0;
            n = hi >= lo ? hi - lo + 1 : 0;
            int64_t s_hi = sp->sinks - 1 < hi ? sp->sinks - 1 : hi; /* sinks 0..n-1 */
            int64_t s_end = s_hi < lo - 1 ? s_hi : lo - 1;           /* not already in the window */
            if (s_end >= 0) n += s_end + 1;
            break;
        }
        default:
            return -1; /* global: not used by this benchmark */
        }
        total += (double)n;
    }
    return total;
}

/* ---- a helper process spoken to by lines (the PyTorch peers) ---- */

void bench_peer_reason(const bench_peer *p, char *why, size_t n) {
    FILE *f = p->errpath[0] ? fopen(p->errpath, "r") : NULL;
    char line[512], last[512] = "";
    if (f) {
        while (fgets(line, sizeof line, f))
            if (line[0] != '\n') snprintf(last, sizeof last, "%s", line);
        fclose(f);
    }
    last[strcspn(last, "\n")] = 0;
    int st; /* killed: say so (its last stderr line is then some earlier warning) */
    if (p->pid > 0 && waitpid(p->pid, &st, WNOHANG) == p->pid && WIFSIGNALED(st))
        snprintf(why, n, "killed by signal %d (%s): for SIGKILL usually the out-of-memory killer, see dmesg",
                 WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(why, n, "%s", last[0] ? last : "the process exited without a message");
}

void bench_peer_stop(bench_peer *p) {
    if (p->to) {
        fputs("quit\n", p->to);
        fclose(p->to);
    }
    if (p->from) fclose(p->from);
    if (p->pid > 0) {
        int st;
        waitpid(p->pid, &st, 0);
    }
    if (p->errpath[0]) unlink(p->errpath);
    memset(p, 0, sizeof *p);
}

int bench_peer_start(bench_peer *p, char *const argv[], char *line, size_t n, char *why, size_t wn) {
    static int serial;
    memset(p, 0, sizeof *p);
    int in[2], out[2];
    if (pipe(in)) {
        snprintf(why, wn, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe(out)) {
        snprintf(why, wn, "pipe: %s", strerror(errno));
        close(in[0]), close(in[1]);
        return -1;
    }
    snprintf(p->errpath, sizeof p->errpath, "/tmp/la_bench_peer_%d_%d.err", (int)getpid(), serial++);
    /* a peer that dies (PyTorch's FlexAttention forward at T = 16384 was killed by the
     * kernel's OOM killer on a 23 GiB machine) must cost its rows, not the benchmark: without
     * this the "quit" written to its closed pipe raised SIGPIPE and ended bench silently */
    signal(SIGPIPE, SIG_IGN);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, wn, "fork: %s", strerror(errno));
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        p->errpath[0] = 0;
        return -1;
    }
    if (pid == 0) {
        int e = open(p->errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (e >= 0) dup2(e, 2);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    p->pid = pid;
    p->to = fdopen(in[1], "w");
    p->from = fdopen(out[0], "r");
    if (!p->to || !p->from || !fgets(line, (int)n, p->from)) {
        if (p->to) fclose(p->to);
        else close(in[1]);
        p->to = NULL;
        bench_peer_reason(p, why, wn);
        bench_peer_stop(p);
        return -1;
    }
    line[strcspn(line, "\n")] = 0;
    return 0;
}

int bench_peer_ask(bench_peer *p, const char *cmd, char *line, size_t n) {
    if (!p->to || fprintf(p->to, "%s\n", cmd) < 0 || fflush(p->to)) return -1;
    if (!fgets(line, (int)n, p->from)) return -1;
    line[strcspn(line, "\n")] = 0;
    return 0;
}

void bench_find_script(const char *name, char *path, size_t n) {
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *sl = strrchr(exe, '/');
        if (sl) {
            *sl = 0;
            if ((size_t)snprintf(path, n, "%s/../bench/%s", exe, name) < n && access(path, R_OK) == 0) return;
        }
    }
    if ((size_t)snprintf(path, n, "bench/%s", name) >= n || access(path, R_OK) != 0) path[0] = 0;
}

double bench_read_bandwidth(int threads, size_t bytes, int reps) {
    const size_t n = bytes / sizeof(float) / 16 * 16;
    float *x = malloc(n * sizeof(float));
    if (!x || n == 0) {
        free(x);
        return -1;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = (float)(i & 1023) * 1e-3f; /* first touch by the reading thread */
    double best = 1e300, sink = 0;
    for (int r = 0; r <= reps; r++) {
        double t0 = cli_now(), total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            const int nt = omp_get_num_threads(), id = omp_get_thread_num();
            const size_t blk = n / 16, lo = blk * (size_t)id / (size_t)nt * 16, hi = blk * (size_t)(id + 1) / (size_t)nt * 16;
            float acc[16] = {0};
            for (size_t i = lo; i < hi; i += 16)
                for (int j = 0; j < 16; j++) acc[j] += x[i + (size_t)j];
            for (int j = 0; j < 16; j++) total += acc[j];
        }
        double t = cli_now() - t0;
        sink += total;
        if (r > 0 && t < best) best = t; /* pass 0 warms up */
    }
    free(x);
    if (sink == 12345.678) printf(" "); /* keep the sums alive */
    return (double)(n * sizeof(float)) / best / 1e9;
}
