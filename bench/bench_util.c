/* bench_util.c -- median and peak-RSS probes shared by the benchmarks. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longattn.h"

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
