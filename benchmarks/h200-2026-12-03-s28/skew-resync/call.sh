#!/usr/bin/env bash
# s28 call 1: the consumer skew re-set at every tile (FLCE_SM90_MAINLOOP=skew=S,resync=1, 78d62df).
# gpu-bundle = 78d62df (default SASS = main's). Checks under skew=3 and 2 with resync on the
# shapes whose D gives ≥ 4 k-steps (resync is off below), then forward / fwd+bwd / three-product
# (4 GB) of main and skew 2, 3, 4 with resync, 3 interleaved rounds; sanitizers last.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
FLCE_SM90_MAINLOOP=skew=3,resync=1 timeout 150 $B/gpu-tests --small "(129,200,5003)" "(257,520,300)" "(640,520,3000)" \
  "llama3 sampled" > "$OUT/tests.log" 2>&1
echo "skew3 tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|failed" "$OUT/tests.log" | cut -c1-300 | head -6; tail -n 1 "$OUT/tests.log"
FLCE_SM90_MAINLOOP=skew=2,resync=1 timeout 40 $B/gpu-tests --small "bf16 all (257,520,300)" "f16 plain (129,200,5003)" \
  "bf16 nosoftcap (257,520,300)" >> "$OUT/tests.log" 2>&1
echo "skew2 tests rc=$? at ${SECONDS}s"; tail -n 1 "$OUT/tests.log"
runs=$(mktemp -d)
SHAPES=gemma2,llama3 BENCH_ARGS="--iters 5" OUT=$runs timeout 330 bash scripts/gpu-variants.sh 3 \
  "main=$B/flce" "s2r=$B/flce:FLCE_SM90_MAINLOOP=skew=2,resync=1" "s3r=$B/flce:FLCE_SM90_MAINLOOP=skew=3,resync=1" \
  "s4r=$B/flce:FLCE_SM90_MAINLOOP=skew=4,resync=1" > "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"
grep -H "" $runs/var-*.jsonl | sed "s|^$runs/||" > "$OUT/variants.jsonl"
for tool in memcheck synccheck racecheck; do
  [ $SECONDS -gt 540 ] && break
  FLCE_SM90_MAINLOOP=skew=3,resync=1 timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small \
    "bf16 all (257,520,300)" "bf16 plain (129,200,5003)" > "$OUT/$tool.log" 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|gpu:" "$OUT/$tool.log" | tail -n 2
done
cat "$OUT/variants.md"
