#!/usr/bin/env bash
# s41 call 7: compute-sanitizer memcheck over cases whose tails 5912082 lays out anew (the tail's
# short chunk first, its last chunk from the tile at or after V − chunk; sm80 and sm90 G kernels).
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; L=/tmp/logs7; mkdir -p $L
export FLCE_CACHE_DIR=$(mktemp -d)
timeout 250 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 plain (1024,64,8000)" "bf16 all (1024,64,8000)" "f16 none (3000,64,12000) de-head" "bf16 plain (1000,64,2200) rest 18 SMs cluster 1" > $L/memcheck.log 2>&1
echo "memcheck rc=$? ${SECONDS}s"; grep -E "ERROR SUMMARY|FAILED| ok " $L/memcheck.log | cut -c1-90 | head -12
tar czf "$FINAL/logs.tgz" -C /tmp logs7
