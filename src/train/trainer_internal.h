/* trainer_internal.h -- the trainer's state, shared by trainer.c and checkpoint.c. */
#ifndef LA_TRAIN_TRAINER_INTERNAL_H
#define LA_TRAIN_TRAINER_INTERNAL_H

#include "core/internal.h"
#include "longattn/train.h"

/* The gradient norm is summed in fixed chunks of this many entries (each in double, in a
 * fixed order), then the chunks in order: the same bits for any thread count. */
#define LA_GN_CHUNK 16384

struct la_trainer {
    la_model *m;
    la_data *data;
    la_train_config cfg;
    size_t P;
    float *adam_m, *adam_v;  // (P) AdamW moments (unused entries stay 0 under Muon)
    float *mom;              // (P) Muon momentum, NULL under AdamW
    float *scratch;          // Muon Newton-Schulz scratch
    double *gn_part;         // (ceil(P / LA_GN_CHUNK)) partial sums of squared gradients
    int32_t *window;         // (B, T+1) sampled windows
    int32_t *inp, *tgt;      // (B, T)
    int step;
    /* data parallelism (src/core/dist.h): a step's grad_accum micro-batches are split over
     * the ranks in contiguous blocks; each micro-batch gradient is computed alone and the
     * step's gradient is their sum in micro-batch order, the same on 1 or N ranks */
    float *acc;     // (P) running sum of micro-batch gradients (one process, grad_accum > 1)
    /* N > 1: the parameters are cut into N slices, rank q sums slice q (a fixed-order
     * reduce-scatter by MPI_Alltoallv), then every rank gets every summed slice */
    float *dp_send;   // (N slices: n_mine micro-batches x slice q) this rank's gradients, by
                      // rank; then (my slice) its sum
    float *dp_recv;   // (grad_accum, my slice) every micro-batch's gradient of my slice, in order
    float *dp_loss;   // (n_mine) this rank's micro-batch losses, then (grad_accum) all of them
    float *dp_lossall;
    int *dp_counts;   // (4 N) per rank: floats sent, floats received, losses, slice length
    int sp_k;         // ranks per sequence (seq_parallel; 1: none)
    int sp_on;        // the sequence groups exist (la_dist_seq_begin at the first step)
};

/* Train config <-> JSON text (stored in checkpoints). to_json returns malloc'ed text. */
char *la_train_config_to_json(const la_train_config *c);
la_status la_train_config_from_json(const char *text, la_train_config *c);

#endif
