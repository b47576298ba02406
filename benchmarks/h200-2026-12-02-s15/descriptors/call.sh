#!/usr/bin/env bash
# The sm90 main loop's shared-memory descriptors built once (SmemDescBase, sm90/wgmma.cuh): each
# stage's and k-step's descriptor a 32-bit add on the first one instead of rebuilt from the address
# (SASS: 78–88 → 48–55 instructions a stage of 4 HGMMAs in the forward, G and product kernels;
# v21 found ~100 a stage in the product kernel's ncu profile). Every sm90 kernel's code changes,
# so: GPU tests of the default (sm90) path, memcheck, own products' tests, and timing against the
# previous build. One device call from the repository root, with the previous build in old-bundle/
# (scripts/gpu-prepare.sh at the parent commit, moved) and this one in gpu-bundle/ (carry both):
#   OUT=$OUT bash scripts/gpu-descriptors.sh
# About 7 minutes; logs in $OUT/logs.tgz, the table last.
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
echo "== small tests bf16 + f16 $(date -u +%T)"
timeout "${T_SMALL:-170}" gpu-bundle/gpu-tests --small "bf16 " "f16 " bad-target > $L/gpu-tests-small.log 2>&1
echo "exit $?" >> $L/gpu-tests-small.log
echo "== memcheck $(date -u +%T)"
timeout 75 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 all (255,507,123)" "bf16 plain (1,64,1000)" "f16 softcap (129,200,5003)" > $L/memcheck.log 2>&1
echo "exit $?" >> $L/memcheck.log
echo "== timing $(date -u +%T)"
mkdir -p /tmp/vd
OUT=/tmp/vd timeout 110 bash scripts/gpu-variants.sh 2 "old=old-bundle/flce" "new=gpu-bundle/flce" \
  "own=gpu-bundle/flce:FLCE_SM90_PRODUCTS=1" > $L/variants.md 2>&1
cp -r /tmp/vd $L/
echo "== sampled $(date -u +%T)"
timeout "${T_SAMPLED:-70}" gpu-bundle/gpu-tests "bf16 llama3 sampled" > $L/gpu-tests-sampled.log 2>&1
echo "exit $?" >> $L/gpu-tests-sampled.log
echo "== own products $(date -u +%T)"
FLCE_SM90_PRODUCTS=1 timeout 45 gpu-bundle/gpu-tests --small "de-head" "de-chunks" "long-tail" > $L/gpu-tests-own.log 2>&1
echo "exit $?" >> $L/gpu-tests-own.log
echo "== done $(date -u +%T)"
tar czf "$OUT/logs.tgz" -C /tmp logs
for f in $L/gpu-tests-*.log; do echo "$(basename $f): $(grep -c '\.\.\. ok' $f) ok, $(grep -c 'FAILED\|failed:' $f) failed; $(grep -h '^gpu:\|^exit' $f | tr '\n' ' ')"; done
grep -h "FAILED" $L/gpu-tests-*.log | head -5
grep -h "ERROR SUMMARY\|^exit\|^gpu:" $L/memcheck.log
tail -n 11 $L/variants.md
