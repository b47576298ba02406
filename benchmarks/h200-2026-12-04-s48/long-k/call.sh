#!/usr/bin/env bash
# s48 call 13: f16 dE's precision in one long product (scripts/.call8.py as long_k.py)
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.call8.py "$OUT/long_k.py"
timeout 120 python3 scripts/.call8.py 2>&1 | grep -v Warn | tee "$OUT/long_k.log"
