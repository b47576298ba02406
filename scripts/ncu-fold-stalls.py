#!/usr/bin/env python3
"""Where an sm90 forward's consumer warps wait, from ncu's source page as CSV (warp-stall samples
by SASS instruction: `ncu --section WarpStateStats --section SourceCounters --page source --csv
--print-source sass`, as benchmarks/h200-2026-12-03-s26/*/call.sh take it).

Splits the samples between the main loop (instructions executed once per k-step: at least 10×
the tile count) and the tile epilogue's fast path (executed once per tile: as often as the
tile's final `WARPGROUP.DEPBAR.LE gsb0, 0x0`, the wait for its last wgmma group, reported on
its own), with the stall reasons of each and the epilogue's samples by opcode.
    python3 scripts/ncu-fold-stalls.py main-plain.csv [chains4-plain.csv …]
"""
import collections
import csv
import sys

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


if __name__ == "__main__":
    for p in sys.argv[1:]:
        report(p)
