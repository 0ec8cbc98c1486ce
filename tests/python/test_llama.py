"""Llama-family models (src/model/llama.c, src/infer/llama_session.c) against an
independent NumPy implementation of the Llama / Qwen2 forward pass.

The reference reads the GGUF file with gguf-py (GGUFReader), dequantizes every tensor with
gguf.quants.dequantize, undoes ggml's q/k row permutation of "llama" files itself (the
inverse of the converter's `reshape(n_head, 2, D/2, cols).swapaxes(1, 2)`), and follows
the Hugging Face definitions: RMSNorm, rotary embedding with `rotate_half` on half-split
pairs, inv_freq = base^(-2k/D), grouped-query attention by repeating kv heads, causal
softmax with scale 1/sqrt(D), SwiGLU MLP, tied or untied head. It runs in float64.

Tolerance. longattn computes in float32 (blocked sgemm or register-decoded quantized dot
products, online softmax); its error against the float64 reference is the rounding of a
float32 computation of the same function. We measure the size of that rounding on the same
inputs by running the reference a second time entirely in float32 (err32 = max |ref32 -
ref64|) and accept max |ours - ref64| <= 8 * err32 + 1e-6 * max |ref64|: a different
float32 summation order changes the rounding by a factor of order one (the random-walk
bound sqrt(n) u |x| is the same for both), 8 leaves room for that, and the relative term
covers the case where err32 happens to be tiny. Anything wrong in the model (a permuted
row, a wrong RoPE pair, a missing bias, an eps) is orders of magnitude above it.
"""
import pathlib
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as QT  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "data" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

QUANTIZABLE = [QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1]
RANDOM_BLOCKS = [QT.Q4_K, QT.Q5_K, QT.Q6_K]  # gguf-py dequantizes them but does not quantize
F16_FIELDS = {QT.Q4_K: [0, 2], QT.Q5_K: [0, 2], QT.Q6_K: [208]}


def run(build_dir, sub, *args, ok=True):
    p = subprocess.run([str(build_dir / "longattn"), sub, *map(str, args)], capture_output=True)
    if ok:
        assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p


# ---------------------------------------------------------------- tiny random models

