/* checkpoint.c -- trainer checkpoints: weights in <path> (la_model_save, safetensors) and the
 * optimiser state in <path>.state (safetensors too: "adam.m", "adam.v", "muon.mom"; step,
 * data sampler state, train config, the hash of the weights and that of the state tensors as
 * metadata strings).
 *
 * Two files cannot be replaced in one atomic step, so a save that is killed half-way
 * (SIGKILL, power loss) must leave a pair that loads. The order is:
 *   1. <path>.state.new   the new state (atomic write)
 *   2. <path>             the new weights (atomic write)
 *   3. rename <path>.state.new -> <path>.state
 * Killed before 2: the old weights and old state still belong together (a stale .state.new
 * is ignored: its weights hash does not match). Killed between 2 and 3: the weights are new
 * and <path>.state old; the loader then takes <path>.state.new, whose weights hash matches.
 * Every pair is checked by that hash, so a mismatched pair is never loaded. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model_io.h"
#include "train/trainer_internal.h"
#include "longattn/train.h"

#define STATE_FORMAT "longattn-trainer-state-1"

/* "state_hash": la_fnv1a over the optimiser state tensors in file order (a bit flipped in
 * them is an error, as one in the weights is through "weights_hash") */

static void state_path(char *buf, size_t n, const char *path) { snprintf(buf, n, "%s.state", path); }
static void state_new_path(char *buf, size_t n, const char *path) { snprintf(buf, n, "%s.state.new", path); }

la_status la_trainer_save(const la_trainer *tr, const char *path) {
    if (!tr || !path || !path[0]) return la_fail(LA_EINVAL, "la_trainer_save: NULL or empty path");
    char sp[1100], final_sp[1100];
    state_new_path(sp, sizeof sp, path);
    state_path(final_sp, sizeof final_sp, path);
    la_st_tensor ts[3];
    int nt = 0;
    ts[nt++] = (la_st_tensor){"adam.m", tr->adam_m, 1, {(int64_t)tr->P}};
    ts[nt++] = (la_st_tensor){"adam.v", tr->adam_v, 1, {(int64_t)tr->P}};
    if (tr->mom) ts[nt++] = (la_st_tensor){"muon.mom", tr->mom, 1, {(int64_t)tr->P}};
    la_data_state ds = {{0}, 0};
    if (tr->data) la_data_get_state(tr->data, &ds);
    char v_step[32], v_np[32], v_hash[32], v_rng[4][32], v_nw[32], v_sh[32];
    uint64_t sh = LA_FNV0;
    for (int i = 0; i < nt; i++) sh = la_fnv1a(sh, ts[i].data, tr->P * sizeof(float));
    snprintf(v_sh, sizeof v_sh, "%016" PRIx64, sh);
    snprintf(v_step, sizeof v_step, "%d", tr->step);
    snprintf(v_np, sizeof v_np, "%zu", tr->P);
    snprintf(v_hash, sizeof v_hash, "%016" PRIx64, la_model_weights_hash(tr->m));
    for (int i = 0; i < 4; i++) snprintf(v_rng[i], sizeof v_rng[i], "%016" PRIx64, ds.rng[i]);
    snprintf(v_nw, sizeof v_nw, "%" PRIu64, ds.n_windows);
    char *cfg = la_train_config_to_json(&tr->cfg);
    if (!cfg) return la_fail(LA_ENOMEM, "la_trainer_save: out of memory");
    const char *meta[] = {"format", STATE_FORMAT,
                          "step", v_step,
                          "n_params", v_np,
                          "optimizer", tr->cfg.optimizer == LA_OPT_MUON ? "muon" : "adamw",
                          "weights_hash", v_hash,
                          "state_hash", v_sh,
                          "data_rng0", v_rng[0],
                          "data_rng1", v_rng[1],
                          "data_rng2", v_rng[2],
                          "data_rng3", v_rng[3],
                          "data_n_windows", v_nw,
                          "train_config", cfg};
    /* both files are written and synced before either replaces anything, so an I/O error
     * there leaves the previous checkpoint pair intact; then the order of the file comment:
     * state -> <path>.state.new, weights -> <path>, rename .state.new -> .state */
    la_afile wf, sf;
    la_status s = la_model_save_af(tr->m, path, &wf);
    if (s == LA_OK) {
        la_test_point("ckpt-weights");
        s = la_st_write_af(&sf, sp, ts, nt, meta, (int)(sizeof meta / sizeof meta[0]) / 2);
        if (s != LA_OK) la_afile_abort(&wf);
        else la_test_point("ckpt-state");
    }
    free(cfg);
    if (s != LA_OK) return s;
    s = la_afile_sync(&wf);
    if (s != LA_OK) {
        la_afile_abort(&sf);
        return s;
    }
    s = la_afile_sync(&sf);
    if (s == LA_OK) s = la_afile_publish(&sf); /* step 1 */
    if (s == LA_OK) s = la_afile_publish(&wf); /* step 2 */
    if (s != LA_OK) {
        la_afile_abort(&wf);
        la_afile_abort(&sf);
        unlink(sp); /* a .state.new whose weights were not published */
        return s;
    }
    la_test_point("ckpt-rename");
    if (rename(sp, final_sp) != 0) /* step 3 */
        return la_fail(LA_EIO, "cannot rename '%s' to '%s': %s (the checkpoint still loads from the new name)", sp,
                       final_sp, strerror(errno));
    la_fsync_parent_dir(final_sp); /* the rename of step 3 made durable */
    return LA_OK;
}

