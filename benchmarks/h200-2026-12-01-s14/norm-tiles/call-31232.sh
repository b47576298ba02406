#!/usr/bin/env bash
# s14 call 5: Gemma-2-2B LoRA r 16 on 10 GiB at the planner's longest with norm tiles (31,232).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
echo "== 31,232 tokens, norm tiles $(date -u +%T)"
(cd benchmarks && timeout 200 python3 activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 \
  --attn flex_attention --repeats 1 --modes offload_tiled_norms --tokens 31232 \
  --out "$OUT/act-gemma-31232-norms.json") > "$OUT/act-gemma-31232-norms.log" 2>&1
echo "exit $?" >> "$OUT/act-gemma-31232-norms.log"
echo "== done $(date -u +%T)"
grep -h "^|\|^exit\|out of memory" "$OUT"/act-gemma-*.log | cut -c1-250
