#!/usr/bin/env bash
# tests/mpi.sh BUILD -- the multi-process (MPI) tests of `make check` (issue 18), run with
# mpirun -np 1/2/3 on this machine (--oversubscribe: more ranks than cores is fine for
# correctness; --allow-run-as-root when CI runs as root). Each case prints "ok"/"FAIL" and
# the script ends with the "N passed, N failed" line tests/check.sh reads.
#   train   1 vs 2 vs 3 ranks, same global batch (6 micro-batches): saved weights bitwise equal
#   idle    2 micro-batches on 3 ranks (one rank without data): bitwise equal to 1 rank
#   resume  2 steps on 1 rank, resumed to 5 on 3 ranks == 5 steps on 1 rank (bitwise)
#   study   a 3-variant study on 1, 2, 3 ranks: every output file equal byte for byte, except
#           the timing fields (training.csv elapsed_s, results.json *_seconds)
#   rpv     a study with "ranks_per_variant": 2 ("accum": 2): 2 ranks (one group training
#           each variant data-parallel) and 3 ranks with --ranks-per-variant 1 give the
#           outputs of 1 rank; 3 ranks with groups of 2 are refused on every rank, naming
#           both numbers and the fix
#   seq-parallel  train --seq-parallel 2 (logn + p-RoPE + window, GQA, B = 2, T = 1000) on 2 ranks and
#           on 4 (2 groups of 2): weights and log bitwise equal to 1 rank; refused on 3 ranks
#           and at T = 150; a study with "seq_parallel": 2 on 2 ranks equal to 1 rank; a learned
#           sink, sigmoid rows and ASEntmax (its beta/gamma layer) trained with --seq-parallel 2
#           on 2 ranks equal to 1 rank
#   synth   synth --quick (6 cells) on 1 and 3 ranks: outputs equal, timings aside
#   synth seeds  synth --quick --seeds 2 (4 cells) on 1 and 3 ranks: outputs equal
#   synth-resume  synth on 2 ranks killed once each rank has stored its first cell (stop
#           point synth-cell, src/core/test_point.c), resumed on 2 ranks: outputs equal to
#           the 1-rank run
#   longeval  longeval on the tiny GGUF of tests/python/test_longeval.py on 2 ranks: every
#           output equal to 1 rank (timings aside); --resume on 2 ranks after cells removed
#   prefill  llama-logits --seq-parallel (tiny GGUF, 700 tokens, GQA) on 1 rank byte-equal to
#           the one-chunk cache-less forward, and on 2 and 3 ranks to 1 rank; perplexity
#           --seq-parallel on 2 ranks reports 1 rank's numbers; without the flag refused;
#           longeval --seq-parallel on 2 ranks equal to 1 rank, an evicting method refused
#   smollm2  perplexity --seq-parallel of the default model (2048 tokens) on 2 ranks reports 1
#           rank's numbers (skipped, visibly, when the model was not fetched)
#   fail    a data file missing on rank 1 only (its own working folder): every rank exits
#           non-zero (not a hang) with one error naming rank 1 and the file; a rank failing
#           before any exchange (no checkpoint in its folder) stops the others; ranks started
#           with different command lines are refused before any work
#   killed  a rank killed (SIGKILL) after step 3 (stop point train-step): mpirun ends the
#           job non-zero (not a hang) and the last complete checkpoint still resumes
#   nompi   dist.c built without MPI refuses a start by mpirun, naming the fix
#   ring    attn --seq-parallel (issue 30) on 2, 3, 4 ranks: out, lse, dq, dk, dv (dlogn_s)
#           byte for byte equal to one process without it, for softmax with rope / alibi /
#           logn+prope / sinv+rope / qwen-logn+yarn, entmax 1.5 + rope, sparsemax + alibi,
#           entmax 1.3 (bisection) + logn, and causal / window / sinks / packed documents
#           (GQA, B = 2, T = 520: uneven zigzag chunks); under window(w=100) at np 4 less than
#           half the bytes of a full mask travel; a run without --seq-parallel
#           refused on every rank; a missing file on rank 1 stops both ranks with one error
#           naming rank 1
# The mpirun cases are skipped, with a visible message, only when the build has no MPI.
# No case depends on the speed of the machine: where a run is interrupted is fixed by the
# library's stop points (LA_TEST_STOP_AT), and `timeout $HANG` only turns a hang into a
# failure (LA_MPI_HANG_S, default 1200 s: generous, since ranks oversubscribe loaded cores).
set -u
build=${1:-build}
bin=$(cd "$build" && pwd)/longattn
cd "$(dirname "$0")/.."
root=$(pwd)
passed=0; failed=0
ok() { echo "ok   mpi $1"; passed=$((passed + 1)); }
bad() { echo "FAIL mpi $1: $2"; failed=$((failed + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- a build without MPI (src/core/dist.c without LA_HAVE_MPI, as the Python package
# builds it): a plain start is rank 0 of 1; a start by a launcher is refused with the fix
if ! ${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -Iinclude -Isrc src/core/dist.c src/core/status.c src/core/alloc.c \
        tests/mpi/nompi_main.c -o "$tmp/nompi" -lcjson 2>"$tmp/nompi.log"; then
    cat "$tmp/nompi.log"; bad nompi "the one-process dist.c does not compile"
elif [ "$("$tmp/nompi")" != "rank 0 size 1" ]; then bad nompi "a plain start is not rank 0 of 1"
elif OMPI_COMM_WORLD_SIZE=2 "$tmp/nompi" 2>"$tmp/nompi.log" ||
     ! grep -q "has no MPI.*libopenmpi-dev openmpi-bin.*make clean && make" "$tmp/nompi.log"; then
    cat "$tmp/nompi.log"; bad nompi "a start as 1 of 2 processes is not refused with the rebuild hint"
else ok "nompi: without MPI one process runs; under mpirun the error says how to rebuild"; fi

if ! grep -q 'MPI=1' "$build/.lib-cflags" 2>/dev/null || ! command -v mpirun >/dev/null; then
    echo "SKIPPED: MPI tests (this build has no MPI: install libopenmpi-dev openmpi-bin, then make clean && make)"
    echo "$passed passed, $failed failed"
    [ $failed -eq 0 ]; exit
fi
MR="mpirun --oversubscribe"
HANG=${LA_MPI_HANG_S:-1200}
[ "$(id -u)" -eq 0 ] && MR="$MR --allow-run-as-root"
# one thread per rank: the comparison is with the same thread count per rank
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# a small byte-level corpus (train/ and val/, deterministic)
python3 - "$tmp/corpus" <<'PY'
import os, random, sys
random.seed(2)
w = "the quick brown fox jumps over a lazy dog while the cat sat on the mat and birds sing".split()
for split, n, words in (("train", 4, 800), ("val", 2, 400)):
    os.makedirs(os.path.join(sys.argv[1], split))
    for i in range(n):
        with open(os.path.join(sys.argv[1], split, "d%d.txt" % i), "w") as f:
            f.write(" ".join(random.choice(w) for _ in range(words)))
PY
cd "$tmp"
T="train --data corpus/train --layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16 --accum 6 --eval-every 2 --ckpt-every 1"

# ---- train: 1 vs 2 vs 3 ranks
$bin $T --steps 4 --out t1 >t1.log 2>&1 || { cat t1.log; bad train "1-rank run failed"; }
for n in 2 3; do
    if ! timeout $HANG $MR -np $n $bin $T --steps 4 --out t$n >t$n.log 2>&1; then
        cat t$n.log; bad "train np=$n" "run failed"
    elif ! cmp -s t1/model.safetensors t$n/model.safetensors; then
        bad "train np=$n" "weights differ from the 1-rank run"
    elif ! diff <(cut -d, -f1-5 t1/log.csv) <(cut -d, -f1-5 t$n/log.csv) >/dev/null; then
        bad "train np=$n" "log (loss, val_loss, grad_norm) differs"
    else ok "train np=$n: weights bitwise equal to 1 rank"; fi
done

# ---- fewer micro-batches than ranks (accum 2 on 3 ranks: one rank computes nothing but
# still sums its slice of the parameters)
T2=${T/--accum 6/--accum 2}
$bin $T2 --steps 3 --out i1 >i.log 2>&1 && timeout $HANG $MR -np 3 $bin $T2 --steps 3 --out i3 >>i.log 2>&1
if [ $? -ne 0 ]; then cat i.log; bad "idle rank" "runs failed"
elif cmp -s i1/model.safetensors i3/model.safetensors; then ok "idle rank: accum 2 on 3 ranks bitwise equal to 1 rank"
else bad "idle rank" "weights differ from the 1-rank run"; fi

# ---- resume with a different number of ranks
$bin $T --steps 5 --out r1 >r.log 2>&1 && $bin $T --steps 2 --out r3 >>r.log 2>&1 &&
    timeout $HANG $MR -np 3 $bin train --resume --out r3 --steps 5 >>r.log 2>&1
if [ $? -ne 0 ]; then cat r.log; bad resume "runs failed"
elif cmp -s r1/model.safetensors r3/model.safetensors; then ok "resume 1 rank -> 3 ranks: weights bitwise equal"
else bad resume "weights after resuming on 3 ranks differ from an uninterrupted 1-rank run"; fi

# ---- a rank that fails before any exchange (here: no checkpoint in its working folder;
# same command line) stops the others, which wait in their first exchange: they waited
# forever before 2026-12-05; and ranks given different command lines are refused at once
mkdir -p wa wb && (cd wa && $bin ${T/corpus/..\/corpus} --steps 2 --out ck >../w.log 2>&1)
timeout $HANG $MR -np 1 -wdir "$tmp/wa" $bin train --resume --out ck --steps 3 : \
    -np 1 -wdir "$tmp/wb" $bin train --resume --out ck --steps 3 >>w.log 2>&1
rc=$?
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then cat w.log; bad "one rank fails first" "exit $rc (0: not noticed, 124: hung)"
elif ! grep -q "no checkpoint in ck" w.log || ! grep -q "rank 1 of 2" w.log; then
    cat w.log; bad "one rank fails first" "no message naming the checkpoint and rank 1"
else ok "one rank failing before any exchange stops the other (exit $rc)"; fi
timeout $HANG $MR -np 1 $bin $T --steps 1 --out dc : -np 1 $bin $T --steps 1 --out dc --d-model 32 >dc.log 2>&1
rc=$?
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then cat dc.log; bad "different command lines" "exit $rc"
elif ! grep -q "different command lines" dc.log || [ -e dc ]; then cat dc.log; bad "different command lines" "not refused before any work"
else ok "ranks started with different command lines refused before any work"; fi

# ---- study: variants over ranks
strip() { # output folder -> its files, timing fields removed (csv columns *_s, markdown
          # columns "... s" and its "Wall time" line, json keys *_s / *seconds) and the folder's own name blanked
    python3 - "$1" <<'PY'
import csv, json, os, sys
d = sys.argv[1]
def timing(name):
    return name.endswith("_s") or name.endswith("seconds") or name.endswith(" s")
for name in sorted(os.listdir(d)):
    p = os.path.join(d, name)
    if os.path.isdir(p):  # cells/: per-cell results for --resume (tests/python/test_resume.py)
        continue
    if name.endswith(".json"):
        def drop(x):
            if isinstance(x, dict):
                return {k: drop(v) for k, v in x.items() if not timing(k)}
            if isinstance(x, list):
                return [drop(v) for v in x]
            return x
        print(name, json.dumps(drop(json.load(open(p))), sort_keys=True))
    elif name.endswith(".csv"):  # quoted fields may hold commas (longeval's "yarn({s},{C})")
        rows = list(csv.reader(open(p)))
        keep = [not timing(c.strip()) for c in rows[0]] if rows else []
        for row in rows:
            print(name, repr([c for c, k in zip(row, keep + [True] * len(row)) if k]))
    elif name.endswith(".md"):
        sep = "|"
        keep = None
        for line in open(p):
            if line.startswith("Wall time"):
                continue
            cells = line.rstrip("\n").split(sep)
            if keep is None or (sep == "|" and len(cells) != len(keep)):
                keep = [not timing(c.strip()) for c in cells]  # a header row
            print(name, sep.join(c for c, k in zip(cells, keep + [True] * len(cells)) if k))
    else:
        print(name, open(p, "rb").read().replace(d.encode() + b"/", b"OUT/").hex())
PY
}
cp "$root/tests/mpi/tiny_study.json" study.json
$bin study study.json --out s1 --no-plots >s1.log 2>&1 || { cat s1.log; bad study "1-rank study failed"; }
strip s1 >s1.txt
for n in 2 3; do
    if ! timeout $HANG $MR -np $n $bin study study.json --out s$n --no-plots >s$n.log 2>&1; then
        cat s$n.log; bad "study np=$n" "run failed"
    elif strip s$n >s$n.txt && cmp -s s1.txt s$n.txt && [ "$(ls s1)" = "$(ls s$n)" ]; then
        ok "study np=$n: every output equal to 1 rank (timings aside)"
    else diff s1.txt s$n.txt | cut -c1-200 | head -5; bad "study np=$n" "outputs differ from the 1-rank run"; fi
done

# ---- ranks_per_variant: groups of ranks train one variant data-parallel
cp "$root/tests/mpi/tiny_study_rpv.json" rpv.json
$bin study rpv.json --ranks-per-variant 1 --out g1 --no-plots >g1.log 2>&1 || { cat g1.log; bad rpv "1-rank study failed"; }
strip g1 >g1.txt
for run in "2:" "3:--ranks-per-variant 1"; do
    n=${run%%:*}; extra=${run#*:}
    if ! timeout $HANG $MR -np $n $bin study rpv.json $extra --out g$n --no-plots >g$n.log 2>&1; then
        cat g$n.log; bad "rpv np=$n $extra" "run failed"
    elif strip g$n >g$n.txt && cmp -s g1.txt g$n.txt && [ "$(ls g1)" = "$(ls g$n)" ]; then
        ok "rpv np=$n ${extra:-(groups of 2)}: every output equal to 1 rank (timings aside)"
    else diff g1.txt g$n.txt | cut -c1-200 | head -5; bad "rpv np=$n $extra" "outputs differ from the 1-rank run"; fi
done
start=$(date +%s)
timeout $HANG $MR -np 3 $bin study rpv.json --out g3x --no-plots >g3x.log 2>&1
rc=$?; secs=$(( $(date +%s) - start ))
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then cat g3x.log; bad "rpv refused" "exit $rc (0: not refused, 124: hung)"
elif [ "$(grep -c 'ranks_per_variant is 2 but 3 ranks were started.*multiple of 2 ranks (mpirun -np 4).*--ranks-per-variant' g3x.log)" -ne 1 ]; then
    cat g3x.log; bad "rpv refused" "no single error naming 2, 3 and the fix"
else ok "rpv refused: groups of 2 on 3 ranks stop every rank (exit $rc, ${secs}s) naming both and the fix"; fi
# seeds and groups together: (variant, seed) cells spread over groups of 2 ranks
$bin study rpv.json --seeds 2 --ranks-per-variant 1 --out gs1 --no-plots >gs1.log 2>&1 ||
    { cat gs1.log; bad "rpv seeds" "1-rank study failed"; }
strip gs1 >gs1.txt
if ! timeout $HANG $MR -np 2 $bin study rpv.json --seeds 2 --out gs2 --no-plots >gs2.log 2>&1; then
    cat gs2.log; bad "rpv seeds np=2" "run failed"
elif strip gs2 >gs2.txt && cmp -s gs1.txt gs2.txt && [ "$(ls gs1)" = "$(ls gs2)" ]; then
    ok "rpv --seeds 2 np=2 (one group of 2): 6 cells, every output equal to 1 rank (timings aside)"
else diff gs1.txt gs2.txt | cut -c1-200 | head -5; bad "rpv seeds np=2" "outputs differ from the 1-rank run"; fi

# ---- seq_parallel (issue 30): groups of ranks share each training sequence
TS="train --data corpus/train --layers 1 --d-model 16 --heads 2 --kv-heads 1 --spec softmax+logn+prope(p=0.5)+window(300)
    --batch 2 --seq-len 1000 --accum 2 --eval-every 2 --ckpt-every 1"
$bin $TS --steps 3 --out p1 >p1.log 2>&1 || { cat p1.log; bad "seq-parallel" "1-rank run failed"; }
for n in 2 4; do
    if ! timeout $HANG $MR -np $n $bin $TS --steps 3 --seq-parallel 2 --out p$n >p$n.log 2>&1; then
        cat p$n.log; bad "seq-parallel np=$n" "run failed"
    elif ! grep -q "$((n / 2)) group.* of 2 ranks sharing each sequence" p$n.log; then
        cat p$n.log; bad "seq-parallel np=$n" "the run does not say it shares sequences"
    elif ! cmp -s p1/model.safetensors p$n/model.safetensors; then
        bad "seq-parallel np=$n" "weights differ from the 1-rank run"
    elif ! diff <(cut -d, -f1-5 p1/log.csv) <(cut -d, -f1-5 p$n/log.csv) >/dev/null; then
        bad "seq-parallel np=$n" "log (loss, val_loss, grad_norm) differs"
    else ok "train --seq-parallel 2 np=$n ($((n / 2)) x 2 ranks): weights and log bitwise equal to 1 rank"; fi
done
# issue 31's normalisers in sequence-parallel training: a learned sink (its gradient from every
# row, on every rank of the group) and sigmoid rows; ASEntmax (beta, gamma of a rank's rows,
# gathered; the beta/gamma layer's weight gradients from every row); 2 ranks bitwise equal to 1
for sk in "softmax+sink+rope+causal" "sigmoid(train=1000)+alibi+causal" "asentmax(alpha=1.5)+rope+causal"; do
    TK=${TS/softmax+logn+prope(p=0.5)+window(300)/$sk}
    $bin $TK --steps 3 --out pk1 >pk1.log 2>&1 || { cat pk1.log; bad "seq-parallel $sk" "1-rank run failed"; }
    if ! timeout $HANG $MR -np 2 $bin $TK --steps 3 --seq-parallel 2 --out pk2 >pk2.log 2>&1; then
        cat pk2.log; bad "seq-parallel $sk np=2" "run failed"
    elif ! cmp -s pk1/model.safetensors pk2/model.safetensors; then bad "seq-parallel $sk np=2" "weights differ from 1 rank"
    elif ! diff <(cut -d, -f1-5 pk1/log.csv) <(cut -d, -f1-5 pk2/log.csv) >/dev/null; then
        bad "seq-parallel $sk np=2" "log (loss, val_loss, grad_norm) differs"
    else ok "train --seq-parallel 2 np=2 with $sk: weights and log bitwise equal to 1 rank"; fi
    rm -rf pk1 pk2
done
timeout $HANG $MR -np 3 $bin $TS --steps 1 --seq-parallel 2 --out px >px.log 2>&1
rc=$?
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then cat px.log; bad "seq-parallel refused" "np 3 with groups of 2: exit $rc"
elif ! grep -q "seq_parallel is 2 but 3 ranks.*mpirun -np 4" px.log; then cat px.log; bad "seq-parallel refused" "np 3: no error naming 2, 3 and the fix"
else ok "train --seq-parallel 2 on 3 ranks refused, naming both and the fix"; fi
timeout $HANG $MR -np 2 $bin ${TS/--seq-len 1000/--seq-len 150} --steps 1 --seq-parallel 2 --out px >px.log 2>&1
rc=$?
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then cat px.log; bad "seq-parallel refused" "seq-len 150: exit $rc"
elif ! grep -q "150 tokens is too short.*at least 193" px.log; then cat px.log; bad "seq-parallel refused" "seq-len 150: no error naming 193"
else ok "train --seq-parallel 2 at --seq-len 150 refused (at least 193: 4 tiles)"; fi
cp "$root/tests/mpi/tiny_study_sp.json" sp.json
$bin study sp.json --ranks-per-variant 1 --seq-parallel 1 --out q1 --no-plots >q1.log 2>&1 || { cat q1.log; bad "study seq_parallel" "1-rank study failed"; }
strip q1 >q1.txt
if ! timeout $HANG $MR -np 2 $bin study sp.json --out q2 --no-plots >q2.log 2>&1; then
    cat q2.log; bad "study seq_parallel np=2" "run failed"
elif ! grep -q "2 ranks of a group share each training sequence" q2.log; then
    cat q2.log; bad "study seq_parallel np=2" "the run does not say it shares sequences"
elif strip q2 >q2.txt && cmp -s q1.txt q2.txt && [ "$(ls q1)" = "$(ls q2)" ]; then
    ok "study \"seq_parallel\": 2 np=2: every output equal to 1 rank (timings aside)"
else diff q1.txt q2.txt | cut -c1-200 | head -5; bad "study seq_parallel np=2" "outputs differ from the 1-rank run"; fi

# ---- study --seeds: (variant, seed) cells over ranks
$bin study study.json --seeds 2 --out sd1 --no-plots >sd1.log 2>&1 || { cat sd1.log; bad "study seeds" "1-rank study failed"; }
strip sd1 >sd1.txt
if ! timeout $HANG $MR -np 3 $bin study study.json --seeds 2 --out sd3 --no-plots >sd3.log 2>&1; then
    cat sd3.log; bad "study seeds np=3" "run failed"
elif strip sd3 >sd3.txt && cmp -s sd1.txt sd3.txt && [ "$(ls sd1)" = "$(ls sd3)" ]; then
    ok "study --seeds 2 np=3: 6 cells over 3 ranks, every output equal to 1 rank (timings aside)"
else diff sd1.txt sd3.txt | cut -c1-200 | head -5; bad "study seeds np=3" "outputs differ from the 1-rank run"; fi

# ---- synth: (task, spec) cells over ranks
Y="synth --quick --steps 10 --specs softmax+nape;softmax+logn+nape;softmax+rope"
$bin $Y --out y1 >y1.log 2>&1 || { cat y1.log; bad synth "1-rank synth failed"; }
strip y1 >y1.txt
for n in 3; do
    if ! timeout $HANG $MR -np $n $bin $Y --out y$n >y$n.log 2>&1; then
        cat y$n.log; bad "synth np=$n" "run failed"
    elif strip y$n >y$n.txt && cmp -s y1.txt y$n.txt && [ "$(ls y1 | grep -vx cells)" = "$(ls y$n | grep -vx cells)" ]; then  # cells/: one process only
        ok "synth np=$n: every output equal to 1 rank (timings aside)"
    else diff y1.txt y$n.txt | cut -c1-200 | head -5; bad "synth np=$n" "outputs differ from the 1-rank run"; fi
done

# ---- synth --seeds: (task, spec, seed) cells over ranks
Y3="synth --quick --steps 10 --specs softmax+nape --seeds 2"
$bin $Y3 --out ys1 >ys1.log 2>&1 || { cat ys1.log; bad "synth seeds" "1-rank synth failed"; }
strip ys1 >ys1.txt
if ! timeout $HANG $MR -np 3 $bin $Y3 --out ys3 >ys3.log 2>&1; then
    cat ys3.log; bad "synth seeds np=3" "run failed"
elif strip ys3 >ys3.txt && cmp -s ys1.txt ys3.txt && grep -q "over_seeds" ys1.txt; then
    ok "synth --seeds 2 np=3: 4 cells over 3 ranks, every output equal to 1 rank (timings aside)"
else diff ys1.txt ys3.txt | cut -c1-200 | head -5; bad "synth seeds np=3" "outputs differ from the 1-rank run"; fi

# ---- synth --resume on 2 ranks after a kill (each rank resumes its own stored cells)
Y2="synth --quick --steps 40 --specs softmax+nape;softmax+logn+nape;softmax+rope"
$bin $Y2 --out z1 >z1.log 2>&1 || { cat z1.log; bad synth-resume "1-rank synth failed"; }
strip z1 >z1.txt
ncells() { ls z2/cells 2>/dev/null | grep '\.json$' | grep -vxc run.json; }
# each rank stops itself after storing its first cell (3 cells per rank); once both are
# stopped, the job is killed: 2 of the 6 cells stored, on any machine
rankpids() { pgrep -f -- "^$bin synth .*--out z2\$"; }
stopped() { [ "$(awk '{print $3}' /proc/$1/stat 2>/dev/null)" = T ]; }
LA_TEST_STOP_AT=synth-cell:1 setsid $MR -np 2 $bin $Y2 --out z2 >z2a.log 2>&1 &
job=$!
for _ in $(seq 1 $((HANG * 10))); do
    n=0; for p in $(rankpids); do stopped "$p" && n=$((n + 1)); done
    [ $n -ge 2 ] && break
    kill -0 $job 2>/dev/null || break
    sleep 0.1
done
kill -9 -- -$job 2>/dev/null
for p in $(rankpids); do kill -9 "$p"; done  # the ranks, if not in its group
{ wait $job; } 2>/dev/null
stored=$(ncells)
rm -f z2/results.json
if [ "$stored" -ne 2 ]; then cat z2a.log; bad synth-resume "$stored cells stored at the stop, not 1 per rank"
elif ! timeout $HANG $MR -np 2 $bin $Y2 --out z2 --resume >z2.log 2>&1; then
    cat z2.log; bad synth-resume "resume on 2 ranks failed"
elif strip z2 >z2.txt && cmp -s z1.txt z2.txt; then
    ok "synth-resume np=2: stopped with $stored of 6 cells stored, resumed on 2 ranks: outputs equal to 1 rank"
else diff z1.txt z2.txt | cut -c1-200 | head -5; bad synth-resume "outputs differ from the 1-rank run"; fi

# perplexity ARGS --seq-parallel on 1 rank and on 2 (files PFX1.txt, PFX2.txt): the reports
# must be equal, the speed aside
pp_np2_equal() {
    local pfx=$1 what=$2 args=$3
    $bin $args --seq-parallel >${pfx}1.txt 2>${pfx}1.log || { cat ${pfx}1.log; bad "$what" "1-rank run failed"; }
    if ! timeout $HANG $MR -np 2 $bin $args --seq-parallel >${pfx}2.txt 2>${pfx}2.log; then
        cat ${pfx}2.log; bad "$what np=2" "run failed"
    elif ! diff <(sed 's/[0-9.]* tok\/s//' ${pfx}1.txt) <(sed 's/[0-9.]* tok\/s//' ${pfx}2.txt) >/dev/null ||
         ! grep -q overall ${pfx}2.txt; then
        cat ${pfx}1.txt ${pfx}2.txt; bad "$what np=2" "the report differs from 1 rank"
    else ok "$what np=2: the report equals 1 rank's (speed aside)"; fi
}

# ---- longeval: method x length cells over ranks, on the tiny GGUF of test_longeval.py
if ! (cd "$root" && .venv/bin/python - "$tmp/tiny.gguf" >"$tmp/gguf.log" 2>&1 <<'PY'
import sys
sys.path.insert(0, "tests/python")
import test_longeval as tle  # its tiny llama file with a byte-level tokenizer
class Patch:  # what tiny_with_tokenizer needs of pytest's monkeypatch
    def setattr(self, obj, name, value): setattr(obj, name, value)
tle.tiny_with_tokenizer(sys.argv[1], Patch())
PY
); then cat gguf.log; bad longeval "cannot make the tiny GGUF (needs .venv with gguf: scripts/setup_venv.sh)"
else
    E="longeval --model tiny.gguf --docs $root/data/pydoc/val --methods as-trained;yarn({s},{C});as-trained|sinks(4,60)
       --lengths 1.5,2.5 --depths 0.25,0.75 --trials 2 --distractors 2 --buckets 4 --chunk 64 --threads 1"
    $bin $E --out e1 >e1.log 2>&1 || { cat e1.log; bad longeval "1-rank longeval failed"; }
    strip e1 >e1.txt
    if ! timeout $HANG $MR -np 2 $bin $E --out e2 >e2.log 2>&1; then cat e2.log; bad "longeval np=2" "run failed"
    elif strip e2 >e2.txt && cmp -s e1.txt e2.txt && [ "$(ls e1)" = "$(ls e2)" ]; then
        ok "longeval np=2: every output equal to 1 rank (timings aside)"
    else diff e1.txt e2.txt | cut -c1-200 | head -5; bad "longeval np=2" "outputs differ from the 1-rank run"; fi
    # resume: cells of both ranks removed, the rest read back
    rm -f e2/results.json e2/cells/m0_l1.json e2/cells/m2_l0.json
    if ! timeout $HANG $MR -np 2 $bin $E --out e2 --resume >e2r.log 2>&1; then cat e2r.log; bad "longeval resume" "run failed"
    elif ! grep -q "(resumed)" e2r.log; then cat e2r.log; bad "longeval resume" "no cell was read back"
    elif strip e2 >e2.txt && cmp -s e1.txt e2.txt; then ok "longeval --resume np=2: outputs equal to 1 rank"
    else diff e1.txt e2.txt | cut -c1-200 | head -5; bad "longeval resume" "outputs differ from the 1-rank run"; fi
    # sequence-parallel prefill (issue 30): 700 tokens (11 tiles: uneven zigzag pieces), GQA 4/2
    ids=$(python3 -c "import random; random.seed(3); print(','.join(str(random.randrange(300)) for _ in range(700)))")
    L="llama-logits --model tiny.gguf --ids $ids"
    $bin $L --chunk 700 --out lf.npy >l.log 2>&1 && $bin $L --seq-parallel --out l1.npy >>l.log 2>&1 ||
        { cat l.log; bad "llama-logits --seq-parallel" "1-rank run failed"; }
    if ! cmp -s lf.npy l1.npy; then bad "llama-logits --seq-parallel" "1 rank differs from the one-chunk forward"
    else ok "llama-logits --seq-parallel on 1 rank: logits byte-equal to the one-chunk forward"; fi
    for n in 2 3; do
        if ! timeout $HANG $MR -np $n $bin $L --seq-parallel --out l$n.npy >l$n.log 2>&1; then
            cat l$n.log; bad "llama-logits --seq-parallel np=$n" "run failed"
        elif ! cmp -s l1.npy l$n.npy; then bad "llama-logits --seq-parallel np=$n" "logits differ from 1 rank"
        else ok "llama-logits --seq-parallel np=$n: logits byte-equal to 1 rank"; fi
    done
    P="perplexity --model tiny.gguf --text $root/data/pydoc/val/library__multiprocessing.txt --ctx 1000 --windows 2"
    pp_np2_equal pp "perplexity --seq-parallel" "$P"
    timeout $HANG $MR -np 2 $bin $P >pp3.txt 2>pp3.log
    rc=$?
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q "add --seq-parallel" pp3.log; then
        cat pp3.log; bad "perplexity refused" "under mpirun without --seq-parallel: exit $rc"
    else ok "perplexity under mpirun without --seq-parallel refused, naming the flag"; fi
    # longeval --seq-parallel: every cell on both ranks together, each prefill over the ranks
    # (la_session_prefill_sp) and the greedy answers from the filled cache: np 2 equal to np 1
    ES="${E/;as-trained|sinks(4,60)/} --seq-parallel"
    $bin $ES --out es1 >es1.log 2>&1 || { cat es1.log; bad "longeval --seq-parallel" "1-rank run failed"; }
    strip es1 >es1.txt
    if ! timeout $HANG $MR -np 2 $bin $ES --out es2 >es2.log 2>&1; then cat es2.log; bad "longeval --seq-parallel np=2" "run failed"
    elif ! grep -q '"seq_parallel":[[:space:]]*1' es2/cells/m0_l0.json; then bad "longeval --seq-parallel np=2" "cells do not record seq_parallel"
    elif strip es2 >es2.txt && cmp -s es1.txt es2.txt && [ "$(ls es1)" = "$(ls es2)" ]; then
        ok "longeval --seq-parallel np=2: every output equal to 1 rank (timings aside)"
    else diff es1.txt es2.txt | cut -c1-200 | head -5; bad "longeval --seq-parallel np=2" "outputs differ from the 1-rank run"; fi
    rm -f es2/results.json es2/cells/m0_l1.json # resume: rank 0 reads the cells, the ranks run the rest together
    if ! timeout $HANG $MR -np 2 $bin $ES --out es2 --resume >es2r.log 2>&1; then cat es2r.log; bad "longeval --seq-parallel resume" "run failed"
    elif [ "$(grep -c '(resumed)' es2r.log)" -ne 3 ]; then cat es2r.log; bad "longeval --seq-parallel resume" "not 3 cells read back"
    elif strip es2 >es2.txt && cmp -s es1.txt es2.txt; then ok "longeval --seq-parallel --resume np=2: outputs equal to 1 rank"
    else diff es1.txt es2.txt | cut -c1-200 | head -5; bad "longeval --seq-parallel resume" "outputs differ from the 1-rank run"; fi
    if $bin ${ES/ --seq-parallel/} --out es2 --resume >es2x.log 2>&1 || ! grep -q "without --seq-parallel" es2x.log; then
        cat es2x.log; bad "longeval resume across --seq-parallel" "cells of a --seq-parallel run taken by a chunked one"
    else ok "longeval --resume refuses the cells of a --seq-parallel run without it, naming the flag"; fi
    timeout $HANG $MR -np 2 $bin $E --seq-parallel --out es3 >es3.log 2>&1
    rc=$?
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q "as-trained|sinks(4,60)' evicts" es3.log; then
        cat es3.log; bad "longeval --seq-parallel refused" "an evicting method: exit $rc"
    else ok "longeval --seq-parallel with an evicting KV method refused, naming it"; fi
fi

# ---- the default model (SmolLM2-135M, scripts/fetch_model.sh): perplexity of 2048 tokens,
# one prefill split over 2 ranks, reports 1 rank's numbers
SM="$root/data/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$SM" ]; then
    echo "skip mpi smollm2 perplexity --seq-parallel: $SM not fetched (scripts/fetch_model.sh)"
else
    P="perplexity --model $SM --text $root/data/pydoc/val/library__multiprocessing.txt --ctx 2048 --windows 1"
    export OMP_NUM_THREADS=1 # one thread per rank: 2 ranks on 2 cores
    pp_np2_equal sm "smollm2 perplexity --seq-parallel (2048 tokens)" "$P"
    unset OMP_NUM_THREADS
fi

# ---- a rank that cannot read its data (the same command line; rank 1 runs in a folder
# without the corpus, as on a machine that lacks it)
mkdir -p wc
start=$(date +%s)
timeout $HANG $MR -np 1 $bin $T --steps 3 --out f : -np 1 -wdir "$tmp/wc" $bin $T --steps 3 --out f >f.log 2>&1
rc=$?; secs=$(( $(date +%s) - start ))
if [ $rc -eq 0 ]; then bad fail "exit status 0"
elif [ $rc -eq 124 ]; then bad fail "hung (killed by timeout after $HANG s)"
elif [ "$(grep -c 'rank 1 of 2: .*corpus/train' f.log)" -ne 1 ]; then cat f.log; bad fail "no single error naming rank 1 and the file"
else ok "fail: bad file on rank 1 -> every rank stops (exit $rc, ${secs}s), one error naming rank 1"; fi

# ---- attn --seq-parallel: one sequence over the ranks, equal to one process
python3 "$root/tests/mpi/ring_inputs.py" "$tmp" 2 4 2 520 16 3
RA="attn --q q.npy --k k.npy --v v.npy --dout dout.npy"
for sp in "softmax+rope+causal|--doc-ids docs.npy" "softmax+alibi+window(w=100)|" "softmax+logn+prope(p=0.5)+causal|--logn-s s.npy" \
          "softmax+sinv(tau=10)+rope+sinks(n=4,w=70)|" "softmax+qwen-logn(train=64)+yarn(s=4,train=64)+causal|--doc-ids docs.npy" \
          "entmax(alpha=1.5)+rope+causal|" "sparsemax+alibi+window(w=100)|--doc-ids docs.npy" "entmax(alpha=1.3)+logn+causal|--logn-s s.npy"; do
    spec=${sp%%|*}; extra=${sp#*|}
    rm -rf r1 && mkdir r1
    if ! $bin $RA --spec "$spec" $extra --out r1/out.npy >r1.log 2>&1; then cat r1.log; bad "ring $spec" "1-process run failed"; continue; fi
    for n in 2 3 4; do
        rm -rf r$n && mkdir r$n
        if ! timeout $HANG $MR -np $n $bin $RA --spec "$spec" $extra --out r$n/out.npy --seq-parallel >r$n.log 2>&1; then
            cat r$n.log; bad "ring $spec np=$n" "run failed"; continue
        fi
        diffs=""
        for f in r1/*.npy; do cmp -s "$f" "r$n/${f#r1/}" || diffs="$diffs ${f#r1/}"; done
        [ "$(ls r$n | wc -l)" -eq "$(ls r1 | wc -l)" ] || diffs="$diffs (file count)"
        if [ -z "$diffs" ]; then ok "ring $spec${extra:+ $extra} np=$n: $(ls r1 | tr '\n' ' ')bitwise equal to 1 process"
        else bad "ring $spec np=$n" "differs from 1 process:$diffs"; fi
    done
done
# only the tiles a rank reads travel (sp_needs): under window(w=100) less than half the bytes
# of a full mask, whose every rank reads every row (the sum of every rank's forward and backward)
rb() { grep -o '[0-9]* bytes sent' "$1" | awk '{s += $1} END {print s + 0}'; }
rm -rf rw && mkdir rw
timeout $HANG $MR -np 4 $bin $RA --spec "softmax+alibi+window(w=100)" --out rw/out.npy --seq-parallel >rw.log 2>&1
timeout $HANG $MR -np 4 $bin $RA --spec "softmax+alibi+full" --out rw/out.npy --seq-parallel >rfull.log 2>&1
bw=$(rb rw.log); bf=$(rb rfull.log)
if [ "$bf" -gt 0 ] && [ "$bw" -gt 0 ] && [ $((2 * bw)) -lt "$bf" ]; then
    ok "ring window(w=100) np=4: $bw bytes sent against $bf under a full mask (only the tiles a rank reads)"
else cat rw.log rfull.log; bad "ring bytes" "window(w=100): $bw bytes, full mask: $bf (expected less than half)"; fi
if timeout $HANG $MR -np 2 $bin $RA --spec "softmax+causal" --out r2/out.npy >rn.log 2>&1 ||
   ! grep -q 'add --seq-parallel' rn.log; then cat rn.log; bad "ring no flag" "attn under mpirun without --seq-parallel not refused"
else ok "ring: attn under mpirun without --seq-parallel is refused, naming the option"; fi
timeout $HANG $MR -np 1 $bin $RA --spec "softmax+causal" --out r2/out.npy --seq-parallel : \
    -np 1 -wdir "$tmp/wc" $bin $RA --spec "softmax+causal" --out r2/out.npy --seq-parallel >rf.log 2>&1
rc=$?
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then cat rf.log; bad "ring fail" "exit $rc (0: not noticed, 124: hung)"
elif [ "$(grep -c 'rank 1 of 2: .*q.npy' rf.log)" -ne 1 ]; then cat rf.log; bad "ring fail" "no single error naming rank 1 and the file"
else ok "ring fail: missing input on rank 1 -> both ranks stop (exit $rc), one error naming rank 1"; fi

# ---- a rank killed mid-training: both ranks stop after step 3 (its log row written, the
# checkpoints of steps 1 and 2 saved), one is killed, the other continued
LA_TEST_STOP_AT=train-step:3 timeout $HANG $MR -np 2 $bin $T --steps 100000 --out k >k.log 2>&1 &
job=$!
kpids() { pgrep -f -- "^$bin train .*--steps 100000 --out k\$"; }
for _ in $(seq 1 $((HANG * 10))); do
    n=0; for p in $(kpids); do stopped "$p" && n=$((n + 1)); done
    [ $n -ge 2 ] && break
    kill -0 $job 2>/dev/null || break
    sleep 0.1
done
victim=$(kpids | tail -1)  # a rank (not mpirun)
[ -n "$victim" ] && kill -9 "$victim"
for p in $(kpids); do [ "$p" != "$victim" ] && kill -CONT "$p"; done
start=$(date +%s)
wait $job; rc=$?; secs=$(( $(date +%s) - start ))
if [ -z "$victim" ]; then cat k.log; bad killed "no rank process found to kill"
elif [ $rc -eq 0 ] || [ $rc -eq 124 ]; then cat k.log; bad killed "exit $rc (0: not noticed, 124: hung)"
elif ! timeout $HANG $bin train --resume --out k --steps 5 >k3.log 2>&1; then
    cat k3.log; bad killed "the last checkpoint does not resume"
else ok "killed: a SIGKILLed rank ends the job (exit $rc, ${secs}s); the last checkpoint resumes"; fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
