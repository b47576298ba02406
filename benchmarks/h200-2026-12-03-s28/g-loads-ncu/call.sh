#!/usr/bin/env bash
# s28 call 3: per-launch time and DRAM bytes of flce_grad_from_compact and flce_to_elem (ncu,
# metrics only, every launch up to 60), main's build (flce-main = 78d62df) against 86f6f0c
# (flce: G's passes loaded before G is written; the rounding four elements a step), at Llama 3
# (4 GB: one chunk) and at the training step's loss shape (2 GB: 3 chunks, dC's accumulator).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
for bin in flce-main flce; do
  for s in "llama3 4096" "16384,2048,128256 2048"; do
    set -- $s
    timeout 100 ncu --clock-control none -k "regex:flce_to_elem|flce_grad_from_compact" -c 60 --csv --metrics $M \
      $B/$bin bench --shapes $1 --iters 1 --step-budget-mb $2 > "$OUT/ncu-$bin-${1//,/x}.csv" 2> "$OUT/ncu-$bin-${1//,/x}.err"
    echo "$bin $1 rc=$? at ${SECONDS}s"
  done
done
python3 - "$OUT" <<'PY'
import csv, glob, io, os, sys, collections
out = sys.argv[1]
for f in sorted(glob.glob(f"{out}/ncu-*.csv")):
    text = open(f).read()
    start = text.find('"ID"')
    if start < 0:
        print(f, "no rows"); continue
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    by = collections.defaultdict(dict)
    for r in rows:
        by[(r["ID"], r["Kernel Name"].split("(")[0])][r["Metric Name"]] = r["Metric Value"].replace(",", "") + " " + r.get("Metric Unit", "")
    print("==", os.path.basename(f))
    for (i, k), m in by.items():
        g = lambda n: m.get(n, "-").strip()
        print(f"{i:>3} {k:<24} grid {g('launch__grid_size')} regs {g('launch__registers_per_thread')} "
              f"t {g('gpu__time_duration.sum')} read {g('dram__bytes_read.sum')} write {g('dram__bytes_write.sum')} "
              f"warps {g('sm__warps_active.avg.pct_of_peak_sustained_active')}")
PY
