#!/usr/bin/env bash
# s40 call 8 (the pacing as one counter a split): the forwards' pacing (FLCE_SM90_PACE=lag, off by default): correct (the small
# forward cases with pacing on: every family and the three-product pass against f64, twice
# bitwise), what it does to DRAM bytes / L2 hits / clock under ncu, and timed.
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; OUT=/tmp/logs8; mkdir -p $OUT
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
B=gpu-bundle
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,sm__cycles_elapsed.max
for s in llama3 gemma2; do
  for pace in 0 1 2; do
    FLCE_SM90_PACE=$pace timeout 90 ncu --clock-control none -k regex:flce_sm90_forward -c 2 --metrics $M --csv \
      $B/flce bench --shapes $s --iters 1 --step-budget-mb 0 > $OUT/ncu-fwd-$s-pace$pace.csv 2>&1
    echo "ncu fwd $s pace $pace rc=$? ${SECONDS}s"
  done
done
for r in 1 2; do
  for pace in 0 1; do
    FLCE_SM90_PACE=$pace timeout 80 $B/flce bench --shapes gemma2,llama3,qwen25 --iters 5 > $OUT/bench-pace$pace-r$r.log 2>&1
    echo "bench pace $pace r$r rc=$? ${SECONDS}s"; grep -E "^\| (gemma2|llama3|qwen25)" $OUT/bench-pace$pace-r$r.log | cut -d'|' -f2-6 | sort -u
  done
done
FLCE_SM90_PACE=1 timeout 120 $B/gpu-tests --small "bf16 plain (" pairs band rest "2 SMs" > $OUT/tests-pace1.log 2>&1
echo "tests pace1 rc=$? ${SECONDS}s"; grep -cE "\.\.\. ok" $OUT/tests-pace1.log; grep -E "FAIL|fail|panick" $OUT/tests-pace1.log | head -5; tail -2 $OUT/tests-pace1.log
python3 - <<'PY'
import csv, glob
for f in sorted(glob.glob("/tmp/logs8/ncu-*.csv")):
    rows = [l for l in open(f) if l.startswith('"')]
    if not rows: print(f, "no rows"); continue
    by = {}
    for r in csv.DictReader(rows):
        by.setdefault(r["ID"], {})[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    for i, m in by.items():
        print(f.split("/")[-1], i, "ms %.3f GHz %.3f Mcycles %.2f DRAM GB %.2f L2 hit %.1f" % (
            m["gpu__time_duration.sum"] / 1e6, m["sm__cycles_elapsed.avg.per_second"] / 1e9,
            m["sm__cycles_elapsed.max"] / 1e6, m["dram__bytes_read.sum"] / 1e9, m["lts__t_sector_hit_rate.pct"]))
PY
echo "total ${SECONDS}s"
tar czf "$FINAL/logs.tgz" -C /tmp logs8
