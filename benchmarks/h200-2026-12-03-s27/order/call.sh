#!/usr/bin/env bash
# s27 call 5 (at 7aaf818): flce_fast at 8k tokens, old wheel (978e276) against new (7aaf818), in
# both orders — call 3 and 4's A/B runs always ran the new wheel second, and the unchanged
# default path read 1.008-1.010 (B/A) there: an order effect of ~1%. 2 rounds A-then-B, then 2
# rounds B-then-A (benchmarks/time_call.py through scripts/gpu-ab-python.sh).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
export FLCE_CACHE_DIR=$(mktemp -d)
AB_METHOD=flce_fast AB_SHAPES=llama3,gemma2 OUT=$OUT/old-first timeout 200 bash scripts/gpu-ab-python.sh old-bundle gpu-bundle 2 > $OUT/old-first.md 2>&1
echo "old first at ${SECONDS}s"; cat $OUT/old-first.md
AB_METHOD=flce_fast AB_SHAPES=llama3,gemma2 OUT=$OUT/new-first timeout 200 bash scripts/gpu-ab-python.sh gpu-bundle old-bundle 2 > $OUT/new-first.md 2>&1
echo "new first at ${SECONDS}s (A = new here)"; cat $OUT/new-first.md
for d in old-first new-first; do sed "s/^{/{\"order\": \"$d\", /" $OUT/$d/ab-python.jsonl; done > $OUT/ab-python.jsonl
cat $OUT/*/ab-python.err > $OUT/ab-python.err; rm -rf $OUT/old-first $OUT/new-first
