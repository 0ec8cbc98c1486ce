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
    /* data parallelism (src/core/dist.h): a step's grad_accum micro-batches are split over
     * the ranks in contiguous blocks; each micro-batch gradient is computed alone and the
     * step's gradient is their sum in micro-batch order, the same on 1 or N ranks */
    float *acc;     // (P) running sum of micro-batch gradients (one process, grad_accum > 1)
    float *dp_mine; // (n_mine, P + 1) this rank's micro-batch gradients, loss last (N > 1)
    float *dp_all;  // (grad_accum, P + 1) every micro-batch's, in micro-batch order (N > 1)
    int *dp_counts; // (N) floats each rank contributes
};

/* Train config <-> JSON text (stored in checkpoints). to_json returns malloc'ed text. */
char *la_train_config_to_json(const la_train_config *c);
la_status la_train_config_from_json(const char *text, la_train_config *c);

#endif
