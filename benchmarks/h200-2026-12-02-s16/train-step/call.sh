set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs3; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $L/gpu.txt
cp scripts/.call3.sh $L/call.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
echo "== train step, compact (default) $(date -u +%T)"
PYTHONPATH=/tmp/site:/tmp/peers timeout 230 python3 benchmarks/train_step.py --tokens 8192,16384 --repeats 5 \
  --methods hf,flce,flce@peak,flce@2G,liger --out $L/train_step.json > $L/train_step.log 2>&1; echo "exit $?" >> $L/train_step.log
echo "== train step, FLCE_STEP_LOGITS=f32 $(date -u +%T)"
FLCE_STEP_LOGITS=f32 PYTHONPATH=/tmp/site:/tmp/peers timeout 120 python3 benchmarks/train_step.py --tokens 8192,16384 --repeats 5 \
  --methods flce@peak,flce@2G,liger --out $L/train_step_f32.json > $L/train_step_f32.log 2>&1; echo "exit $?" >> $L/train_step_f32.log
echo "== train step, compact, second run $(date -u +%T)"
PYTHONPATH=/tmp/site:/tmp/peers timeout 150 python3 benchmarks/train_step.py --tokens 8192,16384 --repeats 5 \
  --methods liger,flce@peak,flce@2G --out $L/train_step_2.json > $L/train_step_2.log 2>&1; echo "exit $?" >> $L/train_step_2.log
echo "== done $(date -u +%T)"
tar czf "$OUT/logs3.tgz" -C /tmp logs3
for f in train_step train_step_f32 train_step_2; do echo "-- $f"; grep -A14 "^| tokens" $L/$f.log; tail -1 $L/$f.log; done
