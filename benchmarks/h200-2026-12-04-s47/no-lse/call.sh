#!/usr/bin/env bash
# s47 call 10: the three-product pass without an lse buffer (StepPlan::lse, the binding's
# want_lse): the GPU cases that run check_step (small shapes, every dtype and option set) in 4
# shards, the binding's fast / bad-input / lse tests, memcheck on two cases — all at once
set -uo pipefail
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
( OUT=/tmp/sh10 LIMIT=200 SHARDS=4 bash gpu-bundle/scripts/gpu-tests-sharded.sh "(1,64,1000)" "(255,507,123)" \
    "(257,520,300)" "(2000,136,9001)" > "$OUT/gpu-tests.log" 2>&1; echo "exit $?" >> "$OUT/gpu-tests.log"
  tar czf "$OUT/gpu-tests-shards.tgz" -C /tmp sh10 ) &
( timeout 220 bash gpu-bundle/scripts/gpu-pytest.sh -k "fast or bad_input or lse" > "$OUT/pytest.log" 2>&1
  echo "exit $?" >> "$OUT/pytest.log" ) &
( timeout 220 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests "bf16 all (255,507,123)" \
    "bf16 none (1,64,1000)" > "$OUT/memcheck.log" 2>&1; echo "exit $?" >> "$OUT/memcheck.log" ) &
wait
grep -h "without lse" /tmp/sh10/gpu-tests-*.log | wc -l | sed 's/^/result lines with "without lse: bitwise": /'
cat "$OUT/gpu-tests.log"; tail -3 "$OUT/pytest.log"; grep -E "ERROR SUMMARY|^gpu:|^exit" "$OUT/memcheck.log"
