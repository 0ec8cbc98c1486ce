/* dist.c -- the process group: MPI_COMM_WORLD when built with LA_HAVE_MPI and launched by
 * mpirun, one process otherwise. The only file of the project that calls MPI (dist.h). */
#include "core/dist.h"
#include "core/internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LA_HAVE_MPI
#include <mpi.h>
#endif

/* the current communicator's rank and size: the world's, or a group's between
 * la_dist_group_begin and la_dist_group_end */
static int g_rank = 0, g_size = 1;
static int g_wsize = 1; /* the world's */
#ifdef LA_HAVE_MPI
static int g_wrank = 0;
#endif

int la_dist_launched_size(void) {
    /* OpenMPI's mpirun, then PMI launchers (MPICH's hydra, Slurm's srun) */
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return 1;
}

static double g_ring_bytes = 0; /* sent through la_dist_ring_start to another rank */
double la_dist_ring_bytes(void) { return g_ring_bytes; }

/* the bytes of n blocks (LA_EINVAL for a block past INT_MAX: one MPI message's count) */
static la_status ring_bytes(const la_dist_block *b, int n, size_t *bytes) {
    size_t tot = 0;
    for (int i = 0; i < n; i++) {
        if (b[i].n > INT_MAX)
            return la_fail(LA_EINVAL, "ring exchange: a block of %zu bytes is more than one message carries (%d); "
                           "split the sequence over more ranks", b[i].n, INT_MAX);
        tot += b[i].n;
    }
    *bytes = tot;
    return LA_OK;
}

/* A ring of one process: the send blocks' bytes, in order, into the receive blocks. */
static la_status ring_self(const la_dist_block *send, int n_send, const la_dist_block *recv, int n_recv) {
    size_t ns = 0, nr = 0;
    LA_TRY(ring_bytes(send, n_send, &ns));
    LA_TRY(ring_bytes(recv, n_recv, &nr));
    if (nr != ns) return la_fail(LA_EINVAL, "ring exchange of one process: %zu bytes sent, %zu expected", ns, nr);
    size_t so = 0, ro = 0; /* offsets inside send[i], recv[j] */
    for (int i = 0, j = 0; i < n_send && j < n_recv;) {
        size_t m = send[i].n - so < recv[j].n - ro ? send[i].n - so : recv[j].n - ro;
        if (m) memmove((char *)recv[j].p + ro, (const char *)send[i].p + so, m);
        so += m, ro += m;
        if (so == send[i].n) i++, so = 0;
        if (ro == recv[j].n) j++, ro = 0;
    }
    return LA_OK;
}

int la_dist_rank(void) { return g_rank; }
int la_dist_size(void) { return g_size; }
int la_dist_world_size(void) { return g_wsize; }

void la_dist_assign(const double *cost, int n, int n_ranks, int *owner) {
    /* longest processing time first: the most expensive item not yet placed goes to
     * the least loaded rank (ties: lower index, lower rank), so the result is the
     * same on every rank. No heap scratch: an allocation that failed on one rank only
     * would otherwise give that rank a different assignment from the others (found by
     * the allocation walk of issue #17). owner[i] < 0 marks an item not yet placed; a
     * rank's load is summed from owner[] in index order, O(n^2 R) for n cells. */
    int R = n_ranks < n ? n_ranks : n;
    for (int i = 0; i < n; i++) owner[i] = -1;
    for (int k = 0; k < n; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (owner[i] < 0 && (best < 0 || cost[i] > cost[best])) best = i;
        int rr = 0;
        double rr_load = 0;
        for (int r = 0; r < R; r++) {
            double load = 0;
            for (int i = 0; i < n; i++)
                if (owner[i] == r) load += cost[i];
            if (r == 0 || load < rr_load) { rr = r; rr_load = load; }
        }
        owner[best] = rr;
    }
}

#define MSG_LEN 512 /* bytes of a failing rank's message carried by la_dist_agree */

#ifdef LA_HAVE_MPI

static int g_mpi = 0; /* MPI initialised by la_dist_init */
static MPI_Comm g_comm = MPI_COMM_NULL; /* what the collectives use: the world or a group */
static MPI_Comm g_group = MPI_COMM_NULL;
static int g_base = 0; /* world rank of the current group's rank 0 */
static MPI_Request *g_ring = NULL; /* the exchange in flight: g_ring_n requests (grown once) */
static int g_ring_n = 0, g_ring_cap = 0, g_ring_busy = 0;

