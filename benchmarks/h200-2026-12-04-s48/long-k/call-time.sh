#!/usr/bin/env bash
# s48 call 14: the time of dE in K-chunks (scripts/.call9.py as k_chunks_time.py)
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"; cp scripts/.call9.py "$OUT/k_chunks_time.py"
timeout 120 python3 scripts/.call9.py 2>&1 | grep -v Warn | tee "$OUT/k_chunks_time.log"
