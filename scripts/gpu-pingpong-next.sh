#!/usr/bin/env bash
# The next measurements of the ping-pong forward (perf-notes v34: its fold is hidden, but its main
# loop, issued by one consumer warpgroup at a time, runs 1.09–1.19× the cooperative one). Times
# the ping-pong with and without the token-tile pairs (FLCE_SM90_CLUSTER=1: in a pair a stage is
# refilled only when the owning consumer of both blocks has released it) beside main with and
# without them, then profiles both forwards with ncu (tensor-pipe use, warp states) at Llama 3.
# Build here first (the ping-pong is in history, reverted by 63b3163):
#   bash scripts/gpu-prepare.sh                           # any build: for its bundle layout
#   git worktree add /tmp/pp d5dd01b && (cd /tmp/pp && CARGO_TARGET_DIR=/tmp/pp-target \
#     cargo build --release -p flce-cli) && strip -o gpu-bundle/flce-pp /tmp/pp-target/release/flce
#   cp gpu-bundle/flce gpu-bundle/flce-main               # main's (or the last verified) forward
# then, carrying gpu-bundle (about 6 minutes):  OUT=$OUT bash scripts/gpu-pingpong-next.sh
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
# the interleaved rounds and their medians: scripts/gpu-variants.sh (its per-round files stay on
# the machine, concatenated into one log: the device returns at most 8 files)
runs=$(mktemp -d)
SHAPES=gemma2,llama3 OUT=$runs bash scripts/gpu-variants.sh 3 "main=$B/flce-main" \
  "main-c1=$B/flce-main:FLCE_SM90_CLUSTER=1" "pp=$B/flce-pp:FLCE_SM90_MAINLOOP=pingpong=1" \
  "pp-c1=$B/flce-pp:FLCE_SM90_MAINLOOP=pingpong=1,FLCE_SM90_CLUSTER=1" > "$OUT/variants.md" 2>&1
grep -H "" "$runs"/var-*.jsonl | sed "s|^$runs/||" > "$OUT/variants.jsonl"  # each row prefixed with its variant and round
OUT=$OUT SHAPE=llama3 KERNEL=forward FLCE=$B/flce-main NAME=main T_NCU=90 bash scripts/ncu-sm90.sh
OUT=$OUT SHAPE=llama3 KERNEL=forward FLCE=$B/flce-pp NAME=pp CUBLAS=0 T_NCU=90 FLCE_SM90_MAINLOOP=pingpong=1 \
  bash scripts/ncu-sm90.sh
cat "$OUT/variants.md"
