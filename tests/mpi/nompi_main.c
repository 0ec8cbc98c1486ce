/* nompi_main.c -- tests/mpi.sh builds this with src/core/dist.c WITHOUT LA_HAVE_MPI (the
 * one-process implementation) and checks that being started by mpirun is refused with a
 * message saying how to rebuild, and that a plain start runs as rank 0 of 1. */
#include <stdio.h>
#include "core/dist.h"
int main(int argc, char **argv) {
    if (la_dist_init(&argc, &argv) != LA_OK) { fprintf(stderr, "%s\n", la_errmsg()); return 1; }
    printf("rank %d size %d\n", la_dist_rank(), la_dist_size());
    return 0;
}
