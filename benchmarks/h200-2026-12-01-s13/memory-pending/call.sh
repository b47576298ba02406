#!/usr/bin/env bash
# Issue 13's runs that wait for a one-GPU call (the twelfth session's changes, built and tested on
# the CPU only), from the repository root after scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-memory-pending.sh
# - pytest of the wheel (test_offload's CUDA cases: the final norm checkpointed by flce.patch);
# - activation_memory.py, Llama-3.2-1B (tied, as the real model) with fused AdamW at 16k / 32k /
#   64k tokens, ckpt / offload / offload_tiled: the planner's adamw-bf16-fused and final-norm
#   terms against the measured peaks, and issue 13's criteria (held ≤ 10%, the peak falls by
#   ≥ 80% of the held difference, step ≤ 1.05×) with the backward, not the optimizer step's
#   temporaries, setting the peak; the 64k row has never run;
# - Gemma-2-2B LoRA r 16 under a 10 GiB cap (flex attention, offload + 4 MLP tiles) at the
#   planner's longest context now (25,856 tokens) and 1.25× it (32,320): the first must run, the
#   second run out of memory (test the_longest_context_on_ten_gib_is_one_that_ran, which holds the
#   pre-change runs).
# Logs under $OUT; the tables last. About 8 minutes: T_* override the parts' limits.
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
echo "== pytest $(date -u +%T)"
(cd /tmp && timeout "${T_PYTEST:-150}" python3 -m pytest -q -x -p no:cacheprovider "$OLDPWD/gpu-bundle/python-tests") \
  > "$OUT/pytest.log" 2>&1
echo "exit $?" >> "$OUT/pytest.log"
echo "== Llama-3.2-1B, fused AdamW $(date -u +%T)"
(cd benchmarks && timeout "${T_LLAMA:-240}" python3 activation_memory.py --model Llama-3.2-1B --fused-adamw \
  --tokens 16384,32768,65536 --repeats 2 --out "$OUT/act-llama1b-fused.json") > "$OUT/act-llama1b-fused.log" 2>&1
echo "exit $?" >> "$OUT/act-llama1b-fused.log"
echo "== Gemma-2-2B LoRA, 10 GiB $(date -u +%T)"
(cd benchmarks && timeout "${T_GEMMA:-150}" python3 activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 \
  --attn flex_attention --modes offload_tiled --tokens 25856,32320 --repeats 1 --out "$OUT/act-gemma-10g.json") \
  > "$OUT/act-gemma-10g.log" 2>&1
echo "exit $?" >> "$OUT/act-gemma-10g.log"
echo "== done $(date -u +%T)"
tail -n 2 "$OUT/pytest.log"
grep -h "^|\|^exit" "$OUT/act-llama1b-fused.log" "$OUT/act-gemma-10g.log"
