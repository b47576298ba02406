#!/usr/bin/env bash
# s18 call 3: the cluster cases the tests call did not reach (f16 zloss unpaired stalled > 40 s), then the train step
set -uo pipefail
L=/tmp/logs-c3; mkdir -p $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
( time timeout 150 gpu-bundle/gpu-tests --small "f16 zloss (640,520,3000) unpaired" ) > $L/f16-zloss-unpaired.log 2>&1
echo "exit $?" >> $L/f16-zloss-unpaired.log
( time timeout 90 gpu-bundle/gpu-tests --small "ignore7 (1,64,1000) pairs" "ignore7 (1,64,1000) unpaired" "pairs 2 SMs" "unpaired 2 SMs" "f16 zloss (640,520,3000) pairs" ) > $L/rest.log 2>&1
echo "exit $?" >> $L/rest.log
OUT=$L PARTS=train timeout 260 bash scripts/gpu-paired.sh > $L/train.txt 2>&1
tar czf "$OUT/logs.tgz" -C /tmp logs-c3
for f in f16-zloss-unpaired rest; do echo "== $f"; grep "^test\|^exit\|^real" $L/$f.log | cut -c1-160; done
tail -14 $L/train.txt
