set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
cd benchmarks
echo "== activation $(date -u +%T)"
PYTHONPATH=/tmp/site timeout 420 python3 activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 --attn flex_attention \
  --tokens 29184,36480 --modes offload_tiled --repeats 1 --out $OUT/activation-flex-longest.json > $OUT/activation-flex-longest.log 2>&1
echo "exit $?" >> $OUT/activation-flex-longest.log
echo "== done $(date -u +%T)"
tail -12 $OUT/activation-flex-longest.log | cut -c1-600
