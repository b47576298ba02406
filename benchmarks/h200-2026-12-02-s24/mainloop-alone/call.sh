#!/usr/bin/env bash
# s24 call 3: the sm90 forward's main loop alone, without its fold (measurement-only binaries,
# not merged: the patches are mainloop-alone/noepi-*.patch): flce-noepi-0028e8e = main with
# Sm90ForwardEpilogue::tile returning at once (128 × 256 tiles); flce-noepi-9c6ad9a = the
# reverted halves commit with the same patch, run with FLCE_SM90_MAINLOOP=halves=1 (128 × 128
# tiles). Beside the bundle's flce (main, 0028e8e) in the same rounds: how much of the forward's
# time over cuBLAS is the fold, how much the main loop. (Their losses are meaningless.)
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call3.sh "$OUT/call.sh"
B=gpu-bundle
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
for r in 1 2 3; do
  [ $r = 3 ] && [ $SECONDS -gt 200 ] && { echo "round 3 cut at ${SECONDS}s"; break; }
  timeout 60 $B/flce bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 2>&1 | row | sed "s/^/$r main /" >> "$OUT/bench.log"
  timeout 60 $B/flce-noepi-0028e8e bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 2>&1 | row | sed "s/^/$r mainloop-256 /" >> "$OUT/bench.log"
  timeout 60 env FLCE_SM90_MAINLOOP=halves=1 $B/flce-noepi-9c6ad9a bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 2>&1 | row | sed "s/^/$r mainloop-128 /" >> "$OUT/bench.log"
done
echo "round variant | shape | cuBLAS | fwd | fwd+bwd"; sort -k2,2 -s "$OUT/bench.log" | cut -d'|' -f1-5
