#!/usr/bin/env bash
# s40 call 6: is the forward's L2 hit rate (66% against G's 87%, DRAM reads 2.2x cuBLAS's) the
# blocks' drift over one long launch? ncu metrics of every forward launch, one launch (default)
# against bands of 16 / 32 token tiles (FLCE_SM90_FORWARD_BAND: the drift reset every band), and
# of every G launch; then the same timed (flce bench, 2 rounds).
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; OUT=/tmp/logs6; mkdir -p $OUT
export FLCE_CACHE_DIR=$(mktemp -d)
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.max
B=gpu-bundle/flce
for s in llama3 gemma2; do
  for band in 0 16 32; do
    FLCE_SM90_FORWARD_BAND=$band timeout 90 ncu --clock-control none -k regex:flce_sm90_forward -c 4 --metrics $M --csv \
      $B bench --shapes $s --iters 1 --step-budget-mb 0 > $OUT/ncu-fwd-$s-band$band.csv 2>&1
    echo "ncu fwd $s band $band rc=$? ${SECONDS}s"
  done
done
timeout 90 ncu --clock-control none -k regex:flce_sm90_grad -c 14 --metrics $M --csv \
  $B bench --shapes llama3 --iters 1 --step-budget-mb 0 > $OUT/ncu-grad-llama3.csv 2>&1
echo "ncu grad rc=$? ${SECONDS}s"
for r in 1 2; do
  for band in 0 16 32; do
    FLCE_SM90_FORWARD_BAND=$band timeout 60 $B bench --shapes gemma2,llama3,qwen25 --iters 5 --step-budget-mb 0 > $OUT/bench-band$band-r$r.log 2>&1
    echo "bench band $band r$r rc=$? ${SECONDS}s"; grep -E "^\| (gemma2|llama3|qwen25)" $OUT/bench-band$band-r$r.log | cut -d'|' -f2-5 | sort -u
  done
done
python3 - <<'PY'
import csv, glob, collections
for f in sorted(glob.glob("/tmp/logs6/ncu-*.csv")):
    rows = [l for l in open(f) if l.startswith('"')]
    if not rows: print(f, "no rows"); continue
    rd = list(csv.DictReader(rows))
    by = collections.OrderedDict()
    for r in rd:
        by.setdefault(r["ID"], {})[r["Metric Name"]] = r["Metric Value"].replace(",", "")
    tot = sum(float(m.get("gpu__time_duration.sum", 0)) for m in by.values())
    print(f.split("/")[-1], "launches", len(by), "total duration", tot)
    for i, m in by.items():
        print("  ", i, {k.split("__")[1][:22]: m[k] for k in m})
PY
echo "total ${SECONDS}s"
tar czf "$FINAL/logs.tgz" -C /tmp logs6
