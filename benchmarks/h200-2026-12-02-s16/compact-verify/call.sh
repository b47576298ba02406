set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs2; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
cp scripts/.call2.sh $L/call.sh
echo "== tests $(date -u +%T)"
timeout 170 gpu-bundle/gpu-tests --small "f16 plain" "f16 sum" "f16 none" "f16 zloss" "ignore7" "f16 shift" > $L/gpu-tests.log 2>&1
echo "exit $?" >> $L/gpu-tests.log
echo "== memcheck $(date -u +%T)"
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 plain (1024,64,8000)" "bf16 zloss (257,520,300)" > $L/memcheck.log 2>&1
echo "exit $?" >> $L/memcheck.log
echo "== sampled $(date -u +%T)"
timeout 150 gpu-bundle/gpu-tests "bf16 llama3 sampled" > $L/gpu-tests-sampled.log 2>&1
echo "exit $?" >> $L/gpu-tests-sampled.log
echo "== pytest $(date -u +%T)"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site gpu-bundle/wheels/flce-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 120 python3 -m pytest -q -p no:cacheprovider -x "$OLDPWD/gpu-bundle/python-tests/test_fast.py") > $L/pytest-fast.log 2>&1
echo "exit $?" >> $L/pytest-fast.log
echo "== done $(date -u +%T)"
tar czf "$OUT/logs2.tgz" -C /tmp logs2
for f in gpu-tests gpu-tests-sampled memcheck; do
  echo "$f: $(grep -c '\.\.\. ok' $L/$f.log) ok, $(grep -c 'FAILED' $L/$f.log) failed; $(grep -h '^exit\|ERROR SUMMARY\|^gpu:' $L/$f.log | tr '\n' ' ')"
done
grep -h "FAILED" $L/gpu-tests*.log $L/memcheck.log | head -5 | cut -c1-400
grep -h "three-product" $L/gpu-tests-sampled.log | cut -c1-400
grep -o "compact 1 chunk(s): [^;|]*" $L/gpu-tests.log | head -4
grep -o "compact 3 chunk(s): [^;|]*" $L/gpu-tests.log | head -4
tail -3 $L/pytest-fast.log
