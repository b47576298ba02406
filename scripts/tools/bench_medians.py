#!/usr/bin/env python3
"""Medians per (loss options, variant, shape) of a device call's bench.log, and each one's ratio
to the variant `main` in the same call.

The log's lines are `flce bench` table rows prefixed with "ROUND OPTIONS VARIANT " (the form the
one-off call scripts since s24 write: benchmarks/h200-2026-12-02-s25/*/call.sh). Usage:
    python3 scripts/bench-medians.py benchmarks/<folder>/bench.log
It reads those committed text logs; new timing calls run scripts/gpu-variants.sh, which keeps
flce bench's JSON rows and prints the same medians and ratios itself.
"""
import collections
import statistics
import sys


def main(path):
    runs = collections.defaultdict(list)
    for line in open(path):
        parts = line.split("|")
        if len(parts) < 5:
            continue
        head = parts[0].split()
        try:
            fwd, fb = float(parts[3].split()[0]), float(parts[4].split()[0])
        except (ValueError, IndexError):
            continue  # a row without both times (a failed or cut run)
        if len(head) < 3:
            continue
        runs[(head[1], head[2], parts[1].split()[0])].append((fwd, fb))
    med = {k: (statistics.median(f for f, _ in v), statistics.median(b for _, b in v), len(v)) for k, v in runs.items()}
    for (opts, variant, shape), (fwd, fb, n) in sorted(med.items()):
        base_f, base_b, _ = med.get((opts, "main", shape), (fwd, fb, 0))
        print(f"{opts:8s} {variant:10s} {shape:7s} n={n} fwd {fwd:6.2f} ({fwd / base_f:.3f}x main)  "
              f"fwd+bwd {fb:6.2f} ({fb / base_b:.3f}x main)")


if __name__ == "__main__":
    main(sys.argv[1])
