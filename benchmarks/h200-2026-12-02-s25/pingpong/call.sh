#!/usr/bin/env bash
# The plain forward's ping-pong schedule (FLCE_SM90_MAINLOOP=pingpong=1, kernels/sm90/
# mainloop_pingpong.cuh, perf-notes v34) in one device call: its GPU cases and memcheck, the
# default mode's cases of the same build, then timing against main in interleaved rounds.
# Build here first (3 binaries):
#   bash scripts/gpu-prepare.sh                       # gpu-bundle/flce + gpu-tests: this tree
#   sed -i 's/^#define FOLD_LANES 1$/#define FOLD_LANES 4/' crates/flce-cuda/kernels/sm90/forward.cu
#   cargo build --release -p flce-cli && strip -o gpu-bundle/flce-l4 target/release/flce
#   git checkout -- crates/flce-cuda/kernels/sm90/forward.cu   # (or sed back)
#   main's flce (a worktree at the last verified commit) as gpu-bundle/flce-main
# then, carrying gpu-bundle:  OUT=$OUT bash scripts/gpu-pingpong.sh
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
PP=pingpong=1
# a hang (a turn never passed) shows here first, in 40 s
FLCE_SM90_MAINLOOP=$PP timeout 40 $B/gpu-tests --small "bf16 plain (300,128,2049)" > "$OUT/smoke.log" 2>&1
smoke=$?; echo "smoke rc=$smoke"; tail -n 1 "$OUT/smoke.log"
if [ $smoke = 0 ]; then
  FLCE_SM90_MAINLOOP=$PP timeout 170 $B/gpu-tests --small "bf16 plain" "bf16 none" "bf16 softcap" "bf16 all" \
    "bf16 nosoftcap" "bf16 smoothing" "bf16 bias" "bf16 weights" "bf16 ignore7" "f16 all" "f16 plain" "phases" \
    > "$OUT/tests-pingpong.log" 2>&1
  echo "tests pingpong rc=$?"; grep FAILED "$OUT/tests-pingpong.log" | cut -c1-250 | head -5; tail -n 1 "$OUT/tests-pingpong.log"
  FLCE_SM90_MAINLOOP=$PP timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small \
    "bf16 plain (300,128,2049)" "bf16 all (257,520,300)" "f16 all (1,64,1000)" > "$OUT/memcheck-pingpong.log" 2>&1
  echo "memcheck pingpong rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck-pingpong.log" | tail -n 2
fi
timeout 60 $B/gpu-tests --small "bf16 all" "bf16 plain" "f16 softcap" "f32 softcap" > "$OUT/tests-default.log" 2>&1
echo "tests default rc=$?"; grep FAILED "$OUT/tests-default.log" | cut -c1-250 | head -5; tail -n 1 "$OUT/tests-default.log"
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
for r in 1 2 3; do
  [ $r -gt 1 ] && [ $SECONDS -gt 470 ] && { echo "round $r cut at ${SECONDS}s"; break; }
  for v in main tree pp pp-l4; do
    case $v in
      main) cmd=($B/flce-main) ;;
      tree) cmd=($B/flce) ;;
      pp) cmd=(env FLCE_SM90_MAINLOOP=$PP $B/flce) ;;
      pp-l4) cmd=(env FLCE_SM90_MAINLOOP=$PP $B/flce-l4) ;;
    esac
    [ $smoke = 0 ] || [ "${v#pp}" = "$v" ] || continue
    timeout 60 "${cmd[@]}" bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 2>&1 | row \
      | sed "s/^/$r plain $v /" >> "$OUT/bench.log"
  done
  for v in main pp; do
    cmd=($B/flce-main); [ $v = pp ] && cmd=(env FLCE_SM90_MAINLOOP=$PP $B/flce)
    [ $smoke = 0 ] || [ $v = main ] || continue
    timeout 60 "${cmd[@]}" bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 --loss-options softcap 2>&1 \
      | row | sed "s/^/$r softcap $v /" >> "$OUT/bench.log"
  done
done
echo "round opts variant | shape | cuBLAS | fwd | fwd+bwd"; sort -k2,3 -s "$OUT/bench.log" | cut -d'|' -f1-5
