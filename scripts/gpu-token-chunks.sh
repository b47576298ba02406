#!/usr/bin/env bash
# The backward's vocabulary-outer plans in token chunks (plan::with_token_chunks: the one pass's
# tail plans, and the dE pass's first pass; built in s38 without device time; off unless
# FLCE_BWD_TOKEN_CHUNKS says otherwise), one device call (~9 min; carry gpu-bundle, built by
# scripts/gpu-prepare.sh):
#  1. correct: every small GPU case (the backward's steps as values since s38: every path), the
#     "token-chunks" ones among them (forced on every family: a tail within a third, two tail
#     chunks, the whole vocabulary with accumulator rows in the workspace, the dE pass's first
#     pass; db, class weights, reduction none; each against f64 and twice bitwise), then the
#     long-tail, de-head and de-pass cases under FLCE_BWD_TOKEN_CHUNKS=auto (the plans the model
#     picks), memcheck on one;
#  2. timed: the default fwd+bwd at Llama 3's 32k / 65k / 128k tokens, FLCE_BWD_TOKEN_CHUNKS=0
#     (today's plans) / 1 (wherever one exists; "auto" takes the same at 65k and 128k by the
#     model, none at 32k), two rounds (scripts/gpu-variants.sh: its fwd+bwd column). The model
#     predicts 65k: 121 -> 86 ms of what differs (-35 ms of ~494); 128k's one pass 407 -> 261
#     (the dE pass is still taken there: "one-pass" times the one pass in token chunks against
#     it); 32k: not faster.
#  3. v46's open host gap (0.62 ms before the trading passes' first kernel in one-step profiles):
#     scripts/profile_kernels.py --steps 3 --host at Gemma 2, the default and a 1 GB slice.
# Run in s39 (benchmarks/h200-2026-12-04-s39/token-chunks/): correct everywhere, not faster (32k
# 1.067, 65k 0.984, 128k the same plan) — the knob stays off. Steps 1-2 fit one call (the small
# cases take what is left of 560 s; the rest of them, the memcheck and 3 need another call, as in
# s39: benchmarks/h200-2026-12-04-s39/rest-tests/call2.sh).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
timeout 90 $B/gpu-tests --small "token-chunks" > "$OUT/tests-tc.log" 2>&1
echo "token-chunks cases rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-tc.log") ok, $(grep -c FAIL "$OUT/tests-tc.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-tc.log" | head -5 | cut -c1-300; tail -n 1 "$OUT/tests-tc.log"
timeout 60 env FLCE_BWD_TOKEN_CHUNKS=auto $B/gpu-tests --small "long-tail" "de-head" "de-pass" > "$OUT/tests-auto.log" 2>&1
echo "auto cases rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-auto.log") ok, $(grep -c FAIL "$OUT/tests-auto.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-auto.log" | head -3 | cut -c1-300
SHAPES="32768,4096,128256 65536,4096,128256 131072,4096,128256" \
  BENCH_ARGS="--iters 3 --step-budget-mb 0" OUT=$OUT/var timeout 230 bash scripts/gpu-variants.sh 2 \
  "today=$B/flce:FLCE_BWD_TOKEN_CHUNKS=0" "always=$B/flce:FLCE_BWD_TOKEN_CHUNKS=1" \
  "one-pass=$B/flce:FLCE_BWD_TOKEN_CHUNKS=1,FLCE_BWD_DE_PASS=0" \
  > "$OUT/variants.md" 2>&1
echo "variants rc=$? at ${SECONDS}s"; tail -n 12 "$OUT/variants.md"
tar czf "$OUT/var.tgz" -C "$OUT" var && rm -rf "$OUT/var"
left=$((560 - SECONDS)); [ $left -gt 20 ] || left=20
timeout $left $B/gpu-tests --small > "$OUT/tests-small.log" 2>&1
echo "small cases rc=$? (limit ${left}s) at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-small.log") ok, $(grep -c FAIL "$OUT/tests-small.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-small.log" | head -5 | cut -c1-300; tail -n 1 "$OUT/tests-small.log"
echo "total ${SECONDS}s"
