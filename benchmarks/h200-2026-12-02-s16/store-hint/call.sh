set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs5; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call5.sh $L/call.sh
echo "== tests $(date -u +%T)"
timeout 60 gpu-bundle/gpu-tests --small "f16 plain" "bf16 zloss" > $L/gpu-tests.log 2>&1; echo "exit $?" >> $L/gpu-tests.log
timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 plain (1024,64,8000)" > $L/memcheck.log 2>&1; echo "exit $?" >> $L/memcheck.log
echo "== timing $(date -u +%T)"
V=("old=old-bundle/flce" "cs=gpu-bundle/flce" "cs_l2_24=gpu-bundle/flce:FLCE_SM90_L2_MB=24" "cs_l2_16=gpu-bundle/flce:FLCE_SM90_L2_MB=16")
mkdir -p /tmp/a /tmp/b /tmp/c
OUT=/tmp/a SHAPES=16384,2048,128256 BENCH_ARGS="--step-budget-mb 2048" timeout 130 bash scripts/gpu-variants.sh 2 "${V[@]}" > $L/v-train-2g.md 2>&1
OUT=/tmp/b SHAPES=16384,2048,128256 BENCH_ARGS="--step-budget-mb 4400" timeout 130 bash scripts/gpu-variants.sh 2 "${V[@]}" > $L/v-train-4g.md 2>&1
OUT=/tmp/c SHAPES=gemma2,llama3 BENCH_ARGS="--step-budget-mb 4096" timeout 150 bash scripts/gpu-variants.sh 2 "${V[@]}" > $L/v-models.md 2>&1
cp -r /tmp/a /tmp/b /tmp/c $L/
echo "== done $(date -u +%T)"
tar czf "$OUT/logs5.tgz" -C /tmp logs5
for f in gpu-tests memcheck; do echo "$f: $(grep -h '^gpu:\|^exit\|ERROR SUMMARY' $L/$f.log | tr '\n' ' ')"; done
cat $L/v-train-2g.md $L/v-train-4g.md $L/v-models.md
