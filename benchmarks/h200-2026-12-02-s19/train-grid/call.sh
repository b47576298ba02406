#!/usr/bin/env bash
# s19 call 4 (at 5106265): (a) the no-zero-gradients and no-copy tests on CUDA; (b) the sm90
# forward's grid: up to 16 vocabulary splits (flce-s16) with a 40 MB L2 budget, paired and
# unpaired, against today's at the model shapes and 16k-65k tokens; (c) the training step.
set -uo pipefail
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site gpu-bundle/wheels/flce-*.whl .whl/small/liger_kernel-*.whl
export PYTHONPATH=/tmp/site
export FLCE_CACHE_DIR=$(mktemp -d)
(cd /tmp && timeout 100 python3 -m pytest -q -p no:cacheprovider -rs -k "no_zero or without_a_copy" $OLDPWD/gpu-bundle/python-tests/test_fast.py) > $OUT/test_fast.log 2>&1
echo "tests rc=$?"; tail -n 4 $OUT/test_fast.log
OUT=/tmp/vgrid SHAPES="llama3 gemma2 qwen25 16384,4096,128256 32768,4096,128256 65536,4096,128256" BENCH_ARGS="--step-budget-mb 0 --iters 5" \
  timeout 270 bash scripts/gpu-variants.sh 2 "base=gpu-bundle/flce" "s16l40=gpu-bundle/flce-s16:FLCE_SM90_L2_MB=40" \
  "s16l40u=gpu-bundle/flce-s16:FLCE_SM90_L2_MB=40,FLCE_SM90_CLUSTER=1" > $OUT/variants-grid.md 2>&1
echo "grid rc=$?"; tar czf $OUT/vgrid.tgz -C /tmp vgrid; grep -v "^|---" $OUT/variants-grid.md | tail -19 | cut -d'|' -f2-6,10-11
timeout 200 python3 benchmarks/train_step.py --tokens 8192,16384 --methods liger,flce@2G,flce@peak --rounds 2 --versus liger --repeats 5 --out $OUT/train.json > $OUT/train.log 2>&1
echo "train rc=$?"; tail -n 14 $OUT/train.log
