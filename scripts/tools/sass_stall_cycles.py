#!/usr/bin/env python3
"""Static issue stalls of the sm90 forward's tile fold, from a cubin's control bits (no GPU).

Each sm_90 instruction's upper 64 bits carry the scheduler's control word; bits 41–44 are the
cycles the warp waits before its next instruction (ptxas's fixed-latency schedule). Summed over
the fold of a plain whole tile — from the row max's first FMNMX (`FMNMX Rx, R24, -INF`: acc[0]
of the first row) to the second row's state store (the second `STS` after it) — and split by
opcode, they show where a warp's own schedule waits (docs/journal.md v35: the FMNMX and FADD chains,
4 cycles a link). The region holds the rarely taken argmax branch too, so read the totals as
an upper bound and compare builds, not cycles.

    cargo run --release -p flce-cuda --example resource_usage sm_90a bf16 /tmp/ru
    python3 scripts/sass-stall-cycles.py /tmp/ru/sm90_forward.cu.sm_90a.bf16.cubin [other.cubin …]

(FLCE_SM90_MAINLOOP in the environment of the first command picks a main-loop variant, as at
run time; cuobjdump on PATH: see scripts/tools/sass-diff.sh.)
"""
import collections
import re
import subprocess
import sys


def instructions(cubin, kernel="flce_sm90_forward"):
    text = subprocess.run(["cuobjdump", "-sass", cubin], capture_output=True, text=True, check=True).stdout
    lines, out, inside, i = text.split("\n"), [], False, 0
    while i < len(lines):
        line = lines[i]
        if "Function :" in line:
            inside = line.strip().endswith(kernel)
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*/\* (0x[0-9a-f]+) \*/", line)
        if m and inside:
            hi = int(re.search(r"/\* (0x[0-9a-f]+) \*/", lines[i + 1]).group(1), 16)
            out.append((m.group(2).strip(), (hi >> 41) & 0xF))
            i += 2
            continue
        i += 1
    return out


def opcode(text):
    parts = text.split()
    return parts[1] if parts[0].startswith("@") else parts[0]


def report(cubin):
    ins = instructions(cubin)
    start = next(k for k, (t, _) in enumerate(ins) if re.search(r"FMNMX R\d+, R24, -INF", t))
    stores = [k for k in range(start, len(ins)) if opcode(ins[k][0]).startswith("STS")]
    fold = ins[start : stores[1] + 1]
    cycles, count = collections.Counter(), collections.Counter()
    for text, stall in fold:
        cycles[opcode(text)] += stall
        count[opcode(text)] += 1
    print(f"== {cubin}: {len(fold)} instructions, {sum(cycles.values())} static stall cycles a warp")
    for op, c in cycles.most_common(8):
        print(f"  {op:26s} {count[op]:5d} instructions  {c:5d} cycles  ({c / count[op]:.2f} each)")


if __name__ == "__main__":
    for path in sys.argv[1:]:
        report(path)
