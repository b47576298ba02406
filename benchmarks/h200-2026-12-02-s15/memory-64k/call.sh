#!/usr/bin/env bash
# Issue 13's target: Gemma-2-2B LoRA r 16 trains at >= 64k tokens under a 10 GiB cap, at the
# planner's longest (a step there runs, one at 1.25x it does not). With checkpointing + offload,
# 8 MLP and norm tiles and the layers' frozen weights streamed from host memory
# (`flce plan --model Gemma-2-2B --gpu-gb 10 --seq 65536 --mlp-tiles 8 --norm-tiles 8
# --stream-weights`: 73,728 tokens). One device call after scripts/gpu-memory-pending.sh, from the
# repository root after scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-memory-64k.sh
# Each run a process of its own; logs under $OUT; the table last. About 8 minutes.
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
gemma=(python3 activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 --attn flex_attention --repeats 1
       --tiles 8 --modes offload_streamed)
for tokens in ${TOKENS:-73728 92160}; do
  echo "== $tokens tokens $(date -u +%T)"
  (cd benchmarks && timeout "${T_RUN:-250}" "${gemma[@]}" --tokens "$tokens" --out "$OUT/act-gemma-$tokens.json") \
    > "$OUT/act-gemma-$tokens.log" 2>&1
  echo "exit $?" >> "$OUT/act-gemma-$tokens.log"
done
echo "== done $(date -u +%T)"
grep -h "^|\|^exit\|out of memory" "$OUT"/act-gemma-*.log | cut -c1-220
