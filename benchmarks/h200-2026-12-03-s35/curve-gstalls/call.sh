#!/usr/bin/env bash
# s35 call 1: (a) the misaligned-dE GPU check fixed after s34's last call; (b) flce's budget curve
# below the default at the model shapes, beside Liger and cuBLAS (can a lower-memory point
# dominate Liger's ~63-75 MB point?); (c) warp-stall samples by SASS line of the default's G
# kernel at Llama 3, in registers (default) and staged (gfold=1).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
timeout 100 $B/gpu-tests --small "bf16 none (257,520,300)" "bf16 none (1,64,1000)" "bf16 none (1024,64,8000)" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s"; tail -3 "$OUT/tests.log"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site $B/wheels/flce-*.whl
PYTHONPATH=/tmp/site:/tmp/peers timeout 330 python3 benchmarks/suite.py --flce-bin $B/flce --out "$OUT/curve" --data peaky \
  --extra-dtypes "" --methods flce,cublas,liger --budgets 24M,32M,48M,64M --sweep none --rep-ms 400 \
  --max-minutes 4.5 > "$OUT/curve.log" 2>&1
echo "curve rc=$? at ${SECONDS}s"
prof() {  # name env
  env $2 timeout 110 ncu --clock-control none -k "regex:^flce_sm90_grad$" -c 1 --section WarpStateStats --section SpeedOfLight \
    --section SourceCounters --page source --csv --print-source sass \
    $B/flce bench --shapes llama3 --forward auto --backward auto > /tmp/$1.csv 2>&1
  echo "$1 rc=$? at ${SECONDS}s"
  gzip -c /tmp/$1.csv > "$OUT/$1-source.csv.gz"
  env $2 timeout 80 ncu --clock-control none -k "regex:^flce_sm90_grad$" -c 1 --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section LaunchStats \
    $B/flce bench --shapes llama3 --forward auto --backward auto > "$OUT/$1-details.log" 2>&1
}
prof grad-default X=1
prof grad-staged FLCE_SM90_MAINLOOP=gfold=1
for f in grad-default grad-staged; do
  echo "== $f"; grep -E "Duration|SM Frequency|Issue Slots Busy|L2 Hit Rate|DRAM Throughput|Grid Size|Warp Cycles Per Issued" "$OUT/$f-details.log"
done
grep -av "%|" "$OUT/curve.log" | tail -n 40
