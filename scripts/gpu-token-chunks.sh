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
# Then: what is correct and faster becomes the default (knobs.rs token_chunks_knob), perf-notes.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt"
# (every small case: CudaLoss::one_pass runs backward_steps::one_pass_steps since s38, every
# backward path — the token-chunks cases among them)
timeout 300 $B/gpu-tests --small > "$OUT/tests-small.log" 2>&1
echo "small cases rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-small.log") ok, $(grep -c FAIL "$OUT/tests-small.log") FAIL"
grep -E "FAIL|panicked" "$OUT/tests-small.log" | head -5 | cut -c1-300; tail -n 1 "$OUT/tests-small.log"
timeout 100 env FLCE_BWD_TOKEN_CHUNKS=auto $B/gpu-tests --small "long-tail" "de-head" "de-pass" > "$OUT/tests-auto.log" 2>&1
echo "auto cases rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-auto.log") ok, $(grep -c FAIL "$OUT/tests-auto.log") FAIL"
timeout 90 compute-sanitizer --error-exitcode 9 $B/gpu-tests --small "bf16 all (3000,64,12000) token-chunks" \
  > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck.log"
SHAPES="32768,4096,128256 65536,4096,128256 131072,4096,128256" \
  BENCH_ARGS="--iters 3 --step-budget-mb 0" OUT=$OUT/var timeout 240 bash scripts/gpu-variants.sh 2 \
  "today=$B/flce:FLCE_BWD_TOKEN_CHUNKS=0" "always=$B/flce:FLCE_BWD_TOKEN_CHUNKS=1" \
  "one-pass=$B/flce:FLCE_BWD_TOKEN_CHUNKS=1,FLCE_BWD_DE_PASS=0" \
  > "$OUT/variants.md" 2>&1
tail -n 20 "$OUT/variants.md"
grep -h "^| 65536x\|^| 131072x" "$OUT"/var/var-*-1.log | cut -d'|' -f2,5,9 | head -6
tar czf "$OUT/var.tgz" -C "$OUT" var && rm -rf "$OUT/var"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site $B/wheels/flce-*.whl
PYTHONPATH=/tmp/site timeout 150 python3 scripts/profile_kernels.py --shape gemma2 --steps 3 --host --top 14 --gaps 4 \
  --configs "auto/auto/min,auto/auto/1073741824" > "$OUT/profile-loop.log" 2>&1
echo "profile rc=$? at ${SECONDS}s"; grep -E "^## |GPU idle|^- " "$OUT/profile-loop.log" | head -12
echo "total ${SECONDS}s"
