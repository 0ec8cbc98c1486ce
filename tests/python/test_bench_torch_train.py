"""bench/torch_train.py is the model `longattn bench train --python` compares against: with
the same weights (la_model_save's file) and tokens, its loss and every tensor's gradient
norm must equal those of src/model (tests/tools/gpt_step). This checks the architecture
(RMSNorm, QK-norm, half-split RoPE, causal softmax attention, ReLU^2 MLP, untied head) and
the backward through PyTorch's autograd. Works with Debian's PyTorch 1.13 (math attention)
and PyTorch 2.x (SDPA)."""
import importlib.util
import math
import pathlib
import random
import subprocess

import pytest

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_script():
    spec = importlib.util.spec_from_file_location("torch_train", ROOT / "bench" / "torch_train.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("L,C,H,T,B", [(2, 32, 2, 16, 2), (1, 64, 4, 24, 3)])
def test_same_loss_and_gradients(build_dir, tmp_path, L, C, H, T, B):
    tool = pathlib.Path(build_dir) / "tests" / "tools" / "gpt_step"
    if not tool.exists():
        pytest.skip(f"{tool} not built (make)")
    r = random.Random(L * 1000 + C)
    toks = [r.randrange(256) for _ in range(2 * B * T)]
    wfile = tmp_path / "m.safetensors"
    out = subprocess.run([str(tool), str(wfile), str(L), str(C), str(H), str(T), str(B)],
                         input=" ".join(map(str, toks)), capture_output=True, text=True, check=True).stdout
    ours = {}
    for line in out.splitlines():
        w = line.split()
        ours["loss" if w[0] == "loss" else w[1]] = float(w[-1])

    tt = load_script()
    torch.manual_seed(0)
    model = tt.GPT(L, C, H, 256, T)
    tt.load_longattn(model, str(wfile))
    idx = torch.tensor(toks[:B * T]).view(B, T)
    tgt = torch.tensor(toks[B * T:]).view(B, T)
    loss = model(idx, tgt)
    loss.backward()
    # float32 on both sides, different summation orders: the loss agrees to ~1e-6
    # relative; gradient norms (sums over up to 16k entries of products of 2L+2 layers)
    # to ~1e-4 relative. A wrong architecture detail (RoPE pairing, a missing gain, the
    # attention scale) moves them by 1e-2 or more.
    assert loss.item() == pytest.approx(ours["loss"], rel=1e-5)
    params = dict(model.named_parameters())
    names = [k for k in ours if k != "loss"]
    assert len(names) == len(params)
    for name in names:
        g = params[tt.torch_name(name)].grad
        got = 0.0 if g is None else math.sqrt(float((g.double() ** 2).sum()))
        assert got == pytest.approx(ours[name], rel=2e-4, abs=1e-7), name


def test_bench_train_times_pytorch_autocast_bf16(build_dir):
    """`bench train --precision bf16 --python PY` runs a second PyTorch process under
    torch.autocast bf16 in the same rounds and reports it (issue 29): the JSON carries its
    rate and ratio, its attention field says autocast, and every round gave a ratio."""
    import json
    import sys

    out = subprocess.run([str(pathlib.Path(build_dir) / "longattn"), "bench", "train", "--precision", "bf16", "--python", sys.executable,
                          "--layers", "1", "--d-model", "32", "--heads", "2", "--seq-len", "16",
                          "--batch", "2", "--steps", "1", "--rounds", "2", "--json"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    r = json.loads(out)
    assert r["torch"] is not None and "autocast" not in r["torch"]["attention"]
    a = r["torch_autocast_bf16"]
    assert a["attention"].endswith("+autocast-bf16")
    assert a["tokens_per_s"] > 0 and a["ratio"] > 0
    assert 0 < a["round_ratio_min"] <= a["round_ratio_max"]
    assert r["config"]["precision"] == "bf16"
