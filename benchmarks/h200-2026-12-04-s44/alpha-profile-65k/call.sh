#!/usr/bin/env bash
# s44 call 13: where the products' alpha loses 9% at 65k tokens (call 12): one profiled default step, aa1bfab and 6b8f849
set -uo pipefail
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-old gpu-bundle/old/flce-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-new gpu-bundle/wheels/flce-*.whl
for v in old new; do
  PYTHONPATH=/tmp/site-$v timeout 100 python3 scripts/profile_kernels.py --shape llama3_n65536 --configs auto/auto/min \
    --top 16 > "$OUT/profile-$v.log" 2>&1
  echo "$v rc=$? ${SECONDS}s"
done
tail -n 22 "$OUT/profile-old.log"; tail -n 22 "$OUT/profile-new.log"
