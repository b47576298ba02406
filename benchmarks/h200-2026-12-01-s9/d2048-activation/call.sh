set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== bench train-step loss shape $(date -u +%T)"
for s in 16384,2048,128256 8192,2048,128256; do for b in 1024 2048 4096; do
  timeout 40 gpu-bundle/flce bench --shapes $s --step-budget-mb $b --json $OUT/bench-d2048.jsonl >> $OUT/bench-d2048.log 2>&1
done; done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
echo "== activation memory $(date -u +%T)"
cd benchmarks
PYTHONPATH=/tmp/site timeout 330 python3 activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 --attn flex_attention \
  --tokens 16384,32768,65536 --modes offload,offload_tiled --repeats 1 --out $OUT/activation-flex-cap10.json > $OUT/activation-flex-cap10.log 2>&1
echo "exit $?" >> $OUT/activation-flex-cap10.log
cd ..
echo "== done $(date -u +%T)"
grep -vE "^\s*$" $OUT/bench-d2048.log | grep -E "^\||ms" | head -30
tail -15 $OUT/activation-flex-cap10.log
