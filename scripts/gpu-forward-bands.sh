#!/usr/bin/env bash
# The sm90 forward in launches over bands of token tiles (FLCE_SM90_FORWARD_BAND, plan::Sm90Tuning's
# forward_band; docs/perf-notes.md v25's way (c) to keep the blocks sharing C's boxes through L2
# at large N; run 2026-12-02 at e597c1d, benchmarks/h200-2026-12-02-s20/bands/, bands of 12 the
# default past 16k tokens since 44dbf9a: "one" below sets FLCE_SM90_FORWARD_BAND=0 for one
# launch). One device call (~3 min), from the
# repository root after scripts/gpu-prepare.sh, carry gpu-bundle:
#   OUT=$OUT bash scripts/gpu-forward-bands.sh
# 1. the GPU tests' band cases (several bands, a shorter last band, every option, f16, 2 SMs)
#    and compute-sanitizer memcheck of one of them; 2. forward / fwd+bwd at 65k and 128k tokens:
#    bands of 11 and 12 token tiles (12 × 11 / 11 × 12 blocks a launch) against one launch (the
#    2026-12-02 run also timed v25's way (b), the grid of fewest splits, since removed).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 150 gpu-bundle/gpu-tests --small " band " > "$OUT/tests-band.log" 2>&1
echo "band tests rc=$?"; tail -n 2 "$OUT/tests-band.log"
timeout 120 compute-sanitizer --tool memcheck gpu-bundle/gpu-tests --small "plain (3000,64,12000) band 3" \
  > "$OUT/memcheck-band.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|passed" "$OUT/memcheck-band.log" | tail -n 2
OUT=/tmp/vbands SHAPES="65536,4096,128256 131072,4096,128256" BENCH_ARGS="--step-budget-mb 0 --iters 3" \
  timeout 300 bash scripts/gpu-variants.sh 2 "one=gpu-bundle/flce:FLCE_SM90_FORWARD_BAND=0" "band12=gpu-bundle/flce:FLCE_SM90_FORWARD_BAND=12" \
  "band11=gpu-bundle/flce:FLCE_SM90_FORWARD_BAND=11" \
  > "$OUT/variants.md" 2>&1
tar czf "$OUT/vbands.tgz" -C /tmp vbands
grep -v "^|---" "$OUT/variants.md" | cut -d'|' -f2-6,10-11
