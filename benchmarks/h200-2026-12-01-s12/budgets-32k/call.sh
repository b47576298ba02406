set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== tests $(date -u +%T)"
timeout 240 gpu-bundle/gpu-tests --small long-tail frozen bad-target bad-weights context-restored bad-pointers two-threads phases > $OUT/gpu-tests-rest.log 2>&1; echo "exit $?" >> $OUT/gpu-tests-rest.log
echo "== 32k budgets $(date -u +%T)"
for r in 1 2; do for b in default 577 640; do
  a=""; [ $b != default ] && a="--budget-mb $b"
  timeout 40 gpu-bundle/flce bench --shapes 32768,4096,128256 --step-budget-mb 0 --iters 5 $a >> $OUT/bench-32k-$b.log 2>&1
done; done
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests-rest.log | head
for b in default 577 640; do echo "-- $b"; grep -h "^| 32768" $OUT/bench-32k-$b.log | cut -c1-260; done
