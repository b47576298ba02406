#!/usr/bin/env bash
# s50 call 2: flce.distributed's CUDA phases with two ranks on one GPU (gloo), and the test file whole
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d) NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
cd /tmp && timeout 400 python3 -m pytest -v -rs -p no:cacheprovider "$OLDPWD/gpu-bundle/python-tests/test_distributed.py" \
  > "$OUT/test_distributed.log" 2>&1; echo "exit $?" >> "$OUT/test_distributed.log"
grep -E "cuda|passed|failed|exit" "$OUT/test_distributed.log" | tail -40
