#!/usr/bin/env bash
# s20 call 2: do forward bands help at or below 16k tokens? base (one launch, memory-capped splits),
# base + bands of 16 (16 x 8), flce-ln0 (e597c1d with SM90_LARGE_N_TOKENS = 0: the large-N split cap
# and L2 budget at every N), ln0 + bands of 12 (12 x 11).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call2.sh "$OUT/call.sh"
OUT=/tmp/vsmall SHAPES="gemma2,llama3,qwen25 16384,2048,128256 16384,4096,128256 32768,4096,128256" \
  timeout 560 bash scripts/gpu-variants.sh 2 "one=gpu-bundle/flce" "b16=gpu-bundle/flce:FLCE_SM90_FORWARD_BAND=16" \
  "ln0=gpu-bundle/flce-ln0" "ln0b12=gpu-bundle/flce-ln0:FLCE_SM90_FORWARD_BAND=12" > "$OUT/variants.md" 2>&1
tar czf "$OUT/vsmall.tgz" -C /tmp vsmall
grep -v "^|---" "$OUT/variants.md" | cut -d'|' -f2-6,10-11