la_status la_dist_init(int *argc, char ***argv) {
    if (g_mpi || la_dist_launched_size() <= 1) return LA_OK;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS)
        return la_fail(LA_EIO, "MPI_Init failed: cannot start the process group");
    /* errors come back as codes (we turn them into la_status), not as an abort */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    g_wrank = g_rank;
    g_wsize = g_size;
    g_comm = MPI_COMM_WORLD;
    g_mpi = 1;
    return LA_OK;
}

void la_dist_finalize(void) {
    if (!g_mpi) return;
    la_dist_seq_end();
    if (g_group != MPI_COMM_NULL) MPI_Comm_free(&g_group);
    MPI_Finalize();
    free(g_ring);
    g_ring = NULL, g_ring_cap = g_ring_n = 0;
    g_mpi = 0;
    g_rank = g_wrank = 0;
    g_size = g_wsize = 1;
    g_base = 0;
    g_comm = MPI_COMM_NULL;
}

static la_status mpi_err(int rc, const char *what) {
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", rc);
    return la_fail(LA_EIO, "rank %d of %d: %s failed: %s", g_wrank, g_wsize, what, s);
}

static int g_agreed_failure;

int la_dist_agreed_failure(void) { return g_agreed_failure; }

la_status la_dist_agree(la_status st) {
    if (!g_mpi) return st;
    /* every rank's status and message, gathered on every rank: the answer is the same
     * everywhere and names the lowest failing rank (by its world rank, also inside a group;
     * a message that already names one, e.g. a group's agreed error passed on to the
     * world, is kept as it is) */
    char mine[MSG_LEN + sizeof(int)];
    memset(mine, 0, sizeof mine);
    int code = (int)st;
    memcpy(mine, &code, sizeof code);
    if (st != LA_OK) snprintf(mine + sizeof(int), MSG_LEN, "%s", la_errmsg());
    char *all = la_malloc((size_t)g_size * sizeof mine);
    if (!all) la_dist_abort(1, "out of memory exchanging status codes");
    int rc = MPI_Allgather(mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, g_comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_err(rc, "MPI_Allgather (status exchange)");
    }
    la_status out = LA_OK;
    for (int r = 0; r < g_size; r++) {
        char *e = all + (size_t)r * sizeof mine;
        memcpy(&code, e, sizeof code);
        if (code != LA_OK) {
            e[sizeof mine - 1] = 0;
            const char *m = e + sizeof(int);
            int r2, n2, len = 0;
            if (sscanf(m, "rank %d of %d: %n", &r2, &n2, &len) == 2 && len > 0 && n2 == g_wsize)
                out = la_fail((la_status)code, "%s", m); /* a group's agreed error: already named */
            else
                out = la_fail((la_status)code, "rank %d of %d: %s", g_base + r, g_wsize, m);
            break;
        }
    }
    free(all);
    if (out != LA_OK) g_agreed_failure = 1;
    return out;
}

int la_dist_any(int flag) {
    if (!g_mpi) return flag != 0;
    int in = flag != 0, out = 0;
    /* max of 0/1 integers: exact, whatever the reduction tree */
    if (MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, g_comm) != MPI_SUCCESS)
        la_dist_abort(1, "MPI_Allreduce of a stop flag failed");
    return out;
}

int la_dist_same_u64(uint64_t v) {
    if (!g_mpi) return 1;
    uint64_t in[2] = {v, ~v}, out[2]; /* max of v and of ~v: equal everywhere iff max v == min v */
    if (MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MAX, g_comm) != MPI_SUCCESS)
        la_dist_abort(1, "MPI_Allreduce of a check value failed");
    return out[0] == ~out[1];
}

la_status la_dist_allgatherv_f32(const float *send, float *recv, const int *counts) {
    if (!g_mpi) {
        if (counts[0] && send != recv) memcpy(recv, send, (size_t)counts[0] * sizeof(float));
        return LA_OK;
    }
    int *displs = la_malloc((size_t)g_size * sizeof(int));
    if (!displs) return la_fail(LA_ENOMEM, "rank %d: out of memory (allgatherv)", g_rank);
    long long off = 0;
    for (int r = 0; r < g_size; r++) {
        if (off > INT_MAX) {
            free(displs);
            return la_fail(LA_EINVAL, "allgatherv: more than %d floats in one exchange", INT_MAX);
        }
        displs[r] = (int)off;
        off += counts[r];
    }
    int rc = MPI_Allgatherv(send, counts[g_rank], MPI_FLOAT, recv, counts, displs, MPI_FLOAT, g_comm);
    free(displs);
    return rc == MPI_SUCCESS ? LA_OK : mpi_err(rc, "MPI_Allgatherv");
}

