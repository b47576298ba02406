#!/usr/bin/env bash
# s17 call 7 (issue 10): more small GPU cases with the forward in clusters of 2 (every option,
# ignore index, shift, reductions, 2-SM plans) after the CTA-scope release.
set -uo pipefail
L=/tmp/logs7; mkdir -p $L $OUT
export FLCE_CACHE_DIR=$(mktemp -d)
FLCE_SM90_CLUSTER=2 timeout 125 gpu-bundle/gpu-tests --small "bf16 all" "ignore7" "2 SMs" "shift" "bf16 none" "bf16 sum" > $L/gpu-tests-fwd-cluster-2.log 2>&1
echo "exit $?" >> $L/gpu-tests-fwd-cluster-2.log
tar czf "$OUT/logs7.tgz" -C /tmp logs7
echo "$(grep -c '\.\.\. ok' $L/gpu-tests-fwd-cluster-2.log) ok, $(grep -c FAILED $L/gpu-tests-fwd-cluster-2.log) failed; $(grep -h '^exit\|^gpu:' $L/gpu-tests-fwd-cluster-2.log | tr '\n' ' ')"
grep -h FAILED $L/gpu-tests-fwd-cluster-2.log | head -3 | cut -c1-300
