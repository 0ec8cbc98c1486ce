#!/usr/bin/env bash
# make check: the layering check (make check-layers), the C tests (normal build), the MPI tests (tests/mpi.sh), the C tests again under ASan+UBSan, the Python
# tests (pytest in .venv, with the documentation test tests/python/test_documentation.py), then one
# closing line summing the three that CI reads.
set -u
cd "$(dirname "$0")/.."
total_p=0; total_f=0; rc_all=0
stage() {
    local name=$1; shift
    local log; log=$(mktemp)
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    local line p f
    if [ "$name" = python ]; then
        line=$(grep -E '(passed|failed|error).* in [0-9.]+s' "$log" | tail -1)
        p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+'); p=${p:-0}
        f=$(echo "$line" | grep -oE '[0-9]+ (failed|error)' | awk '{s+=$1} END{print s+0}')
    else
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
        p=$(echo "$line" | cut -d' ' -f1); f=$(echo "$line" | cut -d' ' -f3)
        p=${p:-0}; f=${f:-0}
    fi
    if [ "$rc" -ne 0 ] && [ "$f" = 0 ]; then f=1; fi
    echo "== stage $name: $p passed, $f failed (exit $rc)"
    total_p=$((total_p + p)); total_f=$((total_f + f))
    [ "$rc" -ne 0 ] && rc_all=1
    rm -f "$log"
}
if make check-layers; then
    echo "== stage layers: ok"
else
    echo "== stage layers: FAILED (a dependency runs against the layer table, see above)"
    total_f=$((total_f + 1)); rc_all=1
fi
stage c make test
# the multi-process tests (mpirun -np 2 and 3; skipped with a message when the build has no MPI)
stage mpi tests/mpi.sh build
stage sanitized make test-san
stage python make test-python
echo "check: $total_p passed, $total_f failed"
exit $rc_all
