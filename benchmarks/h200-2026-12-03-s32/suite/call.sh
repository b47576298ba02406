#!/usr/bin/env bash
# s32 call 3: issue 11's suite on today's defaults (ce0b27a: the finish in blocks; the rest, the
# compact grid in 16 MB, the race fix) at the model shapes and the Llama 3 sweep 1k / 4k / 16k
# beside cuBLAS, torch.compile, Liger's Triton path and CCE (liger-kernel 0.8.5,
# cut-cross-entropy 25.1.1; not Liger's Hopper kernel: its 92 MB wheel); the training step at 8k and 16k.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl .whl/small/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site
timeout 330 python3 benchmarks/suite.py --flce-bin $B/flce --out /tmp/suite --data peaky --extra-dtypes "" \
  --methods flce,flce_fast,cublas,compile,liger,cce --budgets none --rep-ms 600 --sweep 1024,4096,16384 \
  --sweep-methods flce,flce_fast,cublas,compile,liger,cce --max-minutes 4.5 > "$OUT/suite.log" 2>&1
echo "suite rc=$? at ${SECONDS}s"; cp /tmp/suite/results.json "$OUT/results.json"
timeout 170 python3 benchmarks/train_step.py --tokens 8192,16384 --methods liger,flce,flce@2G --rounds 2 \
  --versus liger --repeats 5 --out "$OUT/train.json" > "$OUT/train.log" 2>&1
echo "train rc=$? at ${SECONDS}s"
grep -av "%|" "$OUT/suite.log" | grep -E "^shape|peaky" | cut -c1-150
grep -A8 "^| tokens" "$OUT/train.log"
