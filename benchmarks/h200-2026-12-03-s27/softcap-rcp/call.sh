#!/usr/bin/env bash
# One device call for docs/parked/softcap-rcp-fma.patch: the softcap's reciprocal on the FMA pipe
# for a share of each tile's columns (FLCE_SM90_MAINLOOP=rcpf=F,rcpg=G; perf-notes v35 predicts
# ~29 of 32 in the forward and ~17 in G, the softcap forward −2 to −3% at Gemma 2). Checks (the
# loss-math probe with the FMA reciprocal, softcap and "all" cases at the shares timed, memcheck),
# then softcap fwd+bwd of main (the patch at shares 0 = main's kernels) against shares (24,12),
# (29,17), (32,24), 5 interleaved rounds (scripts/gpu-variants.sh), and "all" at the middle one.
# Build here first:
#   git worktree add /tmp/nx HEAD && (cd /tmp/nx && git apply /work/main/docs/parked/softcap-rcp-fma.patch \
#     && bash scripts/gpu-prepare.sh) && rm -rf gpu-bundle && cp -r /tmp/nx/gpu-bundle gpu-bundle
# then, carrying gpu-bundle:  OUT=$OUT bash scripts/gpu-softcap-rcp.sh
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
M=FLCE_SM90_MAINLOOP
timeout 40 $B/gpu-tests loss-math sm90-mn-major > "$OUT/tests.log" 2>&1
for s in "rcpf=29,rcpg=17" "rcpf=32,rcpg=32"; do
  env $M=$s timeout 60 $B/gpu-tests --small "bf16 softcap" "f16 softcap" "f32 softcap (300" "bf16 all (257" \
    "f16 all (257" >> "$OUT/tests.log" 2>&1
done
echo "tests: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok, $(grep -c FAILED "$OUT/tests.log") failed"
grep -E "loss-math \.\.\.|FAILED" "$OUT/tests.log" | cut -c1-300 | head -6
env $M=rcpf=29,rcpg=17 timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small \
  "bf16 softcap (300,128,2049)" "f16 all (257,520,300)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0 --loss-options softcap" OUT=$runs/softcap timeout 220 \
  bash scripts/gpu-variants.sh 5 "main=$B/flce" "r24=$B/flce:$M=rcpf=24,rcpg=12" "r29=$B/flce:$M=rcpf=29,rcpg=17" \
  "r32=$B/flce:$M=rcpf=32,rcpg=24" > "$OUT/variants-softcap.md" 2>&1
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0 --loss-options all" OUT=$runs/all timeout 90 \
  bash scripts/gpu-variants.sh 3 "main=$B/flce" "r29=$B/flce:$M=rcpf=29,rcpg=17" > "$OUT/variants-all.md" 2>&1
for o in softcap all; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
echo "== softcap"; cat "$OUT/variants-softcap.md"; echo "== all"; cat "$OUT/variants-all.md"
