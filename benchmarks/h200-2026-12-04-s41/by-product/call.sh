#!/usr/bin/env bash
# s41 call 5: call 4's by-product ratios (3 steps back to back) were 4-9% above s40's (1 step):
# the same on 5912082 with 1 step (s40's way), then 3 steps again at Llama 3 — the method, not the build?
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; L=/tmp/logs5; mkdir -p $L
export FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
for s in gemma2 llama3 qwen25 llama3; do
  st=1; [ -f $L/products-$s-1.log ] && st=3
  PYTHONPATH=/tmp/site timeout 60 python3 scripts/profile_kernels.py --shape $s --steps $st --top 10 --gaps 3 \
    --by-product --configs "auto/auto/min" > $L/products-$s-$st.log 2>&1
  echo "== $s steps $st rc=$? at ${SECONDS}s"
  grep -E "^\| (forward|G|dE|dC|step) " $L/products-$s-$st.log
done
tar czf "$FINAL/logs.tgz" -C /tmp logs5
