#!/usr/bin/env bash
# s44 call 6: the products' α — the suite's flce points (errors against the fp32 reference, times) at the model shapes and 16k
set -uo pipefail
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
python3 benchmarks/suite.py --flce-bin gpu-bundle/flce --out "$OUT/suite" --data peaky --extra-dtypes "" \
  --methods flce,flce_fast,cublas --budgets 1G --rep-ms 600 --sweep 1024,16384 --sweep-methods flce,flce_fast,cublas \
  --max-minutes 6 > "$OUT/suite.log" 2>&1
echo "exit $?" >> "$OUT/suite.log"
grep -av "%|" "$OUT/suite.log" | tail -n 30
