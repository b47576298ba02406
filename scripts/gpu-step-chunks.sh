#!/usr/bin/env bash
# The three-product pass's token chunk: the default (plan::default_step_max_tokens: the whole
# batch up to 16k tokens, 8k chunks past that; measured with this script on 2026-12-02, perf-notes
# v25) against the whole batch and chunks capped at 16k / 8k / 4k tokens (FLCE_STEP_MAX_TOKENS,
# plan::step_plan_capped). The budget (40 GB) holds the whole batch at every shape, so only the
# cap moves the plan. From the repository root after scripts/gpu-prepare.sh, carry
# gpu-bundle, one device call (~5 min):
#   OUT=$OUT bash scripts/gpu-step-chunks.sh
# Then the step's tests with the winning cap (GPU tests read plans from the backend, so
# FLCE_STEP_MAX_TOKENS=<cap> gpu-bundle/gpu-tests --small "bf16 plain" runs its chunking).
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs-chunks; mkdir -p "$OUT" $L
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
OUT=$L/variants SHAPES=${SHAPES:-"16384,2048,128256 16384,4096,128256 16384,2304,256000 32768,4096,128256 65536,4096,128256"} \
  BENCH_ARGS="--step-budget-mb 40960 --iters 5" timeout 540 bash scripts/gpu-variants.sh 2 \
  "default=gpu-bundle/flce" "whole=gpu-bundle/flce:FLCE_STEP_MAX_TOKENS=1000000000" "cap16k=gpu-bundle/flce:FLCE_STEP_MAX_TOKENS=16384" \
  "cap8k=gpu-bundle/flce:FLCE_STEP_MAX_TOKENS=8192" "cap4k=gpu-bundle/flce:FLCE_STEP_MAX_TOKENS=4096" \
  > $L/variants.md 2>&1
tar czf "$OUT/logs.tgz" -C /tmp logs-chunks
grep -v "^|---" $L/variants.md
