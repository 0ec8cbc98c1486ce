/* attn.c -- `longattn attn`: run the fused attention kernel on NumPy .npy files so users can
 * check it against their own PyTorch / NumPy code.
 *
 *   longattn attn --spec SPEC --q q.npy --k k.npy --v v.npy --out out.npy
 *                 [--dout dout.npy] [--pos0 N] [--doc-ids docs.npy] [--logn-s s.npy]
 *                 [--stats] [--threads N] [--dtype f32|f16|bf16] [--seq-parallel]
 *
 * Writes out.npy (at --out) and lse.npy (row statistic) in the folder of --out; with
 * --dout also dq.npy, dk.npy, dv.npy (and dlogn_s.npy for logn) there; with --stats
 * entropy.npy and key_mass.npy. Exit codes: 0 ok, 2 bad usage (options, spec string),
 * 1 runtime errors (unreadable or mismatched files, kernel failures).
 *
 * --seq-parallel (issue 30): under mpirun the sequence is split over the ranks
 * (src/attn/ring.c); every rank reads the files, computes its rows, the rows are gathered
 * and rank 0 writes the same files as one process (bitwise equal). Each rank prints what
 * it did (time, bytes sent, time blocked in the ring) to stderr.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/ring.h"
#include "cli/cli.h"
#include "core/dist.h"
#include "core/half.h"
#include "core/internal.h"
#include "longattn.h"

#define CMD "attn"

static const cli_doc DOC = {
    "longattn attn --spec SPEC --q q.npy --k k.npy --v v.npy --out out.npy\n"
    "              [--dout dout.npy] [--pos0 N] [--doc-ids docs.npy]\n"
    "              [--logn-s s.npy] [--stats] [--threads N] [--dtype T]\n"
    "              [--seq-parallel]",
    "Runs the fused attention kernel on float32 .npy files (np.save(path, x.astype(np.float32))).\n"
    "Every option also takes the form --opt=VALUE.",
    "Exit status: 0 ok, 1 runtime error (files), 2 bad usage (options, spec).",
    1,
};

/* an option's value, which may be given once (const char **DEST) */
static int once_arg(const char *cmd, const char *opt, const char *val, void *dest) {
    if (*(const char **)dest) return cli_usage_error(cmd, "option %s given twice", opt);
    *(const char **)dest = val;
    return 0;
}

typedef struct {
    const char *path;
    float *data;
    int ndim;
    int64_t shape[8];
    char str[128]; /* the shape as Python prints it */
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
    shape_str(a, a->str, sizeof a->str);
    return 0;
}

/* Write x as `name` in the folder of `out` (NULL: as `out` itself). */
static int save(const char *out, const char *name, const float *x, int ndim, const int64_t *shape) {
    char buf[4200];
    const char *slash = strrchr(out, '/'), *path = buf;
    if (!name) path = out;
    else if (!slash) snprintf(buf, sizeof buf, "%s", name);
    else snprintf(buf, sizeof buf, "%.*s/%s", (int)(slash - out), out, name);
    if (la_npy_write_f32(path, x, ndim, shape) != LA_OK) {
        fprintf(stderr, "longattn attn: %s\n", la_errmsg());
        return 1;
    }
    return 0;
}


static int shape_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int shape_fail(const char *fmt, ...) {
    va_list ap;
    char buf[2048];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "longattn attn: %s\n", buf);
    la_fail(LA_EINVAL, "%s", buf); /* what the other ranks report (--seq-parallel) */
    return 1;
}

