/* trainer_internal.h -- the trainer's state, shared by trainer.c and checkpoint.c. */
#ifndef LA_TRAIN_TRAINER_INTERNAL_H
#define LA_TRAIN_TRAINER_INTERNAL_H

#include "core/internal.h"

struct la_trainer {
    la_model *m;
    la_data *data;
    la_train_config cfg;
    size_t P;
    float *adam_m, *adam_v;  // (P) AdamW moments (unused entries stay 0 under Muon)
    float *mom;              // (P) Muon momentum, NULL under AdamW
    float *scratch;          // Muon Newton-Schulz scratch
    int32_t *window;         // (B, T+1) sampled windows
    int32_t *inp, *tgt;      // (B, T)
    int step;
};

/* Train config <-> JSON text (stored in checkpoints). to_json returns malloc'ed text. */
char *la_train_config_to_json(const la_train_config *c);
la_status la_train_config_from_json(const char *text, la_train_config *c);

#endif
