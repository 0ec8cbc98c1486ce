#!/usr/bin/env bash
# fuzz/run.sh MODE BUILD [SECONDS]: drive the fuzz targets built in BUILD/fuzz/.
#   MODE fuzz    libFuzzer, SECONDS per target (one process each, -jobs not used), over a
#                scratch copy of fuzz/corpus/<target>/ (the repository keeps only the seeds);
#                crash inputs are copied to BUILD/fuzz-crashes/; one summary line per target
#                goes to stdout and BUILD/fuzz-summary.txt
#   MODE smoke   libFuzzer binaries, every seed run once (no mutation)
#   MODE replay  BUILD/fuzz/replay_<target> (normal compiler, no libFuzzer) over the seeds
# FUZZ_TARGETS="spec gguf" limits the run to those targets.
# Exit status: nonzero if any target crashed or failed an invariant.
set -u
mode=$1; build=$2; secs=${3:-60}
cd "$(dirname "$0")/.."
targets=${FUZZ_TARGETS:-$(ls fuzz/fuzz_*.c | sed 's|fuzz/fuzz_||; s|\.c$||')}
rc=0
case $mode in
replay)
    for t in $targets; do
        out=$("$build/fuzz/replay_$t" "fuzz/corpus/$t" 2>&1); r=$?
        if [ $r -ne 0 ]; then echo "---- fuzz replay $t FAILED (exit $r)"; echo "$out"; rc=1
        else echo "ok   fuzz replay $t ($(echo "$out" | tail -1))"; fi
    done ;;
smoke)
    for t in $targets; do
        out=$("$build/fuzz/fuzz_$t" -runs=0 fuzz/corpus/$t/* 2>&1); r=$?
        if [ $r -ne 0 ]; then echo "---- fuzz smoke $t FAILED (exit $r)"; echo "$out" | tail -40; rc=1
        else echo "ok   fuzz smoke $t ($(ls fuzz/corpus/$t | wc -l) seeds)"; fi
    done ;;
fuzz)
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/la_fuzzrun.XXXXXX")
    mkdir -p "$build/fuzz-crashes"
    : > "$build/fuzz-summary.txt"
    for t in $targets; do
        cp -r "fuzz/corpus/$t" "$scratch/$t"
        mkdir -p "$scratch/art-$t"
        dict=""; [ -f "fuzz/$t.dict" ] && dict="-dict=fuzz/$t.dict"
        log="$scratch/$t.log"
        "$build/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
            -malloc_limit_mb=1024 -max_len=8192 -print_final_stats=1 $dict \
            -artifact_prefix="$scratch/art-$t/" "$scratch/$t" >"$log" 2>&1
        r=$?
        execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
        ncorp=$(ls "$scratch/$t" | wc -l)
        # slow-unit-* files are inputs that once took > 10 s (libFuzzer's -report_slow_units),
        # which a starved or paused process produces without any fault: reported, not failures
        ncrash=$(ls "$scratch/art-$t" | grep -vc '^slow-unit-')
        nslow=$(ls "$scratch/art-$t" | grep -c '^slow-unit-')
        line=$(printf '%-14s %4ss  execs %9s  corpus %5s  crashes %s' "$t" "$secs" "${execs:-?}" "$ncorp" "$ncrash")
        [ "$nslow" -gt 0 ] && line="$line  (slow units: $nslow)"
        echo "$line" | tee -a "$build/fuzz-summary.txt"
        if [ $r -ne 0 ] || [ "$ncrash" -gt 0 ]; then
            rc=1
            cp "$scratch/art-$t"/* "$build/fuzz-crashes/" 2>/dev/null
            grep -A30 -E 'ERROR|invariant|SUMMARY' "$log" | head -60
        fi
    done
    rm -rf "$scratch" ;;
*) echo "usage: fuzz/run.sh fuzz|smoke|replay BUILD [SECONDS]"; exit 2 ;;
esac
exit $rc