int cli_attn(int argc, char **argv) {
    const char *spec_s = NULL, *qp = NULL, *kp = NULL, *vp = NULL, *outp = NULL, *doutp = NULL, *docp = NULL,
               *lognp = NULL, *pos0_s = NULL, *thr_s = NULL, *dtype_s = NULL;
    int stats = 0, seqpar = 0, agreed = 0;
    cli_arg args[] = {
        CLI_A_FN("--spec SPEC", "attention spec string, e.g. 'softmax+sinv(tau=10)+prope(p=0.5)+causal'", once_arg,
                 &spec_s),
        CLI_A_FN("--q FILE", "queries, shape (B, H, T, D) or (H, T, D) meaning B = 1", once_arg, &qp),
        CLI_A_FN("--k FILE", "keys, shape (B, Hkv, S, D) or (Hkv, S, D); H % Hkv == 0", once_arg, &kp),
        CLI_A_FN("--v FILE", "values, the shape of --k", once_arg, &vp),
        CLI_A_FN("--out FILE", "output (same shape as q); lse.npy (shape of q without D) is written next to\n"
                               "it: per row the log-sum-exp (softmax), the threshold tau (entmax family)\n"
                               "or the mass sum_j p_ij (sigmoid); -inf for a row with no visible key",
                 once_arg, &outp),
        CLI_A_FN("--dout FILE", "gradient of the loss w.r.t. out (shape of q): also writes dq.npy, dk.npy,\n"
                                "dv.npy (and dlogn_s.npy with logn) in the folder of --out", once_arg, &doutp),
        CLI_A_FN("--pos0 N", "position of query 0 (default S - T: the last query sees the last key)", once_arg, &pos0_s),
        CLI_A_FN("--doc-ids FILE", "float32 holding integer document ids, shape (B, S): packed sequences;\n"
                                   "no query sees another document, positions restart at each document",
                 once_arg, &docp),
        CLI_A_FN("--logn-s FILE", "per-head s_h of the spec's logn, shape (H,) (only with logn)", once_arg, &lognp),
        CLI_A_FLAG("--stats", "also write entropy.npy (row entropy, nats) and key_mass.npy (B, H, S)", &stats),
        CLI_A_FN("--threads N", "OpenMP threads (default: OpenMP's choice)", once_arg, &thr_s),
        CLI_A_FN("--dtype T", "element type of q, k, v (and dout) in the kernel: f32 (default), f16 or\n"
                              "bf16. The .npy files stay float32 and are rounded to T (nearest even),\n"
                              "as if stored in it; products accumulate in float32, and out, lse and\n"
                              "the gradients are float32 (la_attn_forward_typed)", once_arg, &dtype_s),
        CLI_A_FLAG("--seq-parallel", "split the sequence over the ranks of mpirun (T = S, pos0 0; not with\n"
                                     "--stats): each rank computes its zigzag rows, K/V travel around the ring;\n"
                                     "outputs bitwise equal to one process; each rank prints its time, bytes\n"
                                     "sent and time blocked to stderr. Alone: one rank", &seqpar),
        CLI_A_END,
    };
    int prc = cli_parse(CMD, &DOC, args, argc, argv);
    if (prc >= 0) return prc;
    if (!spec_s || !qp || !kp || !vp || !outp)
        return cli_usage_error(CMD, "missing required option %s",
                               !spec_s ? "--spec SPEC" : !qp ? "--q q.npy" : !kp ? "--k k.npy" : !vp ? "--v v.npy"
                                                                                                   : "--out out.npy");
    la_spec spec;
    if (la_spec_parse(spec_s, &spec) != LA_OK) return cli_usage_error(CMD, "%s", la_errmsg());
    /* what the kernel would refuse for want of an attn option, in attn's terms */
    if (spec.norm == LA_NORM_SIGMOID && !spec.sig_b_set && spec.train_len < 2)
        return cli_usage_error(CMD, "--spec '%s': sigmoid without b uses b = -ln(train); write sigmoid(b=-5.5) "
                               "or sigmoid(train=256)", spec_s);
    if (spec.xform == LA_XF_LOGN && !lognp && spec.logn_s == 0 && spec.train_len < 2)
        return cli_usage_error(CMD, "--spec '%s': logn needs its scale s: give --logn-s s.npy (one per head), "
                               "logn(s=0.3), or logn(train=N) for s = 1/log(N)", spec_s);
    if (lognp && spec.xform != LA_XF_LOGN)
        return cli_usage_error(CMD, "--logn-s sets the per-head s of the logn transform and --spec '%s' has no "
                               "logn: drop --logn-s or add logn to the spec", spec_s);
    if (spec.norm == LA_NORM_ASENTMAX)
        return cli_usage_error(CMD, "--spec '%s': asentmax needs per-query scales (as_beta, as_gamma) that attn "
                               "has no option for; pass them through la_attn_opts in C or Python's "
                               "attention(..., as_beta=, as_gamma=)", spec_s);
    /* the files written next to --out must be neither --out nor an input (the same file by
     * device and inode), and --out must be a file in a folder, not a device such as /dev/stdout */
    const char *extra[7] = {"lse.npy", stats ? "entropy.npy" : NULL, stats ? "key_mass.npy" : NULL,
                            doutp ? "dq.npy" : NULL, doutp ? "dk.npy" : NULL, doutp ? "dv.npy" : NULL,
                            doutp && spec.xform == LA_XF_LOGN ? "dlogn_s.npy" : NULL};
    const char *base = strrchr(outp, '/') ? strrchr(outp, '/') + 1 : outp;
    const char *inputs[6] = {qp, kp, vp, doutp, docp, lognp};
    static const char *const in_opt[6] = {"--q", "--k", "--v", "--dout", "--doc-ids", "--logn-s"};
    struct stat xs, is;
    if (stat(outp, &xs) == 0 && !S_ISREG(xs.st_mode))
        return cli_usage_error(CMD, "--out %s is not a file: attn writes lse.npy and the other outputs into the "
                               "folder of --out; give a file name such as out/out.npy", outp);
    for (int i = 0; i < 7; i++) {
        if (!extra[i]) continue;
        if (!strcmp(base, extra[i]))
            return cli_usage_error(CMD, "--out %s: this run also writes %s into that folder, which would "
                                   "overwrite it; give --out another name, e.g. out.npy", outp, extra[i]);
        char xp[4200];
        snprintf(xp, sizeof xp, "%.*s%s", (int)(base - outp), outp, extra[i]);
        if (stat(xp, &xs) != 0) continue; /* not there yet: nothing to overwrite */
        for (int j = 0; j < 6; j++)
            if (inputs[j] && stat(inputs[j], &is) == 0 && xs.st_dev == is.st_dev && xs.st_ino == is.st_ino)
                return cli_usage_error(CMD, "%s %s: this run writes %s over it; move the input or give --out "
                                       "another folder", in_opt[j], inputs[j], xp);
    }
    if (la_dist_size() > 1 && !seqpar)
        return cli_usage_error(CMD, "started as %d processes: add --seq-parallel to split the sequence over "
                               "them, or run without mpirun", la_dist_size());
    if (seqpar && stats)
        return cli_usage_error(CMD, "--stats is not available with --seq-parallel (key_mass sums over the "
                               "queries of every rank); run --stats on one process");
    long long pos0 = LA_POS0_AUTO, nthreads = 0;
    if (pos0_s && cli_parse_int(pos0_s, -(1LL << 62), 1LL << 62, &pos0))
        return cli_usage_error(CMD, "--pos0 '%s' is not an integer", pos0_s);
    if (thr_s && cli_parse_int(thr_s, 1, 4096, &nthreads))
        return cli_usage_error(CMD, "--threads '%s' is not an integer in 1..4096", thr_s);
    la_dtype dtype = LA_DTYPE_F32;
    if (dtype_s && (la_dtype_parse(dtype_s, &dtype) != LA_OK || dtype == LA_DTYPE_I8))
        return cli_usage_error(CMD, "--dtype '%s' is not an attention input type; use f32, f16 or bf16", dtype_s);
    if (seqpar && dtype != LA_DTYPE_F32)
        return cli_usage_error(CMD, "--seq-parallel runs the float32 kernel; drop --dtype %s or --seq-parallel",
                               dtype_s);

    int rc = 1;
    npy_t q = {0}, k = {0}, v = {0}, dout = {0}, docs = {0}, ls = {0};
    float *out = NULL, *lse = NULL, *dq = NULL, *dk = NULL, *dv = NULL, *ent = NULL, *mass = NULL, *dls = NULL;
    int32_t *doc_ids = NULL;
    la_attn_opts opts = la_attn_opts_default(); /* its workspace is freed at done */
    uint16_t *hx[4] = {NULL, NULL, NULL, NULL}; /* q, k, v, dout in the --dtype type */
    const void *in[4];
    if (load(&q, qp, "--q") || load(&k, kp, "--k") || load(&v, vp, "--v")) goto done;
    if (doutp && load(&dout, doutp, "--dout")) goto done;
    if (docp && load(&docs, docp, "--doc-ids")) goto done;
    if (lognp && load(&ls, lognp, "--logn-s")) goto done;

    /* shapes: q (B,H,T,D) or (H,T,D); k, v (B,Hkv,S,D) or (Hkv,S,D) */
    const npy_t *qkv[3] = {&q, &k, &v};
    const char *role[3] = {"q (B, H, T, D) or (H, T, D)", "k (B, Hkv, S, D) or (Hkv, S, D)",
                           "v (B, Hkv, S, D) or (Hkv, S, D)"};
    for (int t = 0; t < 3; t++)
        if (qkv[t]->ndim != 3 && qkv[t]->ndim != 4) {
            rc = shape_fail("%s has shape %s (%d dimensions); expected %s", qkv[t]->path, qkv[t]->str, qkv[t]->ndim,
                            role[t]);
            goto done;
        }
    int64_t B = q.ndim == 4 ? q.shape[0] : 1, H = q.shape[q.ndim - 3], T = q.shape[q.ndim - 2],
            D = q.shape[q.ndim - 1];
    int64_t Bk = k.ndim == 4 ? k.shape[0] : 1, Hkv = k.shape[k.ndim - 3], S = k.shape[k.ndim - 2],
            Dk = k.shape[k.ndim - 1];
    if (v.ndim != k.ndim || memcmp(v.shape, k.shape, sizeof(int64_t) * (size_t)k.ndim)) {
        rc = shape_fail("%s has shape %s but %s has shape %s: k and v must have the same shape (B, Hkv, S, D)", vp,
                        v.str, kp, k.str);
        goto done;
    }
    if (Bk != B) {
        rc = shape_fail("%s has shape %s (B = %lld) but %s has shape %s (B = %lld): the batch sizes must agree", qp,
                        q.str, (long long)B, kp, k.str, (long long)Bk);
        goto done;
    }
    if (Dk != D) {
        rc = shape_fail("%s has shape %s (D = %lld) but %s has shape %s (D = %lld): q and k must have the same "
                        "head dimension D",
                        qp, q.str, (long long)D, kp, k.str, (long long)Dk);
        goto done;
    }
    if (B < 1 || H < 1 || T < 1 || D < 1 || Hkv < 1 || S < 1) {
        rc = shape_fail("%s has shape %s and %s has shape %s: every dimension must be >= 1", qp, q.str, kp, k.str);
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
    if (doutp && (dout.ndim != q.ndim || memcmp(dout.shape, q.shape, sizeof(int64_t) * (size_t)q.ndim))) {
        rc = shape_fail("%s has shape %s but %s has shape %s: dout must have the shape of q (and of out)", doutp,
                        dout.str, qp, q.str);
        goto done;
    }
    if (docp) {
        int ok = (docs.ndim == 2 && docs.shape[0] == B && docs.shape[1] == S) ||
                 (B == 1 && docs.ndim == 1 && docs.shape[0] == S);
        if (!ok) {
            rc = shape_fail("%s has shape %s; --doc-ids must have shape (B, S) = (%lld, %lld) to match %s", docp,
                            docs.str, (long long)B, (long long)S, kp);
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
    if (lognp && (ls.ndim != 1 || ls.shape[0] != H)) {
        rc = shape_fail("%s has shape %s; --logn-s must have shape (H,) = (%lld,) for the %lld query heads of %s",
                        lognp, ls.str, (long long)H, (long long)H, qp);
        goto done;
    }

    la_shape shape = {(int)B, (int)H, (int)Hkv, (int)T, (int)S, (int)D, pos0_s ? (int64_t)pos0 : LA_POS0_AUTO};
    size_t nq = (size_t)(B * H * T * D), nk = (size_t)(B * Hkv * S * D), nr = (size_t)(B * H * T);
    out = malloc(sizeof(float) * nq);
    lse = malloc(sizeof(float) * nr);
    if (!out || !lse) goto oom;
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
    in[0] = q.data, in[1] = k.data, in[2] = v.data, in[3] = dout.data;
    if (dtype != LA_DTYPE_F32) {
        const npy_t *src[4] = {&q, &k, &v, &dout};
        size_t n[4] = {nq, nk, nk, doutp ? nq : 0};
        for (int t = 0; t < 4; t++) {
            if (!n[t]) continue;
            for (size_t i = 0; dtype == LA_DTYPE_F16 && i < n[t]; i++) {
                float x = src[t]->data[i];
                if (!isfinite(x) || fabsf(x) < 65520.0f) continue; /* below: rounds to <= 65504 */
                npy_t at = {.ndim = src[t]->ndim}; /* the index, printed as a shape */
                for (int64_t d = at.ndim - 1, j = (int64_t)i; d >= 0; j /= src[t]->shape[d--])
                    at.shape[d] = j % src[t]->shape[d];
                shape_str(&at, at.str, sizeof at.str);
                rc = shape_fail("%s: entry %s is %g, beyond the range of f16 (largest finite value 65504); use "
                                "--dtype bf16 or --dtype f32", src[t]->path, at.str, (double)x);
                goto done;
            }
            if (!(hx[t] = malloc(sizeof(uint16_t) * n[t]))) goto oom;
            if (dtype == LA_DTYPE_BF16) la_cvt_f32_to_bf16(hx[t], src[t]->data, n[t]);
            else la_cvt_f32_to_f16(hx[t], src[t]->data, n[t]);
            in[t] = hx[t];
        }
    }
    if (seqpar) { /* a rank that failed to read its files stops every rank (label done) */
        agreed = 1;
        if (la_dist_agree(LA_OK) != LA_OK) {
            fprintf(stderr, "longattn attn: %s\n", la_errmsg());
            goto done;
        }
    }
    (void)la_workspace_create(&opts.ws); /* NULL when it failed: the call allocates its own */
    la_sp_stats sps[2];
    memset(sps, 0, sizeof sps);
    la_status st = seqpar ? la_attn_sp_forward(&spec, &shape, q.data, k.data, v.data, out, lse, &opts, &sps[0])
                          : la_attn_forward_typed(dtype, &spec, &shape, in[0], in[1], in[2], out, lse, &opts);
    if (st != LA_OK) {
        rc = shape_fail("attention forward failed (%s): %s", la_status_name(st), la_errmsg());
        goto done;
    }
    if (doutp) {
        dq = malloc(sizeof(float) * nq);
        dk = malloc(sizeof(float) * nk);
        dv = malloc(sizeof(float) * nk);
        dls = malloc(sizeof(float) * (size_t)H);
        if (!dq || !dk || !dv || !dls) goto oom;
        opts.row_entropy = opts.key_mass = NULL;
        opts.dlogn_s = spec.xform == LA_XF_LOGN ? dls : NULL;
        if (seqpar) {
            /* the ring's backward overwrites the other ranks' rows of its inputs: keep out
             * and lse, which are written below */
            float *o2 = malloc(sizeof(float) * nq), *l2 = malloc(sizeof(float) * nr);
            if (!o2 || !l2) {
                free(o2), free(l2);
                goto oom;
            }
            memcpy(o2, out, sizeof(float) * nq), memcpy(l2, lse, sizeof(float) * nr);
            st = la_attn_sp_backward(&spec, &shape, q.data, k.data, v.data, o2, l2, dout.data, dq, dk, dv, &opts,
                                     &sps[1]);
            free(o2), free(l2);
        } else {
            st = la_attn_backward_typed(dtype, &spec, &shape, in[0], in[1], in[2], out, lse, in[3], dq, dk, dv, &opts);
        }
        if (st != LA_OK) {
            rc = shape_fail("attention backward failed (%s): %s", la_status_name(st), la_errmsg());
            goto done;
        }
    }
    if (seqpar) { /* every rank's rows to every rank, then rank 0 writes */
        la_sp_stats g;
        st = la_attn_sp_gather(out, (int)(B * H), (int)T, (int)D, &g);
        if (st == LA_OK) st = la_attn_sp_gather(lse, (int)(B * H), (int)T, 1, &g);
        if (st == LA_OK && doutp) st = la_attn_sp_gather(dq, (int)(B * H), (int)T, (int)D, &g);
        if (st == LA_OK && doutp) st = la_attn_sp_gather(dk, (int)(B * Hkv), (int)S, (int)D, &g);
        if (st == LA_OK && doutp) st = la_attn_sp_gather(dv, (int)(B * Hkv), (int)S, (int)D, &g);
        if (st != LA_OK) {
            rc = shape_fail("gathering the ranks' rows failed (%s): %s", la_status_name(st), la_errmsg());
            goto done;
        }
        for (int x = 0; x < (doutp ? 2 : 1); x++)
            fprintf(stderr, "longattn attn: rank %d of %d: %s %.3f s (kernel %.3f s, blocked in the ring "
                    "%.3f s, polling %.3f s; CPU %.3f s), %d ring steps, %.0f bytes sent\n", la_dist_rank(),
                    la_dist_size(), x ? "backward" : "forward", sps[x].t_total, sps[x].t_compute, sps[x].t_wait,
                    sps[x].t_test, sps[x].cpu_total, sps[x].steps, sps[x].bytes_sent);
        if (la_dist_rank() != 0) {
            rc = 0;
            goto done;
        }
    }

    int64_t rshape[3] = {B, H, T}, mshape[3] = {B, H, S};
    int rnd = q.ndim == 4 ? 3 : 2; /* lse follows q's rank without D */
    const int64_t *rsh = q.ndim == 4 ? rshape : rshape + 1;
    if (save(outp, NULL, out, q.ndim, q.shape)) goto done;
    if (save(outp, "lse.npy", lse, rnd, rsh)) goto done;
    if (stats) {
        if (save(outp, "entropy.npy", ent, rnd, rsh)) goto done;
        if (save(outp, "key_mass.npy", mass, rnd, q.ndim == 4 ? mshape : mshape + 1)) goto done;
    }
    if (doutp) {
        if (save(outp, "dq.npy", dq, q.ndim, q.shape)) goto done;
        if (save(outp, "dk.npy", dk, k.ndim, k.shape)) goto done;
        if (save(outp, "dv.npy", dv, v.ndim, v.shape)) goto done;
        if (spec.xform == LA_XF_LOGN) {
            int64_t hs[1] = {H};
            if (save(outp, "dlogn_s.npy", dls, 1, hs)) goto done;
        }
    }
    rc = 0;
    goto done;
oom:
    fprintf(stderr, "longattn attn: out of memory\n");
    la_fail(LA_ENOMEM, "out of memory");
    rc = 1;
done:
    if (seqpar && !agreed) la_dist_agree(LA_EIO); /* this rank failed before the computation */
    free(q.data), free(k.data), free(v.data), free(dout.data), free(docs.data), free(ls.data);
    for (int t = 0; t < 4; t++) free(hx[t]);
    free(out), free(lse), free(dq), free(dk), free(dv), free(ent), free(mass), free(dls), free(doc_ids);
    la_workspace_free(opts.ws);
    return rc;
}
