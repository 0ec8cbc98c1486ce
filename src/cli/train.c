/* train.c -- `longattn train`: train the GPT of SPEC 7 on a directory of text or on llm.c
 * token shards, with a progress display, a CSV log, checkpoints, Ctrl-C saving a
 * checkpoint, and --resume. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/dist.h"
#include "core/internal.h"
#include "io/files.h"
#include "longattn.h"

static volatile sig_atomic_t g_stop = 0;
static void on_sigint(int sig) {
    (void)sig;
    g_stop = 1;
}

static const cli_doc DOC = {
    "longattn train --data PATH [options]\n"
    "longattn train --resume --out DIR [--steps N]",
    "Train a decoder-only transformer (pre-norm RMSNorm, QK-norm, ReLU^2 MLP, the given\n"
    "attention spec) on a text file or directory of text files (bytes, vocab 256, one\n"
    "document per file) or on llm.c token shards (*.bin, GPT-2 vocab 50257).\n"
    "Writes DIR/model.safetensors (+ .state: optimiser, step, data position) and\n"
    "DIR/log.csv. Ctrl-C saves a checkpoint and exits; --resume continues it exactly.",
    "Data parallel: mpirun -np R longattn train ... splits the --accum micro-batches of\n"
    "each step over R ranks (weights bitwise equal to one process; --resume with any R;\n"
    "rank 0 writes the log and checkpoints). With --seq-parallel K, groups of K ranks\n"
    "share each micro-batch, each rank holding its share of every sequence (still\n"
    "bitwise one process). See docs/mpi.md.",
    0,
};

typedef struct {
    int tty;
    int every;
    double last_draw;
    la_afile *meta; /* data.txt of a new run, published at its first step */
    const char *ckpt; /* with it, the folder's previous checkpoint is removed */
} progress_ctx;

static void fmt_time(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) s = 0;
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%d:%02d", t / 60, t % 60);
}

static int on_progress(void *user, const la_train_progress *p) {
    progress_ctx *pc = user;
    if (la_dist_rank() != 0) return g_stop != 0;
    if (pc->meta) { /* the run has started: its data.txt replaces the folder's */
        la_status s = la_afile_publish(pc->meta);
        pc->meta = NULL;
        /* a previous run's weights must not meet this run's data.txt and log on --resume
         * before this run's first checkpoint replaces them */
        char old[1100];
        for (int i = 0; s == LA_OK && i < 3; i++) {
            snprintf(old, sizeof old, "%s%s", pc->ckpt, i == 0 ? "" : i == 1 ? ".state" : ".state.new");
            if (unlink(old) != 0 && errno != ENOENT)
                s = la_fail(LA_EIO, "cannot remove the previous run's %s: %s", old, strerror(errno));
        }
        if (s != LA_OK) {
            fprintf(stderr, "longattn train: %s\n", la_errmsg());
            return 1;
        }
    }
    char eta[32], el[32], val[32] = "";
    fmt_time(p->eta_s, eta, sizeof eta);
    fmt_time(p->elapsed_s, el, sizeof el);
    if (!isnan(p->val_loss)) snprintf(val, sizeof val, "  val %.4f", p->val_loss);
    if (pc->tty) {
        int w = 24, fill = (int)((double)p->step / p->steps * w);
        char bar[64];
        for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
        bar[w] = 0;
        fprintf(stderr, "\r\033[K[%s] step %d/%d  loss %.4f  %.0f tok/s  lr %.2g  %s elapsed  ETA %s%s",
                bar, p->step, p->steps, p->loss, p->tokens_per_s, p->lr, el, eta, val);
        if (!isnan(p->val_loss) || p->step == p->steps) fprintf(stderr, "\n");
        fflush(stderr);
    } else if (p->step % pc->every == 0 || p->step == p->steps || !isnan(p->val_loss) || p->step == 1) {
        printf("step %d/%d loss %.4f tok/s %.0f lr %.3g elapsed %s eta %s%s\n", p->step, p->steps,
               p->loss, p->tokens_per_s, p->lr, el, eta, val);
        fflush(stdout);
    }
    return g_stop != 0;
}

