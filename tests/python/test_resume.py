"""Interrupted runs (issue #17, "resume everywhere"): `longattn study` and `longattn synth`
killed (SIGINT = Ctrl-C, SIGKILL) after their first finished cell and continued with
--resume give the files of an uninterrupted run, timings aside; `longattn train` killed
between steps, in the middle of checkpoint writes and at random moments, always leaves a
checkpoint that loads and resumes bitwise to the weights of an uninterrupted run.

Where a signal lands is fixed by the library's stop points (stop_point.py, issue 26), not by
polling the output folder against the clock: the results do not depend on the speed or the
load of the machine.

Timing fields (the only ones not compared byte for byte): study training.csv column
elapsed_s, results.json keys *_seconds, the results.md line "Wall time N s."; synth
results.csv column train_s, results.md column "train s", results.json keys *_seconds; in
cells/*.json the keys train_s, eval_s, passkey_s and the 4th entry of each "log" row.
The run folder's path (in generated gnuplot scripts) is replaced by a placeholder.
Left-over temp files of a killed writer ("*.tmp.<pid>") are not outputs and are ignored."""
import json
import os
import pathlib
import random
import re
import signal
import subprocess

import pytest

from stop_point import start_stopped

ROOT = pathlib.Path(__file__).resolve().parents[2]

TIMING_KEYS = {"wall_seconds", "train_seconds", "eval_seconds", "passkey_seconds", "train_s", "eval_s", "passkey_s"}


