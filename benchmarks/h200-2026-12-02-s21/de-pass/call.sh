#!/usr/bin/env bash
# dE in a pass of its own (plan::with_de_pass, FLCE_BWD_DE_PASS=1; built 2026-12-02, twentieth
# session, not yet run on a GPU): the backward as a vocabulary-outer pass for dC and db, then a
# token-outer pass for dE — five products instead of the default's four plus its tail pass past
# N ≈ V/3, within a tenth of the gradient bytes at every N. One device call (~7 min), from the
# repository root after scripts/gpu-prepare.sh, carry gpu-bundle:
#   OUT=$OUT bash scripts/gpu-de-pass.sh
# 1. the GPU tests' de-pass cases (with the sm90 forward's band, pairs and unpaired cases) (every option with a bias, N above V, reduction none, N = 1, a
#    budget that cuts both passes into token chunks) and compute-sanitizer memcheck of the cut
#    case; 2. Llama 3 at 131,072 tokens sampled against f64 with the two passes; 3. forward+backward
#    (default budget, four products) one pass against two at Llama 3 8k / 32k / 65k / 128k and
#    Gemma 2 at 128k. Prediction (perf-notes v26): 128k 0.91-0.97x, 65k ~1.03x, slower below.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 180 gpu-bundle/gpu-tests --small "de-pass" " band " "pairs" "unpaired" > "$OUT/tests-de-pass.log" 2>&1
echo "de-pass tests rc=$?"; tail -n 1 "$OUT/tests-de-pass.log"
timeout 120 compute-sanitizer --tool memcheck gpu-bundle/gpu-tests --small "de-pass cut" > "$OUT/memcheck-de-pass.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck-de-pass.log" | tail -n 2
FLCE_BWD_DE_PASS=1 timeout 200 gpu-bundle/gpu-tests "llama3-128k sampled fused" > "$OUT/tests-128k.log" 2>&1
echo "128k rc=$?"; grep -E "^test" "$OUT/tests-128k.log" | cut -c1-200
OUT=/tmp/vdepass SHAPES="llama3 32768,4096,128256 65536,4096,128256 131072,4096,128256 131072,2304,256000" \
  BENCH_ARGS="--step-budget-mb 0 --iters 3" timeout 330 bash scripts/gpu-variants.sh 2 "one=gpu-bundle/flce" \
  "two=gpu-bundle/flce:FLCE_BWD_DE_PASS=1" > "$OUT/variants.md" 2>&1
tar czf "$OUT/vdepass.tgz" -C /tmp vdepass
grep -h "then dE" /tmp/vdepass/var-two-1.log | cut -c1-60,180-400 | head -5
grep -v "^|---" "$OUT/variants.md" | cut -d'|' -f2-6,10-11
