"""GGUF reader and dequantization (src/io/gguf*.c, `longattn gguf`) against gguf-py.

gguf-py (PyPI `gguf`, the ggml project's own Python package) writes the files
(GGUFWriter) and is the reference for what they contain (GGUFReader) and for the
float32 values of every quantized block (gguf.quants.dequantize). Dequantization is
compared bit for bit: longattn performs the same float32 operations in the same order
(gguf_quant.c is compiled without FMA contraction), so there is no tolerance to state.
"""
import json
import pathlib
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf import GGUFValueType as VT  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "data" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

SUPPORTED = [QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1,
             QT.Q4_K, QT.Q5_K, QT.Q6_K]
# byte offsets of the f16 scale fields in one block (ggml-common.h)
F16_FIELDS = {QT.Q8_0: [0], QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q5_0: [0], QT.Q5_1: [0, 2],
              QT.Q4_K: [0, 2], QT.Q5_K: [0, 2], QT.Q6_K: [208]}
VT_NAME = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16",
           VT.UINT32: "u32", VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool",
           VT.STRING: "str", VT.ARRAY: "arr", VT.UINT64: "u64", VT.INT64: "i64",
           VT.FLOAT64: "f64"}


def run(build_dir, *args, ok=True):
    p = subprocess.run([str(build_dir / "longattn"), "gguf", *map(str, args)],
                       capture_output=True)
    if ok:
        assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p


def info_json(build_dir, path):
    out = run(build_dir, "info", "--json", path).stdout
    return json.loads(out.decode("utf-8", errors="surrogateescape"))


def finite_f16(rng, n):
    """Random f16 bit patterns, finite (zeros, subnormals and 65504 included)."""
    b = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    b[((b >> 10) & 31) == 31] &= np.uint16(0xBFFF)  # exponent 31 (inf/nan) -> 15
    return b


