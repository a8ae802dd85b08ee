"""Compares minfer's tensor types with the Python gguf package, which nobody
here wrote. Reads a GGUF that tests/test_quant_reference.c made:

  src.T   F32   random source values
  q.T     T     minfer's encoding of src.T (types minfer can encode)
  deq.T   F32   minfer's decoding of q.T
  rnd.T   T     random blocks with finite scales (every decodable type)
  rdeq.T  F32   minfer's decoding of rnd.T
  metadata minfer.type_table: [id, block_elems, block_bytes, ...] of minfer's table

For every decoding it checks bit-identity with gguf.quants.dequantize; where
gguf can encode the type it checks minfer's bytes equal gguf's bytes. Prints
one line per check and exits 1 on any difference."""
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

GGUF_ENCODES = {T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0}

# Differences that are understood, with the reason printed beside them.
EXPLAINED = {
    T.Q8_1: ((32, 36), "ggml's block_q8_1 is f16 d + f16 s + 32 codes = 36 bytes; the gguf package still "
                       "lists the retired f32 d/s layout (40). Q8_1 is an activation format, never stored in files"),
}


def raw_bytes(t):
    return np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)


def gguf_decode(t):
    qtype = T(t.tensor_type)
    data = np.ascontiguousarray(t.data)
    if qtype == T.F32:
        return data.reshape(-1).astype(np.float32)
    rows = raw_bytes(t).reshape(-1, gguf.GGML_QUANT_SIZES[qtype][1] * (int(t.shape[0]) // gguf.GGML_QUANT_SIZES[qtype][0]))
    return gguf.quants.dequantize(rows, qtype).reshape(-1)


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def main(path):
    reader = gguf.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    failures = 0

    table = reader.fields["minfer.type_table"]
    values = [int(table.parts[i][0]) for i in table.data]
    for i in range(0, len(values), 3):
        tid, blk, size = values[i:i + 3]
        want = gguf.GGML_QUANT_SIZES.get(T(tid)) if tid in T._value2member_map_ else None
        if want != (blk, size) and tid in EXPLAINED and EXPLAINED[tid][0] == (blk, size):
            print(f"table {T(tid).name}: differs as explained: minfer {(blk, size)}, gguf {want}: {EXPLAINED[tid][1]}")
            continue
        ok = want == (blk, size)
        failures += not ok
        print(f"table {T(tid).name if want else tid}: {'matches' if ok else f'MISMATCH minfer {(blk, size)} gguf {want}'}")

    for name, t in sorted(tensors.items()):
        kind, _, tname = name.partition(".")
        if kind not in ("q", "rnd"):
            continue
        mine = tensors[("deq." if kind == "q" else "rdeq.") + tname].data.reshape(-1).astype(np.float32)
        ref = gguf_decode(t)
        if same_bits(mine, ref):
            print(f"{tname} dequantize ({kind}): bit-identical, {ref.size} values")
        else:
            failures += 1
            diff = np.abs(mine.astype(np.float64) - ref.astype(np.float64))
            print(f"{tname} dequantize ({kind}): DIFFERENT, max |diff| {diff.max():.3g} at {int(diff.argmax())}")
        if kind == "q" and T(t.tensor_type) in GGUF_ENCODES:
            src = tensors["src." + tname].data.astype(np.float32)
            ref_q = np.ascontiguousarray(gguf.quants.quantize(src, T(t.tensor_type))).view(np.uint8).reshape(-1)
            mine_q = raw_bytes(t)
            if mine_q.shape == ref_q.shape and np.array_equal(mine_q, ref_q):
                print(f"{tname} quantize: identical bytes, {mine_q.size} bytes")
            else:
                failures += 1
                n = int(np.count_nonzero(mine_q != ref_q)) if mine_q.shape == ref_q.shape else -1
                print(f"{tname} quantize: DIFFERENT, {n} bytes differ")
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
