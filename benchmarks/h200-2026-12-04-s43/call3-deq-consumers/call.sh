#!/usr/bin/env bash
# s43 call 3: dE from q formed in place by each consumer warpgroup a k-step ahead (product_q.cu):
# GPU cases (three-product pass: cublas, own-de, de-q = own-de bitwise), memcheck + racecheck on
# de-q, then FLCE_STEP_PRODUCTS cublas / own-de / de-q interleaved (3 rounds), then one profiled
# three-product step per shape and variant (kernel times)
set -uo pipefail
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
FLCE_GPU_TEST_MODES=FusedTiles timeout 150 ./gpu-bundle/gpu-tests --small "(257,520,300)" "(1,64,1000)" \
  "(129,200,5003)" de-chunks chunked-budget "bf16 all (1024,64,8000)" "bf16 plain (1024,64,8000)" > "$OUT/tests.log" 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c '^test .* ok ' $OUT/tests.log) of $(grep -c '^test ' $OUT/tests.log) de-q=$(grep -o 'de-q [0-9]* chunk(s) = own-de bitwise' $OUT/tests.log | wc -l)"
grep -E "FAILED|panicked" "$OUT/tests.log" | cut -c1-300 | head -5
for tool in memcheck racecheck; do
  FLCE_GPU_TEST_MODES=FusedTiles timeout 60 compute-sanitizer --tool $tool ./gpu-bundle/gpu-tests --small "bf16 plain (129,200,5003)" \
    > "$OUT/$tool.log" 2>&1
  echo "$tool rc=$? ${SECONDS}s $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^gpu:' $OUT/$tool.log | tr '\n' ' ')"
done
OUT="$OUT/ab" BENCH_ARGS="--step-budget-mb 8192" timeout 200 bash scripts/gpu-variants.sh 3 \
  "cublas=gpu-bundle/flce:FLCE_STEP_PRODUCTS=cublas" "own=gpu-bundle/flce:FLCE_STEP_PRODUCTS=own-de" \
  "deq=gpu-bundle/flce:FLCE_STEP_PRODUCTS=de-q" > "$OUT/ab.txt" 2>&1
echo "ab rc=$? ${SECONDS}s"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site gpu-bundle/wheels/flce-*.whl
for v in cublas own-de de-q; do for s in llama3 gemma2; do
  FLCE_STEP_PRODUCTS=$v PYTHONPATH=/tmp/site timeout 40 python3 scripts/profile_kernels.py --shape $s --top 8 \
    --configs "auto/auto/8589934592" > $OUT/profile-$s-$v.log 2>&1
  echo "$v $s rc=$? ${SECONDS}s"
  grep -E "^\| (flce_sm90_product|flce_grad_from_compact|sm90_xmma|nvjet|flce_sm90_forward_compact)" $OUT/profile-$s-$v.log | cut -c1-110 | head -5
done; done
(cd "$OUT" && tar czf logs.tgz ab profile-*.log && rm -rf ab profile-*.log)
tail -n 14 "$OUT/ab.txt"
