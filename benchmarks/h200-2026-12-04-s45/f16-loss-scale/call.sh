#!/usr/bin/env bash
# s45 call 6: f16 errors with AMP's loss scale (suite --grad-scale 65536), Gemma 2, peaky: flce by
# default, flce "fast" (the three-product pass: gradients rounded in the forward at grad_output 1,
# scaled in the backward), PyTorch, torch.compile
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
PYTHONPATH=/tmp/site timeout 170 python3 benchmarks/suite.py --flce-bin gpu-bundle/flce --out "$OUT/f16" \
  --shapes gemma2 --data peaky --dtypes f16 --extra-dtypes "" --methods flce,flce_fast,torch,compile --budgets none \
  --sweep none --rep-ms 50 --max-minutes 2.2 --grad-scale 65536 > "$OUT/f16.log" 2>&1
echo "suite rc=$? ${SECONDS}s"
grep -a "peaky f16" "$OUT/f16.log" | grep -av "%|" | cut -c1-120