static la_status meta_u64(const la_st_file *f, const char *path, const char *key, int base,
                          uint64_t *out) {
    const char *v = la_st_meta(f, key);
    if (!v) return la_fail(LA_EFORMAT, "%s: metadata key '%s' is missing (corrupt trainer state)", path, key);
    char *end;
    *out = strtoull(v, &end, base);
    if (end == v || *end) return la_fail(LA_EFORMAT, "%s: metadata '%s' = '%s' is malformed", path, key, v);
    return LA_OK;
}

static la_status load_checked(la_trainer *tr, const char *path, const la_st_file *wf,
                              const la_st_file *sf, const char *sp, int *mismatch) {
    *mismatch = 0;
    /* 1. the weights file describes the trainer's model */
    la_model_config fc;
    LA_TRY(la_model_config_from_meta(wf, path, &fc));
    char vals[16][LA_SPEC_TEXT_MAX];
    const char *kv[32];
    int n = la_model_config_meta(tr->m, vals, kv);
    for (int i = 0; i < n; i++) {
        const char *fv = la_st_meta(wf, kv[2 * i]);
        if (!strcmp(kv[2 * i], "init_std") || !strcmp(kv[2 * i], "qk_gain")) continue; /* initialisation only */
        if (!fv || strcmp(fv, kv[2 * i + 1]))
            return la_fail(LA_EFORMAT, "%s: checkpoint has %s = '%s' but the model has '%s'; build the "
                           "model from the checkpoint (la_model_load) to resume it",
                           path, kv[2 * i], fv ? fv : "(missing)", kv[2 * i + 1]);
    }
    LA_TRY(la_model_weights_from_file(tr->m, wf, path, 0));
    /* 2. the state file */
    const char *fmt = la_st_meta(sf, "format");
    if (!fmt || strcmp(fmt, STATE_FORMAT))
        return la_fail(LA_EFORMAT, "%s: format '%s', expected '%s'", sp, fmt ? fmt : "(missing)", STATE_FORMAT);
    uint64_t step = 0, np = 0, hash = 0, nw = 0, rng[4] = {0};
    LA_TRY(meta_u64(sf, sp, "step", 10, &step));
    LA_TRY(meta_u64(sf, sp, "n_params", 10, &np));
    LA_TRY(meta_u64(sf, sp, "weights_hash", 16, &hash));
    LA_TRY(meta_u64(sf, sp, "data_n_windows", 10, &nw));
    for (int i = 0; i < 4; i++) {
        char k[32];
        snprintf(k, sizeof k, "data_rng%d", i);
        LA_TRY(meta_u64(sf, sp, k, 16, &rng[i]));
    }
    if (np != tr->P)
        return la_fail(LA_EFORMAT, "%s: state is for %llu parameters, the model has %zu", sp,
                       (unsigned long long)np, tr->P);
    const char *opt = la_st_meta(sf, "optimizer");
    const char *want = tr->cfg.optimizer == LA_OPT_MUON ? "muon" : "adamw";
    if (!opt || strcmp(opt, want))
        return la_fail(LA_EFORMAT, "%s: state was written by optimizer '%s' but the trainer uses '%s'",
                       sp, opt ? opt : "(missing)", want);
    const char *names[3] = {"adam.m", "adam.v", "muon.mom"};
    for (int i = 0; i < (tr->mom ? 3 : 2); i++) {
        const la_st_entry *e = la_st_find(sf, names[i]);
        if (!e || e->ndim != 1 || (size_t)e->shape[0] != tr->P)
            return la_fail(LA_EFORMAT, "%s: tensor %s is missing or has the wrong size", sp, names[i]);
    }
    if (la_st_meta(sf, "state_hash")) { /* absent in checkpoints written before it: loaded unchecked */
        uint64_t sh = LA_FNV0, saved = 0;
        LA_TRY(meta_u64(sf, sp, "state_hash", 16, &saved));
        for (int i = 0; i < (tr->mom ? 3 : 2); i++)
            sh = la_fnv1a(sh, sf->data + la_st_find(sf, names[i])->begin, tr->P * sizeof(float));
        if (sh != saved)
            return la_fail(LA_EFORMAT, "%s: the optimiser state does not match its hash (state_hash): the file is "
                           "corrupt; use another checkpoint", sp);
    }
    /* 3. commit: weights first, then check that they are the weights the state was saved with */
    float *backup = la_malloc(tr->P * sizeof(float));
    if (!backup) return la_fail(LA_ENOMEM, "out of memory");
    float *p = la_model_params(tr->m);
    memcpy(backup, p, tr->P * sizeof(float));
    LA_TRY(la_model_weights_from_file(tr->m, wf, path, 1));
    if (la_model_weights_hash(tr->m) != hash) {
        memcpy(p, backup, tr->P * sizeof(float));
        free(backup);
        *mismatch = 1;
        return la_fail(LA_EFORMAT, "%s and %s do not belong together (weights hash differs): the "
                       "checkpoint is corrupt or was overwritten half-way; use another checkpoint",
                       path, sp);
    }
    free(backup);
    memcpy(tr->adam_m, sf->data + la_st_find(sf, "adam.m")->begin, tr->P * sizeof(float));
    memcpy(tr->adam_v, sf->data + la_st_find(sf, "adam.v")->begin, tr->P * sizeof(float));
    if (tr->mom) memcpy(tr->mom, sf->data + la_st_find(sf, "muon.mom")->begin, tr->P * sizeof(float));
    tr->step = (int)step;
    if (tr->data) {
        la_data_state ds;
        memcpy(ds.rng, rng, sizeof rng);
        ds.n_windows = nw;
        la_data_set_state(tr->data, &ds);
    }
    return LA_OK;
}

