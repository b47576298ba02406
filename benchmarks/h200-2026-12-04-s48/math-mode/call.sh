#!/usr/bin/env bash
# s48 call 12: cuBLAS's math mode CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (gpu-bundle)
# against 479c790 (old-bundle): the three-product and default GPU cases of four shapes on the new
# build, then scripts/.call7.py (as math_mode.py) old then new, one round
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.call7.py "$OUT/math_mode.py"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
mkdir -p /tmp/shards
OUT=/tmp/shards SHARDS=4 LIMIT=120 bash scripts/gpu-tests-sharded.sh "(1,64,1000)" "(255,507,123)" "(257,520,300)" "(2000,136,9001)" mean-scale > "$OUT/gpu-tests.log" 2>&1
echo "exit $?" >> "$OUT/gpu-tests.log"; tar czf "$OUT/gpu-tests-shards.tgz" -C /tmp shards
tail -n 8 "$OUT/gpu-tests.log"
for b in old gpu; do
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-$b $b-bundle/wheels/flce-*.whl
done
for round in 1; do
  for b in old gpu; do
    PYTHONPATH=/tmp/site-$b timeout 100 python3 scripts/.call7.py $b 2>&1 | grep -v Warn | tee -a "$OUT/math_mode.log"
  done
done
