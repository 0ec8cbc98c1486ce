/* fuzz_trainer_state.c -- trainer checkpoint state files (<ckpt>.state: optimiser moments,
 * step, data sampler state, train config JSON). Once per process a tiny model and trainer
 * are built (the model of fuzz/gen_seeds.c's "softmax_rope" seed) and their checkpoint saved; every input then replaces the .state file and is
 * read with la_trainer_read_config and la_trainer_load. Invariant: a refused load leaves
 * the trainer untouched (same weights, same step). */
#include <string.h>

#include "fuzz_util.h"
#include "longattn.h"

static la_model *g_m;
static la_trainer *g_tr;
static char g_ckpt[512];
static float *g_w0;

static void setup(void) {
    la_model_config c = la_model_config_default();
    c.n_layer = 1, c.n_head = 2, c.n_kv_head = 2, c.d_model = 8, c.d_ff = 8, c.vocab = 16, c.train_len = 8;
    FZ_CHECK(la_model_new(&c, 3, &g_m) == LA_OK, "model: %s", la_errmsg());
    la_train_config tc = la_train_config_default();
    tc.B = 1, tc.T = 4, tc.steps = 4;
    FZ_CHECK(la_trainer_new(g_m, NULL, &tc, &g_tr) == LA_OK, "trainer: %s", la_errmsg());
    snprintf(g_ckpt, sizeof g_ckpt, "%s/ckpt", fz_tmpdir());
    FZ_CHECK(la_trainer_save(g_tr, g_ckpt) == LA_OK, "save: %s", la_errmsg());
    size_t P = la_model_num_params(g_m);
    g_w0 = malloc(P * sizeof *g_w0);
    memcpy(g_w0, la_model_params(g_m), P * sizeof *g_w0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_m) setup();
    char sp[600];
    snprintf(sp, sizeof sp, "%s.state", g_ckpt);
    fz_write(sp, data, size);
    la_train_config tc;
    (void)la_trainer_read_config(g_ckpt, &tc);
    int step0 = la_trainer_step_count(g_tr);
    if (la_trainer_load(g_tr, g_ckpt) != LA_OK) {
        FZ_CHECK(la_trainer_step_count(g_tr) == step0, "refused load changed the step");
        FZ_CHECK(memcmp(g_w0, la_model_params(g_m), la_model_num_params(g_m) * sizeof(float)) == 0,
                 "refused load changed the weights");
    }
    return 0;
}
