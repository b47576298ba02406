#!/usr/bin/env bash
# The persistent sm90 backward's first pieces (docs/design-sm90-backward.md), built and
# compile-checked on the CPU only: one device call, from the repository root after
# scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-product-pending.sh
# - gpu-tests sm90-mn-major: the MN-major wgmma operands (descriptors, TMA boxes, transpose
#   immediates) on one tile, exactly against the host;
# - the GPU tests' backward cases with FLCE_SM90_PRODUCTS=1 (the dE and dC products through
#   kernels/sm90/product.cu instead of cuBLAS, in the sm90 family's plans: every chunk shape,
#   tails, token chunks with dC's f32 accumulator) against the f64 oracle, and memcheck on two;
# - timing, interleaved: cuBLAS's products against flce's (gpu-variants.sh, 2 rounds, the three
#   model shapes), and Llama 3 at 32k.
# Logs under $OUT; the tables last. About 7 minutes.
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
echo "== mn-major probe $(date -u +%T)"
timeout 60 gpu-bundle/gpu-tests sm90-mn-major > "$OUT/gpu-tests-mn-major.log" 2>&1
echo "exit $?" >> "$OUT/gpu-tests-mn-major.log"
echo "== tests with flce's products $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout "${T_TESTS:-200}" gpu-bundle/gpu-tests --small bf16 f16 "2 SMs" \
  > "$OUT/gpu-tests-product.log" 2>&1
echo "exit $?" >> "$OUT/gpu-tests-product.log"
echo "== memcheck $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 all (3000,64,4000)" "bf16 all (257,520,300)" > "$OUT/memcheck-product.log" 2>&1
echo "exit $?" >> "$OUT/memcheck-product.log"
echo "== timing $(date -u +%T)"
mkdir -p /tmp/vp /tmp/vp32
OUT=/tmp/vp BENCH_ARGS="--step-budget-mb 0" timeout 150 bash scripts/gpu-variants.sh 2 \
  "cublas=gpu-bundle/flce" "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" > "$OUT/variants-product.md" 2>&1
OUT=/tmp/vp32 SHAPES=32768,4096,128256 BENCH_ARGS="--step-budget-mb 0" timeout 80 bash scripts/gpu-variants.sh 1 \
  "cublas=gpu-bundle/flce" "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" > "$OUT/variants-product-32k.md" 2>&1
tar czf "$OUT/variants-product-logs.tgz" -C /tmp vp vp32
echo "== done $(date -u +%T)"
grep -h "^test\|^gpu:\|^exit" "$OUT/gpu-tests-mn-major.log" | cut -c1-200
grep -h "FAILED\|^gpu:\|^exit" "$OUT/gpu-tests-product.log" | head
grep -h "ERROR SUMMARY\|^gpu:\|^exit" "$OUT/memcheck-product.log"
tail -n 8 "$OUT/variants-product.md"; tail -n 3 "$OUT/variants-product-32k.md"
