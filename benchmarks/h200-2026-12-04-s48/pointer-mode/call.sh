#!/usr/bin/env bash
# s48 call 8: cuBLAS's device pointer mode against host mode for dE and dC (scripts/.call4.py as pointer_mode.py)
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.call4.py "$OUT/pointer_mode.py"
timeout 300 python3 scripts/.call4.py 2>&1 | tee "$OUT/pointer_mode.log"
