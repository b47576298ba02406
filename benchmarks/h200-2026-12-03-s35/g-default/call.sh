#!/usr/bin/env bash
# s35 call 3: the new defaults (G staged, its grid within 32 MB of L2) — GPU tests, memcheck and
# racecheck, then interleaved timing against the old G (FLCE_SM90_MAINLOOP=gfold=0,
# FLCE_SM90_G_L2_MB=0) at the model shapes, with logit options (their modules keep G in registers
# on the 3-stage ring), dE only, and Llama 3 at 32k tokens.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 170 $B/gpu-tests --small > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok, $(grep -c FAIL "$OUT/tests.log") FAIL"
{ timeout 60 compute-sanitizer --error-exitcode 9 $B/gpu-tests --small "bf16 none (255,507,123)" "(129,200,5003)" chunked
  echo "memcheck rc=$?"
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "bf16 none (255,507,123)"
  echo "racecheck rc=$?"; } > "$OUT/sanitizers.log" 2>&1
grep -E "rc=|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizers.log"
old="old=$B/flce:FLCE_SM90_MAINLOOP=gfold=0,FLCE_SM90_G_L2_MB=0"
v() { SHAPES="$1" BENCH_ARGS="--iters 5 --step-budget-mb 0 $2" OUT=$OUT/var-$3 bash scripts/gpu-variants.sh $4 "new=$B/flce" "$old" > "$OUT/v-$3.md" 2>&1; tail -n 4 "$OUT/v-$3.md"; }
v gemma2,llama3,qwen25 "" plain 3
v gemma2,llama3 "--options softcap" softcap 2
v llama3 "--options all" all 2
v llama3 "--grads de" de 2
v 32768,4096,128256 "" 32k 2
cat "$OUT"/v-*.md > "$OUT/variants.md"; rm -f "$OUT"/v-*.md
tar czf "$OUT/var.tgz" -C "$OUT" $(cd "$OUT" && ls -d var-*) && rm -rf "$OUT"/var-*