def _corpus(root):
    """A tiny byte-level corpus: train/ and val/ of deterministic English-like documents."""
    rng = random.Random(7)
    words = ("the of and a to in is you that it he was for on are as with his they I at be this have from or "
             "one had by word but not what all were we when your can said there use an each which she do how "
             "their if will up other about out many then them these so some her would make like him into time").split()
    for split, n, size in (("train", 6, 3000), ("val", 3, 1200)):
        d = root / split
        d.mkdir(parents=True)
        for i in range(n):
            (d / f"doc{i}.txt").write_text(" ".join(rng.choice(words) for _ in range(size // 4)))
    return root


def _study_file(path, data, steps=12):
    path.write_text(json.dumps({
        "name": "resume", "data": str(data),
        "model": {"n_layer": 1, "d_model": 32, "n_head": 2, "n_kv_head": 2},
        "steps": steps, "batch": 4, "seq_len": 128, "lr": 0.003, "warmup": 2, "seed": 5,
        "eval_lens": [128, 256], "eval_windows": 2, "val_every": 6,
        "passkey": {"pretrain_mix": 0.25, "finetune_steps": 3, "lens": [128, 256], "depths": [0, 1], "trials": 2},
        "specs": ["softmax+rope", "softmax+nape", "softmax+sinv(tau=10)+prope(p=0.25)"],
    }))
    return path


def _normalise(name, data):
    """File bytes with the timing fields blanked (module docstring)."""
    if name.endswith(".json"):
        def walk(x):
            if isinstance(x, dict):
                return {k: (None if k in TIMING_KEYS else walk(v)) for k, v in x.items()}
            if isinstance(x, list):
                return [walk(v) for v in x]
            return x
        j = json.loads(data)
        if isinstance(j, dict) and isinstance(j.get("log"), list):
            j["log"] = [r[:3] + [None] for r in j["log"]]
        return json.dumps(walk(j), sort_keys=True).encode()
    text = data.decode("latin-1")
    if name == "training.csv":
        text = re.sub(r",[^,\n]*$", ",", text, flags=re.M)
    elif name == "results.md":
        text = re.sub(r"Wall time \d+ s\.", "Wall time - s.", text)
        # synth: | task | spec | steps | train s | ... : the 4th cell of every row
        text = re.sub(r"^(\|[^|]*\|[^|]*\|[^|]*\|)[^|]*\|", r"\1 - |", text, flags=re.M)
    elif name == "results.csv" and text.startswith("task,spec,mult"):
        # synth: the train_s column, found by name (the spec column is quoted, without commas
        # in these tests)
        lines = text.split("\n")
        col = lines[0].split(",").index("train_s")
        text = "\n".join([lines[0]] + [",".join(c if i != col else "-" for i, c in enumerate(ln.split(",")))
                                        if ln else ln for ln in lines[1:]])
    return text.encode("latin-1")


def _outputs(d):
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_file() and ".tmp." not in p.name:
            rel = str(p.relative_to(d))
            # the output folder's own name appears in generated gnuplot scripts
            out[rel] = _normalise(p.name, p.read_bytes().replace(str(d).encode(), b"<OUT>"))
    return out


def _assert_same(ref, got):
    a, b = _outputs(ref), _outputs(got)
    assert sorted(a) == sorted(b), f"file lists differ: {sorted(set(a) ^ set(b))}"
    for k in a:
        assert a[k] == b[k], f"{k} differs between the uninterrupted and the resumed run"


def _finished(cells):
    """Result files of finished cells (not run.json, not a variant's training checkpoint)."""
    if not cells.is_dir():
        return []
    return [c for c in cells.glob("*.json") if c.name != "run.json" and ".train" not in c.name]


def _interrupt_after_first_cell(cmd, out, sig, point, env=None):
    """Run cmd until it has saved its first cell (stop point `point`), check that out/cells
    then holds exactly that cell, send sig; returns (exit code, stderr)."""
    run = start_stopped(cmd, point, env)
    assert run.stopped, "the run ended before its first cell: " + run.resume()[1]
    assert len(_finished(out / "cells")) == 1
    return run.resume(sig)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_study_resume_matches_uninterrupted(build_dir, tmp_path, sig):
    data = _corpus(tmp_path / "data")
    sf = _study_file(tmp_path / "study.json", data)
    exe = str(build_dir / "longattn")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    ref = tmp_path / "ref"
    r = subprocess.run([exe, "study", str(sf), "--out", str(ref), "--threads", "1"], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()
    got = tmp_path / "got"
    rc, err = _interrupt_after_first_cell([exe, "study", str(sf), "--out", str(got), "--threads", "1"], got, sig,
                                          "study-cell", env)
    assert rc == -sig, f"exit {rc}: " + err
    n_done = len(_finished(got / "cells"))
    assert n_done == 1
    r = subprocess.run([exe, "study", str(sf), "--out", str(got), "--threads", "1", "--resume"], capture_output=True,
                       env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert f"{n_done} finished variant" in r.stderr.decode()
    _assert_same(ref, got)


def test_study_resume_continues_a_variant_from_its_training_checkpoint(build_dir, tmp_path):
    """SIGKILL in the middle of a variant, after its first pre-training checkpoint (every
    val_every steps): --resume continues that variant from the checkpoint, not from step 0,
    and still gives the files of an uninterrupted run."""
    data = _corpus(tmp_path / "data")
    sf = _study_file(tmp_path / "study.json", data)
    exe = str(build_dir / "longattn")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    ref = tmp_path / "ref"
    r = subprocess.run([exe, "study", str(sf), "--out", str(ref), "--threads", "1"], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()
    got = tmp_path / "got"
    # 12 steps, a checkpoint every 6: variant 1 saves two (steps 6 and 12), so the 3rd is
    # variant 2's first
    run = start_stopped([exe, "study", str(sf), "--out", str(got), "--threads", "1"], "study-ckpt:3", env)
    assert run.stopped, "the run ended before variant 2's first checkpoint: " + run.resume()[1]
    assert len(_finished(got / "cells")) == 1  # variant 1 finished, 2 not
    assert list(got.glob("cells/variant_2_*.train.json"))
    rc, err = run.resume(signal.SIGKILL)
    assert rc == -signal.SIGKILL, err
    r = subprocess.run([exe, "study", str(sf), "--out", str(got), "--threads", "1", "--resume"], capture_output=True,
                       env=env)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "1 finished variant" in err and "1 variant continued from" in err, err
    assert not list((got / "cells").glob("*.train*")), "training checkpoints are removed once a variant is done"
    _assert_same(ref, got)


def test_study_resume_refuses_other_settings(build_dir, tmp_path):
    data = _corpus(tmp_path / "data")
    exe = str(build_dir / "longattn")
    out = tmp_path / "out"
    sf = _study_file(tmp_path / "a.json", data, steps=12)
    rc, err = _interrupt_after_first_cell([exe, "study", str(sf), "--out", str(out), "--threads", "1"], out,
                                          signal.SIGKILL, "study-cell")
    assert rc == -signal.SIGKILL, err
    sf2 = _study_file(tmp_path / "b.json", data, steps=10)
    r = subprocess.run([exe, "study", str(sf2), "--out", str(out), "--threads", "1", "--resume"], capture_output=True)
    assert r.returncode == 1
    msg = r.stderr.decode()
    assert 'key "steps": 12 in the interrupted run, 10 now' in msg, msg
    r = subprocess.run([exe, "study", str(sf), "--out", str(out), "--threads", "2", "--resume"], capture_output=True)
    assert r.returncode == 1 and 'key "threads"' in r.stderr.decode(), r.stderr.decode()


SYNTH = ["synth", "--quick", "--steps", "60", "--eval-n", "8", "--threads", "1"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_synth_resume_matches_uninterrupted(build_dir, tmp_path, sig):
    exe = str(build_dir / "longattn")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    ref = tmp_path / "ref"
    r = subprocess.run([exe, *SYNTH, "--out", str(ref)], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()
    got = tmp_path / "got"
    rc, err = _interrupt_after_first_cell([exe, *SYNTH, "--out", str(got)], got, sig, "synth-cell", env)
    assert rc == -sig, f"exit {rc}: " + err
    assert len(_finished(got / "cells")) == 1
    r = subprocess.run([exe, *SYNTH, "--out", str(got), "--resume"], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()
    _assert_same(ref, got)
    r = subprocess.run([exe, *SYNTH, "--out", str(got), "--resume", "--seed", "2"], capture_output=True, env=env)
    assert r.returncode == 1 and 'key "seed": "1" in the interrupted run, "2" now' in r.stderr.decode(), r.stderr


TRAIN = ["--layers", "1", "--d-model", "32", "--heads", "2", "--batch", "4", "--seq-len", "32",
         "--eval-every", "0", "--ckpt-every", "1", "--threads", "1"]


def _train(exe, out, steps, data=None, resume=False):
    cmd = [exe, "train", "--out", str(out), "--steps", str(steps)]
    cmd += ["--resume"] if resume else ["--data", str(data), *TRAIN]
    return cmd


# the stop points inside a checkpoint write (src/train/checkpoint.c), each with the file that
# must exist there: the weights' temp file, the state's temp file, or a state.new waiting for
# its rename (between the two files)
WRITE_PHASES = [
    ("ckpt-weights", lambda f: f.startswith("model.safetensors.tmp.")),
    ("ckpt-state", lambda f: f.startswith("model.safetensors.state") and ".tmp." in f),
    ("ckpt-rename", lambda f: f == "model.safetensors.state.new"),
]


def test_train_sigkill_during_checkpoints_resumes_bitwise(build_dir, tmp_path):
    """Ten seeds, three SIGKILLs each, then --resume until done; the final weights must equal
    those of an uninterrupted run bit for bit. Odd seeds kill in the middle of a checkpoint
    write (the weights' temp file, the state's temp file, or a state.new not yet renamed: the
    stop points of WRITE_PHASES, at a random one of the next three checkpoints); even seeds
    kill between two steps (after a step's log row, before its checkpoint: point train-step)
    twice, then once at a random time, wherever that lands. Every kill at a stop point lands
    where it should on any machine (checked: the phase's file exists at the stop)."""
    exe = str(build_dir / "longattn")
    if subprocess.run([exe, "train", "--help"], capture_output=True).stdout.find(b"--threads") < 0:
        TRAIN[TRAIN.index("--threads"):TRAIN.index("--threads") + 2] = []
    env = dict(os.environ, OMP_NUM_THREADS="1")
    data = _corpus(tmp_path / "data") / "train"
    steps = 16
    ref = tmp_path / "ref"
    r = subprocess.run(_train(exe, ref, steps, data), capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()
    want = (ref / "model.safetensors").read_bytes()
    mid_write = 0
    for seed in range(10):
        rng = random.Random(seed)
        out = tmp_path / f"run{seed}"
        kills = 0
        while True:
            ck = out / "model.safetensors"
            resume = ck.exists() or (out / "model.safetensors.state").exists()
            cmd = _train(exe, out, steps, data, resume=ck.exists())
            # a checkpoint every step and at most 3 steps per process before its kill: the
            # 3 kills leave at least 16 - 9 steps to go, so every stop point is reached
            nth = rng.randint(1, 3)
            if kills < 2 or (kills == 2 and seed % 2):
                name, present = (WRITE_PHASES[(seed // 2 + kills) % len(WRITE_PHASES)] if seed % 2
                                 else ("train-step", None))
                run = start_stopped(cmd, f"{name}:{nth}", env)
                assert run.stopped, f"seed {seed}: no stop at {name}:{nth}: {run.resume()[1]}"
                if present:
                    assert any(present(f) for f in os.listdir(out)), f"seed {seed}: {name}: {os.listdir(out)}"
                    mid_write += 1
                rc, err = run.resume(signal.SIGKILL)
                kills += 1
            else:
                p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
                if kills < 3:  # a random moment: the assertions below hold wherever it lands
                    try:
                        p.wait(timeout=rng.uniform(0.05, 1.5))
                    except subprocess.TimeoutExpired:
                        p.kill()
                    kills += 1
                _, err = p.communicate(timeout=1800)
                rc, err = p.returncode, err.decode()
            if rc == 0:
                break
            if rc != -signal.SIGKILL:
                pytest.fail(f"seed {seed}: train exited {rc} (resume={resume}): {err}")
        got = (out / "model.safetensors").read_bytes()
        assert got == want, f"seed {seed}: weights after {kills} kills differ from the uninterrupted run"
        # each step logged once, in order: --resume cuts the rows a killed run logged after its checkpoint
        logged = [int(r.split(",")[0]) for r in (out / "log.csv").read_text().splitlines()[1:]]
        assert logged == list(range(1, steps + 1)), f"seed {seed}: log.csv steps {logged}"
    assert mid_write == 15, f"{mid_write} kills landed during a checkpoint write, not 3 for each odd seed"
