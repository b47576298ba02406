#!/usr/bin/env bash
cp "$0" "$OUT/call.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt"
OUT=$OUT PART=2 SUITE_MINUTES=8.3 bash scripts/gpu-suite-fast.sh
