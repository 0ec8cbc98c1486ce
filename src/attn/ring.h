/* ring.h -- sequence-parallel exact attention over the ranks of the process group
 * (issue 30; src/attn/ring.c). Internal to the project (the CLI and the tests use it);
 * not part of the public C API yet.
 *
 * One sequence (T = S, pos0 = 0: self-attention of a prefill or a training step) is split
 * over the P ranks of the current group (core/dist.h: the world, or a group of
 * la_dist_group_begin). Layout ("zigzag"): the sequence's 64-row tiles are cut into 2P
 * chunks of whole tiles, chunk c = tiles [c nt / 2P, (c+1) nt / 2P); rank r holds chunks r
 * and 2P-1-r, so with a causal mask every rank has about the same number of visible
 * (query, key) pairs. Every tensor is passed in its full, one-process layout (q (B,H,T,D),
 * k, v (B,Hkv,S,D), ...): a rank fills and reads only its own rows (la_attn_sp_rows); the
 * other rows are scratch that the calls fill with the other ranks' rows.
 *
 * Normalisers: softmax and the entmax family (entmax, sparsemax, ASEntmax with opts->as_beta /
 * as_gamma (B, H, T) full on every rank; das_beta / das_gamma: this rank's rows). Since every
 * rank holds every key, an entmax row's threshold is found by the one-process kernel over
 * the whole row: no distributed threshold search is needed. The entmax backward's dk, dv
 * pass reads delta_r = sum u dP / sum u of every query row: each rank computes it for its
 * own rows in its dq pass and the delta rows are exchanged (B * H * T floats) in between.
 *
 * Exactness: every output row, row statistic, dq, dk, dv and d logn_s is bitwise equal to
 * la_attn_forward / la_attn_backward of one process, for any P. The rank runs the one-process
 * kernel itself (the same tiles, the same context tables, the same global positions and
 * document runs), restricted to the work items of its own query tiles (forward, dq) and
 * key tiles (dk, dv), once the K/V rows (backward: also q, out, dout, lse rows) of the other
 * ranks have arrived through the ring. Each row is therefore computed by exactly the
 * arithmetic of one process, in the same global key-tile order, and no partial result is
 * ever merged across ranks (d logn_s: the per-tile partial sums are exchanged and added in
 * the one-process order). What this costs: each rank holds the full K and V (and, in the
 * backward, the full q, out, dout, lse) of the sequence -- memory O(T) per rank like one
 * process, compute and the rows a rank owns O(T / P). See docs/mpi.md.
 *
 * Overlap: K/V (backward: and the query-side rows) travel one (batch, kv head) pair at a
 * time (P - 1 steps of MPI_Isend/MPI_Irecv per pair: at step s each rank sends its own rows
 * to rank r+s and receives those of rank r-s, only the 64-row tiles the receiver reads, so
 * under a window a rank exchanges with its neighbours only); the rank computes pair p while
 * pair p+1 travels, progressing the exchange between pieces of its computation.
 *
 * Every function is collective over the current group. Errors (every rank returns the same
 * one, naming the first failing rank: la_dist_agree): LA_EINVAL for key_mass (not
 * supported), LA_ESHAPE for T != S or pos0 != 0; those of
 * la_attn_forward / la_attn_backward; LA_ENOMEM; LA_EIO (MPI). */
#ifndef LA_ATTN_RING_H
#define LA_ATTN_RING_H

#include "longattn/attn.h"

/* Rows [rows[0], rows[1]) and [rows[2], rows[3]) of a length-T sequence held by rank r of
 * P (the zigzag layout above; either range may be empty when T has fewer than 2P tiles). */
void la_attn_sp_rows(int T, int P, int r, int rows[4]);

