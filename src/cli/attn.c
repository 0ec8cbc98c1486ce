/* attn.c -- `longattn attn`: run the fused attention kernel on NumPy .npy files so users can
 * check it against their own PyTorch / NumPy code.
 *
 *   longattn attn --spec SPEC --q q.npy --k k.npy --v v.npy --out out.npy
 *                 [--dout dout.npy] [--pos0 N] [--doc-ids docs.npy] [--logn-s s.npy]
 *                 [--stats] [--threads N]
 *
 * Writes out.npy (at --out) and lse.npy (row statistic) in the folder of --out; with
 * --dout also dq.npy, dk.npy, dv.npy (and dlogn_s.npy for logn) there; with --stats
 * entropy.npy and key_mass.npy. Exit codes: 0 ok, 2 bad usage (options, spec string),
 * 1 runtime errors (unreadable or mismatched files, kernel failures).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "longattn.h"

#define CMD "attn"

static void usage(FILE *f) {
    static const cli_opt opts[] = {
        {"--spec SPEC", "attention spec string, e.g. 'softmax+sinv(tau=10)+prope(p=0.5)+causal'"},
        {"--q FILE", "queries, shape (B, H, T, D) or (H, T, D) meaning B = 1"},
        {"--k FILE", "keys, shape (B, Hkv, S, D) or (Hkv, S, D); H % Hkv == 0"},
        {"--v FILE", "values, the shape of --k"},
        {"--out FILE", "output (same shape as q); lse.npy (row log-sum-exp, shape of q without D;\n"
                       "-inf for a row with no visible key) is written next to it"},
        {"--dout FILE", "gradient of the loss w.r.t. out (shape of q): also writes dq.npy, dk.npy,\n"
                        "dv.npy (and dlogn_s.npy with logn) in the folder of --out"},
        {"--pos0 N", "position of query 0 (default S - T: the last query sees the last key)"},
        {"--doc-ids FILE", "float32 holding integer document ids, shape (B, S): packed sequences;\n"
                           "no query sees another document, positions restart at each document"},
        {"--logn-s FILE", "per-head s_h of logn, shape (H,)"},
        {"--stats", "also write entropy.npy (row entropy, nats) and key_mass.npy (B, H, S)"},
        {"--threads N", "OpenMP threads (default: OpenMP's choice)"},
        {NULL, NULL},
    };
    cli_help(f,
             "longattn attn --spec SPEC --q q.npy --k k.npy --v v.npy --out out.npy\n"
             "              [--dout dout.npy] [--pos0 N] [--doc-ids docs.npy]\n"
             "              [--logn-s s.npy] [--stats] [--threads N]",
             "Runs the fused attention kernel on float32 .npy files (np.save(path, x.astype(np.float32))).\n"
             "Every option also takes the form --opt=VALUE.",
             opts, "Exit status: 0 ok, 1 runtime error (files), 2 bad usage (options, spec).");
}

typedef struct {
    const char *path;
    float *data;
    int ndim;
    int64_t shape[8];
} npy_t;

static void shape_str(const npy_t *a, char *buf, size_t n) {
    size_t len = 0;
    len += (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < a->ndim && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%lld%s", (long long)a->shape[i],
                                a->ndim == 1 ? "," : (i + 1 < a->ndim ? ", " : ""));
    if (len < n) snprintf(buf + len, n - len, ")");
}

static int load(npy_t *a, const char *path, const char *what) {
    a->path = path;
    a->data = NULL;
    la_status st = la_npy_read_f32(path, &a->data, &a->ndim, a->shape);
    if (st != LA_OK) {
        fprintf(stderr, "longattn attn: cannot read %s (%s): %s\n", what, path, la_errmsg());
        return 1;
    }
    return 0;
}

/* Path of `name` in the folder of `out`. */
static void sibling(const char *out, const char *name, char *buf, size_t n) {
    const char *slash = strrchr(out, '/');
    if (!slash) snprintf(buf, n, "%s", name);
    else snprintf(buf, n, "%.*s/%s", (int)(slash - out), out, name);
}

