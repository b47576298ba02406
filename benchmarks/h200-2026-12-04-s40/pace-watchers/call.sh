#!/usr/bin/env bash
# s40 call 9: the forwards' pacing, watched by the producer warp's other lanes (per-block words,
# the minimum in shared memory): ncu and timed against unpaced, and a few GPU cases with pacing
# on and off (every family and the three-product pass against f64, twice bitwise).
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; OUT=/tmp/logs9; mkdir -p $OUT
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,sm__cycles_elapsed.max
for s in llama3 gemma2; do
  for pace in 0 1; do
    FLCE_SM90_PACE=$pace timeout 60 ncu --clock-control none -k regex:flce_sm90_forward -c 1 --metrics $M --csv \
      $B/flce bench --shapes $s --iters 1 --step-budget-mb 0 > $OUT/ncu-fwd-$s-pace$pace.csv 2>&1
    echo "ncu fwd $s pace $pace rc=$? ${SECONDS}s"
  done
done
for pace in 0 1; do
  FLCE_SM90_PACE=$pace timeout 40 $B/flce bench --shapes gemma2,llama3,qwen25 --iters 5 --step-budget-mb 0 > $OUT/bench-pace$pace.log 2>&1
  echo "bench pace $pace rc=$? ${SECONDS}s"; grep -E "^\| (gemma2|llama3|qwen25)" $OUT/bench-pace$pace.log | cut -d'|' -f2-5 | sort -u
done
FLCE_SM90_PACE=1 timeout 45 $B/gpu-tests --small "bf16 plain (1024,64,8000) pairs 2 SMs" "band 2" "rest 18 SMs" \
  "bf16 plain (3000,64,12000) pairs" > $OUT/tests-pace1.log 2>&1
echo "tests pace1 rc=$? ${SECONDS}s"; tail -1 $OUT/tests-pace1.log
timeout 30 $B/gpu-tests --small "bf16 plain (255,507,123)" "bf16 all (257,520,300)" "f16 zloss (640,520,3000) pairs" > $OUT/tests-default.log 2>&1
echo "tests default rc=$? ${SECONDS}s"; tail -1 $OUT/tests-default.log
python3 - <<'PY'
import csv, glob
for f in sorted(glob.glob("/tmp/logs9/ncu-*.csv")):
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
tar czf "$FINAL/logs.tgz" -C /tmp logs9
