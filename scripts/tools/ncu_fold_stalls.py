#!/usr/bin/env python3
"""Where an sm90 forward's consumer warps wait, from ncu's source page as CSV (warp-stall samples
by SASS instruction: `ncu --section WarpStateStats --section SourceCounters --page source --csv
--print-source sass`, as scripts/tools/ncu-sm90.sh with SOURCE=1 takes it).

Splits the samples between the main loop (instructions executed once per k-step: at least 10×
the tile count) and the tile epilogue's fast path (executed once per tile: as often as the
tile's final `WARPGROUP.DEPBAR.LE gsb0, 0x0`, the wait for its last wgmma group, reported on
its own), with the stall reasons of each and the epilogue's samples by opcode.
    python3 scripts/ncu-fold-stalls.py main-plain.csv [chains4-plain.csv …]

Two views for kernels whose helper warps run loops of their own (the staged fold's, G's): those
loops execute as often as a main loop and land in its share above, so
    --hot N          the N instructions with the most samples (index, executions, top stalls);
    --split I,J,…    the samples between those instruction indices (index ranges from --hot:
                     a loop's instructions share one execution count), each range's share and
                     its largest execution count — a region's samples divided by the warps that
                     run it says how busy they are (docs/journal.md v42: the fold warps' loop had as
                     many samples per warp as a consumer warp's main loop).
"""
import argparse
import collections
import csv

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def load(path):
    with open(path) as f:
        lines = [line for line in f if line.startswith('"0x') or line.startswith('"Address"')]
    reader = csv.reader(lines)
    header = next(reader)
    return header, [dict(zip(header, row)) for row in reader]


def num(d, key):
    try:
        return int(d.get(key) or 0)
    except ValueError:
        return 0


def opcode(source):
    parts = source.strip().split()
    return parts[1] if parts[0].startswith("@") else parts[0]


def report(path):
    header, rows = load(path)
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(num(d, SAMPLES) for d in rows)
    drain = [d for d in rows if "DEPBAR.LE gsb0, 0x0" in d["Source"]]
    tiles = num(drain[0], EXECUTED)
    fold = [d for d in rows if num(d, EXECUTED) == tiles]
    loop = [d for d in rows if num(d, EXECUTED) >= 10 * tiles]
    print(f"== {path}: {total} samples, {tiles} tile epilogues (warp-level)")
    for name, part in (("main loop", loop), ("tile epilogue (fast path, drain included)", fold)):
        n = sum(num(d, SAMPLES) for d in part)
        why = collections.Counter({h[6:]: sum(num(d, h) for d in part) for h in stalls})
        top = ", ".join(f"{k} {100 * v / n:.0f}%" for k, v in why.most_common(5))
        print(f"{name}: {n} samples ({100 * n / total:.1f}%), {sum(num(d, EXECUTED) for d in part)} warp "
              f"instructions; {top}")
    print(f"  of which the drain (DEPBAR.LE gsb0, 0x0): {num(drain[0], SAMPLES)}")
    by_op = collections.defaultdict(lambda: [0, 0, 0, 0])
    for d in fold:
        a = by_op[opcode(d["Source"])]
        a[0] += 1
        a[1] += num(d, SAMPLES)
        a[2] += num(d, "stall_wait")
        a[3] += num(d, "stall_selected")
    print("  opcode                          count  samples   wait  selected")
    for op, a in sorted(by_op.items(), key=lambda x: -x[1][1])[:12]:
        print(f"  {op:30s} {a[0]:6d} {a[1]:8d} {a[2]:6d} {a[3]:8d}")


def hot(path, count):
    header, rows = load(path)
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(num(d, SAMPLES) for d in rows) or 1
    print(f"== {path}: the {count} instructions with the most samples")
    order = sorted(range(len(rows)), key=lambda i: -num(rows[i], SAMPLES))[:count]
    for i in sorted(order):
        d = rows[i]
        top = sorted(stalls, key=lambda h: -num(d, h))[:2]
        why = " ".join(f"{h[6:]}={num(d, h)}" for h in top if num(d, h))
        print(f"{i:6d} {num(d, SAMPLES):8d} {100 * num(d, SAMPLES) / total:5.1f}% exec {num(d, EXECUTED):10d}  "
              f"{d['Source'].strip()[:56]:56s} {why}")


def split(path, cuts):
    _, rows = load(path)
    total = sum(num(d, SAMPLES) for d in rows) or 1
    print(f"== {path}: samples by instruction range")
    bounds = [0] + cuts + [len(rows)]
    for a, b in zip(bounds, bounds[1:]):
        n = sum(num(d, SAMPLES) for d in rows[a:b])
        most = max((num(d, EXECUTED) for d in rows[a:b]), default=0)
        print(f"[{a:6d}, {b:6d}) {n:9d} samples {100 * n / total:5.1f}%  largest execution count {most}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--hot", type=int, default=0, metavar="N")
    ap.add_argument("--split", default="", metavar="I,J,…")
    args = ap.parse_args()
    for p in args.csv:
        if args.hot:
            hot(p, args.hot)
        elif args.split:
            split(p, sorted(int(x) for x in args.split.split(",")))
        else:
            report(p)
