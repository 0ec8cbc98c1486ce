/* lm.c -- the accessors of the language-model interface la_lm (src/model/lm.h). */
#include "model/lm.h"

int la_lm_vocab(const la_lm *lm) { return lm ? lm->vocab : 0; }
int64_t la_lm_context(const la_lm *lm) { return lm ? lm->n_ctx : 0; }
const la_spec *la_lm_spec(const la_lm *lm) { return lm ? lm->ops->spec(lm->model) : NULL; }
const char *la_lm_family(const la_lm *lm) { return lm ? lm->ops->family : NULL; }
