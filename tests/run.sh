#!/usr/bin/env bash
# Run every test program in BUILD/tests, each under a time limit, and finish with one
# line "N passed, N failed" (counted in cmocka test cases) that CI reads. The limit
# (LA_TEST_TIMEOUT, default 1800 s) only turns a hang into a failure: it is far above any
# program's time on a loaded or single-core machine (issue 26), not a speed requirement.
set -u
build=${1:-build}
export LA_FIXTURES=${LA_FIXTURES:-../shared/fixtures}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
if [ -n "${LA_SANITIZED:-}" ]; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
passed=0; failed=0; broken=""
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d|*.o) continue ;; esac
    log=$(mktemp)
    start=$(date +%s)
    timeout "${LA_TEST_TIMEOUT:-1800}" "$t" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    p=$(grep -cE '^\[       OK \]' "$log")
    f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1)
    f=${f:-0}
    if [ $rc -ne 0 ] && [ "$f" = 0 ]; then f=1; fi
    passed=$((passed + p)); failed=$((failed + f))
    if [ $rc -ne 0 ]; then
        broken="$broken $(basename "$t")"
        echo "---- $(basename "$t") FAILED (exit $rc, ${secs}s) ----"; cat "$log"
    else
        echo "ok   $(basename "$t")  ($p cases, ${secs}s)"
    fi
    rm -f "$log"
done
[ -n "$broken" ] && echo "failing programs:$broken"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
