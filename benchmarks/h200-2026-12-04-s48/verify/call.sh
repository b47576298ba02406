#!/usr/bin/env bash
# s48 call 1: the whole verification in one call (build cc5cdbc: the status word in dC's state),
# with a small suite of flce_fast against torch.compile (memory beyond the gradients) beside it
cp "$0" "$OUT/call.sh"
mkdir -p /tmp/mem
(
  sleep 5
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site-mem gpu-bundle/wheels/flce-*.whl
  PYTHONPATH=/tmp/site-mem FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 timeout 420 python3 benchmarks/suite.py \
    --flce-bin gpu-bundle/flce --out /tmp/mem/suite --data peaky --extra-dtypes "" --methods flce_fast,compile \
    --budgets none --shapes gemma2,llama3,qwen25 --sweep 1024,4096,16384 --sweep-methods flce_fast,compile \
    --rep-ms 100 --max-minutes 6 > /tmp/mem/memory-suite.log 2>&1
  echo "exit $?" >> /tmp/mem/memory-suite.log
  grep -av "%|" /tmp/mem/memory-suite.log > "$OUT/memory-suite.log"
) &
OUT=$OUT SHARDS=4 CONCURRENT=1 T_TESTS=460 T_PYTEST=400 T_MEMCHECK=300 STEPS="tests pytest memcheck" \
  bash scripts/gpu-verify.sh 2>&1 | tail -n 30 > "$OUT/verify.out"
wait
cat "$OUT/verify.out"
tail -n 14 "$OUT/memory-suite.log"
