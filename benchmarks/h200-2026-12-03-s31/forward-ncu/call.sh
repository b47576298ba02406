#!/usr/bin/env bash
# The default sm90 forward against cuBLAS's logits GEMM under ncu, one launch each, at the model
# shapes (issue 10's forward target: ≤ 1.0× the logits GEMM) and the 16k training-step loss,
# through scripts/ncu-sm90.sh (time, clock, pipe utilisation, stall reasons, L2 / DRAM). s30
# measured 1.001× at the 16k shape (benchmarks/h200-2026-12-03-s30/forward-ncu-cublas-grad/
# forward-ncu.md); the model shapes were 1.04–1.05× before the staged fold (s20's suite) and have
# not been measured since. ~5 minutes, 8 logs. Build with scripts/gpu-prepare.sh; through the
# device tool, carrying gpu-bundle: OUT=$OUT bash scripts/gpu-forward-ncu.sh
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
for s in gemma2 llama3 qwen25 16384,2048,128256; do
  OUT=$OUT SHAPE=$s KERNEL=forward T_NCU=60 bash scripts/ncu-sm90.sh
  echo "ncu $s at ${SECONDS}s"
done