la_status la_dist_alltoallv_f32(const float *send, const int *send_counts, float *recv, const int *recv_counts) {
    if (!g_mpi) {
        if (send_counts[0] && send != recv) memcpy(recv, send, (size_t)send_counts[0] * sizeof(float));
        return LA_OK;
    }
    int *sd = la_malloc((size_t)g_size * 2 * sizeof(int)), *rd = sd ? sd + g_size : NULL;
    if (!sd) return la_fail(LA_ENOMEM, "rank %d: out of memory (alltoallv)", g_rank);
    long long so = 0, ro = 0;
    for (int q = 0; q < g_size; q++) {
        if (so > INT_MAX || ro > INT_MAX) {
            free(sd);
            return la_fail(LA_EINVAL, "alltoallv: more than %d floats in one exchange", INT_MAX);
        }
        sd[q] = (int)so;
        rd[q] = (int)ro;
        so += send_counts[q];
        ro += recv_counts[q];
    }
    int rc = MPI_Alltoallv(send, send_counts, sd, MPI_FLOAT, recv, recv_counts, rd, MPI_FLOAT, g_comm);
    free(sd);
    return rc == MPI_SUCCESS ? LA_OK : mpi_err(rc, "MPI_Alltoallv");
}

la_status la_dist_gatherv_bytes(const void *send, void *recv, const size_t *counts, int root) {
    if (!g_mpi) {
        if (counts[0] && send != recv) memcpy(recv, send, counts[0]);
        return LA_OK;
    }
    int *cnt = la_malloc((size_t)g_size * 2 * sizeof(int));
    if (!cnt) return la_fail(LA_ENOMEM, "rank %d: out of memory (gatherv)", g_rank);
    int *displs = cnt + g_size;
    size_t off = 0;
    for (int r = 0; r < g_size; r++) {
        if (counts[r] > INT_MAX || off > INT_MAX) {
            free(cnt);
            return la_fail(LA_EINVAL, "gatherv: more than %d bytes in one exchange", INT_MAX);
        }
        cnt[r] = (int)counts[r];
        displs[r] = (int)off;
        off += counts[r];
    }
    int rc = MPI_Gatherv(send, cnt[g_rank], MPI_BYTE, recv, cnt, displs, MPI_BYTE, root, g_comm);
    free(cnt);
    return rc == MPI_SUCCESS ? LA_OK : mpi_err(rc, "MPI_Gatherv");
}

la_status la_dist_bcast(void *buf, size_t n, int root) {
    if (!g_mpi) return LA_OK;
    if (n > INT_MAX) return la_fail(LA_EINVAL, "bcast: %zu bytes is more than one exchange carries", n);
    int rc = MPI_Bcast(buf, (int)n, MPI_BYTE, root, g_comm);
    return rc == MPI_SUCCESS ? LA_OK : mpi_err(rc, "MPI_Bcast");
}

la_status la_dist_ring_start(int shift, const la_dist_block *send, int n_send, const la_dist_block *recv,
                             int n_recv) {
    if (g_ring_busy) return la_fail(LA_EINVAL, "ring exchange: one is already in flight");
    if (!g_mpi || g_size == 1) return ring_self(send, n_send, recv, n_recv);
    int next = ((g_rank + shift) % g_size + g_size) % g_size, prev = ((g_rank - shift) % g_size + g_size) % g_size;
    size_t ns = 0, nr = 0;
    LA_TRY(ring_bytes(send, n_send, &ns));
    LA_TRY(ring_bytes(recv, n_recv, &nr));
    int m = 0;
    for (int i = 0; i < n_send; i++) m += send[i].n > 0;
    for (int i = 0; i < n_recv; i++) m += recv[i].n > 0;
    if (m > g_ring_cap) {
        MPI_Request *q = realloc(g_ring, sizeof(MPI_Request) * (size_t)m);
        if (!q) return la_fail(LA_ENOMEM, "rank %d: out of memory (ring exchange of %d blocks)", g_rank, m);
        g_ring = q, g_ring_cap = m;
    }
    /* One message per non-empty block, straight from and into the caller's arrays, posted in
     * block order on both sides: MPI matches the messages of one sender, communicator and tag
     * in the order they were posted, and the receiver's list is cut like the sender's (the
     * same rows of the same arrays). Contiguous messages rather than one derived datatype
     * (MPI_Type_create_hindexed) over the blocks: measured on OpenMPI 4.1 over shared memory,
     * the datatype lost the single-copy (CMA) path of contiguous messages and the ranks waited
     * much longer for the ring (docs/mpi.md, "Rows in place"). Tag 30 (issue 30): apart from every
     * other exchange, which are collectives. */
    la_status e = LA_OK;
    g_ring_n = 0;
    for (int i = 0; e == LA_OK && i < n_recv; i++) {
        if (!recv[i].n) continue;
        int rc = MPI_Irecv(recv[i].p, (int)recv[i].n, MPI_BYTE, prev, 30, g_comm, &g_ring[g_ring_n++]);
        if (rc != MPI_SUCCESS) e = mpi_err(rc, "MPI_Irecv (ring)");
    }
    for (int i = 0; e == LA_OK && i < n_send; i++) {
        if (!send[i].n) continue;
        int rc = MPI_Isend(send[i].p, (int)send[i].n, MPI_BYTE, next, 30, g_comm, &g_ring[g_ring_n++]);
        if (rc != MPI_SUCCESS) e = mpi_err(rc, "MPI_Isend (ring)");
    }
    LA_TRY(e);
    g_ring_bytes += (double)ns;
    g_ring_busy = 1;
    return LA_OK;
}

