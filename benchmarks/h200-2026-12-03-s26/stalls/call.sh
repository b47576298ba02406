#!/usr/bin/env bash
# s26 call 2: where the forward's fold waits. Call 1 moved most of the softcap's reciprocals and a
# fifth of the fold's exponentials from MUFU to the FMA pipe with no change in time, so the fold
# is not MUFU-bound. Here: ncu warp-stall samples by SASS line (SourceCounters) of main's forward
# at Gemma 2, plain and softcap, and of the ping-pong forward (d5dd01b, its fold hidden, its main
# loop slower: perf-notes v34); the ping-pong with and without token-tile pairs timed beside main
# (scripts/gpu-pingpong-next.sh's variants, 2 rounds); the pipe-math probe (cut by call 1's limit).
# Binaries: flce + gpu-tests = the working tree on a50811a; flce-main = a50811a; flce-pp = d5dd01b.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle; L=/tmp/src; mkdir -p $L
timeout 60 $B/gpu-tests pipe-math > "$OUT/pipe-math.log" 2>&1; echo "pipe-math rc=$?"; grep -E "pipe-math|gpu:" "$OUT/pipe-math.log" | cut -c1-600
src() {  # name binary [bench options…]: the forward's stall samples by SASS line, CSV
  local name=$1 bin=$2; shift 2
  timeout 130 ncu --clock-control none -k 'regex:^flce_sm90_forward$' -c 1 --section SpeedOfLight \
    --section WarpStateStats --section SourceCounters --page source --csv --print-source sass \
    $bin bench --shapes gemma2 --forward auto --backward auto --step-budget-mb 0 "$@" > $L/$name.csv 2>&1
  echo "ncu $name rc=$? at ${SECONDS}s, $(wc -l < $L/$name.csv) lines"
}
src main-plain $B/flce-main
src main-softcap $B/flce-main --loss-options softcap
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0" OUT=$runs timeout 200 bash scripts/gpu-variants.sh 2 \
  "main=$B/flce-main" "main-c1=$B/flce-main:FLCE_SM90_CLUSTER=1" "pp=$B/flce-pp:FLCE_SM90_MAINLOOP=pingpong=1" \
  "pp-c1=$B/flce-pp:FLCE_SM90_MAINLOOP=pingpong=1,FLCE_SM90_CLUSTER=1" > "$OUT/variants.md" 2>&1
grep -H "" "$runs"/var-*.jsonl | sed "s|^$runs/||" > "$OUT/variants.jsonl"
echo "variants at ${SECONDS}s"
[ $SECONDS -lt 440 ] && FLCE_SM90_MAINLOOP=pingpong=1 src pp-plain $B/flce-pp
tar czf "$OUT/source.tgz" -C /tmp src
cat "$OUT/variants.md"
