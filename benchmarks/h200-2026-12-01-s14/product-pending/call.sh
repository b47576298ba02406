#!/usr/bin/env bash
# flce's own backward products (kernels/sm90/product.cu, FLCE_SM90_PRODUCTS=1) after the
# thirteenth session's changes, built and compile-checked on the CPU only: one device call, from
# the repository root after scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-product-pending.sh
# - GPU tests with flce's products: `de-chunks` (dE's f32 accumulator over 5 vocabulary chunks at
#   D = 520: the grouped read-modify-write epilogue, add_to_f32, and the per-pair one of a partial
#   column tile), the bf16 and 2-SM small cases, Gemma 2 and Llama 3 sampled (the model shapes'
#   chunks), against the f64 oracle; memcheck on two;
# - timing, interleaved: cuBLAS's products against flce's (gpu-variants.sh, 2 rounds, the three
#   model shapes; Llama 3 at 32k, 1 round);
# - every launch of one Llama 3 step with either products (scripts/gpu-product-launches.sh).
# Logs under $OUT; the tables last. About 7 minutes (T_* override the parts' limits).
# The call that ran the first product kernel (7eaff27) is benchmarks/h200-2026-12-01-s13/product-first/call.sh.
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
echo "== tests with flce's products $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout "${T_TESTS:-150}" gpu-bundle/gpu-tests "de-chunks" "gemma2 sampled fused" \
  "llama3 sampled fused" > "$OUT/gpu-tests-product-chunks.log" 2>&1
echo "exit $?" >> "$OUT/gpu-tests-product-chunks.log"
FLCE_SM90_PRODUCTS=1 timeout "${T_SMALL:-100}" gpu-bundle/gpu-tests --small bf16 "2 SMs" \
  > "$OUT/gpu-tests-product-small.log" 2>&1
echo "exit $?" >> "$OUT/gpu-tests-product-small.log"
echo "== memcheck $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 sum (600,520,5000) de-chunks" "bf16 all (257,520,300)" > "$OUT/memcheck-product.log" 2>&1
echo "exit $?" >> "$OUT/memcheck-product.log"
echo "== timing $(date -u +%T)"
mkdir -p /tmp/vp /tmp/vp32
OUT=/tmp/vp timeout 120 bash scripts/gpu-variants.sh 2 \
  "cublas=gpu-bundle/flce" "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" > "$OUT/variants-product.md" 2>&1
OUT=/tmp/vp32 SHAPES=32768,4096,128256 timeout 60 bash scripts/gpu-variants.sh 1 \
  "cublas=gpu-bundle/flce" "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" > "$OUT/variants-product-32k.md" 2>&1
tar czf "$OUT/variants-product-logs.tgz" -C /tmp vp vp32
echo "== launches $(date -u +%T)"
OUT="$OUT" bash scripts/gpu-product-launches.sh > "$OUT/launches.log" 2>&1
echo "== done $(date -u +%T)"
grep -h "FAILED\|^gpu:\|^exit" "$OUT"/gpu-tests-product-*.log | head
grep -h "ERROR SUMMARY\|^exit" "$OUT/memcheck-product.log"
cat "$OUT/launches.log"
tail -n 8 "$OUT/variants-product.md"; tail -n 3 "$OUT/variants-product-32k.md"
