set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl .whl/small/cut_cross_entropy-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
PYTHONPATH=/tmp/site:/tmp/peers timeout 320 python3 benchmarks/train_step.py --tokens 8192,16384 --repeats 3 \
  --methods hf,flce,liger,flce_fast,cce,flce_offload --out $OUT/train_step.json > $OUT/train_step.log 2>&1; echo "exit $?" >> $OUT/train_step.log
tail -20 $OUT/train_step.log
