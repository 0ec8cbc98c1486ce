/* dist.h -- the process group (MPI) behind one small interface (src/core/dist.c).
 *
 * The only code that calls MPI is src/core/dist.c. Built with LA_HAVE_MPI (make finds
 * mpicc), it wraps MPI_COMM_WORLD; built without, it is a one-process group, and being
 * started by a launcher (mpirun/srun with more than one process) is an error that says how
 * to rebuild. MPI is initialised only when the process was started by a launcher, so a
 * plain run never touches MPI. Every function below except la_dist_rank/size/active and
 * la_dist_abort is COLLECTIVE: every rank calls it, in the same order.
 *
 * Failure rule: a rank that fails does not return early from a collective phase; it passes
 * its status to la_dist_agree, which every rank calls at the same point, and all ranks
 * then return the same error naming the first failing rank and its message. A rank that
 * dies (killed, out of memory in the kernel) is handled by the launcher (mpirun aborts the
 * job); la_dist_abort is the last resort inside the program.
 */
#ifndef LA_CORE_DIST_H
#define LA_CORE_DIST_H

#include <stddef.h>

#include "longattn/core.h"

/* Start: initialise MPI when launched by mpirun (OMPI_COMM_WORLD_SIZE / PMI_SIZE > 1 in the
 * environment), otherwise stay one process. Errors: LA_EINVAL when launched with several
 * processes by a build without MPI (the message says how to rebuild), LA_EIO when MPI
 * fails to start. Calling it again is a no-op. */
la_status la_dist_init(int *argc, char ***argv);
/* Finish MPI (no-op when it was not started). */
void la_dist_finalize(void);
/* This process's rank in [0, size) and the number of processes (0 and 1 when alone); inside
 * a group (la_dist_group_begin) the rank in the group and the group's size. */
int la_dist_rank(void);
int la_dist_size(void);
/* The number of processes the launcher started, group or not. */
int la_dist_world_size(void);
/* Number of processes the launcher says it started (1 when not launched). */
int la_dist_launched_size(void);

/* Work split (not collective; the same answer on every rank): owner[i] = the rank that
 * does item i of n with estimated cost[i] -- most expensive first to the least loaded rank
 * (ties: lower index, lower rank); ranks beyond n get nothing. */
void la_dist_assign(const double *cost, int n, int n_ranks, int *owner);

/* Collective: every rank passes its own status (and, when failing, its la_errmsg()). All
 * ranks return LA_OK, or the status of the lowest failing rank with the message
 * "rank R of N: <its message>" (a single process returns st unchanged). */
la_status la_dist_agree(la_status st);
/* Collective: 1 on every rank when flag is nonzero on any rank. */
int la_dist_any(int flag);
/* 1 once a la_dist_agree has returned a failure: every rank saw it at the same call and has
 * stopped, so the program exchanges nothing more (main's last agree is skipped). */
int la_dist_agreed_failure(void);
/* Collective: 1 on every rank when v is the same on every rank. */
int la_dist_same_u64(uint64_t v);
/* Collective: rank r contributes counts[r] floats (send); recv receives all ranks'
 * contributions in rank order (sum of counts floats). One process: a copy. */
la_status la_dist_allgatherv_f32(const float *send, float *recv, const int *counts);
/* Collective: rank r sends send_counts[q] floats to rank q (packed in rank order in send)
 * and receives recv_counts[q] floats from rank q (packed in rank order in recv). */
la_status la_dist_alltoallv_f32(const float *send, const int *send_counts, float *recv, const int *recv_counts);
/* Collective: rank r contributes counts[r] bytes; root receives them in rank order into
 * recv (other ranks may pass recv NULL). */
la_status la_dist_gatherv_bytes(const void *send, void *recv, const size_t *counts, int root);
/* Collective: n bytes of buf from root to every rank. */
la_status la_dist_bcast(void *buf, size_t n, int root);

/* Ring exchange (sequence parallelism, src/attn/ring.c), non-blocking so that the caller
 * computes while it runs: la_dist_ring_start posts sends of the n_send blocks send[] to the
 * rank `shift` ahead ((rank + shift) % size) and receives from the rank `shift` behind
 * ((rank - shift) % size) into the n_recv blocks recv[]: the blocks are rows inside the
 * caller's arrays, each sent as its own contiguous message, so the rows go from and into
 * those arrays without a pack or unpack copy of ours. The receiver's list must be cut like
 * the sender's (the same block sizes in the same order, empty blocks skipped on both sides):
 * block i of one rank's send lands in block i of the receive of the rank shift ahead; either
 * list may be empty (nothing posted for it). la_dist_ring_test progresses them (*done = 1
 * once all completed) and la_dist_ring_wait waits for all. One exchange in flight per
 * process; the blocks must stay untouched until it completed (the send blocks may be read).
 * Every rank of the group calls them in the same order with the same shift (the exchange
 * is matched by order, like a collective). One process: the ring is the process itself
 * (the send blocks' bytes, in order, are copied into the receive blocks, however each list
 * is cut). Errors: LA_EINVAL (a block of more than INT_MAX bytes, different byte counts on
 * one process, or an exchange already in flight), LA_ENOMEM, LA_EIO. */
typedef struct {
    void *p;  /* first byte of the block */
    size_t n; /* its bytes (0: skipped) */
} la_dist_block;
la_status la_dist_ring_start(int shift, const la_dist_block *send, int n_send, const la_dist_block *recv,
                             int n_recv);
la_status la_dist_ring_test(int *done);
la_status la_dist_ring_wait(void);
/* Bytes this process has sent to another rank through the ring since it started (not
 * collective; 0 when alone): what sequence parallelism costs in traffic. */
double la_dist_ring_bytes(void);

/* Collective over all processes: cut them into groups of k consecutive ranks (world ranks
 * [g k, (g+1) k) form group g; *group = g, *n_groups = size / k). Until la_dist_group_end
 * (collective again) la_dist_rank/size and every collective above refer to this process's
 * group only, so code written for "all ranks" (the trainer's data parallelism) runs inside
 * a group unchanged; error messages still name world ranks. Errors: LA_EINVAL when k does
 * not divide the number of processes (the message names both and the fix), LA_EIO. */
la_status la_dist_group_begin(int k, int *group, int *n_groups);
void la_dist_group_end(void);
/* Sequence groups (issue 30, training with "seq_parallel": k): inside the current group (or
 * the world), consecutive runs of k ranks share one sequence. la_dist_seq_begin is
 * collective over the current group and creates them (errors: LA_EINVAL when k does not
 * divide the group's size, naming both and the fix; LA_EIO); la_dist_seq_enter /
 * la_dist_seq_leave (not collective: every rank of a sequence group calls them at the same
 * points) switch la_dist_rank/size and every collective above to this rank's sequence group
 * and back, so that the ring (src/attn/ring.c) runs inside it while the trainer's gradient
 * exchange runs over the whole group; la_dist_seq_end frees them (collective again).
 * *seq = this rank's sequence group, *n_seq = their number (size / k). One process: only
 * k = 1. */
la_status la_dist_seq_begin(int k, int *seq, int *n_seq);
void la_dist_seq_enter(void);
void la_dist_seq_leave(void);
void la_dist_seq_end(void);
/* Stop every rank now (MPI_Abort) after printing msg with this rank's number to stderr;
 * alone: exit(code). Last resort of a program (never called by the library). */
void la_dist_abort(int code, const char *msg) __attribute__((noreturn));

#endif
