#!/usr/bin/env bash
# s41 call 1: GPU small cases over backward.rs's row_at refactor (not GPU-run since s40), then ncu
# metrics of the forward and of G under L2 eviction policies on the main loop's loads
# (FLCE_SM90_MAINLOOP l2a = E's boxes, l2b = C's; 2 evict_first, 3 evict_last).
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; L=/tmp/logs1; mkdir -p $L
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $L/gpu.txt
timeout 150 ./gpu-bundle/gpu-tests --small "bf16 plain (" "de-head" "long-tail" "token-chunks" > $L/tests.log 2>&1
echo "tests rc=$? ${SECONDS}s"; grep -E "test result|FAILED|panicked" $L/tests.log | head
T_NCU=80 OUT=$L/fwd SHAPES="llama3 gemma2" COUNT=1 bash scripts/ncu-launch-metrics.sh base= l2a3=FLCE_SM90_MAINLOOP=l2a=3 \
  l2b3=FLCE_SM90_MAINLOOP=l2b=3 l2a3b2=FLCE_SM90_MAINLOOP=l2a=3,l2b=2 > $L/fwd-table.txt 2>&1
echo "fwd ncu ${SECONDS}s"
T_NCU=80 OUT=$L/grad KERNEL=flce_sm90_grad SHAPES="llama3" COUNT=11 bash scripts/ncu-launch-metrics.sh base= \
  l2a3=FLCE_SM90_MAINLOOP=l2a=3 l2b3=FLCE_SM90_MAINLOOP=l2b=3 > $L/grad-table.txt 2>&1
echo "grad ncu ${SECONDS}s"
tar czf "$FINAL/logs.tgz" -C /tmp logs1
cat $L/fwd-table.txt $L/grad-table.txt | tail -40
