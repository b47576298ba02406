#!/usr/bin/env bash
# s17 call 5 (issue 10): the cluster release at CTA scope (mbar_arrive_cluster without
# .release.cluster). Own products in clusters of 2 (tests, memcheck, timing: gpu-product-cluster.sh),
# then the forward in clusters of 2 (FLCE_SM90_CLUSTER=2): small tests and timing against the default.
set -uo pipefail
mkdir -p $OUT/c1 $OUT/f
OUT=$OUT/c1 T_TESTS=110 bash scripts/gpu-product-cluster.sh
L=/tmp/logsf; mkdir -p $L
export FLCE_CACHE_DIR=$(mktemp -d)
FLCE_SM90_CLUSTER=2 timeout 70 gpu-bundle/gpu-tests --small "bf16 plain" "bf16 zloss" "f16 plain" > $L/gpu-tests-fwd-cluster.log 2>&1
echo "exit $?" >> $L/gpu-tests-fwd-cluster.log
mkdir -p /tmp/vf
OUT=/tmp/vf timeout 90 bash scripts/gpu-variants.sh 2 "plain=gpu-bundle/flce" "cluster=gpu-bundle/flce:FLCE_SM90_CLUSTER=2" > $L/variants-fwd.md 2>&1
cp -r /tmp/vf $L/
tar czf "$OUT/f/logsf.tgz" -C /tmp logsf
echo "fwd cluster tests: $(grep -c '\.\.\. ok' $L/gpu-tests-fwd-cluster.log) ok, $(grep -c FAILED $L/gpu-tests-fwd-cluster.log) failed; $(grep -h '^exit\|^gpu:' $L/gpu-tests-fwd-cluster.log | tr '\n' ' ')"
grep -h FAILED $L/gpu-tests-fwd-cluster.log | head -3 | cut -c1-300
cat $L/variants-fwd.md
