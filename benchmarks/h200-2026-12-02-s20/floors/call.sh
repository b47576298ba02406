#!/usr/bin/env bash
# s20 call 9: the suite's cuBLAS floors from the real products (suite.measure_cublas: logits, dE = G·C,
# dC = Gᵀ·E, each timed; floor3 / floor4) beside flce and flce_fast, at the model shapes and 1k / 16k / 128k.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
cp scripts/.call9.sh "$OUT/call.sh"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
PYTHONPATH=/tmp/site timeout 170 python3 benchmarks/suite.py --out "$OUT/suite" --data peaky --extra-dtypes "" \
  --methods flce,flce_fast,cublas --budgets none --rep-ms 600 --sweep 1024,16384,131072 \
  --sweep-methods flce,flce_fast,cublas --max-minutes 2.3 > "$OUT/suite.log" 2>&1
echo "exit $?" >> "$OUT/suite.log"
grep -av "%|" "$OUT/suite.log" | grep -aE "^shape|peaky" | cut -c1-150
