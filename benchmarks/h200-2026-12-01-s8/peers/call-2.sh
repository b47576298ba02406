set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
cat /tmp/cut/cu13.part.aa .whl/b/cu13.part.ab > /tmp/cut/nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/*.whl /tmp/cut/*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/peers/nvidia_cutlass_dsl/dsl_packages:/tmp/site:/tmp/peers
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== suite $(date -u +%T)"
timeout 200 python3 benchmarks/suite.py --shapes gemma2,llama3,qwen25 --sweep none --data peaky --extra-dtypes "" \
  --methods flce,cublas,liger_sm90 --budgets none --max-minutes 2.6 --out $OUT/suite > $OUT/suite.log 2>&1
echo "exit $?" >> $OUT/suite.log
echo "== done $(date -u +%T)"
grep -E "^\|" $OUT/suite.log | head -30