la_status la_trainer_load(la_trainer *tr, const char *path) {
    if (!tr || !path) return la_fail(LA_EINVAL, "la_trainer_load: NULL argument");
    char sp[1100], np[1100];
    state_path(sp, sizeof sp, path);
    state_new_path(np, sizeof np, path);
    la_st_file wf, sf;
    LA_TRY(la_st_read(path, &wf));
    /* <path>.state, or <path>.state.new when a save was killed before renaming it (file comment) */
    int has_new = access(np, F_OK) == 0, mismatch = 0;
    const char *used = access(sp, F_OK) == 0 || !has_new ? sp : np;
    la_status s = la_st_read(used, &sf);
    if (s != LA_OK) {
        la_st_free(&wf);
        return s;
    }
    s = load_checked(tr, path, &wf, &sf, used, &mismatch);
    la_st_free(&sf);
    if (s != LA_OK && mismatch && has_new && used == sp && la_st_read(np, &sf) == LA_OK) {
        s = load_checked(tr, path, &wf, &sf, np, &mismatch);
        la_st_free(&sf);
    }
    la_st_free(&wf);
    return s;
}

/* The train config stored in a checkpoint's state file (for `longattn train --resume`). */
la_status la_trainer_read_config(const char *path, la_train_config *cfg) {
    char sp[1100], np[1100];
    state_path(sp, sizeof sp, path);
    state_new_path(np, sizeof np, path);
    if (access(sp, F_OK) != 0 && access(np, F_OK) == 0) memcpy(sp, np, sizeof sp); /* a first save killed before its rename */
    la_st_file sf;
    LA_TRY(la_st_read(sp, &sf));
    const char *js = la_st_meta(&sf, "train_config");
    la_status s = js ? la_train_config_from_json(js, cfg)
                     : la_fail(LA_EFORMAT, "%s: no train_config in the metadata", sp);
    la_st_free(&sf);
    return s;
}
