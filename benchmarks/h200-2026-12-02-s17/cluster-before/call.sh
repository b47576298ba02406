#!/usr/bin/env bash
# s17 call 3 (issue 10): own products in clusters of 2 with the grid sized to
# cuOccupancyMaxActiveClusters (built in s15, never run), then ncu of the clustered launches with
# the Occupancy section — why pairs ran 1.2-1.3x slower (perf-notes v21). gpu-bundle = main d2ab65f.
set -uo pipefail
mkdir -p $OUT/c1 $OUT/c2
OUT=$OUT/c1 T_TESTS=60 bash scripts/gpu-product-cluster.sh
OUT=$OUT/c2 CLUSTER=2 TIMING=0 bash scripts/gpu-product-ncu.sh
