#!/usr/bin/env bash
# s48 call 6: issue 10 / 11's suite with every peer on cc5cdbc (two interleaved rounds), then the
# end-to-end step at 16k (six rounds) against Liger's patch; the wheel parts came in calls 2–5
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
OUT=$OUT PART=2 ROUNDS=2 SUITE_MINUTES=8.0 bash scripts/gpu-suite-fast.sh | tail -n 16
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d) PYTHONPATH=/tmp/site:/tmp/peers
timeout 150 python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce --rounds 6 \
  --versus liger --repeats 5 > "$OUT/train16k.log" 2>&1
echo "train16k rc=$? at ${SECONDS}s"
grep -hE "^\| 16384 " "$OUT/train16k.log"
