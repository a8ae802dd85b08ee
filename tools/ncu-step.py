#!/usr/bin/env python3
"""ncu-step.py: one decode step's kernels from an ncu CSV, as a table.

tools/gpu-check.sh's profile stage runs `ncu --csv --metrics
gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum` over
`minfer run --no-graphs` (clocks and caches left as they are, so the times
are the ones a real step sees) and hands the CSV here. The last step is the
kernels from the last embedding gather on; for each kernel family it
prints the launches, the time, its share of the step and the DRAM bandwidth
it reached, against the copy bandwidth measured in the same run.

With a third argument `prompt`, the first step instead: the prompt's
kernels, from the first embedding gather to the next.

usage: ncu-step.py CSV COPY_GBPS [prompt]
"""
import collections
import csv
import io
import sys


def family(name):
    """A kernel's name without its parameter list (the first '(' outside <>)."""
    depth = 0
    for i, ch in enumerate(name):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            return name[:i]
    return name


def main():
    path, copy_gbps = sys.argv[1], float(sys.argv[2])
    lines = open(path, errors="replace").read().splitlines()
    header = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if header is None:
        sys.exit("ncu-step: no ncu CSV header in " + path)
    rows = csv.DictReader(io.StringIO("\n".join(l for l in lines[header:] if l.startswith('"'))))
    kernels = collections.OrderedDict()  # ID -> {name, metrics}
    for r in rows:
        k = kernels.setdefault(r["ID"], {"name": family(r["Kernel Name"]), "m": {}})
        unit, value = r["Metric Unit"], float(r["Metric Value"].replace(",", ""))
        scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6,
                 "Gbyte": 1e9}.get(unit, 1.0)
        k["m"][r["Metric Name"]] = value * scale
    ids = list(kernels)
    starts = [i for i, k in enumerate(ids) if "embed" in kernels[k]["name"]]
    if not starts:
        sys.exit("ncu-step: no embedding kernel, so no step to show")
    prompt = len(sys.argv) > 3 and sys.argv[3] == "prompt"
    step = [kernels[k] for k in (ids[starts[0]:starts[1]] if prompt and len(starts) > 1 else
                                 ids[starts[0]:] if prompt else ids[starts[-1]:])]
    fam = collections.OrderedDict()
    for k in step:
        f = fam.setdefault(k["name"], [0, 0.0, 0.0])
        f[0] += 1
        f[1] += k["m"].get("gpu__time_duration.sum", 0.0)
        f[2] += k["m"].get("dram__bytes_read.sum", 0.0) + k["m"].get("dram__bytes_write.sum", 0.0)
    total = sum(f[1] for f in fam.values())
    print(f"{'the prompt' if prompt else 'one decode step'}: {len(step)} kernels, {total:.1f} us of kernel time")
    print()
    print("| kernel | launches | us | share | DRAM GB/s | of copy bandwidth |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (n, us, b) in sorted(fam.items(), key=lambda x: -x[1][1]):
        gbps = b / (us * 1e3) if us > 0 else 0.0
        print(f"| {name} | {n} | {us:.1f} | {100 * us / total:.1f}% | {gbps:.0f} | {100 * gbps / copy_gbps:.0f}% |")


if __name__ == "__main__":
    main()
