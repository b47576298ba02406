#!/usr/bin/env bash
# The tail layout's GPU check (perf-notes v50), in one device call from the repository root after
# scripts/gpu-prepare.sh (carry gpu-bundle; for the A/B also an older build's wheel in
# gpu-bundle/wheels-old/, else that half is skipped): the GPU cases whose plans start a tail that
# fits one chunk as early as a chunk and a third of V allow (129x200x5003, 640x520x3000,
# 700x520x4300 — sm80 and sm90 G; 4de60e5, not GPU-run in s41: the device time was spent), each
# against f64 and twice bitwise, then Llama 3 at 1k / 4k tokens in the suite (flce and cuBLAS),
# this build's wheel and the older one's.
set -uo pipefail
L=${OUT:-gpu-logs}; mkdir -p "$L"; cp "$0" "$L/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
timeout 75 ./gpu-bundle/gpu-tests --small "bf16 plain (129,200,5003)" "bf16 all (129,200,5003)" "f16 plain (129,200,5003)" \
  "f16 zloss (640,520,3000) pairs" "(700,520,4300)" "bf16 plain (1024,64,8000) pairs" > $L/tests.log 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c '^test .* ok ' $L/tests.log) failed=$(grep -c 'FAILED' $L/tests.log) of $(grep -c '^test ' $L/tests.log)"
for b in new old; do
  wheels=gpu-bundle/wheels; [ $b = old ] && wheels=gpu-bundle/wheels-old
  [ -d $wheels ] || { echo "no $wheels: $b skipped"; continue; }
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/$b $wheels/flce-*.whl
  PYTHONPATH=/tmp/$b timeout 30 python3 benchmarks/suite.py --flce-bin gpu-bundle/flce --out $L/sweep-$b --data peaky \
    --extra-dtypes "" --shapes "" --methods cublas --sweep-methods flce,cublas --budgets none --sweep 1024,4096 \
    --rep-ms 400 --max-minutes 0.45 > $L/sweep-$b.log 2>&1
  echo "$b rc=$? ${SECONDS}s"
done
