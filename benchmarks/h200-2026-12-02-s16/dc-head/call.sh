set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs6; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call6.sh $L/call.sh
echo "== tests $(date -u +%T)"
timeout 100 gpu-bundle/gpu-tests --small "f16 plain" "bf16 sum" "bf16 zloss" "bf16 all" "chunked-budget" > $L/gpu-tests.log 2>&1; echo "exit $?" >> $L/gpu-tests.log
timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 zloss (257,520,300)" "bf16 all (257,520,300)" > $L/memcheck.log 2>&1; echo "exit $?" >> $L/memcheck.log
echo "== timing $(date -u +%T)"
mkdir -p /tmp/a /tmp/b
OUT=/tmp/a SHAPES=16384,2048,128256 BENCH_ARGS="--step-budget-mb 2048" timeout 45 bash scripts/gpu-variants.sh 2 "old=old-bundle/flce" "new=gpu-bundle/flce" > $L/v-2g.md 2>&1
OUT=/tmp/b SHAPES=16384,2048,128256 BENCH_ARGS="--step-budget-mb 1792" timeout 45 bash scripts/gpu-variants.sh 2 "old=old-bundle/flce" "new=gpu-bundle/flce" > $L/v-1792m.md 2>&1
cp -r /tmp/a /tmp/b $L/
echo "== train step $(date -u +%T)"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
PYTHONPATH=/tmp/site:/tmp/peers timeout 100 python3 benchmarks/train_step.py --tokens 8192,16384 --repeats 5 \
  --methods liger,flce@2G,flce@peak --out $L/train_step.json > $L/train_step.log 2>&1; echo "exit $?" >> $L/train_step.log
echo "== done $(date -u +%T)"
tar czf "$OUT/logs6.tgz" -C /tmp logs6
for f in gpu-tests memcheck; do echo "$f: $(grep -h '^gpu:\|^exit\|ERROR SUMMARY' $L/$f.log | tr '\n' ' ')"; done
grep -h FAILED $L/gpu-tests.log | head -3 | cut -c1-300
cat $L/v-2g.md $L/v-1792m.md; grep -A9 "^| tokens" $L/train_step.log; tail -1 $L/train_step.log
