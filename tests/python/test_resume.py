"""Interrupted runs (issue #17, "resume everywhere"): `longattn study` and `longattn synth`
killed (SIGINT = Ctrl-C, SIGKILL) after their first finished cell and continued with
--resume give the files of an uninterrupted run, timings aside; `longattn train` killed at
random moments, also in the middle of checkpoint writes, always leaves a checkpoint that
loads and resumes bitwise to the weights of an uninterrupted run.

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
import time

import pytest

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


def _interrupt_after_first_cell(cmd, out, sig, timeout=600):
    """Start cmd, send sig once out/cells holds a finished cell; returns the exit code."""
    # SIGINT back to its default in the child: a test run started in the background by a shell
    # without job control (nohup make check &) inherits SIGINT ignored, and the run would then
    # finish instead of stopping
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t0 = time.time()
    cells = out / "cells"
    while p.poll() is None and time.time() - t0 < timeout:
        if _finished(cells):
            p.send_signal(sig)
            break
        time.sleep(0.01)
    _, err = p.communicate(timeout=timeout)
    return p.returncode, err.decode()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_study_resume_matches_uninterrupted(build_dir, tmp_path, sig):
    data = _corpus(tmp_path / "data")
    # 48 steps per variant (not 12): the two variants left after the first cell must outlast the
    # poll below even on a loaded machine, or the SIGINT arrives after the run has finished
    sf = _study_file(tmp_path / "study.json", data, steps=48)
    exe = str(build_dir / "longattn")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    ref = tmp_path / "ref"
    r = subprocess.run([exe, "study", str(sf), "--out", str(ref), "--threads", "1"], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()
    got = tmp_path / "got"
    rc, err = _interrupt_after_first_cell([exe, "study", str(sf), "--out", str(got), "--threads", "1"], got, sig)
    assert rc != 0, "the run finished before it could be interrupted: " + err
    n_done = len(_finished(got / "cells"))
    assert 1 <= n_done < 3
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
    p = subprocess.Popen([exe, "study", str(sf), "--out", str(got), "--threads", "1"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    while p.poll() is None and not list(got.glob("cells/variant_2_*.train.json")):
        time.sleep(0.002)
    p.kill()
    p.wait()
    assert p.returncode == -signal.SIGKILL, "the run finished before it could be interrupted"
    assert len(_finished(got / "cells")) == 1  # variant 1 finished, 2 not
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
                                          signal.SIGKILL)
    assert rc != 0, err
    sf2 = _study_file(tmp_path / "b.json", data, steps=10)
    r = subprocess.run([exe, "study", str(sf2), "--out", str(out), "--threads", "1", "--resume"], capture_output=True)
    assert r.returncode == 1
    msg = r.stderr.decode()
    assert 'key "steps": 12 in the interrupted run, 10 now' in msg, msg
    r = subprocess.run([exe, "study", str(sf), "--out", str(out), "--threads", "2", "--resume"], capture_output=True)
    assert r.returncode == 1 and 'key "threads"' in r.stderr.decode(), r.stderr.decode()


# 300 steps per cell (0.1 s at 30): the cells left after the first must outlast the poll on a
# loaded machine, or the SIGINT arrives after the run has finished
SYNTH = ["synth", "--quick", "--steps", "300", "--eval-n", "8", "--threads", "1"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_synth_resume_matches_uninterrupted(build_dir, tmp_path, sig):
    exe = str(build_dir / "longattn")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    ref = tmp_path / "ref"
    r = subprocess.run([exe, *SYNTH, "--out", str(ref)], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()
    got = tmp_path / "got"
    rc, err = _interrupt_after_first_cell([exe, *SYNTH, "--out", str(got)], got, sig)
    assert rc != 0, "the run finished before it could be interrupted: " + err
    assert 1 <= len(_finished(got / "cells")) < 4
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


WRITE_PHASES = [
    lambda f: f.startswith("model.safetensors.tmp."),           # weights being written
    lambda f: f.startswith("model.safetensors.state") and ".tmp." in f,  # state being written
    lambda f: f == "model.safetensors.state.new",               # new state written, not yet renamed
]


def test_train_sigkill_during_checkpoints_resumes_bitwise(build_dir, tmp_path):
    """Several seeds: SIGKILL at a random time, or as soon as a checkpoint file is being
    written (its temp file or state.new exists); then --resume until done. The final
    weights must equal those of an uninterrupted run bit for bit."""
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
            p = subprocess.Popen(_train(exe, out, steps, data, resume=ck.exists()), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, env=env)
            if kills < 3:
                wait = rng.uniform(0.05, 1.5)
                # odd seeds: kill as soon as a given part of a checkpoint write is seen: the
                # weights' temp file, the state's temp file, or a state.new waiting for its
                # rename (between the two files); even seeds: a random time
                trigger = WRITE_PHASES[(seed // 2 + kills) % len(WRITE_PHASES)] if seed % 2 else None
                deadline = time.time() + (60 if trigger else wait)
                while p.poll() is None and time.time() < deadline:
                    if trigger and out.is_dir() and any(trigger(f) for f in os.listdir(out)):
                        mid_write += 1
                        break
                    time.sleep(0.0002)
                if p.poll() is None:
                    p.kill()
                    kills += 1
            _, err = p.communicate(timeout=600)
            if p.returncode == 0:
                break
            if p.returncode != -signal.SIGKILL:
                pytest.fail(f"seed {seed}: train exited {p.returncode} (resume={resume}): {err.decode()}")
        got = (out / "model.safetensors").read_bytes()
        assert got == want, f"seed {seed}: weights after {kills} kills differ from the uninterrupted run"
    assert mid_write >= 5, f"only {mid_write} kills landed during a checkpoint write"
