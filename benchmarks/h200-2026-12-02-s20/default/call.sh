#!/usr/bin/env bash
# s20 call 3: the forward's bands of 12 token tiles past 16k tokens as the default (plan::SM90_LARGE_N_BAND):
# band GPU cases, the 128k sampled case (now banded), and default against one launch (FLCE_SM90_FORWARD_BAND=0).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call3.sh "$OUT/call.sh"
timeout 120 gpu-bundle/gpu-tests --small " band " > "$OUT/tests-band.log" 2>&1; echo "band tests rc=$?"; tail -n 1 "$OUT/tests-band.log"
timeout 220 gpu-bundle/gpu-tests "llama3-128k sampled fused" > "$OUT/tests-128k.log" 2>&1; echo "128k rc=$?"; grep -E "^test|gpu:" "$OUT/tests-128k.log" | cut -c1-250
OUT=/tmp/vdef SHAPES="32768,4096,128256 65536,4096,128256 131072,4096,128256" BENCH_ARGS="--step-budget-mb 0 --iters 3" \
  timeout 240 bash scripts/gpu-variants.sh 2 "bands=gpu-bundle/flce" "one=gpu-bundle/flce:FLCE_SM90_FORWARD_BAND=0" > "$OUT/variants.md" 2>&1
tar czf "$OUT/vdef.tgz" -C /tmp vdef
grep -h "fwd Sm90" /tmp/vdef/var-bands-1.log | cut -c1-40,200-420 | head -3
grep -v "^|---" "$OUT/variants.md" | cut -d'|' -f2-6,10-11
