#!/usr/bin/env bash
# A/B timing of two builds on the GPU machine, in one call: `flce bench` of bundle A and bundle B
# interleaved (A B A B ...), so clock drift and neighbours hit both alike; prints each shape's
# median forward and forward+backward per bundle and B/A, last. scripts/tools/variants.sh with the
# two bundles as its variants (and `flce bench`'s own defaults).
#   bash scripts/tools/ab.sh OLD_BUNDLE NEW_BUNDLE [rounds]     (each bundle from scripts/gpu/prepare.sh)
# Carry both bundle folders. Logs under $OUT (or ./gpu-logs), one file per bundle and round.
set -uo pipefail
A=${1:?bundle A}; B=${2:?bundle B}; rounds=${3:-3}
BENCH_ARGS=${BENCH_ARGS-} exec bash "$(dirname "$0")/variants.sh" "$rounds" "A=$A/flce" "B=$B/flce"
