#!/usr/bin/env python3
"""One markdown row per kernel launch from ncu's `--csv --metrics` output (the files
scripts/tools/ncu-launch-metrics.sh writes, one per variant and shape): time, SM clock, the longest
SM's cycles, DRAM bytes read and written, and the L2 hit rate — what told the forward's DRAM
bytes and clock from its cycles in docs/journal.md v49.

    python3 scripts/tools/ncu_launch_table.py gpu-logs/ncu-*.csv
"""
import csv
import sys

METRICS = {
    "gpu__time_duration.sum": ("ms", 1e-6),
    "sm__cycles_elapsed.avg.per_second": ("GHz", 1e-9),
    "sm__cycles_elapsed.max": ("M cycles", 1e-6),
    "dram__bytes_read.sum": ("DRAM read GB", 1e-9),
    "dram__bytes_write.sum": ("DRAM write GB", 1e-9),
    "lts__t_sector_hit_rate.pct": ("L2 hit %", 1.0),
}
# The units ncu writes for those metrics with --csv (raw values: ns, byte, cycle, hz, %; the scaled
# forms in case a version prints them), to the base unit the scales above expect
UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9, "nsecond": 1.0, "usecond": 1e3, "msecond": 1e6,
         "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "cycle": 1.0, "Kcycle": 1e3, "Mcycle": 1e6,
         "hz": 1.0, "Khz": 1e3, "Mhz": 1e6, "Ghz": 1e9, "%": 1.0}


def launches(path):
    """[(launch id, kernel name, {metric: value in its base unit})] of one ncu CSV."""
    with open(path) as f:
        rows = [line for line in f if line.startswith('"')]
    out = {}
    for r in csv.DictReader(rows):
        name = r.get("Kernel Name", "?").split("(")[0].strip()
        value = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "")
        if unit not in UNITS:
            sys.exit(f"{path}: unknown unit {unit!r} of {r['Metric Name']}")
        value *= UNITS[unit]
        out.setdefault(r["ID"], (name, {}))[1][r["Metric Name"]] = value
    return [(i, name, m) for i, (name, m) in out.items()]


def main(paths):
    cols = [label for label, _ in METRICS.values()]
    print("| file | launch | kernel | " + " | ".join(cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    # summed over a file's launches (several: e.g. a backward's G launches); the clock and the
    # hit rate are not sums, so left out there
    summed = {"gpu__time_duration.sum", "sm__cycles_elapsed.max", "dram__bytes_read.sum", "dram__bytes_write.sum"}
    for path in paths:
        rows = launches(path)
        for i, name, m in rows:
            cells = []
            for metric, (_, scale) in METRICS.items():
                v = m.get(metric)
                cells.append("" if v is None else f"{v * scale:.4g}" if scale != 1.0 else f"{v:.1f}")
            print(f"| {path.split('/')[-1]} | {i} | {name} | " + " | ".join(cells) + " |")
        if len(rows) > 1:
            cells = [f"{sum(m.get(k, 0.0) for _, _, m in rows) * scale:.4g}" if k in summed else ""
                     for k, (_, scale) in METRICS.items()]
            print(f"| {path.split('/')[-1]} | all {len(rows)} | (sum) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
