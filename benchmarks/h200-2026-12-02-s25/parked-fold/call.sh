#!/usr/bin/env bash
# The parked fold changes (docs/parked/README.md, perf-notes v33) in one device call: checks of
# the candidate, then timing against main in the same rounds. Build here first (3 binaries):
#   git apply docs/parked/sm90-fold-lanes.patch && bash scripts/gpu-prepare.sh && git checkout -- crates
#   cargo build --release -p flce-cli && strip -o gpu-bundle/flce-main target/release/flce
#   git apply docs/parked/sm90-halves-overlap-lanes.patch && cargo build --release -p flce-cli \
#     && strip -o gpu-bundle/flce-halves target/release/flce && git checkout -- crates \
#     && rm crates/flce-cuda/kernels/sm90/forward_halves.cuh
# then, carrying gpu-bundle:  OUT=$OUT bash scripts/gpu-parked-fold.sh
# gpu-bundle/flce + gpu-tests: main with the fold's 4 chains and the plain-only default fold
# (and the softcap slope through softcap_slope in logit_grad / grad_with_options: the f32 and
# softcap cases check it);
# flce-main: main; flce-halves: the forward in 128-column halves with the same chains, run with
# FLCE_SM90_MAINLOOP=halves=1,overlap=P.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 230 $B/gpu-tests --small "bf16 plain" "bf16 none" "bf16 softcap" "bf16 all" "bf16 nosoftcap" "bf16 smoothing" "bf16 bias" "bf16 weights" "f16 all" "f16 softcap" "phases" "f32 softcap" "f32 all" > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -c "\.\.\. ok" "$OUT/tests.log"; grep FAILED "$OUT/tests.log" | cut -c1-250 | head -5; tail -n 1 "$OUT/tests.log"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 plain (300,128,2049)" \
  "bf16 nosoftcap (257,520,300)" "f16 all (257,520,300)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
row() { grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++'; }
for r in 1 2; do
  [ $r = 2 ] && [ $SECONDS -gt 420 ] && { echo "round 2 cut at ${SECONDS}s"; break; }
  for v in main candidate halves3 halves4; do
    case $v in
      main) cmd=($B/flce-main) ;;
      candidate) cmd=($B/flce) ;;
      halves3) cmd=(env FLCE_SM90_MAINLOOP=halves=1,overlap=3 $B/flce-halves) ;;
      halves4) cmd=(env FLCE_SM90_MAINLOOP=halves=1,overlap=4 $B/flce-halves) ;;
    esac
    timeout 60 "${cmd[@]}" bench --shapes gemma2,llama3 --iters 5 2>&1 | row | sed "s/^/$r plain $v /" >> "$OUT/bench.log"
  done
  for v in main candidate; do
    bin=$B/flce; [ $v = main ] && bin=$B/flce-main
    timeout 60 $bin bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 --loss-options softcap 2>&1 \
      | row | sed "s/^/$r softcap $v /" >> "$OUT/bench.log"
  done
done
echo "round opts variant | shape | cuBLAS | fwd | fwd+bwd | three-product"; sort -k2,3 -s "$OUT/bench.log" | cut -d'|' -f1-6
