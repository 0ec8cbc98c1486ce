/* fuzz_checkpoint.c -- model checkpoints (la_model_load: safetensors with the model config
 * and spec in its metadata). A checkpoint that loads must run: one forward pass on a short
 * sequence returns LA_OK or LA_ENUMERIC. The loss itself may be non-finite: the loader
 * refuses non-finite weights, but finite weights near FLT_MAX overflow in the forward, and
 * the library's contract is that callers (trainer, evaluation) turn a non-finite loss into
 * LA_ENUMERIC (the first fuzz run stopped on exactly that, a harness error). */
#include <math.h>
#include <string.h>

#include "fuzz_util.h"
#include "longattn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", fz_tmpdir());
    fz_write(path, data, size);
    la_model *m = NULL;
    if (la_model_load(path, &m) == LA_OK) {
        FZ_CHECK(m != NULL, "la_model_load succeeded without a model");
        const la_model_config *c = la_model_get_config(m);
        int32_t tok[4], tgt[4];
        for (int i = 0; i < 4; i++) tok[i] = tgt[i] = i % c->vocab;
        float loss = NAN;
        la_status s = la_model_forward(m, tok, tgt, 1, 4, &loss, NULL);
        FZ_CHECK(s == LA_OK || s == LA_ENUMERIC, "forward of a loaded model failed: %s", la_errmsg());
        la_model_free(m);
    } else {
        FZ_CHECK(m == NULL, "la_model_load failed but left a model");
    }
    return 0;
}
