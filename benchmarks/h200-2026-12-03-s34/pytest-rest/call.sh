#!/usr/bin/env bash
# s34 call 3: the binding's pytest files the previous call's 240 s did not reach (test_hf.py,
# test_offload.py, test_plan.py, test_weights.py) and the one case that failed there
# (test_kernel_plans_are_made_once_and_introspectable: its softcap backward expected cuBLAS, the
# family before v28's option modules), with the slowest durations listed.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
pip install -q --no-deps --target /tmp/site $B/wheels/flce-*.whl > /dev/null 2>&1
T=$PWD/$B/python-tests
(cd /tmp && PYTHONPATH=/tmp/site timeout 330 python3 -m pytest -q -p no:cacheprovider --durations=15 \
  "$T/test_flce.py::test_kernel_plans_are_made_once_and_introspectable" "$T/test_flce.py::test_cpu_path_in_a_forked_worker" \
  $T/test_hf.py $T/test_offload.py $T/test_plan.py $T/test_weights.py > $OUT/pytest-rest.log 2>&1; echo "exit $?" >> $OUT/pytest-rest.log)
echo "pytest at ${SECONDS}s"; grep -E "passed|failed|^FAILED|^ERROR|exit" $OUT/pytest-rest.log | tail -n 8
