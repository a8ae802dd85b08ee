"""Reads a `minfer synth` file with the Python gguf package and checks it
against an expected tensor list (lines "name TYPE ne0 [ne1]" in a text file):
same names in the same order, types and shapes, finite values, and the
promised scales (matrices sd ~0.02, norm weights mean ~1).
usage: check_synth.py FILE.gguf EXPECTED.txt ARCH N_VOCAB; exits 1 on any difference."""
import sys

import numpy as np
import gguf


def main(path, expected_path, arch, n_vocab):
    r = gguf.GGUFReader(path)
    fails = []
    f = r.fields["general.architecture"]
    if bytes(f.parts[f.data[0]]).decode() != arch:
        fails.append("general.architecture differs")
    toks = r.fields["tokenizer.ggml.tokens"]
    if len(toks.data) != int(n_vocab):
        fails.append(f"{len(toks.data)} tokens, expected {n_vocab}")
    want = [line.split() for line in open(expected_path) if line.strip()]
    got = r.tensors
    if [t.name for t in got] != [w[0] for w in want]:
        fails.append(f"tensor names differ: {[t.name for t in got][:6]}... vs {[w[0] for w in want][:6]}...")
    for t, w in zip(got, want):
        shape = [int(x) for x in t.shape]
        if gguf.GGMLQuantizationType(t.tensor_type).name != w[1] or shape != [int(x) for x in w[2:]]:
            fails.append(f"{t.name}: {gguf.GGMLQuantizationType(t.tensor_type).name} {shape} vs {w[1]} {w[2:]}")
            continue
        x = gguf.quants.dequantize(np.ascontiguousarray(t.data), gguf.GGMLQuantizationType(t.tensor_type)).reshape(-1)
        if not np.all(np.isfinite(x)):
            fails.append(f"{t.name}: non-finite values")
        elif "norm" in t.name and abs(float(x.mean()) - 1) > 0.05:
            fails.append(f"{t.name}: mean {x.mean():.4f}, expected about 1")
        elif t.name.endswith(".weight") and "norm" not in t.name and x.size >= 4096 and abs(float(x.std()) - 0.02) > 0.002:
            fails.append(f"{t.name}: sd {x.std():.5f}, expected about 0.02")
    for line in fails:
        print("DIFFERENT", line)
    print(f"checked {len(got)} tensors: {len(fails)} differences")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
