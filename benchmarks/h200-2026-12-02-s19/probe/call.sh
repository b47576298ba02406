#!/usr/bin/env bash
# s19 call 2: the no-copy test at the suite's N 1k shape; "fast" policy overhead; ncu of the
# forward against cuBLAS at 16k and 65k tokens (why the forward slows per token at large N).
set -uo pipefail
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
export FLCE_CACHE_DIR=$(mktemp -d)
(cd /tmp && timeout 120 python3 -m pytest -q -p no:cacheprovider -rs -k "without_a_copy or three_product_plan" $OLDPWD/gpu-bundle/python-tests/test_fast.py) > $OUT/test_nocopy.log 2>&1
echo "nocopy rc=$?"; tail -n 8 $OUT/test_nocopy.log
timeout 150 python3 benchmarks/fast_policy_overhead.py --shapes gemma2,llama3 > $OUT/fast_overhead.md 2> $OUT/fast_overhead.err
echo "overhead rc=$?"; cat $OUT/fast_overhead.md; tail -3 $OUT/fast_overhead.err
for s in 16384,4096,128256 65536,4096,128256; do
  OUT=$OUT/ncu T_NCU=100 SHAPE=$s KERNEL=forward bash scripts/ncu-sm90.sh
done
