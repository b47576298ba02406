set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
cd benchmarks
PYTHONPATH=/tmp/site timeout 200 python3 activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 --tokens 8192,16384,32768 --repeats 1 \
  --out $OUT/activation-gemma2-lora.json > $OUT/activation-gemma2-lora.log 2>&1; echo "exit $?" >> $OUT/activation-gemma2-lora.log
grep -E "^\||exit|Error" $OUT/activation-gemma2-lora.log | tail -12
