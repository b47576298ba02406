#!/usr/bin/env bash
# s22 call 2, bundle at the commit "Auto takes the sm90 family ... for calls with a bias, softcap or
# smoothing too" (scripts/gpu-prepare.sh): 0. first-call latency of a new set of options (cold and
# warm kernel cache); 1. the GPU cases with options, every dtype, the sm90 band / pairs / SM-limited
# cases; 2. memcheck of the bias and smoothing modules; 3. pytest's option cases (the default
# path: now the sm90 family); 4. the default (auto) against cuBLAS chunks forced, softcap and all
# options, at Llama 3 N 2048 / 32768, Gemma 2 and Qwen 2.5 (2 rounds interleaved).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call2.sh "$OUT/call.sh"
B=gpu-bundle
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $B/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
{
  for o in plain all; do
    for c in cold warm; do
      [ $c = cold ] && export FLCE_CACHE_DIR=$(mktemp -d)
      s=$(date +%s.%N); $B/flce bench --shapes 2048,4096,128256 --iters 1 --step-budget-mb 0 --loss-options $o > /dev/null 2>&1
      echo "first-call latency, $o, $c cache: $(python3 -c "print(round($(date +%s.%N)-$s,2))") s (whole flce bench process)"
    done
  done
} 2>&1 | tee "$OUT/latency.log"
timeout 170 $B/gpu-tests --small "all" "softcap" "bias" "smoothing" "weights" "chunked-budget" > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E "FAILED" "$OUT/tests.log" | cut -c1-200; grep -c "\.\.\. ok" "$OUT/tests.log"; tail -n 1 "$OUT/tests.log"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "bf16 bias (257,520,300)" \
  "bf16 smoothing (257,520,300)" "f16 all (257,520,300)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|gpu:" "$OUT/memcheck.log" | tail -n 2
for r in 1 2; do
  for o in softcap all; do
    for m in auto cublas; do
      for s in 2048,4096,128256 32768,4096,128256 gemma2,qwen25; do
        timeout 60 $B/flce bench --shapes $s --iters 5 --step-budget-mb 0 --loss-options $o --forward $m --backward $m \
          2>&1 | grep -E "^\| [a-z0-9]" | grep -v "^| shape" | awk '!s[$0]++' | sed "s/^/$r $o $m /" >> "$OUT/timing.log"
      done
    done
  done
done
echo "round options mode | shape | cuBLAS | fwd | fwd+bwd"; sort -k2,3 -s "$OUT/timing.log" | cut -d'|' -f1-5
(cd /tmp && timeout 90 python3 -m pytest -q -p no:cacheprovider -x "$OLDPWD/$B/python-tests" -k "softcap or bias or smoothing or option") \
  > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -n 3 "$OUT/pytest.log"
