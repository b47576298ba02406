#!/usr/bin/env bash
# s45 call 2: the GPU test cases call 1 did not reach (its 200 s cap), in three processes, + pytest + racecheck
set -uo pipefail
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
T=./gpu-bundle/gpu-tests
$T --small "(1,64,1000)" > /dev/null 2>&1   # warm the kernel cache once
for g in 1 2 3; do
  mapfile -t names < gpu-bundle/lists/g$g.txt
  timeout 420 $T "${names[@]}" > "$OUT/tests-g$g.log" 2>&1 &
done
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 420 python3 -m pytest -q -p no:cacheprovider "$OLDPWD/gpu-bundle/python-tests") > "$OUT/pytest.log" 2>&1 &
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $T --small "(255,507,123)" "(1,64,1000)" chunked > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $OUT/racecheck.log | tail -1)"
wait
for g in 1 2 3; do
  echo "g$g: ok=$(grep -c '^test .* ok' $OUT/tests-g$g.log) skipped=$(grep -c '^test .* skipped' $OUT/tests-g$g.log) failed=$(grep -c '^test .* FAILED' $OUT/tests-g$g.log) of $(grep -c '^test ' $OUT/tests-g$g.log) (listed $(wc -l < gpu-bundle/lists/g$g.txt)); $(tail -n 1 $OUT/tests-g$g.log | cut -c1-150)"
  grep -h "FAILED\|skipped" "$OUT/tests-g$g.log" | cut -c1-250
done
echo "pytest: $(tail -n 1 $OUT/pytest.log)"
echo "total ${SECONDS}s"
