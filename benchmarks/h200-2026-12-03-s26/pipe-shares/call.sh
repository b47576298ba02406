#!/usr/bin/env bash
# s26 call 1: the epilogues' exponentials and the softcap's reciprocal shared between the MUFU and
# FMA pipes (types.cuh exp2_fma / rcp_fma_1_2, FLCE_SM90_MAINLOOP expf/expg/rcpf/rcpg; perf-notes
# v35). Binaries: flce + gpu-tests = the working tree on a50811a; flce-main = a50811a.
# Checks (pipe-math probe, option cases in every dtype, memcheck), then forward and fwd+bwd of
# main / zero (shares 0: the FFMA form only) / def (7, 4, 27, 10) / hi (10, 6, 32, 16), plain and
# softcap, 2 interleaved rounds (scripts/gpu-variants.sh).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 150 $B/gpu-tests --small pipe-math "bf16 plain" "bf16 softcap" "bf16 all" "f16 softcap" "f16 plain" \
  "f32 softcap" "f32 all" > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -c "\.\.\. ok" "$OUT/tests.log"; grep -E "FAILED|pipe-math" "$OUT/tests.log" | cut -c1-400 | head -8; tail -n 1 "$OUT/tests.log"
timeout 70 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 plain (300,128,2049)" \
  "bf16 softcap (300,128,2049)" "f16 all (257,520,300)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
runs=$(mktemp -d)
V=("main=$B/flce-main" "zero=$B/flce:FLCE_SM90_MAINLOOP=expf=0,expg=0,rcpf=0,rcpg=0" "def=$B/flce"
   "hi=$B/flce:FLCE_SM90_MAINLOOP=expf=10,expg=6,rcpf=32,rcpg=16")
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0" OUT=$runs/plain bash scripts/gpu-variants.sh 2 "${V[@]}" \
  > "$OUT/variants-plain.md" 2>&1
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5 --step-budget-mb 0 --loss-options softcap" OUT=$runs/softcap \
  bash scripts/gpu-variants.sh 2 "${V[@]}" > "$OUT/variants-softcap.md" 2>&1
for o in plain softcap; do grep -H "" $runs/$o/var-*.jsonl | sed "s|^$runs/||"; done > "$OUT/variants.jsonl"
echo "== plain"; cat "$OUT/variants-plain.md"; echo "== softcap"; cat "$OUT/variants-softcap.md"
