#!/usr/bin/env bash
# Every GPU test case in one device call: gpu-tests in SHARDS processes at once (--shard=I/N; the
# f64 oracle is CPU work, 16 cores on the H200 machine), each with its log, then one summary line a
# shard and every failure. From the repository root after scripts/gpu-prepare.sh:
#   device call (carry gpu-bundle): OUT=$OUT bash scripts/gpu-tests-sharded.sh [filters...]
# SHARDS (default 3), LIMIT (seconds a shard, default 420). The shards are balanced by the cases'
# measured times (crates/flce-cuda/tests/gpu/case_ms.txt, refreshed from a full run's logs with
# scripts/case-costs.sh): s46's full run in 4 interleaved processes ended them after 206 / 450 /
# 404 / 262 s of cases (benchmarks/h200-2026-12-04-s46/verify-s45/), balanced ~331 s each.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
SHARDS=${SHARDS:-3} LIMIT=${LIMIT:-420}
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
T=./gpu-bundle/gpu-tests
$T --small "(1,64,1000)" > "$OUT/warm-up.log" 2>&1  # the kernel cache filled once, not by every shard
for i in $(seq 1 "$SHARDS"); do
  timeout "$LIMIT" $T --shard="$i/$SHARDS" "$@" > "$OUT/gpu-tests-$i.log" 2>&1 &
done
wait
status=0
for i in $(seq 1 "$SHARDS"); do
  log="$OUT/gpu-tests-$i.log"
  last=$(tail -n 1 "$log")
  case "$last" in gpu:*) ;; *) last="did not finish (timeout $LIMIT s?): $(grep -c '^test ' "$log") cases reached"; status=1 ;; esac
  echo "shard $i/$SHARDS: $last"
  grep -h "^test .* FAILED" "$log" | cut -c1-300 && status=1
done
exit $status
