#!/usr/bin/env bash
# Issue 13's next one-GPU call (after the fourteenth session), from the repository root after
# scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-memory-pending.sh
# flce.weights (flce.patch(..., stream_weights=True): the layers' frozen weights in pinned host
# memory, each layer's on the GPU only while it runs), built and tested on the CPU only:
# - pytest of the wheel's offload and weights tests on the GPU (bitwise results, the device bytes
#   the streamed weights leave, at most two blocks' in flight);
# - Gemma-2-2B LoRA r 16 under the 10 GiB cap, flex attention, 4 MLP and norm tiles, 25,856 tokens:
#   offload_tiled_norms against offload_streamed (what streaming costs in step time, what it
#   takes off the peak: the planner says 3.48 GiB of weights);
# then scripts/gpu-memory-64k.sh (the planner's longest with streaming, and 1.25x it).
# The previous version of this call: benchmarks/h200-2026-12-01-s14/memory-pending/call.sh.
# Logs under $OUT; the table last. About 5 minutes: T_* override the parts' limits.
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
echo "== pytest offload + weights $(date -u +%T)"
(cd /tmp && timeout "${T_PYTEST:-90}" python3 -m pytest -q -p no:cacheprovider \
  "$OLDPWD/crates/flce-py/tests/test_weights.py" "$OLDPWD/crates/flce-py/tests/test_offload.py") \
  > "$OUT/pytest-weights.log" 2>&1
echo "exit $?" >> "$OUT/pytest-weights.log"
gemma=(python3 activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 --attn flex_attention --repeats 2)
echo "== 25,856 tokens, resident and streamed weights $(date -u +%T)"
(cd benchmarks && timeout "${T_STREAM:-200}" "${gemma[@]}" --modes offload_tiled_norms,offload_streamed \
  --tokens 25856 --out "$OUT/act-gemma-25856-streamed.json") > "$OUT/act-gemma-25856-streamed.log" 2>&1
echo "exit $?" >> "$OUT/act-gemma-25856-streamed.log"
echo "== done $(date -u +%T)"
tail -n 3 "$OUT/pytest-weights.log"
grep -h "^|\|^exit\|out of memory" "$OUT"/act-gemma-*.log | cut -c1-220