def ggml_permute(w, n_head):
    """What ggml's converter (convert_hf_to_gguf.py) does to llama q/k rows."""
    rows, cols = w.shape
    d = rows // n_head
    return w.reshape(n_head, 2, d // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def random_kquant(rng, qtype, rows, cols, std):
    """(rows, row_bytes) random K-quant blocks scaled so the values have about std."""
    bs, nb = gguf.GGML_QUANT_SIZES[qtype]
    nblk = rows * cols // bs
    raw = rng.integers(0, 256, size=(nblk, nb), dtype=np.uint8)

    def set_scales(c):
        for off in F16_FIELDS[qtype]:
            raw[:, off:off + 2] = np.full(nblk, c, dtype=np.float16).view(np.uint8).reshape(-1, 2)
    set_scales(1.0)
    s = gguf.quants.dequantize(raw.reshape(rows, -1), qtype).std()
    set_scales(std / s)  # values are linear in (d, dmin) jointly
    return raw.reshape(rows, cols // bs * nb)


def add_matrix(w, name, a, qtype, rng):
    rows, cols = a.shape
    if qtype == QT.F32:
        w.add_tensor(name, a.astype(np.float32))
    elif qtype in RANDOM_BLOCKS:
        w.add_tensor(name, random_kquant(rng, qtype, rows, cols, float(a.std())), raw_dtype=qtype)
    else:
        w.add_tensor(name, gguf.quants.quantize(a.astype(np.float32), qtype), raw_dtype=qtype)


# a SentencePiece vocabulary (llama.cpp's model "llama"): U+2581 marks a space
SPM_TOKENS = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a", "\u2581ab", "ab"]
# Llama 3's control tokens (BOS <|begin_of_text|> = 1) before SPM_TOKENS's six pieces
LLAMA3_TOKENS = ["<unk>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"] + SPM_TOKENS[3:]


def write_model(path, arch, qtype, tied, seed=0, C=256, H=4, K=2, F=512, L=2, V=300,
                base=10000.0, eps=1e-5, sinks=False, spm=False, tokens=None, chat=None):
    """spm or tokens: a SentencePiece tokenizer (SPM_TOKENS, or TOKENS: control tokens, then
    SPM_TOKENS's six pieces) and min(V, its size) embedding rows; chat: its chat template,
    with add_bos_token"""
    rng = np.random.default_rng(seed)
    D = C // H
    w = gguf.GGUFWriter(str(path), arch)
    if spm or tokens:
        tokens = tokens or SPM_TOKENS
        V, n_ctl = min(V, len(tokens)), len(tokens) - 6
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([0.0] * n_ctl + [-1.0, -1.0, -1.0, -2.0, -0.5, -3.0])
        w.add_token_types([2] + [3] * (n_ctl - 1) + [1] * 6)
        if chat:
            w.add_chat_template(chat)
            w.add_add_bos_token(True)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
    w.add_block_count(L)
    w.add_context_length(256)
    w.add_embedding_length(C)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(K)
    w.add_rope_freq_base(base)
    w.add_rope_dimension_count(D)
    w.add_layer_norm_rms_eps(eps)
    hf = {}  # Hugging Face layout (un-permuted) float32 weights, for the permutation check

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    emb = rng.standard_normal((V, C)).astype(np.float32)
    add_matrix(w, "token_embd.weight", emb, qtype, rng)
    w.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(C)).astype(np.float32))
    if not tied:
        add_matrix(w, "output.weight", mat(V, C), qtype, rng)
    for layer in range(L):
        p = f"blk.{layer}."
        wq, wk = mat(H * D, C), mat(K * D, C)
        hf[p + "attn_q.weight"], hf[p + "attn_k.weight"] = wq, wk
        if arch == "llama":
            wq, wk = ggml_permute(wq, H), ggml_permute(wk, K)
        add_matrix(w, p + "attn_q.weight", wq, qtype, rng)
        add_matrix(w, p + "attn_k.weight", wk, qtype, rng)
        add_matrix(w, p + "attn_v.weight", mat(K * D, C), qtype, rng)
        add_matrix(w, p + "attn_output.weight", mat(C, H * D), qtype, rng)
        add_matrix(w, p + "ffn_gate.weight", mat(F, C), qtype, rng)
        add_matrix(w, p + "ffn_up.weight", mat(F, C), qtype, rng)
        add_matrix(w, p + "ffn_down.weight", mat(C, F), qtype, rng)
        w.add_tensor(p + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(C)).astype(np.float32))
        w.add_tensor(p + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(C)).astype(np.float32))
        if arch == "qwen2":
            for n, r in (("attn_q.bias", H * D), ("attn_k.bias", K * D), ("attn_v.bias", K * D)):
                w.add_tensor(p + n, (0.5 * rng.standard_normal(r)).astype(np.float32))
        if sinks is True or (sinks and layer in sinks):  # gpt-oss: one f32 sink logit per query head (issue 31)
            w.add_tensor(p + "attn_sinks.weight", (1.5 * rng.standard_normal(H)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return hf


# ---------------------------------------------------------------- the NumPy reference

class RefModel:
    """Weights of a GGUF llama/qwen2 file, dequantized by gguf-py, in Hugging Face layout."""

    def __init__(self, path):
        r = gguf.GGUFReader(str(path))
        f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("tokenizer.")}
        a = f["general.architecture"]
        self.arch = a
        self.L = f[f"{a}.block_count"]
        self.H = f[f"{a}.attention.head_count"]
        self.K = f.get(f"{a}.attention.head_count_kv", self.H)
        self.C = f[f"{a}.embedding_length"]
        self.D = self.C // self.H
        self.base = float(f.get(f"{a}.rope.freq_base", 10000.0))
        self.eps = float(f[f"{a}.attention.layer_norm_rms_epsilon"])
        self.t = {}
        for t in r.tensors:
            x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            shape = tuple(int(s) for s in reversed(t.shape.tolist()))  # ne is fastest first
            self.t[t.name] = x.reshape(shape if len(shape) > 1 else (-1,))
        if a == "llama":  # undo the converter's permutation: row 2i+j of a head -> j*D/2+i
            for name, n_head in (("attn_q", self.H), ("attn_k", self.K)):
                for layer in range(self.L):
                    key = f"blk.{layer}.{name}.weight"
                    w = self.t[key]
                    rows, cols = w.shape
                    self.t[key] = w.reshape(n_head, self.D // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)
        self.out = self.t.get("output.weight", self.t["token_embd.weight"])

    def forward(self, ids, dtype=np.float64, inv_freq=None, logit_scale=None, attn_logits=None):
        """logits (T, V) of the token ids at positions 0..T-1. inv_freq (D/2,) replaces the
        file's RoPE frequencies and logit_scale (T,) multiplies each query's logits (the
        context-extension methods of test_longeval.py); attn_logits(q, k, rotate_half), given
        the un-rotated q, k (H, T, D) of a layer, returns its scaled logits (H, T, T) in place
        of RoPE's (test_longeval.py's position-regime methods)."""
        H, K, D, eps = self.H, self.K, self.D, self.eps
        W = lambda n: self.t[n].astype(dtype)  # noqa: E731
        T = len(ids)
        x = self.t["token_embd.weight"][np.asarray(ids)].astype(dtype)

        def rms(v, g):
            return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + dtype(eps)) * g

        if inv_freq is None:
            inv_freq = 1.0 / (self.base ** (np.arange(0, D, 2, dtype=np.float64) / D))
        ang = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]
        emb = np.concatenate([ang, ang], axis=-1)
        cos, sin = np.cos(emb).astype(dtype), np.sin(emb).astype(dtype)

        def rotate_half(v):
            return np.concatenate([-v[..., D // 2:], v[..., :D // 2]], axis=-1)

        mask = np.triu(np.ones((T, T), dtype=bool), 1)
        for layer in range(self.L):
            p = f"blk.{layer}."
            n = rms(x, W(p + "attn_norm.weight"))
            q, k, v = n @ W(p + "attn_q.weight").T, n @ W(p + "attn_k.weight").T, n @ W(p + "attn_v.weight").T
            if p + "attn_q.bias" in self.t:
                q, k, v = q + W(p + "attn_q.bias"), k + W(p + "attn_k.bias"), v + W(p + "attn_v.bias")
            q = q.reshape(T, H, D).transpose(1, 0, 2)
            k = k.reshape(T, K, D).transpose(1, 0, 2)
            v = v.reshape(T, K, D).transpose(1, 0, 2)
            k, v = np.repeat(k, H // K, axis=0), np.repeat(v, H // K, axis=0)
            if attn_logits is not None:
                s = attn_logits(q, k, rotate_half)
            else:
                q = q * cos + rotate_half(q) * sin
                k = k * cos + rotate_half(k) * sin
                s = q @ k.transpose(0, 2, 1) / dtype(np.sqrt(D))
            if logit_scale is not None:
                s = s * logit_scale[None, :, None]
            s[:, mask] = -np.inf
            sk = self.t.get(p + "attn_sinks.weight")
            if sk is not None:  # the sink as one more column of every row, dropped after the softmax
                s = np.concatenate([s, np.broadcast_to(sk.astype(dtype)[:, None, None], (H, T, 1))], axis=-1)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            att = (s / s.sum(axis=-1, keepdims=True))[..., :T] @ v
            x = x + att.transpose(1, 0, 2).reshape(T, H * D) @ W(p + "attn_output.weight").T
            n = rms(x, W(p + "ffn_norm.weight"))
            g, u = n @ W(p + "ffn_gate.weight").T, n @ W(p + "ffn_up.weight").T
            x = x + (g / (1 + np.exp(-g)) * u) @ W(p + "ffn_down.weight").T
        return rms(x, W("output_norm.weight")) @ self.out.astype(dtype).T


def tolerance(ref64, ref32):
    return 8 * np.abs(ref32 - ref64).max() + 1e-6 * np.abs(ref64).max()


def c_logits(build_dir, tmp_path, model, ids, *extra):
    out = tmp_path / "logits.npy"
    run(build_dir, "llama-logits", "--model", model, "--ids", ",".join(map(str, ids)), "--out", out, *extra)
    return np.load(out).astype(np.float64)


CASES = [(a, q) for a in ("llama", "qwen2") for q in QUANTIZABLE + RANDOM_BLOCKS]


@pytest.mark.parametrize("arch,qtype", CASES, ids=[f"{a}-{q.name}" for a, q in CASES])
def test_tiny_model_matches_numpy(build_dir, tmp_path, arch, qtype):
    tied = (CASES.index((arch, qtype)) % 2) == 0
    path = tmp_path / f"{arch}-{qtype.name}.gguf"
    hf = write_model(path, arch, qtype, tied, seed=CASES.index((arch, qtype)))
    ref = RefModel(path)
    if qtype == QT.F32:  # the reference's un-permutation inverts the converter's exactly
        for k, w in hf.items():
            np.testing.assert_array_equal(ref.t[k], w)
    ids = [int(i) for i in np.random.default_rng(7).integers(0, 300, size=13)]
    r64, r32 = ref.forward(ids), ref.forward(ids, np.float32).astype(np.float64)
    tol = tolerance(r64, r32)
    # prefill: cache-less forward in chunks of 5 (sgemm on dequantized weights)
    ours = c_logits(build_dir, tmp_path, path, ids, "--chunk", "5")
    assert ours.shape == r64.shape
    err = np.abs(ours - r64).max()
    assert err <= tol, f"prefill: max |ours - ref| = {err:.3g} > {tol:.3g}"
    # decode: one token at a time through the KV cache (quantized mat-vec products)
    dec = c_logits(build_dir, tmp_path, path, ids, "--kv", "full", "--kv-type", "f32", "--step", "1")
    err = np.abs(dec - r64).max()
    assert err <= tol, f"decode: max |ours - ref| = {err:.3g} > {tol:.3g}"


def test_int8_group_checked_against_the_models_head_size(build_dir, tmp_path):
    """--kv-type int8(group=g) is checked against the loaded model's head size D, not the
    64 of la_kv_params_default (a D = 128 model refused group 128 before the model was read):
    group 128 on D = 128 runs and stays within the int8 tolerance of the f32 cache (1/254
    of each group's absmax per element, a few hundredths of the logits here); group 48,
    which does not divide 128, is a usage error (exit 2) naming the options and both numbers,
    on llama-logits, perplexity and generate."""
    path = tmp_path / "d128.gguf"
    write_model(path, "llama", QT.F32, True, seed=5, C=256, H=2, K=1)  # D = 256 / 2 = 128
    ids = [int(i) for i in np.random.default_rng(3).integers(0, 300, size=9)]
    f32 = c_logits(build_dir, tmp_path, path, ids, "--kv", "full", "--kv-type", "f32", "--step", "1")
    i8 = c_logits(build_dir, tmp_path, path, ids, "--kv", "full", "--kv-type", "int8(group=128)", "--step", "1")
    err = np.abs(i8 - f32).max()
    assert 0 < err <= 0.05 * np.abs(f32).max(), err
    for extra in (("--kv", "full", "--kv-type", "int8(group=48)"), ("--kv", "window(4)+int8(group=48)")):
        p = run(build_dir, "llama-logits", "--model", path, "--ids", "1,2,3", "--out", tmp_path / "x.npy", *extra,
                ok=False)
        assert p.returncode == 2 and b"--kv / --kv-type" in p.stderr and b"group = 48 must divide D = 128" in p.stderr
    text = tmp_path / "t.txt"
    text.write_text("ab " * 200)
    path = tmp_path / "d128spm.gguf"  # with a tokenizer, for perplexity and generate
    write_model(path, "llama", QT.F32, True, seed=5, C=256, H=2, K=1, spm=True)
    for sub, extra in (("perplexity", ("--text", text, "--ctx", "8")), ("generate", ("--prompt", "ab"))):
        p = run(build_dir, sub, "--model", path, *extra, "--kv-type", "int8(group=48)", ok=False)
        assert p.returncode == 2 and b"group = 48 must divide D = 128" in p.stderr, (sub, p.stderr)


def test_sentencepiece_spaces_in_generate_and_perplexity(build_dir, tmp_path):
    """SentencePiece ids that continue a text keep the space of their first piece: generate
    printed "abab ab ab" for ids decoding to "ab ab ab ab" (the first new token lost its
    space), and perplexity counted "\u2581ab" as 2 bytes, not 3 (bits per byte 1.5x too high)."""
    path = tmp_path / "spm.gguf"
    write_model(path, "llama", QT.F32, True, seed=2, C=64, H=2, K=1, F=128, L=1, spm=True)
    ids_file = tmp_path / "ids.txt"
    p = run(build_dir, "generate", "--model", path, "--prompt", "ab", "--max-new", "3", "--temperature", "0",
            "--quiet", "--ids-out", ids_file)
    prompt_ids, new_ids = [line.split() for line in ids_file.read_text().splitlines()]
    whole = run(build_dir, "tokenize", "--model", path, "--decode", ",".join(prompt_ids + new_ids)).stdout.decode()
    head = run(build_dir, "tokenize", "--model", path, "--decode", ",".join(prompt_ids)).stdout.decode()
    assert p.stdout.decode() == whole.rstrip("\n")[len(head.rstrip("\n")):] + "\n"
    assert " " in p.stdout.decode()
    text = tmp_path / "t.txt"
    text.write_text("ab ab ab ab ab ab ab ab")  # 8 tokens "\u2581ab", the first not scored
    out = run(build_dir, "perplexity", "--model", path, "--text", text, "--ctx", "8").stdout.decode()
    assert "7 (21 bytes)" in out, out


def test_permutation_matters(build_dir, tmp_path):
    """Skipping the un-permutation of a llama file's q/k rows changes the logits by far
    more than the tolerance (at these short lengths the model still produces plausible
    numbers, so the check needs the reference), and longattn's match the un-permuted ones."""
    a = tmp_path / "l.gguf"
    write_model(a, "llama", QT.F32, tied=False, seed=3)
    ids = [5, 17, 42, 9, 100, 3, 250]
    la = c_logits(build_dir, tmp_path, a, ids)
    ref = RefModel(a)
    r64 = ref.forward(ids)
    tol = tolerance(r64, ref.forward(ids, np.float32))
    assert np.abs(la - r64).max() <= tol
    for layer in range(ref.L):  # re-permute q/k: what a loader without the fix would use
        for name, n_head in (("attn_q", ref.H), ("attn_k", ref.K)):
            key = f"blk.{layer}.{name}.weight"
            ref.t[key] = ggml_permute(ref.t[key], n_head)
    wrong = ref.forward(ids)
    assert np.abs(wrong - r64).max() > 100 * tol


@pytest.mark.skipif(not MODEL.exists(), reason="default model not fetched (scripts/fetch_model.sh)")
def test_smollm2_logits_and_greedy_continuation(build_dir, tmp_path):
    """The real SmolLM2-135M-Instruct Q4_1 file: logits of a short prompt plus 32 greedy
    tokens within the tolerance, and the greedy continuation identical: teacher-forcing the
    reference on longattn's continuation, its argmax at every step is longattn's next token
    (so a free-running greedy reference would produce the same 32 tokens)."""
    ids_file = tmp_path / "ids.txt"
    # f32 cache: the continuation is compared with the float64 reference's argmax
    run(build_dir, "generate", "--model", MODEL, "--prompt", "Once upon a time, in a small village,", "--temperature", "0",
        "--max-new", "32", "--quiet", "--ids-out", ids_file, "--kv-type", "f32")
    lines = ids_file.read_text().splitlines()
    prompt = [int(x) for x in lines[0].split()]
    gen = [int(x) for x in lines[1].split()] if len(lines) > 1 and lines[1].strip() else []
    assert 0 < len(gen) <= 32
    ids = prompt + gen
    ref = RefModel(MODEL)
    r64 = ref.forward(ids)
    r32 = ref.forward(ids, np.float32).astype(np.float64)
    tol = tolerance(r64, r32)
    ours = c_logits(build_dir, tmp_path, MODEL, ids)
    err = np.abs(ours - r64).max()
    assert err <= tol, f"max |ours - ref| = {err:.3g} > {tol:.3g}"
    ref_next = r64[len(prompt) - 1:].argmax(axis=1).tolist()
    assert ref_next[:-1] == gen
    if len(gen) < 32:  # longattn stopped at the end-of-text token: the reference picks it too
        assert ref_next[-1] == 2  # SmolLM2's eos (<|endoftext|>), tokenizer.ggml.eos_token_id


@pytest.mark.skipif(not MODEL.exists(), reason="default model not fetched (scripts/fetch_model.sh)")
def test_cli_errors(build_dir, tmp_path):
    """Bad input to generate / perplexity: a clear message naming the problem, exit != 0."""
    p = run(build_dir, "generate", "--model", tmp_path / "missing.gguf", "--prompt", "x", ok=False)
    assert p.returncode == 1 and b"missing.gguf" in p.stderr and b"No such file" in p.stderr
    p = run(build_dir, "generate", "--model", MODEL, "--prompt", "word " * 50, "--ctx", "20", ok=False)
    assert p.returncode == 1 and b"tokens but must be shorter than the KV cache, 20 tokens" in p.stderr
    p = subprocess.run([str(build_dir / "longattn"), "generate", "--model", str(MODEL), "--prompt", b"ok \xff\xfe"],
                       capture_output=True)
    assert p.returncode == 1 and b"UTF-8" in p.stderr and b"offset 3" in p.stderr
    p = run(build_dir, "generate", "--model", MODEL, "--prompt", "x", "--spec", "softmax+bogus", ok=False)
    assert p.returncode == 2 and b"bogus" in p.stderr
    text = tmp_path / "t.txt"
    text.write_text("A short text.")
    p = run(build_dir, "perplexity", "--model", MODEL, "--text", text, "--ctx", "64", ok=False)
    assert p.returncode == 1 and b"fewer than one window" in p.stderr
    # --ids-out is written atomically: a folder that does not exist is an error, not exit 0
    p = run(build_dir, "generate", "--model", MODEL, "--prompt", "x", "--max-new", "1", "--quiet", "--ids-out",
            tmp_path / "no" / "ids.txt", ok=False)
    assert p.returncode == 1 and b"--ids-out: cannot create" in p.stderr, p.stderr


@pytest.mark.skipif(not MODEL.exists(), reason="default model not fetched (scripts/fetch_model.sh)")
def test_perplexity_matches_logits(build_dir, tmp_path):
    """perplexity's bits per token equal the mean next-token NLL computed here from
    llama-logits on the same ids (the prompt ids that generate --ids-out reports)."""
    sentence = "The quick brown fox jumps over the lazy dog. " * 4
    ids_file = tmp_path / "ids.txt"
    run(build_dir, "generate", "--model", MODEL, "--prompt", sentence, "--max-new", "0", "--quiet",
        "--ids-out", ids_file)
    ids = [int(x) for x in ids_file.read_text().split("\n")[0].split()]
    ctx = 16
    text = tmp_path / "t.txt"
    text.write_text(sentence)
    out = run(build_dir, "perplexity", "--model", MODEL, "--text", text, "--ctx", ctx, "--windows", 2,
              "--chunk", 5, "--kv-type", "f32").stdout.decode()
    bits = float(out.split("overall: ")[1].split()[0])
    nll = []
    for w in range(2):
        x = ids[w * ctx:(w + 1) * ctx]
        lg = c_logits(build_dir, tmp_path, MODEL, x)
        lse = np.log(np.exp(lg - lg.max(axis=1, keepdims=True)).sum(axis=1)) + lg.max(axis=1)
        nll += [lse[i] - lg[i, x[i + 1]] for i in range(ctx - 1)]
    assert abs(bits - np.mean(nll) / np.log(2)) < 1e-3  # printed with 4 decimals
    assert "[1, 2)" in out and "[8, 16)" in out


@pytest.mark.skipif(not MODEL.exists(), reason="default model not fetched (scripts/fetch_model.sh)")
def test_generate_chunked_prefill_and_kv_types(build_dir, tmp_path):
    """generate prefills window / sinks caches in chunks, exactly as token by token (kv_stream.c):
    the same greedy ids with --prefill-chunk 1 and the default chunk, for the f32 cache and the
    f16 default; every --kv-type runs; a bad type or a type given twice is a usage error."""
    prompt = ("The history of the city goes back many centuries. It was founded by traders who came from the "
              "coast and settled near the river, where they built houses, a market and a small harbour.")

    def ids(*extra):
        f = tmp_path / "ids.txt"
        run(build_dir, "generate", "--model", MODEL, "--prompt", prompt, "--temperature", "0", "--max-new", "8",
            "--quiet", "--ids-out", f, *extra)
        return f.read_text()

    for kv in ("sinks(4,20)", "window(24)"):
        for t in ("f32", "f16"):
            assert ids("--kv", kv, "--kv-type", t) == ids("--kv", kv, "--kv-type", t, "--prefill-chunk", "1"), (kv, t)
    for t in ("bf16", "int8", "int8(group=16)"):
        assert len(ids("--kv-type", t).splitlines()[1].split()) > 0
    assert ids() == ids("--kv-type", "f16")  # the GGUF default
    p = run(build_dir, "generate", "--model", MODEL, "--prompt", "x", "--kv-type", "f8", ok=False)
    assert p.returncode == 2 and b"f16" in p.stderr
    p = run(build_dir, "generate", "--model", MODEL, "--prompt", "x", "--kv", "full+f16", "--kv-type", "bf16", ok=False)
    assert p.returncode == 2 and b"once" in p.stderr


@pytest.mark.parametrize("kv_type", ["f16", "bf16", "int8"])
def test_decode_kernel_portable_is_close(build_dir, tmp_path, monkeypatch, kv_type):
    """The decode kernel has an AVX2 + FMA + F16C path chosen at run time (fused conversion,
    rotation and products, a polynomial exp): LA_PORTABLE=1 (the portable loop CI runs) gives
    logits within 1e-4 of their range (float32 roundings of the attention, ~1e-6 relative,
    which can flip the rounding of a later layer's k / v to the cache type: measured 2.4e-5
    f16, 7.2e-4 bf16, 1.0e-6 int8 against a range of ~10; on a CPU without AVX2 both runs
    are the portable path and equal). Also: the reduced cache stays close to the f32 one (within 5 % of the range)."""
    path = tmp_path / "m.gguf"
    write_model(path, "llama", QT.F32, tied=False, seed=11)
    ids = [int(i) for i in np.random.default_rng(3).integers(0, 300, size=40)]
    args = ("--kv", "full", "--kv-type", kv_type, "--step", "1")
    monkeypatch.delenv("LA_PORTABLE", raising=False)
    fast = c_logits(build_dir, tmp_path, path, ids, *args)
    monkeypatch.setenv("LA_PORTABLE", "1")
    portable = c_logits(build_dir, tmp_path, path, ids, *args)
    err = np.abs(fast - portable).max()
    print(f"decode kernel {kv_type}: AVX2 vs portable max |logit difference| {err:.2e}")
    assert err <= 1e-4 * (portable.max() - portable.min()), err
    f32 = c_logits(build_dir, tmp_path, path, ids, "--kv", "full", "--kv-type", "f32", "--step", "1")
    assert 0 < np.abs(fast - f32).max() < 0.05 * (f32.max() - f32.min())


@pytest.mark.parametrize("arch,qtype", [("llama", QT.F32), ("llama", QT.Q8_0), ("qwen2", QT.F16)])
def test_tiny_model_with_attn_sinks(build_dir, tmp_path, arch, qtype):
    """gpt-oss-style per-head sink logits (blk.N.attn_sinks) read from the file and added to
    every softmax denominator, prefill and KV-cache decode, against the NumPy reference with
    the sink column; the same file with the sinks ignored by the reference is far off."""
    path = tmp_path / f"sinks-{arch}-{qtype.name}.gguf"
    write_model(path, arch, qtype, tied=False, seed=11, sinks=True)
    ref = RefModel(path)
    assert "blk.1.attn_sinks.weight" in ref.t
    ids = [int(i) for i in np.random.default_rng(8).integers(0, 300, size=13)]
    r64, r32 = ref.forward(ids), ref.forward(ids, np.float32).astype(np.float64)
    tol = tolerance(r64, r32)
    ours = c_logits(build_dir, tmp_path, path, ids, "--chunk", "5")
    err = np.abs(ours - r64).max()
    assert err <= tol, f"prefill: max |ours - ref| = {err:.3g} > {tol:.3g}"
    # float32 cache: the tolerance is float32's (the f16 default cache is checked against
    # f32 in test_decode_kernel_portable_is_bitwise and tests/test_kv_decode.c)
    dec = c_logits(build_dir, tmp_path, path, ids, "--kv", "full", "--kv-type", "f32", "--step", "1")
    err = np.abs(dec - r64).max()
    assert err <= tol, f"decode: max |ours - ref| = {err:.3g} > {tol:.3g}"
    for layer in range(ref.L):
        del ref.t[f"blk.{layer}.attn_sinks.weight"]
    assert np.abs(ours - ref.forward(ids)).max() > 100 * tol  # the sinks matter


def test_attn_sinks_in_some_layers_only(build_dir, tmp_path):
    """Sinks in some layers but not all is refused, naming the first layer that has them and
    the first that lacks them (the message once named blk.0 whichever layer had them)."""
    for have, first, missing in (((1,), 1, 0), ((0, 2), 0, 1)):
        path = tmp_path / f"sinks-{first}.gguf"
        write_model(path, "llama", QT.F32, tied=True, L=3, sinks=have)
        p = run(build_dir, "llama-logits", "--model", path, "--ids", "1,2", "--out", tmp_path / "x.npy", ok=False)
        assert p.returncode == 1
        assert (f"blk.{first}.attn_sinks is present but blk.{missing}.attn_sinks is missing"
                in p.stderr.decode()), p.stderr.decode()


@pytest.mark.skipif(not MODEL.exists(), reason="default model not fetched (scripts/fetch_model.sh)")
def test_x_q8_decode_products(build_dir, tmp_path):
    """--x-q8 (la_qmatvec_q8x on the decode products) reaches the model: token-by-token
    perplexity (--chunk 1: every product goes through the matrix-vector path) moves, by little
    (x rounded to 8 bits per 32 values; docs/real-models.md measured +0.9 % bits per token at
    4096 tokens, this 64-token text moves by 1.6 %: bound 3 %, where a wrong scale or nibble
    order gives tens of percent), prefill in chunks of 4 or more rows is untouched (its products
    are sgemm), and generate runs with it."""
    text = tmp_path / "t.txt"
    text.write_text("The history of the city goes back many centuries. It was founded by traders who came "
                    "from the coast and settled near the river, where they built houses and a market. " * 3)

    def bits(*extra):
        out = run(build_dir, "perplexity", "--model", MODEL, "--text", text, "--ctx", 64, "--windows", 1,
                  *extra).stdout.decode()
        return float(out.split("overall: ")[1].split()[0])

    exact, q8 = bits("--chunk", 1), bits("--chunk", 1, "--x-q8")
    assert exact != q8
    assert abs(q8 - exact) < 0.03 * exact
    assert bits("--chunk", 8) == bits("--chunk", 8, "--x-q8")
    out = run(build_dir, "generate", "--model", MODEL, "--prompt", "The capital of France is", "--max-new", 4,
              "--quiet", "--x-q8").stdout.decode()
    assert out.strip()


def test_llama3_chat_has_one_bos(build_dir, tmp_path):
    """A Llama 3 template writes <|begin_of_text|> itself: generate --chat put a second BOS
    before it (the tokenizer's add_bos); Hugging Face and llama.cpp give one."""
    path = tmp_path / "l3.gguf"
    write_model(path, "llama", QT.F32, True, seed=2, C=64, H=2, K=1, F=128, L=1, tokens=LLAMA3_TOKENS,
                chat="{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}")
    ids = tmp_path / "ids.txt"
    run(build_dir, "generate", "--model", path, "--chat", "--prompt", "ab", "--max-new", "1", "--quiet",
        "--ids-out", ids)
    assert ids.read_text().split()[:2] == ["1", "3"]  # <|begin_of_text|> <|start_header_id|>
    # without --chat the tokenizer's BOS is still added
    run(build_dir, "generate", "--model", path, "--prompt", "ab", "--max-new", "1", "--quiet", "--ids-out", ids)
    assert ids.read_text().split()[:2] == ["1", "9"]  # <|begin_of_text|> \u2581ab


def test_tokenizer_larger_than_model_refused(build_dir, tmp_path):
    """A tokenizer with more tokens than token_embd.weight has rows: its ids past the rows
    read past the embedding (perplexity overflowed the heap); refused when the model and its
    tokenizer are opened together, naming both sizes."""
    path = tmp_path / "big.gguf"
    write_model(path, "llama", QT.F32, True, seed=2, C=64, H=2, K=1, F=128, L=1, spm=True, V=5)
    text = tmp_path / "t.txt"
    text.write_text("ab ab ab ab ab ab ab ab")
    for args in (["generate", "--prompt", "ab"], ["perplexity", "--text", text, "--ctx", "4"]):
        p = run(build_dir, args[0], "--model", path, *args[1:], ok=False)
        assert p.returncode == 1 and b"9 tokens" in p.stderr and b"only 5" in p.stderr, p.stderr
        assert p.stdout == b""


def test_cli_usage_errors_tiny(build_dir, tmp_path):
    """Meaningless or conflicting options are usage errors (exit 2) naming them: they were
    ignored, or --ids 4294967297 ran as id 1, or --spec sigmoid failed after the prompt echo."""
    path = tmp_path / "m.gguf"
    write_model(path, "llama", QT.F32, True, seed=2, C=64, H=2, K=1, F=128, L=1, spm=True)
    out = tmp_path / "x.npy"
    cases = [
        (["llama-logits", "--model", path, "--ids", "4294967297,2", "--out", out], b"'4294967297' is not a token id"),
        (["llama-logits", "--model", path, "--ids", "1,99999999999", "--out", out], b"'99999999999'"),
        (["llama-logits", "--model", path, "--ids", "1,2", "--out", out, "--step", "2"], b"--step needs --kv"),
        (["llama-logits", "--model", path, "--ids", "1,2", "--out", out, "--kv", "full", "--chunk", "2"], b"--chunk"),
        (["generate", "--model", path, "--prompt", "ab", "--system", "s"], b"--system needs --chat"),
        (["generate", "--ckpt", path, "--model", path, "--prompt", "ab"], b"not both"),
        (["generate", "--ckpt", tmp_path / "a.safetensors", "--model", path, "--prompt", "ab"], b"not both"),
        (["gguf", "types", "extra"], b"'extra'"),
        (["gguf", "info", path, path], b"got 2 arguments"),
    ]
    for args, msg in cases:
        p = run(build_dir, *args, ok=False)
        assert p.returncode == 2 and msg in p.stderr and b"--help" in p.stderr, (args, p.stderr)
        assert p.stdout == b"" and not out.exists(), args
    p = run(build_dir, "llama-logits", "--model", path, "--ids", "1,2", "--out", out, "--spec", "asentmax", ok=False)
    assert p.returncode == 2 and b"asentmax takes per-query scales" in p.stderr and not out.exists()
    # sigmoid / logn take train from the file's context_length (256): they run
    for spec in ("sigmoid+rope", "softmax+logn+rope"):
        run(build_dir, "generate", "--model", path, "--prompt", "ab", "--max-new", "2", "--quiet", "--spec", spec)
    p = run(build_dir, "generate", "--model", path, "--prompt", "ab ab ab", "--ctx", "3", ok=False)
    assert p.returncode == 1 and b"the prompt is 3 tokens but must be shorter than the KV cache, 3 tokens" in p.stderr
