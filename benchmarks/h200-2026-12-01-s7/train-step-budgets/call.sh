set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
PYTHONPATH=/tmp/site:/tmp/peers timeout 200 python3 benchmarks/train_step.py --tokens 8192,16384 --repeats 5 \
  --methods flce,liger,flce@512M,flce@1G,flce@2G,flce_fast --out $OUT/train_step-budgets.json > $OUT/train_step-budgets.log 2>&1; echo "exit $?" >> $OUT/train_step-budgets.log
tail -16 $OUT/train_step-budgets.log