static int save(const char *path, const float *x, int ndim, const int64_t *shape) {
    if (la_npy_write_f32(path, x, ndim, shape) != LA_OK) {
        fprintf(stderr, "longattn attn: %s\n", la_errmsg());
        return 1;
    }
    return 0;
}


static int shape_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int shape_fail(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "longattn attn: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    return 1;
}

int cli_attn(int argc, char **argv) {
    const char *spec_s = NULL, *qp = NULL, *kp = NULL, *vp = NULL, *outp = NULL, *doutp = NULL, *docp = NULL,
               *lognp = NULL, *pos0_s = NULL, *thr_s = NULL;
    int stats = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--stats")) {
            stats = 1;
            continue;
        }
        static const char *names[] = {"--spec", "--q", "--k", "--v", "--out", "--dout", "--doc-ids", "--logn-s",
                                      "--pos0", "--threads"};
        const char **slots[] = {&spec_s, &qp, &kp, &vp, &outp, &doutp, &docp, &lognp, &pos0_s, &thr_s};
        int hit = -1;
        const char *val = NULL;
        for (int n = 0; n < (int)(sizeof names / sizeof names[0]); n++) {
            size_t l = strlen(names[n]);
            if (!strncmp(a, names[n], l) && (a[l] == '\0' || a[l] == '=')) {
                hit = n;
                if (a[l] == '=') val = a + l + 1;
                else if (i + 1 < argc) val = argv[++i];
                else return cli_usage_error(CMD, "option %s needs a value", names[n]);
                break;
            }
        }
        if (hit < 0)
            return cli_usage_error(CMD, "unknown option '%s'; valid: --spec --q --k --v --out --dout --pos0 "
                                        "--doc-ids --logn-s --stats --threads --help",
                                   a);
        if (*slots[hit]) return cli_usage_error(CMD, "option %s given twice", names[hit]);
        *slots[hit] = val;
    }
    if (!spec_s || !qp || !kp || !vp || !outp)
        return cli_usage_error(CMD, "missing required option %s",
                               !spec_s ? "--spec SPEC" : !qp ? "--q q.npy" : !kp ? "--k k.npy" : !vp ? "--v v.npy"
                                                                                                   : "--out out.npy");
    la_spec spec;
    if (la_spec_parse(spec_s, &spec) != LA_OK) return cli_usage_error(CMD, "%s", la_errmsg());
    long long pos0 = LA_POS0_AUTO, nthreads = 0;
    if (pos0_s && cli_parse_int(pos0_s, -(1LL << 62), 1LL << 62, &pos0))
        return cli_usage_error(CMD, "--pos0 '%s' is not an integer", pos0_s);
    if (thr_s && cli_parse_int(thr_s, 1, 4096, &nthreads))
        return cli_usage_error(CMD, "--threads '%s' is not an integer in 1..4096", thr_s);

    int rc = 1;
    npy_t q = {0}, k = {0}, v = {0}, dout = {0}, docs = {0}, ls = {0};
    float *out = NULL, *lse = NULL, *dq = NULL, *dk = NULL, *dv = NULL, *ent = NULL, *mass = NULL, *dls = NULL;
    int32_t *doc_ids = NULL;
    char sq[128], sk[128], sv[128], sx[128];
    if (load(&q, qp, "--q") || load(&k, kp, "--k") || load(&v, vp, "--v")) goto done;
    if (doutp && load(&dout, doutp, "--dout")) goto done;
    if (docp && load(&docs, docp, "--doc-ids")) goto done;
    if (lognp && load(&ls, lognp, "--logn-s")) goto done;
    shape_str(&q, sq, sizeof sq);
    shape_str(&k, sk, sizeof sk);
    shape_str(&v, sv, sizeof sv);

    /* shapes: q (B,H,T,D) or (H,T,D); k, v (B,Hkv,S,D) or (Hkv,S,D) */
    const npy_t *qkv[3] = {&q, &k, &v};
    const char *role[3] = {"q (B, H, T, D) or (H, T, D)", "k (B, Hkv, S, D) or (Hkv, S, D)",
                           "v (B, Hkv, S, D) or (Hkv, S, D)"};
    for (int t = 0; t < 3; t++)
        if (qkv[t]->ndim != 3 && qkv[t]->ndim != 4) {
            char s[128];
            shape_str(qkv[t], s, sizeof s);
            rc = shape_fail("%s has shape %s (%d dimensions); expected %s", qkv[t]->path, s, qkv[t]->ndim, role[t]);
            goto done;
        }
    int64_t B = q.ndim == 4 ? q.shape[0] : 1, H = q.shape[q.ndim - 3], T = q.shape[q.ndim - 2],
            D = q.shape[q.ndim - 1];
    int64_t Bk = k.ndim == 4 ? k.shape[0] : 1, Hkv = k.shape[k.ndim - 3], S = k.shape[k.ndim - 2],
            Dk = k.shape[k.ndim - 1];
    if (v.ndim != k.ndim || memcmp(v.shape, k.shape, sizeof(int64_t) * (size_t)k.ndim)) {
        rc = shape_fail("%s has shape %s but %s has shape %s: k and v must have the same shape (B, Hkv, S, D)", vp,
                        sv, kp, sk);
        goto done;
    }
    if (Bk != B) {
        rc = shape_fail("%s has shape %s (B = %lld) but %s has shape %s (B = %lld): the batch sizes must agree", qp,
                        sq, (long long)B, kp, sk, (long long)Bk);
        goto done;
    }
    if (Dk != D) {
        rc = shape_fail("%s has shape %s (D = %lld) but %s has shape %s (D = %lld): q and k must have the same "
                        "head dimension D",
                        qp, sq, (long long)D, kp, sk, (long long)Dk);
        goto done;
    }
    if (B < 1 || H < 1 || T < 1 || D < 1 || Hkv < 1 || S < 1) {
        rc = shape_fail("%s has shape %s and %s has shape %s: every dimension must be >= 1", qp, sq, kp, sk);
        goto done;
    }
    if (H % Hkv) {
        rc = shape_fail("%s has H = %lld query heads but %s has Hkv = %lld kv heads: H must be a multiple of Hkv "
                        "(grouped-query attention)",
                        qp, (long long)H, kp, (long long)Hkv);
        goto done;
    }
    if (B > INT_MAX || H > INT_MAX || T > INT_MAX || S > INT_MAX || D > INT_MAX) {
        rc = shape_fail("%s / %s: dimensions beyond 2^31 are not supported", qp, kp);
        goto done;
    }
    if (doutp) {
        shape_str(&dout, sx, sizeof sx);
        if (dout.ndim != q.ndim || memcmp(dout.shape, q.shape, sizeof(int64_t) * (size_t)q.ndim)) {
            rc = shape_fail("%s has shape %s but %s has shape %s: dout must have the shape of q (and of out)", doutp,
                            sx, qp, sq);
            goto done;
        }
    }
    if (docp) {
        shape_str(&docs, sx, sizeof sx);
        int ok = (docs.ndim == 2 && docs.shape[0] == B && docs.shape[1] == S) ||
                 (B == 1 && docs.ndim == 1 && docs.shape[0] == S);
        if (!ok) {
            rc = shape_fail("%s has shape %s; --doc-ids must have shape (B, S) = (%lld, %lld) to match %s", docp, sx,
                            (long long)B, (long long)S, kp);
            goto done;
        }
        doc_ids = malloc(sizeof(int32_t) * (size_t)(B * S));
        if (!doc_ids) goto oom;
        for (int64_t i = 0; i < B * S; i++) {
            float x = docs.data[i];
            if (!(x == floorf(x)) || !(fabsf(x) <= 16777216.0f)) {
                rc = shape_fail("%s: entry %lld is %g; document ids must be whole numbers (|id| <= 2^24, exact in "
                                "float32)",
                                docp, (long long)i, (double)x);
                goto done;
            }
            doc_ids[i] = (int32_t)x;
        }
    }
    if (lognp) {
        shape_str(&ls, sx, sizeof sx);
        if (ls.ndim != 1 || ls.shape[0] != H) {
            rc = shape_fail("%s has shape %s; --logn-s must have shape (H,) = (%lld,) for the %lld query heads of %s",
                            lognp, sx, (long long)H, (long long)H, qp);
            goto done;
        }
    }

    la_shape shape = {(int)B, (int)H, (int)Hkv, (int)T, (int)S, (int)D, pos0_s ? (int64_t)pos0 : LA_POS0_AUTO};
    size_t nq = (size_t)(B * H * T * D), nk = (size_t)(B * Hkv * S * D), nr = (size_t)(B * H * T);
    out = malloc(sizeof(float) * nq);
    lse = malloc(sizeof(float) * nr);
    if (!out || !lse) goto oom;
    la_attn_opts opts = la_attn_opts_default();
    opts.doc_ids = doc_ids;
    opts.logn_s = lognp ? ls.data : NULL;
    opts.n_threads = (int)nthreads;
    if (stats) {
        ent = malloc(sizeof(float) * nr);
        mass = malloc(sizeof(float) * (size_t)(B * H * S));
        if (!ent || !mass) goto oom;
        opts.row_entropy = ent;
        opts.key_mass = mass;
    }
    opts.ws = la_workspace_new();
    la_status st = la_attn_forward(&spec, &shape, q.data, k.data, v.data, out, lse, &opts);
    if (st != LA_OK) {
        la_workspace_free(opts.ws);
        rc = shape_fail("attention forward failed (%s): %s", la_status_name(st), la_errmsg());
        goto done;
    }
    if (doutp) {
        dq = malloc(sizeof(float) * nq);
        dk = malloc(sizeof(float) * nk);
        dv = malloc(sizeof(float) * nk);
        dls = malloc(sizeof(float) * (size_t)H);
        if (!dq || !dk || !dv || !dls) {
            la_workspace_free(opts.ws);
            goto oom;
        }
        opts.row_entropy = opts.key_mass = NULL;
        opts.dlogn_s = spec.xform == LA_XF_LOGN ? dls : NULL;
        st = la_attn_backward(&spec, &shape, q.data, k.data, v.data, out, lse, dout.data, dq, dk, dv, &opts);
        if (st != LA_OK) {
            la_workspace_free(opts.ws);
            rc = shape_fail("attention backward failed (%s): %s", la_status_name(st), la_errmsg());
            goto done;
        }
    }
    la_workspace_free(opts.ws);

    char path[4200];
    int64_t rshape[3] = {B, H, T}, mshape[3] = {B, H, S};
    int rnd = q.ndim == 4 ? 3 : 2; /* lse follows q's rank without D */
    const int64_t *rsh = q.ndim == 4 ? rshape : rshape + 1;
    if (save(outp, out, q.ndim, q.shape)) goto done;
    sibling(outp, "lse.npy", path, sizeof path);
    if (save(path, lse, rnd, rsh)) goto done;
    if (stats) {
        sibling(outp, "entropy.npy", path, sizeof path);
        if (save(path, ent, rnd, rsh)) goto done;
        sibling(outp, "key_mass.npy", path, sizeof path);
        if (save(path, mass, rnd, q.ndim == 4 ? mshape : mshape + 1)) goto done;
    }
    if (doutp) {
        sibling(outp, "dq.npy", path, sizeof path);
        if (save(path, dq, q.ndim, q.shape)) goto done;
        sibling(outp, "dk.npy", path, sizeof path);
        if (save(path, dk, k.ndim, k.shape)) goto done;
        sibling(outp, "dv.npy", path, sizeof path);
        if (save(path, dv, v.ndim, v.shape)) goto done;
        if (spec.xform == LA_XF_LOGN) {
            int64_t hs[1] = {H};
            sibling(outp, "dlogn_s.npy", path, sizeof path);
            if (save(path, dls, 1, hs)) goto done;
        }
    }
    rc = 0;
    goto done;
oom:
    fprintf(stderr, "longattn attn: out of memory\n");
    rc = 1;
done:
    free(q.data), free(k.data), free(v.data), free(dout.data), free(docs.data), free(ls.data);
    free(out), free(lse), free(dq), free(dk), free(dv), free(ent), free(mass), free(dls), free(doc_ids);
    return rc;
}
