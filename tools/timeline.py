#!/usr/bin/env python3
"""timeline.py FILE [--all]: one decode step's launches from a measuring
build's timeline (MINFER_TIMELINE=FILE, runtime/cuda/timeline.cuh): what each
kernel costs the step, when its CTAs came in, grouped by kernel.

A launch is the CTAs of one kernel (file, line of its wait, CTAs, threads),
each CTA index once, that enter in a row or among the next two launches'
(a launch's last wave may enter after the next launch's first CTAs, by the
global timer). Launches are in order of their first entries, and a launch's
end is when the next launch's first wait returned. Per launch:
  cost   its end minus the end of the launch before (its share of the step);
  early  its first CTA's entry minus the end of the launch before (negative:
         resident and asking for its weights while the one before still ran);
  spread its last CTA's entry minus its first's (more than ~1 us: waves).
Grouped by kernel and the kernel before it (one place in a layer); the last
launch (its end unknown: the step's output matrix) is left out of the groups.
--all prints every launch too."""
import sys
from collections import OrderedDict


def launches(path):
    recs = []
    for line in open(path):
        if line.startswith("#"):
            continue
        sm, enter, waited, ctas, threads, tag, ln, block = line.split()
        recs.append((int(enter), int(waited), int(ctas), int(threads), f"{tag}:{ln}", int(block)))
    recs.sort()
    out = []
    for enter, waited, ctas, threads, where, block in recs:
        key = (where, ctas, threads)
        # a launch's last CTAs may enter after the next launch's first ones
        # (seen: a quantize launch's CTAs among the gate/up pair's last wave)
        into = next((l for l in reversed(out[-3:]) if l["key"] == key and block not in l["blocks"]), None)
        if into is None:
            into = {"key": key, "n": 0, "enter": [], "waited": [], "blocks": set()}
            out.append(into)
        into["n"] += 1
        into["blocks"].add(block)
        into["enter"].append(enter)
        into["waited"].append(waited)
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    ls = launches(sys.argv[1])
    if len(ls) < 2:
        sys.exit(f"timeline.py: {len(ls)} launches in {sys.argv[1]}")
    t0 = min(ls[0]["enter"])
    ends = [min(ls[i + 1]["waited"]) for i in range(len(ls) - 1)] + [max(ls[-1]["waited"])]
    stamps = sorted({e for l in ls for e in l["enter"]})
    tick = min((b - a for a, b in zip(stamps, stamps[1:])), default=0)
    rows = []
    for i, l in enumerate(ls):
        before = ends[i - 1] if i else t0
        rows.append((l["key"], l["n"], (ends[i] - before) / 1e3, (min(l["enter"]) - before) / 1e3,
                     (max(l["enter"]) - min(l["enter"])) / 1e3))
    step = (ends[-1] - t0) / 1e3
    print(f"{len(ls)} launches, {sum(l['n'] for l in ls)} CTAs, step {step:.1f} us "
          f"(the last launch's end: its last wait; timer steps of {tick} ns seen)")
    if "--all" in sys.argv:
        print("| # | kernel (file:line) | CTAs of | threads | cost us | early us | spread us |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        for i, ((where, ctas, threads), n, cost, early, spread) in enumerate(rows):
            print(f"| {i} | {where} | {n} of {ctas} | {threads} | {cost:.2f} | {early:.2f} | {spread:.2f} |")
    groups = OrderedDict()  # a kernel after the same kernel: one place in a layer (the last launch left out)
    for i, (key, n, cost, early, spread) in enumerate(rows[:-1]):
        groups.setdefault(key + (rows[i - 1][0][0] if i else "",), []).append((cost, early, spread))
    print("| kernel (file:line) | CTAs | threads | after | launches | cost us (mean) | share | early us (mean) | spread us (mean) |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for (where, ctas, threads, after), v in sorted(groups.items(), key=lambda kv: -sum(c for c, _, _ in kv[1])):
        total = sum(c for c, _, _ in v)
        print(f"| {where} | {ctas} | {threads} | {after} | {len(v)} | {total / len(v):.2f} | {100 * total / step:.1f}% | "
              f"{sum(e for _, e, _ in v) / len(v):.2f} | {sum(s for _, _, s in v) / len(v):.2f} |")


if __name__ == "__main__":
    main()