la_status la_dist_ring_test(int *done) {
    *done = 1;
    if (!g_ring_busy) return LA_OK;
    int flag = 0;
    int rc = MPI_Testall(g_ring_n, g_ring, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
        g_ring_busy = 0;
        return mpi_err(rc, "MPI_Testall (ring)");
    }
    if (flag) g_ring_busy = 0;
    *done = flag;
    return LA_OK;
}

la_status la_dist_ring_wait(void) {
    if (!g_ring_busy) return LA_OK;
    g_ring_busy = 0;
    int rc = MPI_Waitall(g_ring_n, g_ring, MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS ? LA_OK : mpi_err(rc, "MPI_Waitall (ring)");
}

la_status la_dist_group_begin(int k, int *group, int *n_groups) {
    if (k < 1 || g_wsize % k)
        return la_fail(LA_EINVAL, "groups of %d ranks do not divide the %d ranks started: start a multiple of %d "
                       "ranks (mpirun -np %d) or use groups of a divisor of %d", k, g_wsize, k,
                       k * (g_wsize / k + 1), g_wsize);
    if (g_comm != MPI_COMM_WORLD && g_mpi) return la_fail(LA_EINVAL, "la_dist_group_begin: already in a group");
    *group = g_wrank / k;
    *n_groups = g_wsize / k;
    if (!g_mpi) return LA_OK;
    /* consecutive world ranks form a group (with mpirun's default by-core/by-slot mapping
     * they share a node, so a group's gradient exchange stays inside it) */
    int rc = MPI_Comm_split(MPI_COMM_WORLD, *group, g_wrank, &g_group);
    if (rc != MPI_SUCCESS) return mpi_err(rc, "MPI_Comm_split (rank groups)");
    MPI_Comm_set_errhandler(g_group, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_group, &g_rank);
    MPI_Comm_size(g_group, &g_size);
    g_base = *group * k;
    g_comm = g_group;
    return LA_OK;
}

void la_dist_group_end(void) {
    if (!g_mpi || g_group == MPI_COMM_NULL) return;
    MPI_Comm_free(&g_group);
    g_comm = MPI_COMM_WORLD;
    g_rank = g_wrank;
    g_size = g_wsize;
    g_base = 0;
}

/* sequence groups: a communicator inside the current one, swapped in by la_dist_seq_enter */
static MPI_Comm g_seq = MPI_COMM_NULL, g_saved_comm = MPI_COMM_NULL;
static int g_seq_rank = 0, g_seq_size = 1, g_seq_base = 0;
static int g_saved_rank = 0, g_saved_size = 1, g_saved_base = 0, g_in_seq = 0;

la_status la_dist_seq_begin(int k, int *seq, int *n_seq) {
    if (k < 1 || g_size % k)
        return la_fail(LA_EINVAL, "seq_parallel %d does not divide the %d ranks %s: start a multiple of %d ranks "
                       "(mpirun -np %d) or set seq_parallel to a divisor of %d", k, g_size,
                       g_comm == MPI_COMM_WORLD || !g_mpi ? "started" : "of this group", k,
                       k * (g_size / k + 1), g_size);
    if (g_seq != MPI_COMM_NULL) return la_fail(LA_EINVAL, "la_dist_seq_begin: sequence groups exist already");
    *seq = g_rank / k;
    *n_seq = g_size / k;
    if (!g_mpi) return LA_OK;
    int rc = MPI_Comm_split(g_comm, *seq, g_rank, &g_seq);
    if (rc != MPI_SUCCESS) return mpi_err(rc, "MPI_Comm_split (sequence groups)");
    MPI_Comm_set_errhandler(g_seq, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_seq, &g_seq_rank);
    MPI_Comm_size(g_seq, &g_seq_size);
    g_seq_base = g_base + *seq * k;
    return LA_OK;
}

void la_dist_seq_enter(void) {
    if (g_seq == MPI_COMM_NULL || g_in_seq) return;
    g_saved_comm = g_comm, g_saved_rank = g_rank, g_saved_size = g_size, g_saved_base = g_base;
    g_comm = g_seq, g_rank = g_seq_rank, g_size = g_seq_size, g_base = g_seq_base;
    g_in_seq = 1;
}

void la_dist_seq_leave(void) {
    if (!g_in_seq) return;
    g_comm = g_saved_comm, g_rank = g_saved_rank, g_size = g_saved_size, g_base = g_saved_base;
    g_in_seq = 0;
}

void la_dist_seq_end(void) {
    la_dist_seq_leave();
    if (g_seq != MPI_COMM_NULL) MPI_Comm_free(&g_seq);
}

void la_dist_abort(int code, const char *msg) {
    fprintf(stderr, "longattn: rank %d of %d: %s; stopping every rank\n", g_wrank, g_wsize, msg);
    fflush(stderr);
    if (g_mpi) MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
    exit(code ? code : 1);
}

#else /* one process: no MPI in this build */

la_status la_dist_init(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    int n = la_dist_launched_size();
    if (n > 1)
        return la_fail(LA_EINVAL,
                       "started as one of %d processes (mpirun/srun), but this build of longattn has no "
                       "MPI: every process would run the whole job alone. Install MPI (Debian: apt-get "
                       "install libopenmpi-dev openmpi-bin) and rebuild (make clean && make), or run "
                       "without mpirun",
                       n);
    return LA_OK;
}

void la_dist_finalize(void) {}

la_status la_dist_agree(la_status st) { return st; }
int la_dist_agreed_failure(void) { return 0; }
int la_dist_same_u64(uint64_t v) {
    (void)v;
    return 1;
}
int la_dist_any(int flag) { return flag != 0; }

la_status la_dist_allgatherv_f32(const float *send, float *recv, const int *counts) {
    if (counts[0] && send != recv) memcpy(recv, send, (size_t)counts[0] * sizeof(float));
    return LA_OK;
}

la_status la_dist_alltoallv_f32(const float *send, const int *send_counts, float *recv, const int *recv_counts) {
    (void)recv_counts;
    if (send_counts[0] && send != recv) memcpy(recv, send, (size_t)send_counts[0] * sizeof(float));
    return LA_OK;
}

la_status la_dist_gatherv_bytes(const void *send, void *recv, const size_t *counts, int root) {
    (void)root;
    if (counts[0] && send != recv) memcpy(recv, send, counts[0]);
    return LA_OK;
}

la_status la_dist_bcast(void *buf, size_t n, int root) {
    (void)buf;
    (void)n;
    (void)root;
    return LA_OK;
}

la_status la_dist_ring_start(int shift, const la_dist_block *send, int n_send, const la_dist_block *recv,
                             int n_recv) {
    (void)shift;
    return ring_self(send, n_send, recv, n_recv);
}

la_status la_dist_ring_test(int *done) {
    *done = 1;
    return LA_OK;
}

la_status la_dist_ring_wait(void) { return LA_OK; }

la_status la_dist_group_begin(int k, int *group, int *n_groups) {
    if (k != 1)
        return la_fail(LA_EINVAL, "groups of %d ranks do not divide the 1 rank started: start a multiple of %d "
                       "ranks (mpirun -np %d, in a build with MPI) or use groups of 1", k, k, k);
    *group = 0;
    *n_groups = 1;
    return LA_OK;
}

void la_dist_group_end(void) {}

la_status la_dist_seq_begin(int k, int *seq, int *n_seq) {
    if (k != 1)
        return la_fail(LA_EINVAL, "seq_parallel %d does not divide the 1 rank started: start a multiple of %d "
                       "ranks (mpirun -np %d, in a build with MPI) or set seq_parallel to 1", k, k, k);
    *seq = 0;
    *n_seq = 1;
    return LA_OK;
}

void la_dist_seq_enter(void) {}
void la_dist_seq_leave(void) {}
void la_dist_seq_end(void) {}

void la_dist_abort(int code, const char *msg) {
    fprintf(stderr, "longattn: %s\n", msg);
    exit(code ? code : 1);
}

#endif
