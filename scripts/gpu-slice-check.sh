#!/usr/bin/env bash
# The vocabulary-slice pass's open check (docs/perf-notes.md v46), one device call (~8 min;
# carry gpu-bundle, built by scripts/gpu-prepare.sh):
#  1. its GPU cases — each oracle case that takes compact logits runs the slice with the rest's G
#     and dE's accumulator in the workspace, and with its first chunks' G in dC's unwritten rows
#     and dE's accumulator in dC's head rows (SliceRest::dc_scratch, de_in_dc: built in s37,
#     first run by this script in s38) — and memcheck on one;
#  2. the rests timed against each other and against the default at 384 MB / 512 MB / 1 GB
#     (scripts/gpu-variants.sh, two rounds: its fwd+bwd column is the default's four products, its
#     three-product column the slice pass and its head; FLCE_SLICE_MIN_SHARE=0 so that the small
#     heads the planner skips by default are timed too): "uniform" (the s37 default), "scratch"
#     (FLCE_SLICE_DC_SCRATCH=1), "in-dc" (and FLCE_SLICE_DE_IN_DC=1: a larger head, 2·D rows more).
# Run on the H200 2026-12-04 (benchmarks/h200-2026-12-04-s38/slice-rests/): both correct and
# sanitized, in-dc the fastest, so both are the default since (the knobs' =0 turns them off, as the
# variants here do) and MIN_SLICE_HEAD_SHARE moved to 1/16 (plan/slice.rs).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
timeout 150 $B/gpu-tests --small "nosoftcap" "bf16 plain (" "bf16 none (" > "$OUT/tests-slice.log" 2>&1
echo "slice cases rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-slice.log") ok, $(grep -c FAIL "$OUT/tests-slice.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-slice.log" | head -5 | cut -c1-300
timeout 60 env FLCE_GPU_TEST_MODES=FusedTiles compute-sanitizer --error-exitcode 9 $B/gpu-tests --small \
  "bf16 nosoftcap (300,128,2049)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck.log"
for mb in 384 512 1024; do
  SHAPES=gemma2,llama3,qwen25 BENCH_ARGS="--iters 5 --step-budget-mb $mb" OUT=$OUT/var-$mb \
    bash scripts/gpu-variants.sh 2 "uniform=$B/flce:FLCE_SLICE_MIN_SHARE=0,FLCE_SLICE_DC_SCRATCH=0,FLCE_SLICE_DE_IN_DC=0" \
    "scratch=$B/flce:FLCE_SLICE_MIN_SHARE=0,FLCE_SLICE_DC_SCRATCH=1,FLCE_SLICE_DE_IN_DC=0" \
    "in-dc=$B/flce:FLCE_SLICE_MIN_SHARE=0,FLCE_SLICE_DC_SCRATCH=1,FLCE_SLICE_DE_IN_DC=1" > "$OUT/v-$mb.md" 2>&1
  echo "## $mb MB"; tail -n 10 "$OUT/v-$mb.md"
done
cat "$OUT"/v-*.md > "$OUT/variants.md" && rm -f "$OUT"/v-*.md
tar czf "$OUT/var.tgz" -C "$OUT" $(cd "$OUT" && ls -d var-*) && rm -rf "$OUT"/var-*
echo "total ${SECONDS}s"
