#!/bin/sh
# profile_train.sh -- where a training step spends its time, per phase (docs/benchmarks.md:
# "Where the trainer's time goes"). Builds the whole tree with -DLA_PROFILE into build-prof/
# (wall-clock and process CPU-time laps between the step's phases, src/core/prof.h; the
# default build compiles them away) and runs `longattn bench train` there, which then prints
# the per-phase table. Arguments go to bench train, e.g.
#   scripts/profile_train.sh --study --steps 4 --rounds 2 --no-torch
#   OMP_NUM_THREADS=1 scripts/profile_train.sh --steps 3 --no-torch
set -e
make -j2 BUILD=build-prof CFLAGS=-DLA_PROFILE build-prof/longattn >/dev/null
exec ./build-prof/longattn bench train "$@"
