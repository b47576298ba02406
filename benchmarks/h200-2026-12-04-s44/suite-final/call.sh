#!/usr/bin/env bash
# s44 call 11: issue 10 / 11's suite with every peer on 6b8f849 (the products' alpha), then the flat-data errors
set -uo pipefail
cp "$0" "$OUT/call.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt"
OUT=$OUT PART=2 SUITE_MINUTES=6 bash scripts/gpu-suite-fast.sh > "$OUT/suite-tail.txt" 2>&1
tail -n 14 "$OUT/suite-tail.txt"
export PYTHONPATH=/tmp/peers/nvidia_cutlass_dsl/dsl_packages:/tmp/site:/tmp/peers FLCE_CACHE_DIR=$(mktemp -d)
timeout 200 python3 benchmarks/suite.py --flce-bin gpu-bundle/flce --out "$OUT/flat" --data flat --extra-dtypes "" \
  --shapes llama3,gemma2 --methods flce,flce_fast,torch,compile,liger,liger_sm90,cce --budgets none --sweep none \
  --rep-ms 200 --max-minutes 2.5 > "$OUT/flat.log" 2>&1
echo "flat exit $?"; grep -a "flat bf16" "$OUT/flat.log" | grep -av "%|" | cut -c1-140
tar czf "$OUT/results.tgz" -C "$OUT" suite flat && rm -rf "$OUT/suite" "$OUT/flat"
