#!/usr/bin/env bash
# s41 call 4: the GPU cases call 3 did not reach (de-pass, token chunks, frozen classifier, phases)
# on 5912082, and issue 10's gap product by product on it (scripts/profile_kernels.py
# --by-product, the default budget, 3 steps averaged, at the model shapes).
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; L=/tmp/logs4; mkdir -p $L
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $L/gpu.txt
timeout 200 ./gpu-bundle/gpu-tests --small "de-pass" "token-chunks" "frozen-classifier" "phases" > $L/tests.log 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c ' ok ' $L/tests.log) failed=$(grep -c 'FAILED' $L/tests.log) of $(grep -c '^test ' $L/tests.log)"; grep -E "FAILED|panicked" $L/tests.log | head -5
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
for s in gemma2 llama3 qwen25; do
  PYTHONPATH=/tmp/site timeout 60 python3 scripts/profile_kernels.py --shape $s --steps 3 --top 10 --gaps 3 \
    --by-product --configs "auto/auto/min" > $L/products-$s.log 2>&1
  echo "== $s rc=$? at ${SECONDS}s"
  grep -E "^\| (forward|G|dE|dC|other|step) " $L/products-$s.log
done
tar czf "$FINAL/logs.tgz" -C /tmp logs4
