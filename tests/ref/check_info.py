"""Checks `minfer info --json` against the Python gguf package's reader: the
same metadata keys, value types and values (arrays in full), and the same
tensors with names, types, shapes, sizes and absolute data offsets.
usage: check_info.py FILE.gguf INFO.json; exits 1 on any difference."""
import json
import math
import sys

import numpy as np
import gguf
from gguf import GGUFValueType as V

TYPE_NAMES = {V.UINT8: "uint8", V.INT8: "int8", V.UINT16: "uint16", V.INT16: "int16", V.UINT32: "uint32",
              V.INT32: "int32", V.FLOAT32: "float32", V.BOOL: "bool", V.STRING: "string", V.ARRAY: "array",
              V.UINT64: "uint64", V.INT64: "int64", V.FLOAT64: "float64"}


def scalar(part, vtype):
    if vtype == V.STRING:
        return bytes(part).decode("utf-8", errors="replace")
    v = part[0]
    if vtype == V.BOOL:
        return bool(v)
    if vtype in (V.FLOAT32, V.FLOAT64):
        return float(v)
    return int(v)


def field_value(f):
    if f.types[0] != V.ARRAY:
        return scalar(f.parts[f.data[0]], f.types[0])
    if len(f.types) > 2:  # nested arrays: gguf exposes only the leaves, so compare those
        return [scalar(f.parts[i], f.types[-1]) for i in f.data]
    return [scalar(f.parts[i], f.types[-1]) for i in f.data]


def flatten(v):
    if isinstance(v, list):
        return [x for e in v for x in flatten(e)]
    return [v]


def same(a, b, vtype):
    if vtype in (V.FLOAT32, V.FLOAT64):
        if isinstance(a, str):  # minfer prints non-finite floats as strings
            return a == ("nan" if math.isnan(b) else "inf" if b > 0 else "-inf")
        # minfer prints float32 with 9 significant digits: equal once rounded back to float32
        width = np.float32 if vtype == V.FLOAT32 else np.float64
        return width(a) == width(b)
    return a == b


def main(path, info_path):
    reader = gguf.GGUFReader(path)
    with open(info_path) as fh:
        info = json.load(fh)
    fails = []
    fields = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    meta = info["metadata"]
    if set(fields) != set(meta):
        fails.append(f"keys differ: only gguf {sorted(set(fields) - set(meta))}, only minfer {sorted(set(meta) - set(fields))}")
    for key, f in fields.items():
        if key not in meta:
            continue
        mine = meta[key]
        if mine["type"] != TYPE_NAMES[f.types[0]]:
            fails.append(f"{key}: type {mine['type']} vs {TYPE_NAMES[f.types[0]]}")
            continue
        ref = field_value(f)
        got = mine["value"]
        if isinstance(ref, list):
            got = flatten(got)
            ok = len(got) == len(ref) and all(same(a, b, f.types[-1]) for a, b in zip(got, ref))
        else:
            ok = same(got, ref, f.types[0])
        if not ok:
            fails.append(f"{key}: value {str(got)[:80]} vs {str(ref)[:80]}")
    tensors = {t["name"]: t for t in info["tensors"]}
    if [t.name for t in reader.tensors] != [t["name"] for t in info["tensors"]]:
        fails.append("tensor names or order differ")
    for t in reader.tensors:
        mine = tensors.get(t.name)
        if mine is None:
            continue
        want = {"type": gguf.GGMLQuantizationType(t.tensor_type).name, "shape": [int(x) for x in t.shape],
                "bytes": int(t.n_bytes), "offset": int(t.data_offset)}
        got = {k: mine[k] for k in want}
        if got != want:
            fails.append(f"tensor {t.name}: {got} vs {want}")
    for f in fails:
        print("DIFFERENT", f)
    print(f"checked {len(fields)} keys and {len(reader.tensors)} tensors: {len(fails)} differences")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