/* What a call did on this rank (times in seconds, omp_get_wtime). */
typedef struct {
    double bytes_sent;    /* bytes this rank sent through the ring */
    double t_total;       /* the whole call */
    double t_compute;     /* inside the kernel */
    double t_wait;        /* blocked in MPI waiting for a ring step (not overlapped) */
    double t_test;        /* in MPI progress calls between pieces of computation */
    double cpu_total;     /* CPU time of this process during the call (all its threads): on a
                             shared machine the work a rank did, apart from waiting for a core */
    int steps;            /* ring steps */
} la_sp_stats;

/* Forward: on entry this rank's rows of q and of k, v; on return k and v hold the rows this
 * rank's queries see (whole 64-row tiles of the other ranks; under a window or sinks mask
 * not every rank's: the others stay zero), and out, row_stat (and opts->row_entropy,
 * row_support) this rank's rows. opts->doc_ids (B, S) and logn_s (H) are the full arrays on
 * every rank. stats may be NULL. la_attn_sp_forward_all_kv: the same, and k, v return with
 * every rank's rows (a KV cache filled by a prefill). */
la_status la_attn_sp_forward(const la_spec *spec, const la_shape *shape, float *q, float *k, float *v,
                             float *out, float *row_stat, const la_attn_opts *opts, la_sp_stats *stats);
la_status la_attn_sp_forward_all_kv(const la_spec *spec, const la_shape *shape, float *q, float *k, float *v,
                                    float *out, float *row_stat, const la_attn_opts *opts, la_sp_stats *stats);

/* Backward: on entry this rank's rows of q, k, v, out, row_stat, dout (the forward's rows);
 * on return q, out, row_stat, dout, k, v hold the rows this rank read (softmax and sigmoid
 * rows: the key tiles its queries see and the query tiles that see its keys; the entmax
 * family and a learned sink's opts->dsinks: every rank's rows), dq this rank's query rows,
 * dk, dv this rank's key rows, and opts->dlogn_s (logn) the full gradient on every rank. */
la_status la_attn_sp_backward(const la_spec *spec, const la_shape *shape, float *q, float *k, float *v,
                              float *out, float *row_stat, float *dout, float *dq, float *dk, float *dv,
                              const la_attn_opts *opts, la_sp_stats *stats);

/* Fill the other ranks' rows of x (n_heads, T, D) (x: every rank's own rows on entry). */
la_status la_attn_sp_gather(float *x, int n_heads, int T, int D, la_sp_stats *stats);

/* ASEntmax's beta, gamma (la_asentmax_params_forward) of rows [n0, n1) of the B*T only (row n:
 * token n % T of sequence n / T; the other rows of beta, gamma are not written): each element
 * comes from its own row, so a rank that computes its rows this way writes the bits of one
 * call over all rows (sequence-parallel training: the rank's rows, then la_attn_sp_gather).
 * Errors: those of la_asentmax_params_forward; LA_EINVAL for rows outside [0, B*T). */
la_status la_asentmax_params_forward_rows(const float *x, int B, int T, int C, int H, const float *w_beta,
                                          const float *b_beta, const float *w_gamma, const float *b_gamma,
                                          double gamma_range, float *beta, float *gamma, int64_t n0,
                                          int64_t n1);

/* The computation of rank r of P alone, on complete inputs (no communication): out and
 * row_stat of its rows (forward), or dq of its rows, dk, dv of its key rows and the
 * per-query-tile partial sums of d logn_s of its tiles into part (B, H, nqt) doubles when
 * not NULL (backward; opts->dlogn_s is not written). For the single-process tests of the
 * layout and the item selection. */
la_status la_attn_sp_forward_rank(const la_spec *spec, const la_shape *shape, const float *q, const float *k,
                                  const float *v, float *out, float *row_stat, const la_attn_opts *opts,
                                  int P, int r);
la_status la_attn_sp_backward_rank(const la_spec *spec, const la_shape *shape, const float *q, const float *k,
                                   const float *v, const float *out, const float *row_stat, const float *dout,
                                   float *dq, float *dk, float *dv, double *part, const la_attn_opts *opts,
                                   int P, int r);

#endif
