#!/usr/bin/env bash
# s20 call 6: (1) where the three-product pass's time goes at Llama 3 / Gemma 2 / N 1k (profile_kernels.py,
# workspace_budget "fast"); (2) band width past 16k tokens: bands of 12 (default) against 16.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
cp scripts/.call6.sh "$OUT/call.sh"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
for s in llama3 gemma2 llama3_n1024; do
  extra=""; [ $s = llama3_n1024 ] && extra=--launches
  PYTHONPATH=/tmp/site timeout 90 python3 scripts/profile_kernels.py --shape $s --configs auto/auto/fast --top 12 --gaps 5 $extra > "$OUT/profile-$s.md" 2>&1
  echo "== $s"; grep -E "^## |^\| [a-z]" "$OUT/profile-$s.md" | head -10
done
OUT=/tmp/vbw SHAPES="65536,4096,128256 131072,4096,128256" BENCH_ARGS="--step-budget-mb 0 --iters 3" \
  timeout 200 bash scripts/gpu-variants.sh 2 "b12=gpu-bundle/flce" "b16=gpu-bundle/flce:FLCE_SM90_FORWARD_BAND=16" \
  > "$OUT/variants.md" 2>&1
tar czf "$OUT/vbw.tgz" -C /tmp vbw
grep -v "^|---" "$OUT/variants.md" | cut -d'|' -f2-6,10-11
