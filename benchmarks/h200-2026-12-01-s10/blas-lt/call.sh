set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== list $(date -u +%T)"
FLCE_BLAS_LT=list timeout 60 gpu-bundle/flce bench --shapes gemma2,llama3,qwen25 --step-budget-mb 0 > $OUT/lt-list.log 2>&1; echo "exit $?" >> $OUT/lt-list.log
echo "== tests under lt0 $(date -u +%T)"
FLCE_BLAS_LT=0 timeout 120 gpu-bundle/gpu-tests --small bf16 f16 f32 "2 SMs" > $OUT/gpu-tests-lt0.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-lt0.log
echo "== variants $(date -u +%T)"
mkdir -p /tmp/var1
OUT=/tmp/var1 timeout 240 bash scripts/gpu-variants.sh 2 "base=gpu-bundle/flce" "lt0=gpu-bundle/flce:FLCE_BLAS_LT=0" "lt1=gpu-bundle/flce:FLCE_BLAS_LT=1" "lt2=gpu-bundle/flce:FLCE_BLAS_LT=2" > $OUT/variants.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp var1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
echo "== qwen planner $(date -u +%T)"
(cd benchmarks && PYTHONPATH=/tmp/site timeout 200 python3 activation_memory.py --model Qwen2.5-1.5B --tokens 16384,32768 --repeats 2 --out $OUT/act-qwen15.json > $OUT/act-qwen15.log 2>&1; echo "exit $?" >> $OUT/act-qwen15.log)
echo "== done $(date -u +%T)"
grep -E "candidates" $OUT/lt-list.log | cut -c1-400 | head -20
grep -E "^gpu:|^exit|FAILED|test result" $OUT/gpu-tests-lt0.log | head
cat $OUT/variants.md | tail -14
tail -15 $OUT/act-qwen15.log