int cli_train(int argc, char **argv) {
    const char *cmd = "train";
    la_model_config mc = la_model_config_default();
    la_train_config tc = la_train_config_default();
    la_data_config dc = la_data_config_default();
    const char *data_path = NULL, *out = "runs/train";
    int resume = 0, seq_parallel = 1;
    tc.eval_every = 50;
    tc.ckpt_every = 100;
    const char *spec = NULL;
    double qk_gain = mc.qk_gain;
    enum { MAXI = 1000000000 };
    cli_arg args[] = {
        CLI_A_GROUP("data and output:"),
        CLI_A_STR("--data PATH", "text file/dir or .bin shard file/dir", &data_path),
        CLI_A_NUM_X("--val-fraction X", "documents held out for validation (default 0.1)", &dc.val_fraction, 0, 1,
                    CLI_OPEN_HI),
        CLI_A_STR("--out DIR", "output directory (default runs/train)", &out),
        CLI_A_FLAG("--resume", "continue from DIR/model.safetensors with its saved settings", &resume),
        CLI_A_GROUP("model:"),
        CLI_A_STR("--spec TEXT", "attention spec (default softmax+rope+causal)", &spec),
        CLI_A_INT("--layers N", "transformer blocks (default 4)", &mc.n_layer, 1, MAXI),
        CLI_A_INT("--d-model N", "model width (default 128)", &mc.d_model, 1, INT_MAX / 4), /* 4 x: the MLP */
        CLI_A_INT("--heads N", "attention heads (default 4)", &mc.n_head, 1, MAXI),
        CLI_A_INT("--kv-heads N", "key/value heads (default = heads)", &mc.n_kv_head, 1, MAXI),
        CLI_A_INT("--d-ff N", "MLP width (default 4 * d-model)", &mc.d_ff, 1, MAXI),
        CLI_A_NUM_X("--qk-gain X", "initial QK-norm gain (default 1; larger starts sharper attention)", &qk_gain, 0,
                    100, CLI_OPEN_LO),
        CLI_A_GROUP("training:"),
        CLI_A_INT("--steps N", "optimizer steps (default 400; with --resume: new total)", &tc.steps, 1, MAXI),
        CLI_A_INT("--batch B", "sequences per micro-batch (default 16)", &tc.B, 1, MAXI),
        CLI_A_INT("--seq-len T", "training context (default 128)", &tc.T, 2, MAXI),
        CLI_A_INT("--accum N", "micro-batches per step (default 1)", &tc.grad_accum, 1, MAXI),
        CLI_A_INT("--seq-parallel K", "under mpirun: K ranks share each sequence (default 1; the\n"
                                      "sequence length at least 128 K - 63; docs/mpi.md)", &seq_parallel, 1, MAXI),
        CLI_A_FN("--optimizer NAME", "adamw | muon (default adamw)", cli_optimizer_arg, &tc.optimizer),
        CLI_A_FN("--precision P", "f32 | bf16 (default f32): bf16 rounds every matrix-product and\n"
                                  "attention operand to bf16, accumulates in float32, keeps float32\n"
                                  "master weights, gradients and optimizer state (emulated on CPUs\n"
                                  "without a bf16 GEMM: slower than f32; docs/training.md)",
                 cli_precision_arg, &tc.precision),
        CLI_A_NUM("--lr X", "AdamW peak lr (default 3e-3)", &tc.lr, 1e-12, HUGE_VAL),
        CLI_A_NUM("--min-lr X", "final lr of the cosine schedule (default lr/10)", &tc.min_lr, 0, HUGE_VAL),
        CLI_A_NUM("--muon-lr X", "Muon peak lr (default 0.02)", &tc.muon_lr, 1e-12, HUGE_VAL),
        CLI_A_INT("--warmup N", "warm-up steps (default 20)", &tc.warmup, 0, MAXI),
        CLI_A_NUM("--wd X", "weight decay (default 0.1)", &tc.weight_decay, 0, HUGE_VAL),
        CLI_A_NUM("--clip X", "grad-norm clip (default 1)", &tc.clip, 0, HUGE_VAL),
        CLI_A_U64("--seed N", "seed of the weights and the data order (default 1)", &tc.seed),
        CLI_A_INT("--eval-every N", "validation every N steps (default 50; 0 = end only)", &tc.eval_every, 0, MAXI),
        CLI_A_INT("--ckpt-every N", "checkpoint every N steps (default 100; always at the end)", &tc.ckpt_every, 0, MAXI),
        CLI_A_END,
    };
    int prc = cli_parse(cmd, &DOC, args, argc, argv);
    if (prc >= 0) return prc;
    if (spec && strlen(spec) >= sizeof mc.spec) return cli_usage_error(cmd, "--spec text too long");
    if (spec) snprintf(mc.spec, sizeof mc.spec, "%s", spec);
    mc.qk_gain = (float)qk_gain;
    /* what the checkpoint fixes: with --resume these would be silently ignored; the one
     * given last is named */
    static const char *const fixed[] = {"--spec", "--layers", "--heads", "--kv-heads", "--d-model", "--d-ff",
                                        "--qk-gain", "--batch", "--seq-len", "--accum", "--optimizer", "--lr",
                                        "--min-lr", "--muon-lr", "--warmup", "--wd", "--clip", "--seed",
                                        "--val-fraction", "--precision", NULL};
    const char *fixed_opt = NULL;
    for (int k = 0, last = 0; fixed[k]; k++)
        if (cli_given(args, fixed[k]) > last) last = cli_given(args, fixed[k]), fixed_opt = fixed[k];
    const int steps_set = cli_given(args, "--steps") > 0, min_lr_set = cli_given(args, "--min-lr") > 0;
    if (!min_lr_set) tc.min_lr = tc.lr / 10;
    tc.seq_parallel = seq_parallel;
    if (resume && fixed_opt)
        return cli_usage_error(cmd, "--resume continues the run with the model, optimiser and data settings of its "
                                    "checkpoint; %s cannot change them (only --steps, --eval-every, --ckpt-every and "
                                    "--data may be given). Start a new run with another --out instead", fixed_opt);
    if (!resume && !data_path) return cli_usage_error(cmd, "--data PATH is required (a text file/dir or .bin shards)");
    if (strlen(out) > 900) return cli_usage_error(cmd, "--out path too long");
    la_spec sp;
    if (!resume && la_spec_parse(mc.spec, &sp) != LA_OK)
        return cli_usage_error(cmd, "--spec: %s", la_errmsg());
    if (!resume && mc.d_model % mc.n_head)
        return cli_usage_error(cmd, "--heads %d does not divide --d-model %d", mc.n_head, mc.d_model);
    if (!resume && mc.n_kv_head && mc.n_head % mc.n_kv_head)
        return cli_usage_error(cmd, "--kv-heads %d does not divide --heads %d", mc.n_kv_head, mc.n_head);
    if (!resume && tc.min_lr > tc.lr)
        return cli_usage_error(cmd, "--min-lr %g is above --lr %g (the schedule decays from --lr to --min-lr)",
                               tc.min_lr, tc.lr);
    la_model_config chk = mc;
    chk.vocab = 256; /* the data's vocabulary is read later; the rest is checked now (an odd head size with RoPE) */
    if (!resume && la_model_config_validate(&chk) != LA_OK)
        return cli_usage_error(cmd, "--layers / --d-model / --heads / --spec: %s", la_errmsg());
    char ckpt[1024], csv[1024], meta_path[1100];
    snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", out);
    if (resume && access(ckpt, F_OK) != 0) { /* nothing to resume: no folder made, no file named wrongly */
        fprintf(stderr, "longattn train: no checkpoint in %s (no %s); start a new run with --data\n", out, ckpt);
        return 1;
    }
    if (!resume && la_mkdir_p(out) != LA_OK) {
        fprintf(stderr, "longattn train: %s\n", la_errmsg());
        return 1;
    }
    snprintf(csv, sizeof csv, "%s/log.csv", out);
    snprintf(meta_path, sizeof meta_path, "%s/data.txt", out);

    la_model *m = NULL;
    la_data *data = NULL;
    la_trainer *tr = NULL;
    la_afile meta = {0};
    progress_ctx pc = {0};
    la_status s;
    int rc = 1;
    if (resume) {
        /* settings from the checkpoint; --steps may extend the run, --eval-every and
         * --ckpt-every replace the saved ones */
        la_train_config given = tc;
        s = la_trainer_read_config(ckpt, &tc);
        if (s != LA_OK) {
            s = la_fail(s, "cannot resume from %s: %s", ckpt, la_errmsg());
            goto setup_end;
        }
        if (steps_set) tc.steps = given.steps;
        if (cli_given(args, "--eval-every")) tc.eval_every = given.eval_every;
        if (cli_given(args, "--ckpt-every")) tc.ckpt_every = given.ckpt_every;
        tc.seq_parallel = seq_parallel; /* where the numbers are computed, not what they are */
        /* data path and split fraction recorded by the first run (data.txt) */
        static char saved[1024];
        double saved_vf = dc.val_fraction;
        FILE *f = fopen(meta_path, "r");
        if (f) {
            if (!fgets(saved, sizeof saved, f)) saved[0] = 0;
            saved[strcspn(saved, "\n")] = 0;
            if (fscanf(f, "%lf", &saved_vf) != 1) saved_vf = dc.val_fraction;
            fclose(f);
        }
        if (!data_path && saved[0]) data_path = saved;
        dc.val_fraction = saved_vf;
        if (!data_path) return cli_usage_error(cmd, "--resume: %s has no record of the data; pass --data", meta_path);
        if ((s = la_model_load(ckpt, &m)) != LA_OK) goto setup_end;
    } else {
        mc.train_len = tc.T;
    }
    /* the split fraction and seed are the defaults unless given; record them with the data */
    if ((s = la_data_open(data_path, &dc, &data)) != LA_OK) goto setup_end;
    if (la_data_num_tokens(data, LA_SPLIT_TRAIN) < tc.T + 1) { /* before any file of the folder is replaced */
        s = la_fail(LA_ESHAPE, "the train split of %s has %lld tokens, fewer than one window of --seq-len + 1 = %d; "
                    "use a shorter --seq-len or more data", data_path,
                    (long long)la_data_num_tokens(data, LA_SPLIT_TRAIN), tc.T + 1);
        goto setup_end;
    }
    if (!resume) {
        mc.vocab = la_data_vocab(data);
        if ((s = la_model_new(&mc, tc.seed, &m)) != LA_OK) goto setup_end;
    }
    snprintf(tc.ckpt_path, sizeof tc.ckpt_path, "%s", ckpt);
    snprintf(tc.csv_path, sizeof tc.csv_path, "%s", csv);
    if ((s = la_trainer_new(m, data, &tc, &tr)) != LA_OK) goto setup_end;
    if (!resume && la_dist_rank() == 0) {
        /* record the data for --resume: an absolute path (so a resume from another directory
         * finds it) and the split fraction, written now and published at the first step (a
         * run that cannot start leaves the folder's data.txt as it was) */
        char *abs = realpath(data_path, NULL);
        if ((s = la_afile_open(&meta, meta_path)) == LA_OK) {
            fprintf(meta.f, "%s\n%.17g\n", abs ? abs : data_path, dc.val_fraction);
            if ((s = la_afile_sync(&meta)) == LA_OK) pc.meta = &meta, pc.ckpt = ckpt;
        }
        free(abs);
        if (s != LA_OK) goto setup_end;
    }
    if (resume && (s = la_trainer_load(tr, ckpt)) != LA_OK) goto setup_end;
    if (resume && steps_set && tc.steps <= la_trainer_step_count(tr)) {
        rc = cli_usage_error(cmd, "--steps %d: the checkpoint in %s is at step %d already; give a larger total",
                             tc.steps, out, la_trainer_step_count(tr));
        goto done;
    }
    if (la_data_num_tokens(data, LA_SPLIT_VAL) < tc.T + 1 && tc.eval_every) {
        if (la_dist_rank() == 0) fprintf(stderr, "  (validation split shorter than one window: validation disabled)\n");
        tc.eval_every = 0;
        la_trainer_free(tr);
        tr = NULL;
        if ((s = la_trainer_new(m, data, &tc, &tr)) != LA_OK) goto setup_end;
        if (resume && (s = la_trainer_load(tr, ckpt)) != LA_OK) goto setup_end;
    }
setup_end:
    /* under mpirun: a rank that could not start (a data file missing on its node, out of
     * memory) stops every rank here with one error naming it */
    if ((s = la_dist_agree(s)) != LA_OK) goto fail;
    int nranks = la_dist_size(), rank0 = la_dist_rank() == 0;
    const la_model_config *c = la_model_get_config(m);
    if (rank0) fprintf(stderr,
            "longattn train: %s  %d layers, d_model %d, %d heads, vocab %d, %.2fM params\n"
            "  data %s: %lld train / %lld val tokens (%d / %d documents)\n"
            "  %s, steps %d (from %d), batch %d x %d x accum %d, lr %g, out %s\n",
            c->spec, c->n_layer, c->d_model, c->n_head, c->vocab, la_model_num_params(m) / 1e6,
            data_path, (long long)la_data_num_tokens(data, LA_SPLIT_TRAIN),
            (long long)la_data_num_tokens(data, LA_SPLIT_VAL), la_data_num_docs(data, LA_SPLIT_TRAIN),
            la_data_num_docs(data, LA_SPLIT_VAL), tc.optimizer == LA_OPT_MUON ? "muon" : "adamw",
            tc.steps, la_trainer_step_count(tr), tc.B, tc.T, tc.grad_accum, tc.lr, out);
    if (rank0 && tc.precision != LA_DTYPE_F32) fprintf(stderr, "  %s\n", cli_precision_note(tc.precision));
    int units = nranks / (tc.seq_parallel > 1 ? tc.seq_parallel : 1); /* data-parallel units */
    if (rank0 && nranks > 1 && units == nranks)
        fprintf(stderr, "  %d ranks (MPI): micro-batches of %d x %d, %d per step over %d ranks%s\n", nranks, tc.B,
                tc.T, tc.grad_accum, nranks,
                tc.grad_accum % nranks ? " (--accum not a multiple of the ranks: some ranks wait)" : "");
    else if (rank0 && nranks > 1)
        fprintf(stderr, "  %d ranks (MPI): %d group%s of %d ranks sharing each sequence (--seq-parallel), micro-batches "
                "of %d x %d, %d per step over the groups%s\n", nranks, units, units > 1 ? "s" : "", tc.seq_parallel, tc.B, tc.T,
                tc.grad_accum, tc.grad_accum % units ? " (--accum not a multiple of the groups: some wait)" : "");
    pc.tty = isatty(STDERR_FILENO);
    pc.every = tc.steps / 50 > 0 ? tc.steps / 50 : 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    const int step0 = la_trainer_step_count(tr);
    s = la_trainer_run(tr, on_progress, &pc);
    signal(SIGINT, SIG_DFL);
    if (pc.tty && rank0) fprintf(stderr, "\n");
    if (s == LA_EINTERRUPTED) {
        if (rank0) fprintf(stderr, "longattn train: interrupted at step %d; checkpoint saved in %s\n"
                        "  continue with: longattn train --resume --out %s\n",
                la_trainer_step_count(tr), ckpt, out);
        goto done;
    }
    if (s != LA_OK) goto fail;
    float val;
    if (la_data_num_tokens(data, LA_SPLIT_VAL) >= tc.T + 1 && la_trainer_eval(tr, &val) == LA_OK) {
        if (rank0) fprintf(stderr, "longattn train: done, %d steps; validation loss %.4f nats/token (%.4f bits)\n",
                la_trainer_step_count(tr), val, val / log(2.0));
    } else if (rank0)
        fprintf(stderr, "longattn train: done, %d steps\n", la_trainer_step_count(tr));
    if (rank0) fprintf(stderr, "  weights %s, log %s\n", ckpt, csv);
    if (tc.seq_parallel > 1 && nranks > 1) { /* every rank: its traffic (docs/mpi.md's scaling table) */
        int ran = la_trainer_step_count(tr) - step0;
        fprintf(stderr, "  [rank %d] --seq-parallel: %.1f MB sent through the ring, %.2f MB per step\n",
                la_dist_rank(), la_dist_ring_bytes() / 1e6, la_dist_ring_bytes() / 1e6 / (ran > 0 ? ran : 1));
    }
    rc = 0;
    goto done;
fail:
    /* an error agreed by every rank is printed once (by rank 0) */
    if (la_dist_rank() == 0) fprintf(stderr, "longattn train: %s: %s\n", la_status_name(s), la_errmsg());
done:
    if (pc.meta) la_afile_abort(pc.meta); /* the run never finished a step */
    la_trainer_free(tr);
    la_data_free(data);
    la_model_free(m);
    return rc;
}
