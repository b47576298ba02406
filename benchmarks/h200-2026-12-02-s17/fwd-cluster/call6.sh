#!/usr/bin/env bash
# s17 call 6 (issue 10): the forward in clusters of 2 after the CTA-scope release — memcheck of
# clustered forward cases, and a second timing (3 rounds, interleaved) against the default.
set -uo pipefail
L=/tmp/logs6; mkdir -p $L $OUT
export FLCE_CACHE_DIR=$(mktemp -d)
FLCE_SM90_CLUSTER=2 timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 plain (1024,64,8000)" "bf16 zloss (257,520,300)" > $L/memcheck-fwd-cluster.log 2>&1
echo "exit $?" >> $L/memcheck-fwd-cluster.log
mkdir -p /tmp/v6
OUT=/tmp/v6 timeout 130 bash scripts/gpu-variants.sh 3 "plain=gpu-bundle/flce" "cluster=gpu-bundle/flce:FLCE_SM90_CLUSTER=2" > $L/variants-fwd.md 2>&1
cp -r /tmp/v6 $L/
tar czf "$OUT/logs6.tgz" -C /tmp logs6
grep -h "ERROR SUMMARY\|^exit\|^gpu:" $L/memcheck-fwd-cluster.log
cat $L/variants-fwd.md
