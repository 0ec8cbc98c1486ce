"""ring_inputs.py OUT B H HKV T D [SEED] -- float32 .npy inputs for the sequence-parallel
attention tests of tests/mpi.sh (issue 30), written without numpy (plain npy 1.0): q, dout
(B, H, T, D), k, v (B, HKV, T, D), docs.npy (B, T) document ids in runs of 90 (shifted per
batch), s.npy (H,) per-head logn s_h."""
import struct, random, sys
def save(path, shape, data):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % ("".join("%d, " % s for s in shape) if len(shape) != 1 else "%d," % shape[0])
    pad = 64 - (10 + len(hdr) + 1) % 64
    hdr = hdr + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%df" % len(data), *data))
out, B, H, Hkv, T, D = sys.argv[1], *map(int, sys.argv[2:7])
rnd = random.Random(int(sys.argv[7]) if len(sys.argv) > 7 else 0)
n = lambda *s: [rnd.uniform(-1.5, 1.5) for _ in range(eval("*".join(map(str, s))))]
save(out + "/q.npy", (B, H, T, D), n(B, H, T, D))
save(out + "/k.npy", (B, Hkv, T, D), n(B, Hkv, T, D))
save(out + "/v.npy", (B, Hkv, T, D), n(B, Hkv, T, D))
save(out + "/dout.npy", (B, H, T, D), n(B, H, T, D))
save(out + "/docs.npy", (B, T), [float((j + 29 * b) // 90) for b in range(B) for j in range(T)])
save(out + "/s.npy", (H,), [0.2 + 0.03 * h for h in range(H)])
