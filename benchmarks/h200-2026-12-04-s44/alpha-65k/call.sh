#!/usr/bin/env bash
# s44 call 12: the products' alpha at 65k tokens (call 11's suite read flce 5.7% slower there from ~1 timed call): interleaved A/B
set -uo pipefail
cp "$0" "$OUT/call.sh"
mkdir -p /tmp/ab
OUT=/tmp/ab SHAPES="65536,4096,128256" timeout 280 bash scripts/gpu-variants.sh 2 \
  "aa1bfab=gpu-bundle/old/flce" "alpha=gpu-bundle/flce" > "$OUT/ab65k.txt" 2>&1
echo "rc=$? ${SECONDS}s"
tar czf "$OUT/ab65k-logs.tgz" -C /tmp ab
tail -n 6 "$OUT/ab65k.txt"
