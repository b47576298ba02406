#!/usr/bin/env bash
# s46 call 1: GPU-verify s45's host changes (written after its last device call): every gpu-tests
# case (sharded), compute-sanitizer memcheck on the small cases, the binding's pytest on CUDA.
set -uo pipefail
cp "$0" "$OUT/call.sh"
B=gpu-bundle
export FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
$B/gpu-tests --small "(1,64,1000)" > "$OUT/warm.log" 2>&1
(cd /tmp && timeout 400 python3 -m pytest -q -p no:cacheprovider -x -rs "$OLDPWD/$B/python-tests" > "$OUT/pytest.log" 2>&1; echo "pytest rc $?" >> "$OUT/pytest.log") &
(timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "(255,507,123)" "(1,64,1000)" "(129,200,5003)" chunked bad-target mean-scale > "$OUT/memcheck.log" 2>&1; echo "memcheck rc $?" >> "$OUT/memcheck.log") &
mkdir -p "$OUT/t"
OUT="$OUT/t" SHARDS=4 LIMIT=470 bash $B/scripts/gpu-tests-sharded.sh > "$OUT/t/summary.txt" 2>&1
wait
cd "$OUT" && tar czf tests.tgz t warm.log && rm -rf t warm.log
echo "== summary"; tar xzOf tests.tgz t/summary.txt
tail -n 1 memcheck.log; grep -E "ERROR SUMMARY" memcheck.log | tail -1
grep -E "passed|failed" pytest.log | tail -2; tail -n 1 pytest.log
