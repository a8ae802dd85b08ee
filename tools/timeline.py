#!/usr/bin/env python3
"""timeline.py FILE [--all] [--against OTHER]: two decode steps' launches from a measuring
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
  spread its last CTA's entry minus its first's (more than ~1 us: waves);
  data in, work  (kernels that mark them: the decode matmuls) the median CTA's
         first warp: from its entry until its staged rows were in, then
         until its rows were done (nan: no marks);
  own, tail  (kernels that mark their CTAs' ends: the matmuls' first warps,
         the small kernels' thread 0) from the launch's first wait's return
         to its last CTA's end, and from then to the launch's end: what the
         launch did, and what its grid's completion took to reach the next
         launch's wait. (The persistent piece kernel, whose warps take
         several tiles, marks its first warp's first tile: its work is one
         tile's, and its own and tail end at the last such tile, not at its
         CTAs' ends.)
Grouped by kernel and the kernel before it (one place in a layer); the last
launch (its end unknown: the second step's output matrix) is left out of
the groups. The argmax between the two steps (argm, after the output
matrix) costs the step's turnaround: where greedy tokens are fed on the
device (engine_eval_next: minfer bench's tg), the argmax itself and the
next step's graph launch behind it; otherwise also its token's copy to
the host, the host's turn and the next step's input copies; until the
next step's first CTA has passed its wait.
--all prints every launch too; --against OTHER compares each group's mean
cost with another step's file (the same model under another build or
setting) instead of the table."""
import sys
from collections import OrderedDict


def launches(path):
    recs = []
    for line in open(path):
        if line.startswith("#"):
            continue
        f = line.split()
        sm, enter, waited, ctas, threads, tag, ln, block = f[:8]
        marks = (int(f[8]), int(f[9])) if len(f) >= 10 else (0, 0)  # timeline_mark's data in, work done
        recs.append((int(enter), int(waited), int(ctas), int(threads), f"{tag}:{ln}", int(block), marks))
    recs.sort()
    out = []
    for enter, waited, ctas, threads, where, block, (in_ns, done_ns) in recs:
        key = (where, ctas, threads)
        # a launch's last CTAs may enter after the next launch's first ones
        # (seen: a quantize launch's CTAs among the gate/up pair's last wave)
        into = next((l for l in reversed(out[-3:]) if l["key"] == key and block not in l["blocks"]), None)
        if into is None:
            into = {"key": key, "n": 0, "enter": [], "waited": [], "blocks": set(), "in": [], "work": [], "done": []}
            out.append(into)
        if in_ns and done_ns > in_ns:
            into["in"].append(in_ns)
            into["work"].append(done_ns - in_ns)
        if done_ns:
            into["done"].append(enter + done_ns)
        into["n"] += 1
        into["blocks"].add(block)
        into["enter"].append(enter)
        into["waited"].append(waited)
    return out


def step_rows(path):
    """Each launch's (key, CTAs seen, cost, early, spread, data in, work, own, tail) in us, the step's us, the
    timer's step in ns."""
    ls = launches(path)
    if len(ls) < 2:
        sys.exit(f"timeline.py: {len(ls)} launches in {path}")
    t0 = min(ls[0]["enter"])
    ends = [min(ls[i + 1]["waited"]) for i in range(len(ls) - 1)] + [max(ls[-1]["waited"])]
    stamps = sorted({e for l in ls for e in l["enter"]})
    tick = min((b - a for a, b in zip(stamps, stamps[1:])), default=0)
    rows = []
    for i, l in enumerate(ls):
        before = ends[i - 1] if i else t0
        last = max(l["done"]) if l["done"] else float("nan")
        rows.append((l["key"], l["n"], (ends[i] - before) / 1e3, (min(l["enter"]) - before) / 1e3,
                     (max(l["enter"]) - min(l["enter"])) / 1e3, median(l["in"]) / 1e3, median(l["work"]) / 1e3,
                     (last - min(l["waited"])) / 1e3, (ends[i] - last) / 1e3))
    return rows, (ends[-1] - t0) / 1e3, tick


def median(v):
    return sorted(v)[len(v) // 2] if v else float("nan")


def groups_of(rows):
    """A kernel after the same kernel (one place in a layer; the last launch left out): its launches' figures."""
    groups = OrderedDict()
    for i, (key, n, *figures) in enumerate(rows[:-1]):
        groups.setdefault(key + (rows[i - 1][0][0] if i else "",), []).append(figures)
    return groups


def mean(v, k):
    return sum(x[k] for x in v) / len(v)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows, step, tick = step_rows(sys.argv[1])
    print(f"{len(rows)} launches, {sum(r[1] for r in rows)} CTAs, {step:.1f} us from the first entry to the last "
          f"launch's last wait (timer steps of {tick} ns seen)")
    if "--all" in sys.argv:
        print("| # | kernel (file:line) | CTAs of | threads | cost us | early us | spread us | data in us | work us | "
              "own us | tail us |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for i, ((where, ctas, threads), n, cost, early, spread, data, work, own, tail) in enumerate(rows):
            print(f"| {i} | {where} | {n} of {ctas} | {threads} | {cost:.2f} | {early:.2f} | {spread:.2f} | "
                  f"{data:.2f} | {work:.2f} | {own:.2f} | {tail:.2f} |")
    groups = groups_of(rows)
    if "--against" in sys.argv:  # another step's file: each group's mean cost there and here
        other_rows, other_step, _ = step_rows(sys.argv[sys.argv.index("--against") + 1])
        other = groups_of(other_rows)
        print(f"against {other_step:.1f} us there")
        print("| kernel (file:line) | CTAs | after | cost us there | here | here - there |")
        print("| --- | ---: | --- | ---: | ---: | ---: |")
        for key, v in groups.items():
            if key in other:
                there, here = mean(other[key], 0), mean(v, 0)
                print(f"| {key[0]} | {key[1]} | {key[3]} | {there:.2f} | {here:.2f} | {here - there:+.2f} |")
        return
    print("| kernel (file:line) | CTAs | threads | after | launches | cost us (mean) | share | early us (mean) | "
          "spread us (mean) | data in us | work us | own us | tail us |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (where, ctas, threads, after), v in sorted(groups.items(), key=lambda kv: -sum(x[0] for x in kv[1])):
        total = sum(x[0] for x in v)
        print(f"| {where} | {ctas} | {threads} | {after} | {len(v)} | {mean(v, 0):.2f} | {100 * total / step:.1f}% | "
              f"{mean(v, 1):.2f} | {mean(v, 2):.2f} | {mean(v, 3):.2f} | {mean(v, 4):.2f} | {mean(v, 5):.2f} | "
              f"{mean(v, 6):.2f} |")


if __name__ == "__main__":
    main()
