#!/usr/bin/env bash
# s25 call 5 (measurement): ping-pong variants on d5dd01b, beside main (d556244) and d5dd01b's
# ping-pong (pp). rows = pp-rows.patch, FLCE_SM90_MAINLOOP=pingpong=2: each consumer keeps its 64
# rows and 64 × 256 wgmma tile, the consumers take turns per vocabulary tile (C's box loaded once
# per consumer); pp2 = pp-inflight2.patch (two wgmma groups in flight); pp2n = the same without
# the turn barriers (pp-inflight2-noturn.patch).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
FLCE_SM90_MAINLOOP=pingpong=2 timeout 60 $B/gpu-tests-rows --small "bf16 plain" "bf16 all" "bf16 none" "f16 all" \
  > "$OUT/tests-rows.log" 2>&1
echo "tests rows rc=$?"; grep -c "\.\.\. ok" "$OUT/tests-rows.log"; grep FAILED "$OUT/tests-rows.log" | cut -c1-250 | head -3; tail -n 1 "$OUT/tests-rows.log"
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
declare -A dead
for r in 1 2 3; do
  [ $r -gt 1 ] && [ $SECONDS -gt 140 ] && { echo "round $r cut at ${SECONDS}s"; break; }
  for v in main rows pp pp2 pp2n; do
    [ -n "${dead[$v]:-}" ] && continue
    case $v in
      main) cmd=($B/flce-main) ;;
      rows) cmd=(env FLCE_SM90_MAINLOOP=pingpong=2 $B/flce-rows) ;;
      pp) cmd=(env FLCE_SM90_MAINLOOP=pingpong=1 $B/flce-pp) ;;
      pp2) cmd=(env FLCE_SM90_MAINLOOP=pingpong=1 $B/flce-pp2) ;;
      pp2n) cmd=(env FLCE_SM90_MAINLOOP=pingpong=1 $B/flce-pp2n) ;;
    esac
    timeout 30 "${cmd[@]}" bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 > "$OUT/raw.txt" 2>&1
    rc=$?; [ $rc = 0 ] || { echo "$v rc=$rc"; dead[$v]=1; }
    row < "$OUT/raw.txt" | sed "s/^/$r plain $v /" >> "$OUT/bench.log"
  done
done
rm -f "$OUT/raw.txt"
echo "round opts variant | shape | cuBLAS | fwd | fwd+bwd"; sort -k2,3 -s "$OUT/bench.log" | cut -d'|' -f1-5
