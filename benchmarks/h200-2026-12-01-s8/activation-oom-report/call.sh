set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
echo "== activation oom report $(date -u +%T)"
(cd benchmarks && PYTHONPATH=/tmp/site timeout 240 python3 activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 --tokens 16384 --repeats 1 --oom-report --out $OUT/activation-16k.json) > $OUT/activation-16k.log 2>&1
echo "exit $?" >> $OUT/activation-16k.log
echo "== variants $(date -u +%T)"
mkdir -p /tmp/var3
OUT=/tmp/var3 timeout 200 bash scripts/gpu-variants.sh 3 "base=gpu-bundle/flce" "lanes=gpu-bundle/flce:FLCE_SM90_MAINLOOP=lanes=1" > $OUT/variants-3rounds.md 2>&1
tar czf $OUT/variants3-logs.tgz -C /tmp var3
echo "== done $(date -u +%T)"
tail -60 $OUT/activation-16k.log
tail -8 $OUT/variants-3rounds.md
