/* Shared between the diagnose runners (diagnose_run.c, diagnose_passkey.c); not public. */
#ifndef LA_RUNNER_DIAGNOSE_INTERNAL_H
#define LA_RUNNER_DIAGNOSE_INTERNAL_H

#include "longattn/experiments.h" /* its module header (issue 32: not the umbrella) */

/* Load a `longattn train` / `study` checkpoint that must be byte-level (vocab 256), as both
 * diagnose modes feed bytes. `why` completes the error "... so it needs a byte-level model"
 * (e.g. "--text feeds bytes"). On success *out owns the model; on failure it is NULL and the
 * message names --ckpt. */
la_status la_diag_load_byte_model(const char *ckpt, const char *why, la_model **out);

#endif
