#!/usr/bin/env bash
# s17 call 2: the training step at 16k tokens with the two merged changes (both-bundle = try/both
# 73be54c, the tree main lands) against main 1a4c3e4 (old-bundle), Liger beside each; then one
# profiled step of liger and flce@2G (train_step.py --profile) to see where the step's time goes.
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv > $L/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/new both-bundle/wheels/flce-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/old old-bundle/wheels/flce-*.whl
ts() { PYTHONPATH=/tmp/$1:/tmp/peers timeout $2 python3 benchmarks/train_step.py "${@:4}" --out $L/$3.json > $L/$3.log 2>&1; echo "exit $?" >> $L/$3.log; }
ts new 120 new1 --tokens 16384 --repeats 5 --methods liger,flce@2G,flce@peak
ts old 60 old1 --tokens 16384 --repeats 5 --methods flce@2G,flce@peak
ts new 80 new2 --tokens 16384 --repeats 5 --methods flce@2G,liger
ts new 90 profile --tokens 16384 --repeats 3 --methods liger,flce@2G --profile 30
tar czf "$OUT/logs.tgz" -C /tmp logs
for f in new1 old1 new2; do echo "== $f"; grep -A6 "^| tokens" $L/$f.log; grep '^exit' $L/$f.log; done
grep -A34 "^## profile" $L/profile.log | cut -c1-150
