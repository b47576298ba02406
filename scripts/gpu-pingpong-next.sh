#!/usr/bin/env bash
# The next measurement of the ping-pong forward (perf-notes v34–v35). s25: its fold is hidden but
# its main loop, issued by one consumer warpgroup at a time, ran 1.09–1.19× the cooperative one;
# s26: without the token-tile pairs (FLCE_SM90_CLUSTER=1) it runs 1.079 / 1.030× main (Gemma 2 /
# Llama 3), with them 1.117 / 1.118. This call asks whether the unpaired ping-pong's main loop is
# now the cooperative one's: main / coop with the fold skipped / unpaired ping-pong / unpaired
# ping-pong with the fold skipped, 3 interleaved rounds (scripts/gpu-variants.sh), then ncu of
# the unpaired ping-pong's forward beside main's (tensor-pipe use, warp states: scripts/ncu-sm90.sh).
# Build here first (the ping-pong is in history, reverted by 63b3163; the skip patch is
# measurement only):
#   bash scripts/gpu-prepare.sh                           # any build: for its bundle layout
#   git worktree add /tmp/pp d5dd01b && (cd /tmp/pp && CARGO_TARGET_DIR=/tmp/pp-target \
#     cargo build --release -p flce-cli) && strip -o gpu-bundle/flce-pp /tmp/pp-target/release/flce
#   (cd /tmp/pp && git apply /work/main/benchmarks/h200-2026-12-02-s25/verify-diag/noepi-d5dd01b.patch \
#     && CARGO_TARGET_DIR=/tmp/pp-target cargo build --release -p flce-cli) \
#     && strip -o gpu-bundle/flce-skip /tmp/pp-target/release/flce
#   cp gpu-bundle/flce gpu-bundle/flce-main               # main's forward
# then, carrying gpu-bundle (about 5 minutes):  OUT=$OUT bash scripts/gpu-pingpong-next.sh
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
PP=FLCE_SM90_MAINLOOP=pingpong=1,FLCE_SM90_CLUSTER=1
# the interleaved rounds and their medians: scripts/gpu-variants.sh (its per-round files stay on
# the machine, concatenated into one log: the device returns at most 8 files)
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0" OUT=$runs bash scripts/gpu-variants.sh 3 \
  "main=$B/flce-main" "skip=$B/flce-skip" "pp-c1=$B/flce-pp:$PP" "pp-c1-skip=$B/flce-skip:$PP" > "$OUT/variants.md" 2>&1
grep -H "" "$runs"/var-*.jsonl | sed "s|^$runs/||" > "$OUT/variants.jsonl"  # each row prefixed with its variant and round
OUT=$OUT SHAPE=llama3 KERNEL=forward FLCE=$B/flce-main NAME=main T_NCU=90 bash scripts/ncu-sm90.sh
FLCE_SM90_MAINLOOP=pingpong=1 FLCE_SM90_CLUSTER=1 OUT=$OUT SHAPE=llama3 KERNEL=forward FLCE=$B/flce-pp NAME=pp-c1 \
  CUBLAS=0 T_NCU=90 bash scripts/ncu-sm90.sh
cat "$OUT/variants.md"
