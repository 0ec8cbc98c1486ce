#!/bin/sh
# profile_attn.sh -- where the softmax attention forward+backward spends its time, per
# phase (docs/benchmarks.md: "Where the backward's time goes"). Builds a copy of the kernel
# with -DLA_PROFILE (time-stamp-counter laps around each phase of the tile loops, see
# src/attn/softmax.c) into build-prof/, links tests/tools/attn_run.c against it and the
# normal internal library, and runs it:
#   scripts/profile_attn.sh [SPEC] [T] [reps] [threads]     (defaults: softmax+causal 4096 3 1)
# perf(1) is the better tool where the kernel exposes hardware counters; valgrind cannot
# run the AVX-512 build. Needs `make` first (build/liblongattn-internal.a).
set -e
spec=${1:-softmax+causal}; T=${2:-4096}; reps=${3:-3}; threads=${4:-1}
CC=${CC:-cc}
FLAGS="-std=gnu11 -O3 -march=native -g -fopenmp -Iinclude -Isrc -DLA_PROFILE"
mkdir -p build-prof
$CC $FLAGS -c src/attn/softmax.c -o build-prof/softmax.o
$CC $FLAGS tests/tools/attn_run.c build-prof/softmax.o build/liblongattn-internal.a -fopenmp \
    $(sed 's/#.*//' scripts/link-libs.txt | sed 's/[^ ][^ ]*/-l&/g') -o build-prof/attn_run
exec ./build-prof/attn_run "$spec" "$T" "$reps" "$threads" fwdbwd
