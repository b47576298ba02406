#!/usr/bin/env bash
# Issue 13's next one-GPU call (after the thirteenth session), from the repository root after
# scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-memory-pending.sh
# Gemma-2-2B LoRA r 16 under the 10 GiB cap, flex attention, each run a process of its own:
# - 25,856 tokens (ran with offload + 4 MLP tiles: 8,991 MB allocated, 10,224 reserved) with the
#   layers' RMSNorms in 4 token tiles too (offload_tiled_norms): what norm tiles take off the
#   layers' backward, which sets this peak (benchmarks/saved_bytes.py: −21% of a LoRA layer's
#   saved bytes on the CPU; not in the planner);
# - 29,120 tokens (1.25× the planner's longest, 23,296) with offload + 4 MLP tiles: must run out
#   of memory (test the_longest_context_on_ten_gib_is_one_that_ran), and with norm tiles.
# The previous call's version (7eaff27) is benchmarks/h200-2026-12-01-s13/memory-pending/call.sh:
# its 32,320-token run did not finish in 150 s, hence the longer limits. Logs under $OUT; the
# table last. About 8 minutes: T_* override the parts' limits, LONG_MODES the 29,120-token modes.
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
gemma=(python3 activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 --attn flex_attention --repeats 1)
echo "== 25,856 tokens, norm tiles $(date -u +%T)"
(cd benchmarks && timeout "${T_NORMS:-200}" "${gemma[@]}" --modes offload_tiled_norms --tokens 25856 \
  --out "$OUT/act-gemma-25856-norms.json") > "$OUT/act-gemma-25856-norms.log" 2>&1
echo "exit $?" >> "$OUT/act-gemma-25856-norms.log"
echo "== 29,120 tokens $(date -u +%T)"
(cd benchmarks && timeout "${T_LONG:-260}" "${gemma[@]}" --modes "${LONG_MODES:-offload_tiled,offload_tiled_norms}" --tokens 29120 \
  --out "$OUT/act-gemma-29120.json") > "$OUT/act-gemma-29120.log" 2>&1
echo "exit $?" >> "$OUT/act-gemma-29120.log"
echo "== done $(date -u +%T)"
grep -h "^|\|^exit\|out of memory" "$OUT"/act-gemma-*.log | cut -c1-220