def random_blocks(rng, qtype, rows, blocks_per_row):
    """(rows, row_bytes) uint8 of random blocks whose f16 scales are finite."""
    bs, nb = gguf.GGML_QUANT_SIZES[qtype]
    if qtype in (QT.F16, QT.BF16):
        bits = finite_f16(rng, rows * blocks_per_row * bs)
        if qtype == QT.BF16:  # bf16: finite when the exponent is not all ones
            bits = rng.integers(0, 1 << 16, size=bits.size, dtype=np.uint32).astype(np.uint16)
            bits[((bits >> 7) & 0xFF) == 0xFF] &= np.uint16(0xBFFF)
        return bits.view(np.uint8).reshape(rows, -1)
    if qtype == QT.F32:
        return rng.standard_normal(rows * blocks_per_row).astype(np.float32).view(np.uint8).reshape(rows, -1)
    raw = rng.integers(0, 256, size=(rows * blocks_per_row, nb), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        raw[:, off:off + 2] = finite_f16(rng, rows * blocks_per_row).view(np.uint8).reshape(-1, 2)
    return raw.reshape(rows, blocks_per_row * nb)


def test_type_table_matches_gguf_py(build_dir):
    lines = run(build_dir, "types").stdout.decode().splitlines()[1:]
    ours = {}
    for ln in lines:
        tid, name, block, nbytes, deq = ln.split()
        ours[int(tid)] = (name, int(block), int(nbytes), deq == "yes")
    for qt, (block, nbytes) in gguf.GGML_QUANT_SIZES.items():
        assert int(qt) in ours, f"type {qt.name} missing from longattn's table"
        assert ours[int(qt)][:3] == (qt.name, block, nbytes)
    assert {t for t, v in ours.items() if v[3]} == {int(q) for q in SUPPORTED}


def write_metadata_file(path, alignment=None):
    w = gguf.GGUFWriter(str(path), arch="testarch")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", 255)
    w.add_int8("t.i8", -128)
    w.add_uint16("t.u16", 65535)
    w.add_int16("t.i16", -32768)
    w.add_uint32("t.u32", 4294967295)
    w.add_int32("t.i32", -2147483648)
    w.add_float32("t.f32", 3.14159)
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -2**63)
    w.add_float64("t.f64", -1.0e300)
    w.add_bool("t.true", True)
    w.add_bool("t.false", False)
    w.add_string("t.str", "héllo ☃ \"quoted\"\nline")
    for vt, vals in [(VT.UINT8, [0, 1, 255]), (VT.INT8, [-128, 0, 127]),
                     (VT.UINT16, [0, 65535]), (VT.INT16, [-32768, 32767]),
                     (VT.UINT32, [0, 4294967295]), (VT.INT32, [-2147483648, 5]),
                     (VT.FLOAT32, [0.5, -1.25e-30, 3.0e38]), (VT.UINT64, [2**64 - 1, 0]),
                     (VT.INT64, [-2**63, 2**63 - 1]), (VT.FLOAT64, [1e-300, -2.5]),
                     (VT.BOOL, [True, False, True]),
                     (VT.STRING, ["", "a", "Ġ t", "日本語", "x" * 1000])]:
        w.add_key_value(f"t.arr.{VT_NAME[vt]}", vals, VT.ARRAY, sub_type=vt)
    rng = np.random.default_rng(1)
    for qt, shape in [(QT.F32, (3, 5)), (QT.F16, (2, 7)), (QT.Q4_1, (2, 64)),
                      (QT.Q6_K, (1, 256)), (QT.Q2_K, (2, 256)), (QT.F32, (4,))]:
        if len(shape) == 1:
            w.add_tensor(f"tensor.1d", rng.standard_normal(shape).astype(np.float32))
            continue
        rows, cols = shape
        bs, _ = gguf.GGML_QUANT_SIZES[qt]
        raw = random_blocks(rng, qt, rows, cols // bs) if qt != QT.Q2_K else \
            rng.integers(0, 256, size=(rows, cols // 256 * 84), dtype=np.uint8)
        w.add_tensor(f"tensor.{qt.name}", raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_against_reader(build_dir, path):
    ours = info_json(build_dir, path)
    r = gguf.GGUFReader(str(path))
    fields = {k: f for k, f in r.fields.items() if not k.startswith("GGUF.")}
    assert list(ours["metadata"]) == list(fields), "keys or their order differ"
    for key, f in fields.items():
        o = ours["metadata"][key]
        assert o["type"] == VT_NAME[f.types[0]], key
        if f.types[0] == VT.ARRAY:
            assert o["elem"] == VT_NAME[f.types[-1]], key
            want = f.contents()
        else:
            want = f.contents()
        if f.types[-1] in (VT.FLOAT32, VT.FLOAT64):  # exact: printed with 17 digits
            want = [float(x) for x in want] if isinstance(want, list) else float(want)
        assert o["value"] == want, key
    assert ours["data_offset"] == r.data_offset
    assert ours["alignment"] == r.alignment
    assert len(ours["tensors"]) == len(r.tensors)
    for o, t in zip(ours["tensors"], r.tensors):
        assert o["name"] == t.name
        assert o["type"] == t.tensor_type.name
        assert o["ne"] == [int(x) for x in t.shape]
        assert ours["data_offset"] + o["offset"] == t.data_offset
        assert o["nbytes"] == t.n_bytes
    return ours, r


@pytest.mark.parametrize("alignment", [None, 64])
def test_metadata_and_tensors_match_gguf_reader(build_dir, tmp_path, alignment):
    path = tmp_path / "meta.gguf"
    write_metadata_file(path, alignment)
    ours, _ = check_against_reader(build_dir, path)
    assert ours["version"] == 3
    assert ours["alignment"] == (alignment or 32)
    # spot checks against the values written (not only against the reader)
    md = ours["metadata"]
    assert md["t.u64"]["value"] == 2**64 - 1 and md["t.i64"]["value"] == -2**63
    assert md["t.arr.str"]["value"][3] == "日本語"
    assert md["t.f32"]["value"] == float(np.float32(3.14159))
    # version 2 has the same little-endian layout: patch the version field
    v2 = tmp_path / "meta_v2.gguf"
    b = bytearray(path.read_bytes())
    b[4:8] = (2).to_bytes(4, "little")
    v2.write_bytes(bytes(b))
    assert info_json(build_dir, v2)["version"] == 2
    # the human-readable listing names every key and tensor
    text = run(build_dir, "info", path).stdout.decode()
    for key in md:
        assert key in text
    for t in ours["tensors"]:
        assert t["name"] in text


def test_unsupported_type_is_named(build_dir, tmp_path):
    path = tmp_path / "meta.gguf"
    write_metadata_file(path)
    p = run(build_dir, "dequant", path, "tensor.Q2_K", tmp_path / "x.npy", ok=False)
    assert p.returncode == 1
    err = p.stderr.decode()
    assert "Q2_K" in err and "tensor.Q2_K" in err and "Q4_K" in err  # lists the supported ones
    p = run(build_dir, "dequant", path, "no.such.tensor", tmp_path / "x.npy", ok=False)
    assert p.returncode == 1 and "no.such.tensor" in p.stderr.decode()


@pytest.mark.parametrize("qtype", SUPPORTED, ids=lambda q: q.name)
def test_dequant_random_blocks_bit_exact(build_dir, tmp_path, qtype):
    rng = np.random.default_rng(int(qtype) + 100)
    bs, _ = gguf.GGML_QUANT_SIZES[qtype]
    rows, blocks = 3, (8 if bs > 1 else 64) * (1 if bs == 256 else 4)
    raw = random_blocks(rng, qtype, rows, blocks)
    path = tmp_path / f"{qtype.name}.gguf"
    w = gguf.GGUFWriter(str(path), arch="testarch")
    w.add_tensor("w", raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = tmp_path / "w.npy"
    run(build_dir, "dequant", path, "w", out)
    ours = np.load(out)
    ref = gguf.quants.dequantize(raw, qtype).astype(np.float32)
    assert ours.shape == ref.shape == (rows, blocks * bs)
    assert np.all(np.isfinite(ref))
    # bit for bit, block by block (the first differing block is named on failure)
    diff = ours.view(np.uint32) != ref.view(np.uint32)
    if diff.any():
        r, c = np.argwhere(diff)[0]
        pytest.fail(f"{qtype.name}: row {r} block {c // bs} value {c % bs}: "
                    f"{ours[r, c]!r} != {ref[r, c]!r}")


def test_default_model_matches_gguf_reader(build_dir, tmp_path):
    if not MODEL.exists():
        pytest.fail(f"{MODEL} missing: run scripts/fetch_model.sh (scripts/setup.sh does)")
    ours, r = check_against_reader(build_dir, MODEL)
    md = ours["metadata"]
    assert md["general.architecture"]["value"] == "llama"
    assert len(md["tokenizer.ggml.tokens"]["value"]) == 49152
    assert len(ours["tensors"]) == 272
    # a Q4_1 weight and an F32 norm, dequantized, against gguf-py
    by_name = {t.name: t for t in r.tensors}
    for name in ["blk.0.attn_q.weight", "blk.0.attn_norm.weight"]:
        t = by_name[name]
        out = tmp_path / "t.npy"
        run(build_dir, "dequant", MODEL, name, out)
        ref = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        ours_t = np.load(out)
        assert ours_t.shape == ref.shape, name
        assert np.array_equal(ours_t.view(np.uint32), ref.view(np.uint32)), name


def test_fifo_inputs_are_refused_not_waited_on(build_dir, tmp_path):
    """A model or checkpoint path that is a FIFO with no writer is refused ('not a regular
    file', exit 1): the readers open O_NONBLOCK before checking (before 2026-12-05, gguf
    safetensors and npy readers, and generate's GGUF sniffing, blocked in open forever)."""
    import os
    fifo = tmp_path / "model.fifo"
    os.mkfifo(fifo)
    prog = str(build_dir / "longattn")
    for args in (["gguf", "info", fifo], ["generate", "--ckpt", fifo, "--prompt", "x"],
                 ["generate", "--model", fifo, "--prompt", "x"],
                 ["kv-eval", "--ckpt", fifo, "--data", tmp_path]):
        p = subprocess.run([prog, *map(str, args)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and "not a regular file" in p.stderr, (args, p.stderr)
