#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets into fuzz/corpus/<target>/ (valid and
near-valid inputs, all small). Checkpoint seeds come from fuzz/gen_seeds.c (the library's
own writer); run `make fuzz-corpus` to regenerate everything. Deterministic."""
import json, os, struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- spec strings (SPEC 6): valid ones from every category, and near-misses
specs = [
    "softmax+rope+causal", "softmax+nope+causal", "entmax(alpha=1.5)+nape+window(512)",
    "sparsemax+alibi+full", "asentmax(alpha=1.5,delta=1,gamma_range=2)+nape",
    "softmax+sinv(tau=10)+prope(p=0.5,theta=10000)+causal", "logn(s=0.25)+yarn(s=2,train=64)",
    "softmax+qwen-logn(train=2048)+yarn(s=4,train=2048,beta_fast=16,beta_slow=2,theta=500000)+sinks(n=4,w=256)",
    "dynamic-ntk(s=2,train=32)+critical(0.5)", "ntk(8)+temp(x=0.7)", "global(g=2)+window(w=8)",
    "softmax+temp(x=1e-05)+rope(theta=500000)+causal", "entmax(4)", "entmax(1.0000001)",
    "sinv(tau=1e+20)", "logn+prope", "window(8)+window(9)", "softmax++rope", "rope+casual",
    "entmax(alpha=nan)", "temp(x=inf)", "window(2147483648)", "sinks(n=-1,w=4)",
    "prope(p=1.5)", " yarn( 4 , 2048 ,16, 2, 500000 ) + qwen-logn ( train = 2048 ) + sinks(4, 256) ",
]
for i, s in enumerate(specs):
    put("spec", f"seed{i:02d}", s)

# ---- KV policy strings
kv = ["full", "window(256)", "window(w=256)", "sinks(4,252)", "sinks(n=4,w=252)", "h2o(64,64)",
      "h2o(heavy=64,recent=64,sinks=4)", "sinks(4,252)+int8", "h2o(8,16)+int8(group=32)",
      "full+int8", "window(0)", "h2o(1)", "full(3)", "window(99999999999)", "int8", "sinks(4,252)+int8+int8"]
for i, s in enumerate(kv):
    put("kv_policy", f"seed{i:02d}", s)

# ---- study files
quick = {"name": "q", "data": "data/x", "model": {"n_layer": 1, "d_model": 16, "n_head": 2, "n_kv_head": 1,
         "qk_gain": 2.0}, "steps": 4, "batch": 2, "seq_len": 16, "lr": 0.003, "warmup": 1, "seed": 7,
         "eval_lens": [16, 64], "eval_windows": 2, "val_every": 2,
         "passkey": {"pretrain_mix": 0.25, "finetune_steps": 2, "finetune_lr": 0.001, "lens": [16, 32],
                     "depths": [0, 0.5, 1], "trials": 2},
         "specs": ["softmax+rope", "softmax+sinv(tau=10)+prope(p=0.25)"]}
put("study", "quick.json", json.dumps(quick, indent=1))
minimal = {"data": "d", "steps": 1, "batch": 1, "seq_len": 8, "lr": 0.1, "specs": ["softmax"]}
put("study", "minimal.json", json.dumps(minimal))
bad = dict(minimal, eval_lens=[64, 16])
put("study", "bad_lens.json", json.dumps(bad))
put("study", "bad_spec.json", json.dumps(dict(minimal, specs=["softmaxx"])))
put("study", "unknown_key.json", json.dumps(dict(minimal, stepz=3)))
put("study", "too_many.json", json.dumps(dict(minimal, specs=["softmax"] * 17)))
put("study", "truncated.json", json.dumps(quick)[:120])

# ---- longeval study files (la_longeval_load)
le = {"comment": "c", "methods": ["as-trained", "pi({s})", "yarn({s},{C}) | sinks(4,252)+int8"],
      "lengths": [0.5, 1, 2], "depths": [0.1, 0.5, 0.9], "trials": 1, "distractors": 3, "buckets": 8,
      "chunk": 512, "seed": 1, "docs": "data/pydoc/val", "haystack": "filler"}
put("longeval", "full.json", json.dumps(le, indent=1))
put("longeval", "minimal.json", json.dumps({"methods": ["as-trained"]}))
put("longeval", "empty.json", "{}")
put("longeval", "bad_depth.json", json.dumps(dict(le, depths=[0.5, 1.5])))
put("longeval", "bad_haystack.json", json.dumps(dict(le, haystack="hay")))
put("longeval", "unknown_key.json", json.dumps(dict(le, trails=2)))
put("longeval", "too_many.json", json.dumps(dict(le, methods=["as-trained"] * 65)))
put("longeval", "method_not_string.json", json.dumps(dict(le, methods=["as-trained", 3])))
put("longeval", "not_object.json", json.dumps(["methods"]))
put("longeval", "truncated.json", json.dumps(le)[:90])

# ---- .npy
def npy(values, shape, descr="<f4", version=1, fortran=False):
    """.npy bytes of a flat list of values with the given shape and dtype descr."""
    fmt = {"<f4": "<f", ">f4": ">f", "<f8": "<d", "<f2": "<e", "<i4": "<i"}[descr]
    hdr = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", str(tuple(shape)))
    pre = 10 if version == 1 else 12
    pad = (-(pre + len(hdr) + 1)) % 64
    hdr = hdr + " " * pad + "\n"
    size = struct.pack("<H", len(hdr)) if version == 1 else struct.pack("<I", len(hdr))
    body = b"".join(struct.pack(fmt, v) for v in values)
    return b"\x93NUMPY" + bytes([version, 0]) + size + hdr.encode() + body

put("npy", "f32_2x3.npy", npy(range(6), (2, 3)))
put("npy", "f64_4.npy", npy([0, 1 / 3, 2 / 3, 1], (4,), "<f8"))
put("npy", "f16_3.npy", npy([1, 1, 1], (3,), "<f2"))
put("npy", "f32_scalar.npy", npy([1.5], ()))
put("npy", "f32_empty.npy", npy([], (0, 3)))
put("npy", "f32_v2.npy", npy(range(4), (4,), version=2))
put("npy", "f32_fortran.npy", npy([0, 3, 1, 4, 2, 5], (2, 3), fortran=True))
put("npy", "be_f4.npy", npy(range(3), (3,), ">f4"))
put("npy", "i32.npy", npy(range(3), (3,), "<i4"))
put("npy", "truncated.npy", npy(range(6), (6,))[:-5])
put("npy", "big_shape.npy", npy(range(2), (2,)).replace(b"(2,)", b"(9999999999999,)"))
put("npy", "nan.npy", npy([float("nan"), float("inf"), -0.0], (3,)))

# ---- safetensors
def st(tensors, meta=None, pad=True):
    """safetensors bytes of (name, shape, flat values) F32 tensors."""
    hdr, blob = {}, b""
    for name, shape, values in tensors:
        b = b"".join(struct.pack("<f", v) for v in values)
        hdr[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [len(blob), len(blob) + len(b)]}
        blob += b
    if meta is not None:
        hdr["__metadata__"] = meta
    h = json.dumps(hdr).encode()
    if pad:
        h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + blob

ones2 = ("a", [2], [1, 1])
put("safetensors", "two.safetensors", st([("a", [2, 3], range(6)), ("b", [2], [1, 1])], {"k": "v"}))
put("safetensors", "empty.safetensors", st([]))
put("safetensors", "scalar.safetensors", st([("s", [], [2.0])]))
put("safetensors", "meta_only.safetensors", st([], {"format": "x", "n": "1"}))
put("safetensors", "f16.safetensors", st([ones2]).replace(b'"F32"', b'"F16"'))
put("safetensors", "overlap.safetensors",
    st([ones2, ("b", [2], [1, 1])]).replace(b"[8, 16]", b"[4, 12]"))
put("safetensors", "truncated.safetensors", st([("a", [4], [1] * 4)])[:-3])
put("safetensors", "huge_len.safetensors", struct.pack("<Q", 1 << 62) + b"{}")
put("safetensors", "meta_not_string.safetensors", st([ones2], {"n": 1}))

# ---- llm.c shards (header 256 int32: magic 20240520, version 1, count), uint16 tokens
def shard(tokens, magic=20240520, version=1, count=None):
    h = [0] * 256
    h[0], h[1], h[2] = magic, version, len(tokens) if count is None else count
    return struct.pack("<256i", *h) + b"".join(struct.pack("<H", t) for t in tokens)

put("shards", "two_docs.bin", shard([50256, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 50256] + list(range(20, 40))))
put("shards", "one_doc.bin", shard([50256] + list(range(100, 140))))
put("shards", "empty.bin", shard([]))
put("shards", "eot_only.bin", shard([50256, 50256, 50256]))
put("shards", "bad_magic.bin", shard([1, 2, 3], magic=1))
put("shards", "bad_count.bin", shard([1, 2, 3], count=7))
put("shards", "bad_token.bin", shard([50256, 60000, 2]))
put("shards", "neg_count.bin", shard([], count=-1))

# ---- text directories: first byte = layout (see fuzz_textdir.c), files split at 0xFF
def tdir(mode, files):
    return bytes([mode]) + b"\xff".join(f.encode() if isinstance(f, str) else f for f in files)

lorem = "The quick brown fox jumps over the lazy dog. " * 3
put("textdir", "flat3", tdir(0b0100, [lorem, lorem[:40], "short"]))
put("textdir", "study", tdir(0b0001, [lorem, lorem, lorem[:30], "v"]))
put("textdir", "hidden", tdir(0b0010, [lorem]))
put("textdir", "single", tdir(0b1000, [lorem]))
put("textdir", "empty_files", tdir(0b0000, ["", "", ""]))
put("textdir", "study_noval", tdir(0b0001, [lorem, ""]))
put("textdir", "tiny", tdir(0b1100, ["ab", "c"]))
print("corpus written to", ROOT)

# ---- GGUF (v3, little-endian): metadata of every type, F32 / Q8_0 / Q4_1 tensors
def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b

def gkv(key, vtype, val):
    out = gstr(key) + struct.pack("<I", vtype)
    scal = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    if vtype == 8:
        return out + gstr(val)
    if vtype == 9:
        et, items = val
        out += struct.pack("<IQ", et, len(items))
        return out + b"".join(gstr(x) if et == 8 else struct.pack(scal[et], x) for x in items)
    return out + struct.pack(scal[vtype], val)

def gguf(kvs, tensors, align=32, version=3):
    """tensors: (name, ne list, type id, raw bytes)"""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(gkv(*k) for k in kvs)
    data, infos = b"", b""
    for name, ne, typ, raw in tensors:
        data += b"\0" * ((-len(data)) % align)
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", typ, len(data))
        data += raw
    blob = head + infos
    return blob + b"\0" * ((-len(blob)) % align) + data

kvs = [("general.architecture", 8, "llama"), ("general.alignment", 4, 32), ("u8", 0, 7), ("i8", 1, -7),
       ("u16", 2, 700), ("i16", 3, -700), ("i32", 5, -70000), ("f32", 6, 1.5), ("flag", 7, True),
       ("u64", 10, 1 << 40), ("i64", 11, -(1 << 40)), ("f64", 12, 0.25),
       ("tokenizer.ggml.tokens", 9, (8, ["a", "b", "ab", "<s>"])), ("tokenizer.ggml.scores", 9, (6, [0.0, -1.0, -2.0, 0.0])),
       ("tokenizer.ggml.token_type", 9, (5, [1, 1, 1, 3]))]
f32 = b"".join(struct.pack("<f", x) for x in range(8))
q8 = struct.pack("<e", 0.5) + bytes(range(32))                          # Q8_0: f16 scale + 32 int8
q41 = struct.pack("<ee", 0.25, -1.0) + bytes((i * 37) & 0xFF for i in range(16))  # Q4_1: d, m, 16 nibble bytes
put("gguf", "meta_f32.gguf", gguf(kvs, [("w", [4, 2], 0, f32)]))
put("gguf", "q8_0.gguf", gguf(kvs[:2], [("q", [32], 8, q8)]))
put("gguf", "q4_1.gguf", gguf(kvs[:2], [("q", [32, 1], 3, q41), ("f", [8], 0, f32)]))
put("gguf", "empty.gguf", gguf([], []))
put("gguf", "v2.gguf", gguf(kvs[:3], [("w", [8], 0, f32)], version=2))
put("gguf", "truncated.gguf", gguf(kvs, [("w", [4, 2], 0, f32)])[:-9])
put("gguf", "align64.gguf", gguf([("general.alignment", 4, 64)], [("w", [8], 0, f32), ("v", [8], 0, f32)], align=64))
put("gguf", "bad_align.gguf", gguf([("general.alignment", 4, 48)], [("w", [8], 0, f32)], align=48))
put("gguf", "dup_key.gguf", gguf([("k", 4, 1), ("k", 4, 2)], []))

# ---- tokenizer: first byte = mode (see fuzz_tokenizer.c), then text or a vocabulary
texts = ["the quick brown fox", " the  weather\tin 1234567 cities", "caf\u00e9 \u65e5\u672c\u8a9e \U0001F600!",
         "<|endoftext|>hello<user> there", "12 345 6789", "", "\x00\x01 control \x7f", "'s 've 're n't"]
for i, t in enumerate(texts):
    put("tokenizer", f"bpe{i}", bytes([i % 4 | (8 if i % 2 else 0)]) + t.encode())
    put("tokenizer", f"spm{i}", bytes([4 + i % 2]) + t.encode())
put("tokenizer", "invalid_utf8", bytes([0]) + b"ab\xff\xfe\xc3")
put("tokenizer", "vocab_gpt2", bytes([6]) + "gpt2\ngpt2\na\nb\nab\n\na b\n".encode())
put("tokenizer", "vocab_llama", bytes([7]) + "llama\n\n<unk>\n\u2581\na\n".encode())
put("tokenizer", "vocab_bad_merge", bytes([6]) + b"gpt2\n\na\nb\n\na c\n")
put("tokenizer", "vocab_dup", bytes([6]) + b"gpt2\nsmollm\na\na\n")
