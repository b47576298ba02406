#!/usr/bin/env bash
# s26 call 5: the landing form (call 4's tree with the fold's chains knob removed: the sm90
# default, softcap-only and bias + softcap modules compile to the same SASS as call 4's; the
# bias, smoothing and "all" modules' register allocation differs). Checks of those modules, then
# "all" and bias timed against main, 3 rounds. Binaries: flce + gpu-tests = the tree; flce-main = a50811a.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 100 $B/gpu-tests --small "bf16 all (" "f16 all" "bias" "smoothing" "weights" "zloss" > "$OUT/tests.log" 2>&1
echo "tests rc=$?: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep FAILED "$OUT/tests.log" | cut -c1-300 | head -5; tail -n 1 "$OUT/tests.log"
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 all (257,520,300)" \
  "f16 smoothing" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
runs=$(mktemp -d)
for o in all bias; do
  SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0 --loss-options $o" OUT=$runs/$o timeout 80 \
    bash scripts/gpu-variants.sh 3 "main=$B/flce-main" "final=$B/flce" > "$OUT/variants-$o.md" 2>&1
  echo "== $o"; cat "$OUT/variants-$o.md"
done
for o in all bias; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
