#!/usr/bin/env bash
# scripts/mpi_scaling.sh [BUILD] -- measure the MPI scaling table of docs/mpi.md
# on this machine and print it as markdown, with the paper estimate for 8 and 64 nodes.
#
# Runs `longattn train` with the same model, data and global batch as
#   1 rank x 1 thread, 2 ranks x 1 thread, 1 rank x 2 threads
# and reads the per-step columns of DIR/log.csv: step_s (wall time of the step) and comm_s
# (time in the gradient exchange once every rank has finished its micro-batches: alltoallv
# + fold + allgatherv; 0 on one rank); compute = step_s - comm_s (it includes waiting for
# the slower rank). Medians over the steps after the first WARM. The weights of
# every run must be bitwise equal (checked and printed).
#
# Run it on a QUIET machine (nothing else running); it takes a few minutes. Settings (env):
#   LAYERS=2 DMODEL=128 HEADS=4 BATCH=8 SEQ=128 ACCUM=2 STEPS=24 WARM=4 DATA=data/pydoc
#   NET_GBS=1.1   usable network bandwidth per node for the estimate, GB/s (10 Gb/s Ethernet)
#   LAT_US=50     per-message latency for the estimate, microseconds
set -euo pipefail
build=${1:-build}
bin=$(cd "$build" && pwd)/longattn
cd "$(dirname "$0")/.."
: "${LAYERS:=2}" "${DMODEL:=128}" "${HEADS:=4}" "${BATCH:=8}" "${SEQ:=128}" "${ACCUM:=2}"
: "${STEPS:=24}" "${WARM:=4}" "${DATA:=data/pydoc}" "${NET_GBS:=1.1}" "${LAT_US:=50}"
command -v mpirun >/dev/null || { echo "mpi_scaling: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
grep -q 'MPI=1' "$build/.lib-cflags" 2>/dev/null ||
    { echo "mpi_scaling: $build has no MPI: install libopenmpi-dev, then make clean && make" >&2; exit 1; }
MR="mpirun --oversubscribe"
[ "$(id -u)" -eq 0 ] && MR="$MR --allow-run-as-root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
T="train --data $DATA/train --layers $LAYERS --d-model $DMODEL --heads $HEADS --batch $BATCH --seq-len $SEQ
   --accum $ACCUM --steps $STEPS --eval-every 0 --ckpt-every 0 --seed 1"
run() { # name ranks threads
    local out=$tmp/$1 log=$tmp/$1.log
    echo "mpi_scaling: $2 rank(s) x $3 thread(s) ..." >&2
    if [ "$2" -eq 1 ]; then
        OMP_NUM_THREADS=$3 OPENBLAS_NUM_THREADS=$3 "$bin" $T --out "$out" >"$log" 2>&1
    else
        $MR -np "$2" -x OMP_NUM_THREADS="$3" -x OPENBLAS_NUM_THREADS="$3" "$bin" $T --out "$out" >"$log" 2>&1
    fi || { cat "$log" >&2; echo "mpi_scaling: the $2 x $3 run failed" >&2; exit 1; }
}
run r1t1 1 1
run r2t1 2 1
run r1t2 1 2
same=yes
for r in r2t1 r1t2; do cmp -s "$tmp/r1t1/model.safetensors" "$tmp/$r/model.safetensors" || same=no; done

python3 - "$tmp" "$same" "$BATCH" "$SEQ" "$ACCUM" "$WARM" "$NET_GBS" "$LAT_US" "$(nproc)" \
    "$(uptime | sed 's/.*load average: //')" <<'PY'
import csv, json, os, statistics, struct, sys
tmp, same, B, T, A, warm = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
net_gbs, lat_us, cores, load = float(sys.argv[7]), float(sys.argv[8]), sys.argv[9], sys.argv[10]

def steps(run):
    rows = list(csv.DictReader(open(os.path.join(tmp, run, "log.csv"))))[warm:]
    step = statistics.median(float(r["step_s"]) for r in rows)
    comm = statistics.median(float(r["comm_s"]) for r in rows)
    return step, comm, len(rows)

def n_params(path):  # safetensors: 8-byte header length, JSON header, float32 data
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
    return sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in head.items() if k != "__metadata__") // 4

P = n_params(os.path.join(tmp, "r1t1", "model.safetensors"))
tok = B * T * A  # tokens per step (the global batch)
res = {k: steps(k) for k in ("r1t1", "r2t1", "r1t2")}
base = res["r1t1"][0]
print(f"Measured {os.popen('date -u +%Y-%m-%d').read().strip()} on {cores} cores (load average {load}): "
      f"`longattn train --batch {B} --seq-len {T} --accum {A}` ({P / 1e6:.2f}M parameters, "
      f"{tok} tokens per step), medians over {res['r1t1'][2]} steps after {warm}; "
      f"weights of the three runs bitwise equal: {same}.\n")
print("| ranks x threads | step | compute | gradient exchange | tokens/s | vs 1 x 1 |")
print("|---|---:|---:|---:|---:|---:|")
for k, name in (("r1t1", "1 x 1"), ("r2t1", "2 x 1"), ("r1t2", "1 x 2")):
    step, comm, _ = res[k]
    print(f"| {name} | {step * 1e3:.1f} ms | {(step - comm) * 1e3:.1f} ms | {comm * 1e3:.2f} ms | "
          f"{tok / step:.0f} | {base / step:.2f}x |")

# paper estimate: one rank per node, each with the 1 x 1 compute of ONE micro-batch per step
# (the global batch grows with the nodes); the exchange of N ranks moves (N-1)/N of the
# gradient out and in (alltoallv, allgatherv) over the network, plus one message per peer
# in each, plus the fold and copies (taken as the measured 2-rank exchange on this machine)
c1 = (res["r1t1"][0] - res["r1t1"][1]) / A
fold = res["r2t1"][1]
grad_mb = 4 * P / 1e6
print(f"\nEstimate for 8 and 64 nodes (on paper: one rank per node at 1 thread, one micro-batch of "
      f"{B} x {T} per rank and step, so the global batch grows with the nodes; compute "
      f"{c1 * 1e3:.0f} ms per micro-batch measured above; the exchange moves (N-1)/N of the "
      f"{grad_mb:.2f} MB gradient out and in at {net_gbs:g} GB/s usable, plus {lat_us:g} us per "
      f"peer and message, plus the measured 2-rank exchange for the fold and copies):\n")
print("| nodes | compute / step | exchange / step | tokens/s | vs 1 node |")
print("|---:|---:|---:|---:|---:|")
for N in (1, 8, 64):
    ex = 0.0 if N == 1 else fold + 2 * (N - 1) / N * grad_mb / 1e3 / net_gbs + 2 * (N - 1) * lat_us * 1e-6
    step = c1 + ex
    tps = N * B * T / step
    print(f"| {N} | {c1 * 1e3:.0f} ms | {ex * 1e3:.1f} ms | {tps / 1e3:.1f}k | {tps / (B * T / c1):.1f}x |")
PY
