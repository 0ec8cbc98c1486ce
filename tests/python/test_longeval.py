"""Long-context evaluation (issue #15): the extension methods against the NumPy float64
reference model of test_llama.py (with the method applied), past the file's trained
context; `longattn longeval` end to end on a tiny random GGUF with a byte-level
tokenizer: outputs parse, --resume after an interruption reproduces the results."""
import json
import math
import re
import shutil
import signal
import csv as csv_mod
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
import test_llama as tl  # noqa: E402
from stop_point import start_stopped  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402

C_TRAIN = 256  # write_model's context_length


def ref_forward(ref, ids, inv_freq, logit_scale):
    """test_llama's float64 reference with the method's frequencies and per-query factor."""
    return ref.forward(ids, inv_freq=inv_freq, logit_scale=logit_scale)


def method_ref(name, s, base, D, T, Ctr):
    """(inv_freq, per-query logit factor) of a method, written from SPEC 3, 4 and 9."""
    i = np.arange(0, D, 2, dtype=np.float64)
    rope = lambda b: 1.0 / (b ** (i / D))  # noqa: E731
    pos = np.arange(T, dtype=np.float64)
    one = np.ones(T)
    if name == "pi":  # Chen et al. 2023: positions p -> p / s
        return rope(base) / s, one
    if name == "ntk":
        return rope(base * s ** (D / (D - 2))), one
    if name == "dynamic-ntk":  # Hugging Face: only past the trained context, n = T here
        sp = s * T / Ctr - (s - 1) if T > Ctr else 1.0
        return rope(base * sp ** (D / (D - 2))), one
    if name == "yarn":  # Peng et al. 2023, ramp between beta_fast = 32 and beta_slow = 1
        def corr(r):
            return D * np.log(Ctr / (2 * np.pi * r)) / (2 * np.log(base))
        lo, hi = max(np.floor(corr(32)), 0), min(np.ceil(corr(1)), D - 1)
        ramp = np.clip((np.arange(D // 2) - lo) / (hi - lo), 0, 1)
        f = rope(base)
        ms = 0.1 * np.log(s) + 1
        return f * (1 - ramp) + f / s * ramp, one * ms * ms
    if name == "qwen-logn":  # max(1, log(p+1)/log(C)) on the logits
        return rope(base), np.maximum(1.0, np.log(pos + 1) / np.log(Ctr))
    if name == "critical":  # gamma log(n_q), n_q = p + 1 keys under causal
        return rope(base), s * np.log(pos + 1)
    raise ValueError(name)


METHODS = [("pi(2)", "pi", 2), ("ntk(2)", "ntk", 2), ("dynamic-ntk(2,256)", "dynamic-ntk", 2),
           ("yarn(2,256)", "yarn", 2), ("qwen-logn(256)", "qwen-logn", 0), ("critical(0.5)", "critical", 0.5)]


@pytest.mark.parametrize("spec,name,s", METHODS, ids=[m[0] for m in METHODS])
def test_method_matches_numpy_past_trained_context(build_dir, tmp_path, spec, name, s):
    path = tmp_path / "tiny.gguf"
    tl.write_model(path, "llama", QT.F32, tied=True, seed=3, base=500.0)
    ref = tl.RefModel(path)
    T = 300  # past the file's context_length 256
    ids = [int(i) for i in np.random.default_rng(5).integers(0, 300, size=T)]
    inv, scale = method_ref(name, s, ref.base, ref.D, T, C_TRAIN)
    r64 = ref_forward(ref, ids, inv, scale)
    rope64 = ref_forward(ref, ids, method_ref("pi", 1, ref.base, ref.D, T, C_TRAIN)[0], np.ones(T))
    ours = tl.c_logits(build_dir, tmp_path, path, ids, "--spec", spec)
    # float32 kernel vs float64 reference: test_llama's tolerance on plain RoPE (8x the
    # float32-vs-float64 gap of the reference itself) is the yardstick for every method
    r32 = ref.forward(ids, np.float32).astype(np.float64)
    tol = tl.tolerance(ref.forward(ids), r32)
    err = np.abs(ours - r64).max()
    assert err <= tol, f"{spec}: max |ours - ref| = {err:.3g} > {tol:.3g}"
    # and the method does change the logits (the test could not pass with plain RoPE)
    assert np.abs(r64 - rope64).max() > 10 * tol


def regimes(name, a, T):
    """Issue 28: (query positions, key positions, mask) per regime of a method, written from
    SPEC 10 and the papers (SelfExtend: Jin et al. 2024; ReRoPE: Su 2023; DCA: An et al.
    2024 with the chunk/local split of HKUNLP/ChunkLlama); the masks partition the causal
    lower triangle."""
    i = np.arange(T)[:, None] * np.ones((1, T), dtype=np.int64)
    j = np.arange(T)[None, :] * np.ones((T, 1), dtype=np.int64)
    d = i - j
    causal = d >= 0
    if name in ("selfextend", "rerope", "leaky"):
        W = a[0] if name != "selfextend" else a[1]
        near = (i.astype(float), j.astype(float), causal & (d < W))
        if name == "selfextend":
            G = a[0]
            far = ((i // G + W - W // G).astype(float), (j // G).astype(float), causal & (d >= W))
        elif name == "rerope":
            far = (np.full((T, T), float(W)), np.zeros((T, T)), causal & (d >= W))
        else:
            k = a[1]
            far = ((i + W * (k - 1)) / k, j / k, causal & (d >= W))
        return [near, far]
    chunk, local = a
    s = chunk - local
    ci, cj = i // s, j // s
    intra = ((i % s).astype(float), (j % s).astype(float), causal & (ci == cj))
    succ = (np.minimum(i % s + s, chunk).astype(float), (j % s).astype(float), ci - cj == 1)
    inter = (np.full((T, T), float(min(2 * s - 1, chunk))), (j % s).astype(float), ci - cj >= 2)
    return [intra, succ, inter]


def regime_forward(ref, ids, regs):
    """test_llama's float64 reference model with the attention logits of every (i, j) taken
    from the regime whose mask holds it: RoPE of q at the regime's query position and of k
    at its key position (half-split pairs, as the model's own RoPE)."""
    D = ref.D
    inv = 1.0 / (ref.base ** (np.arange(0, D, 2, dtype=np.float64) / D))

    def cos_sin(pos):
        ang = pos[:, None] * inv
        emb = np.concatenate([ang, ang], -1)
        return np.cos(emb), np.sin(emb)

    def logits(q, k, rh):
        T = q.shape[1]
        s = np.full((q.shape[0], T, T), -np.inf)
        for qp, kp, m in regs:
            # one query position per row and one key position per column within a regime
            qc, qs = cos_sin(np.where(m, qp, 0).max(axis=1))
            kc, ks = cos_sin(np.where(m, kp, 0).max(axis=0))
            sr = (q * qc + rh(q) * qs) @ (k * kc + rh(k) * ks).transpose(0, 2, 1) / np.sqrt(D)
            s[:, m] = sr[:, m]
        return s

    return ref.forward(ids, attn_logits=logits)


REGIMES = [("selfextend(4,64)", "selfextend", (4, 64)), ("rerope(64)", "rerope", (64,)),
           ("leaky-rerope(64,4)", "leaky", (64, 4)), ("dca(128,32)", "dca", (128, 32))]


@pytest.mark.parametrize("spec,name,a", REGIMES, ids=[m[0] for m in REGIMES])
def test_position_regime_method_matches_numpy(build_dir, tmp_path, spec, name, a):
    """SelfExtend, ReRoPE, Leaky ReRoPE, DCA (src/model/posreg.c) against the float64 model
    with the method's per-(i, j) positions, T = 300 past the context 256, and each differs
    from plain RoPE (so the test fails when the regimes are not applied)."""
    path = tmp_path / "tiny.gguf"
    tl.write_model(path, "llama", QT.F32, tied=True, seed=3, base=500.0)
    ref = tl.RefModel(path)
    T = 300
    ids = [int(i) for i in np.random.default_rng(5).integers(0, 300, size=T)]
    regs = regimes(name, a, T)
    # a key position must be one number per column, a query position one per row, in each regime
    for qp, kp, m in regs:
        for r in range(T):
            assert len(set(qp[r][m[r]])) <= 1
        for c in range(T):
            assert len(set(kp[:, c][m[:, c]])) <= 1
    r64 = regime_forward(ref, ids, regs)
    rope64 = ref.forward(ids)
    ours = tl.c_logits(build_dir, tmp_path, path, ids, "--spec", spec)
    r32 = ref.forward(ids, np.float32).astype(np.float64)
    tol = tl.tolerance(rope64, r32)
    err = np.abs(ours - r64).max()
    assert err <= tol, f"{spec}: max |ours - ref| = {err:.3g} > {tol:.3g}"
    assert np.abs(r64 - rope64).max() > 10 * tol
    # the same in chunks of 37 (queries at positions S - T.. of a longer cache) and through a
    # decoding session over the KV cache (the path longeval uses)
    for extra in (["--chunk", "37"], ["--kv", "full", "--step", "37"]):
        ours2 = tl.c_logits(build_dir, tmp_path, path, ids, "--spec", spec, *extra)
        assert np.abs(ours2 - r64).max() <= tol, extra


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tiny_with_tokenizer(path, monkeypatch, merge_at=256):
    """write_model's tiny llama file (V = 300) plus a byte-level GPT-2 tokenizer: the 256
    byte symbols, one merge (token id merge_at), padding tokens up to V (past it when
    merge_at >= V: a tokenizer that does not match the model)."""
    b2u = bytes_to_unicode()
    n = max(300, merge_at + 1)
    toks = [b2u[b] for b in range(256)] + [f"<pad{i}>" for i in range(n - 257)]
    toks.insert(merge_at, "Ġt")
    types = [1] * 256 + [3] * (n - 256)
    types[merge_at] = 1
    base_writer = gguf.GGUFWriter

    class TokWriter(base_writer):
        def write_header_to_file(self, *a, **k):
            self.add_tokenizer_model("gpt2")
            self.add_tokenizer_pre("gpt2")
            self.add_token_list(toks)
            self.add_token_types(types)
            self.add_token_merges(["Ġ t"])
            super().write_header_to_file(*a, **k)

    monkeypatch.setattr(gguf, "GGUFWriter", TokWriter)
    tl.write_model(path, "llama", QT.F32, tied=True, seed=4)
    monkeypatch.setattr(gguf, "GGUFWriter", base_writer)


def longeval(build_dir, *args):
    return [str(build_dir / "longattn"), "longeval", *map(str, args)]


def strip_seconds(j):
    for c in j["cells"]:
        c.pop("seconds")
    return j


def test_longeval_end_to_end_and_resume(build_dir, tmp_path, monkeypatch):
    model = tmp_path / "tiny.gguf"
    tiny_with_tokenizer(model, monkeypatch)
    methods = "as-trained;yarn({s},{C});pi({s});as-trained | sinks(4,60);as-trained | h2o(32,28,4)+int8"
    common = ["--model", model, "--methods", methods, "--lengths", "1.5,2.5", "--depths", "0.25,0.75",
              "--trials", "2", "--distractors", "2", "--buckets", "4", "--chunk", "64", "--threads", "1",
              "--documents", "2"]
    a = tmp_path / "a"
    p = subprocess.run(longeval(build_dir, *common, "--out", a), capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr
    res = json.loads((a / "results.json").read_text())
    assert res["C"] == 256 and len(res["cells"]) == 10
    for c in res["cells"]:
        # 2 documents x 2 depths x 2 trials
        assert c["passkey_n"] == 8 and c["multikey_n"] == 8 and c["n_docs"] == 2 and c["shared_prefix"] == 1
        assert 0 <= c["passkey_hits"] <= 8 and np.isfinite(c["bits_per_byte"]) and c["bits_per_byte"] > 0
        assert len(c["passkey_example_hits"]) == 8 and sum(c["passkey_example_hits"]) == c["passkey_hits"]
        assert len(c["bucket_bits_per_token"]) == 4
    # {s} = L / C
    assert "yarn(s=2.5,train=256" in res["cells"][3]["spec"]
    assert res["cells"][6]["kv"].startswith("sinks")
    csv = (a / "longeval.csv").read_text().splitlines()
    # one row per cell and one per (cell, document)
    assert len(csv) == 1 + 10 * 3 and csv[0].startswith("method,spec,kv,length_x_C,L,doc,")
    rows = list(csv_mod.reader(csv))
    assert sum(r[5] == "all" for r in rows) == 10 and sum(r[5] == "2" for r in rows) == 10
    md = (a / "longeval.md").read_text()
    assert "| `as-trained \\| sinks(4,60)` |" in md
    assert "], n = 8" in md and "Against `as-trained`" in md and "McNemar" in md
    assert "2.5C = 640" in p.stdout
    if shutil.which("gnuplot"):  # scripts/setup.sh installs gnuplot-nox
        for png in ["ppl_by_position.png", "retrieval.png"] + [f"passkey_{i}.png" for i in range(1, 6)]:
            assert (a / png).read_bytes()[:4] == b"\x89PNG", png
        assert not list(a.glob("*.tmp"))
    # interrupted run: SIGKILL once its 3rd cell is stored (a stop point, stop_point.py: the same
    # moment on any machine), then --resume
    b = tmp_path / "b"
    run = start_stopped(longeval(build_dir, *common, "--out", b), "longeval-cell:3")
    assert run.stopped, run.resume()[1]
    rc, err = run.resume(signal.SIGKILL)
    assert rc == -signal.SIGKILL, err
    assert len(list((b / "cells").glob("*.json"))) == 3
    assert not (b / "results.json").exists()
    p2 = subprocess.run(longeval(build_dir, *common, "--out", b, "--resume"), capture_output=True, text=True,
                        timeout=1800)
    assert p2.returncode == 0, p2.stderr
    assert "(resumed)" in p2.stderr
    ra = strip_seconds(json.loads((a / "results.json").read_text()))
    rb = strip_seconds(json.loads((b / "results.json").read_text()))
    assert ra == rb
    # resume into a folder of another run is refused with a clear message
    p3 = subprocess.run(longeval(build_dir, *common[:3], "pi(3)", *common[4:], "--out", b, "--resume"),
                        capture_output=True, text=True)
    assert p3.returncode != 0 and "is not this run's cell" in p3.stderr
    # so is a resume with an option that changes the cells' numbers (here --trials), and the
    # stored cells stay as they were
    before = {f.name: f.read_bytes() for f in (b / "cells").glob("*.json")}
    trials = common.index("--trials") + 1
    p4 = subprocess.run(longeval(build_dir, *common[:trials], "1", *common[trials + 1:], "--out", b, "--resume"),
                        capture_output=True, text=True)
    assert p4.returncode != 0 and "was computed with trials = 2, this run has trials = 1" in p4.stderr, p4.stderr
    assert {f.name: f.read_bytes() for f in (b / "cells").glob("*.json")} == before
    # options that do not change a cell (--no-share, --resamples) resume
    p5 = subprocess.run(longeval(build_dir, *common, "--no-share", "--resamples", "1000", "--out", b, "--resume"),
                        capture_output=True, text=True, timeout=1800)
    assert p5.returncode == 0, p5.stderr
    shutil.rmtree(b)


def strip_cost(j):
    for c in j["cells"]:
        for k in ("seconds", "prefill_tokens", "shared_prefix"):
            c.pop(k)
    return j


def test_shared_prefix_equals_unshared_bitwise(build_dir, tmp_path, monkeypatch):
    """Issue 28: retrieval examples continued from forks of the shared haystack prefix give
    exactly (bitwise: every per-example first-token logit, every per-document bit sum, as
    JSON round-trip numbers) what prefilling each example from its first token gives, for
    full caches (RoPE, YaRN, dynamic NTK whose scale follows the cache length), int8, exact
    streaming (sinks) and the approximate H2O; and it prefills fewer tokens."""
    model = tmp_path / "tiny.gguf"
    tiny_with_tokenizer(model, monkeypatch)
    methods = ("as-trained;yarn({s},{C});dynamic-ntk({s},{C});as-trained | sinks(4,60);"
               "as-trained | h2o(32,28,4)+int8;yarn({s},{C}) | full+int8;selfextend(4,64);dca(128,32)")
    common = ["--model", model, "--methods", methods, "--lengths", "1.5,2.5", "--depths", "0.1,0.3,0.5,0.7,0.9",
              "--trials", "2", "--distractors", "2", "--buckets", "4", "--chunk", "32", "--threads", "1",
              "--documents", "3"]
    a, b = tmp_path / "shared", tmp_path / "unshared"
    p = subprocess.run(longeval(build_dir, *common, "--out", a), capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr
    assert "% done" in p.stderr and "ETA" in p.stderr  # progress inside a cell
    q = subprocess.run(longeval(build_dir, *common, "--no-share", "--out", b), capture_output=True, text=True,
                       timeout=1800)
    assert q.returncode == 0, q.stderr
    ja, jb = json.loads((a / "results.json").read_text()), json.loads((b / "results.json").read_text())
    cost_a = sum(c["prefill_tokens"] for c in ja["cells"])
    cost_b = sum(c["prefill_tokens"] for c in jb["cells"])
    assert all(c["shared_prefix"] == 1 for c in ja["cells"]) and all(c["shared_prefix"] == 0 for c in jb["cells"])
    assert strip_cost(ja) == strip_cost(jb)
    assert cost_a < 0.9 * cost_b, (cost_a, cost_b)  # measured 0.85 here (short L, chunk 32, 2 trials)


def test_longeval_cli_errors(build_dir, tmp_path):
    p = subprocess.run(longeval(build_dir, "--lengths", "1"), capture_output=True, text=True)
    assert p.returncode != 0 and "--model FILE.gguf is required" in p.stderr
    p = subprocess.run(longeval(build_dir, "--model", tl.MODEL, "--methods", "softmax+bogus", "--lengths", "0.01"),
                       capture_output=True, text=True)
    assert p.returncode != 0 and "bogus" in p.stderr


def test_chunked_prefill(build_dir, tmp_path, monkeypatch):
    """Full-cache methods: the chunk size changes nothing (exact). window / sinks: the chunked
    prefill IS token-by-token streaming (src/infer/kv_stream.c; each row sees the keys and
    re-indexed positions of its own step), so bits per token by position bucket equal
    --exact-stream's to float32 summation order (rtol 1e-5; measured ~1e-7). h2o keeps the
    documented approximation (a chunk of a quarter of its recent window sees the cache as
    evicted before it): measured here and bounded (0.2 % measured on this model at 4C; the
    bound 2 % catches a broken re-indexing, which costs far more)."""
    model = tmp_path / "tiny.gguf"
    tiny_with_tokenizer(model, monkeypatch)

    def bits(out, *extra):
        p = subprocess.run(longeval(build_dir, "--model", model, "--lengths", "4", "--trials", "0", "--buckets", "4",
                                    "--threads", "1", "--out", tmp_path / out, *extra),
                           capture_output=True, text=True, timeout=1800)
        assert p.returncode == 0, p.stderr
        cells = json.loads((tmp_path / out / "results.json").read_text())["cells"]
        return np.array([c["bits_per_token"] for c in cells]), np.array([c["bucket_bits_per_token"] for c in cells])

    full = "as-trained;yarn({s},{C})"
    a, b = bits("f64", "--methods", full, "--chunk", "64")[0], bits("f17", "--methods", full, "--chunk", "17")[0]
    np.testing.assert_allclose(a, b, rtol=1e-5)  # float32 sums in another order only
    ev = "as-trained | sinks(4,60);as-trained | window(64);yarn({s},{C}) | sinks(2,40)"
    (c_all, c_b), (e_all, e_b) = bits("c", "--methods", ev, "--chunk", "64"), bits("e", "--methods", ev,
                                                                                   "--exact-stream")
    print("window/sinks chunked vs token-by-token, relative difference:", np.abs(c_all - e_all) / e_all)
    np.testing.assert_allclose(c_b, e_b, rtol=1e-5)
    np.testing.assert_allclose(c_all, e_all, rtol=1e-5)
    h2o = "as-trained | h2o(32,28,4)"
    ch, eh = bits("hc", "--methods", h2o, "--chunk", "64")[0], bits("he", "--methods", h2o, "--exact-stream")[0]
    rel = np.abs(ch - eh) / eh
    print("h2o chunked (approximation) vs token-by-token, relative difference in bits/token:", rel)
    assert np.all(rel < 0.02) and np.all(rel > 0)


def test_filler_haystack(build_dir, tmp_path, monkeypatch):
    """--haystack filler: Mohtashami & Jaggi's repeated filler as the retrieval haystack (recorded
    in results.json); the perplexity stream stays the real text, so bits are unchanged."""
    model = tmp_path / "tiny.gguf"
    tiny_with_tokenizer(model, monkeypatch)
    common = ["--model", model, "--methods", "as-trained", "--lengths", "2", "--depths", "0.5", "--trials", "1",
              "--distractors", "1", "--threads", "1"]
    out = {}
    for name, extra in (("text", ["--haystack", "text"]), ("filler", ["--haystack", "filler"])):
        p = subprocess.run(longeval(build_dir, *common, *extra, "--out", tmp_path / name), capture_output=True,
                           text=True, timeout=1800)
        assert p.returncode == 0, p.stderr
        out[name] = json.loads((tmp_path / name / "results.json").read_text())
        assert out[name]["haystack"] == name
    assert out["text"]["cells"][0]["bits_per_token"] == out["filler"]["cells"][0]["bits_per_token"]


def _tiny_cells(build_dir, tmp_path, monkeypatch, methods, lengths):
    """Run longeval (perplexity only) on the tiny GGUF (C = 256); returns results.json's cells."""
    model = tmp_path / "tiny.gguf"
    tiny_with_tokenizer(model, monkeypatch)
    p = subprocess.run(longeval(build_dir, "--model", model, "--methods", methods, "--lengths", lengths,
                                "--trials", "0", "--buckets", "2", "--threads", "1", "--out", tmp_path / "o"),
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr
    return json.loads((tmp_path / "o" / "results.json").read_text())["cells"]


def test_longeval_critical_g_is_one_over_ln_c(build_dir, tmp_path, monkeypatch):
    """{g} = 1/ln C: critical({g}) must scale logits by ln(n)/ln(C) (1 at the trained context),
    the only constant that leaves a model trained without the scaling unchanged at n = C."""
    spec = _tiny_cells(build_dir, tmp_path, monkeypatch, "critical({g})+yarn({s},{C})", "1.5")[0]["spec"]
    m = re.search(r"critical\(gamma=([0-9.eE+-]+)\)", spec)
    assert m, spec
    assert abs(float(m.group(1)) - 1 / math.log(256)) < 1e-12, spec  # C = 256 in the tiny model


def test_longeval_full_int8_holds_a_context_past_the_default_cache(build_dir, tmp_path, monkeypatch):
    """'| full+int8' must size its full cache to L like a method without a policy: the policy parse
    keeps the default 4096 slots, and a 2C run on SmolLM2 (L = 16384) stopped with "the KV cache is
    full". L = 17 C = 4352 > 4096 on the tiny model."""
    cells = _tiny_cells(build_dir, tmp_path, monkeypatch, "as-trained;as-trained | full+int8", "17")
    assert cells[0]["L"] == 4352 and "int8" in cells[1]["kv"]
    # int8 keys and values: close to the float cache, not equal (the test can tell them apart)
    a, b = cells[0]["bits_per_token"], cells[1]["bits_per_token"]
    assert a != b and abs(a - b) < 0.05 * a, (a, b)


def _quick(model, out, *extra):
    """a one-cell perplexity run on the tiny model (seconds)"""
    return ["--model", model, "--methods", "as-trained", "--lengths", "1", "--trials", "0", "--buckets", "1",
            "--documents", "1", "--threads", "1", "--docs", tl.ROOT / "data" / "longdocs", "--out", out, *extra]


def _cells(out):
    return {f.name: f.read_bytes() for f in (out / "cells").glob("*.json")}


def test_longeval_bad_method_or_kv_type_refused_before_deleting(build_dir, tmp_path, monkeypatch):
    """A --kv-type the model cannot take, a method the kernels refuse (asentmax needs its
    trained parameters), a policy with a second '|' or an unknown term and a length under 64
    tokens are usage errors (exit 2, the usage hint, the method named) found before the
    previous run's cells/ is emptied; before the fix they failed (exit 1) in the first cell,
    after la_grid_open had deleted them."""
    model = tmp_path / "tiny.gguf"
    tiny_with_tokenizer(model, monkeypatch)
    out = tmp_path / "o"
    p = subprocess.run(longeval(build_dir, *_quick(model, out)), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    before = _cells(out)
    assert len(before) == 1
    for extra, says in ((["--kv-type", "int8(group=7)"], "int8(group=7)"),
                        (["--methods", "asentmax+rope"], "asentmax"),
                        (["--methods", "as-trained | sinks(4,20) | window(3)"], "two"),
                        (["--methods", "as-trained | bogus(3)"], "method 'as-trained | bogus(3)'"),
                        (["--lengths", "0.001"], "--lengths")):
        p = subprocess.run(longeval(build_dir, *_quick(model, out, *extra)), capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 2 and says in p.stderr and "--help` for usage" in p.stderr, (extra, p.stderr)
        assert _cells(out) == before, extra


def test_longeval_list_options_refuse_empty_and_repeated_items(build_dir, tmp_path):
    """'1,' ',1' '1,,2' and a value or method given twice were accepted (empty fields
    skipped, the same cell run twice)."""
    for opt, val in (("--lengths", "1,"), ("--lengths", ",1"), ("--lengths", "1,,2"), ("--lengths", "1,1"),
                     ("--lengths", "1,1.0"), ("--depths", "0.5,0.5"), ("--methods", "as-trained;as-trained"),
                     ("--methods", "as-trained;;pi(2)"), ("--methods", "as-trained;")):
        p = subprocess.run(longeval(build_dir, "--model", tmp_path / "absent.gguf", opt, val), capture_output=True,
                           text=True)
        assert p.returncode == 2 and opt in p.stderr and ("empty" in p.stderr or "twice" in p.stderr), (val, p.stderr)


def test_longeval_resume_takes_the_same_settings_spelled_otherwise(build_dir, tmp_path, monkeypatch):
    """--kv-type f16 is the default, int8 is int8(group=0) and DIR/ is DIR: --resume refused
    these cells (the option text was compared). Cells of the earlier version (the raw text,
    "" for no --kv-type, no model_bytes) still resume with the same settings, and a different
    type is still refused."""
    model = tmp_path / "tiny.gguf"
    tiny_with_tokenizer(model, monkeypatch)
    out, out8 = tmp_path / "o", tmp_path / "o8"
    docs = str(tl.ROOT / "data" / "longdocs")
    runs = ((out, [], ["--kv-type", "f16", "--docs", docs + "/"]), (out8, ["--kv-type", "int8"],
                                                                     ["--kv-type", "int8(group=0)"]))
    for o, first, again in runs:
        p = subprocess.run(longeval(build_dir, *_quick(model, o, *first)), capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        p = subprocess.run(longeval(build_dir, *_quick(model, o, "--resume", *again)), capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0 and "(resumed)" in p.stderr, p.stderr
    # a cell as the earlier version stored it
    cell = out / "cells" / "m0_l0.json"
    j = json.loads(cell.read_text())
    j["settings"].pop("model_bytes")
    j["settings"]["kv_type"], j["settings"]["docs"] = "", docs + "/"
    cell.write_text(json.dumps(j))
    p = subprocess.run(longeval(build_dir, *_quick(model, out, "--resume")), capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0 and "(resumed)" in p.stderr, p.stderr
    p = subprocess.run(longeval(build_dir, *_quick(model, out, "--resume", "--kv-type", "bf16")), capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 1 and 'kv_type = "f16", this run has kv_type = "bf16"' in p.stderr, p.stderr


def test_longeval_manifest_is_not_a_document(build_dir, tmp_path, monkeypatch):
    """data/longdocs holds six .txt documents and scripts/prepare_longdocs.sh's MANIFEST;
    --documents 0 scored seven (MANIFEST first, in name order)."""
    model = tmp_path / "tiny.gguf"
    tiny_with_tokenizer(model, monkeypatch)
    docs = tmp_path / "docs"
    docs.mkdir()
    text = (tl.ROOT / "data" / "longdocs" / "3-wisdom.txt").read_bytes()[:20000]
    (docs / "a.txt").write_bytes(text)
    (docs / "b.txt").write_bytes(text[::-1])
    (docs / "MANIFEST").write_text("20000 a.txt\n20000 b.txt\n")
    args = [a if a != tl.ROOT / "data" / "longdocs" else docs for a in _quick(model, tmp_path / "o")]
    args[args.index("--documents") + 1] = "0"
    p = subprocess.run(longeval(build_dir, *args), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "o" / "results.json").read_text())["cells"][0]["n_docs"] == 2


def test_longeval_tokenizer_past_the_model_vocabulary(build_dir, tmp_path, monkeypatch):
    """A tokenizer whose merge gives id 305 on a model with 300 logits: the perplexity read
    logits row[305] (past the row); now refused before anything runs or is deleted."""
    good, bad = tmp_path / "good.gguf", tmp_path / "bad.gguf"
    tiny_with_tokenizer(good, monkeypatch)
    tiny_with_tokenizer(bad, monkeypatch, merge_at=305)
    out = tmp_path / "o"
    p = subprocess.run(longeval(build_dir, *_quick(good, out)), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    before = _cells(out)
    p = subprocess.run(longeval(build_dir, *_quick(bad, out)), capture_output=True, text=True, timeout=600)
    assert p.returncode == 1 and "tokenizer" in p.stderr and "300" in p.stderr, p.stderr
    assert _cells(out) == before


def test_resume_refuses_sentencepiece_cells_counted_without_spaces(build_dir, tmp_path):
    """Bits per byte of a SentencePiece model count each piece's space since 2026-12-05:
    its cells say so (settings token_bytes = keep-space), and a cell without it, as earlier
    versions wrote them, is refused on --resume instead of mixing two countings in one table."""
    model, docs = tmp_path / "spm.gguf", tmp_path / "docs"
    tl.write_model(model, "llama", QT.F32, True, seed=2, C=64, H=2, K=1, F=128, L=1, spm=True)
    docs.mkdir()
    rng = np.random.default_rng(3)
    (docs / "a.txt").write_text(" ".join(rng.choice(["ab", "a", "b", "ba", "abab"], size=600)))
    args = [str(build_dir / "longattn"), "longeval", "--model", str(model), "--docs", str(docs), "--lengths", "1",
            "--trials", "0", "--distractors", "-1", "--documents", "1", "--threads", "1", "--methods", "as-trained",
            "--out", str(tmp_path / "out")]
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    cell = tmp_path / "out" / "cells" / "m0_l0.json"
    j = json.loads(cell.read_text())
    assert j["settings"]["token_bytes"] == "keep-space"
    del j["settings"]["token_bytes"]
    cell.write_text(json.dumps(j))
    p = subprocess.run(args + ["--resume"], capture_output=True, text=True)
    assert p.returncode != 0 and "token_bytes" in p.stderr, p.stderr
