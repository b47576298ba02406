#!/usr/bin/env bash
# Every GPU test case in one device call: gpu-tests in SHARDS processes at once (--shard=I/N; the
# f64 oracle is CPU work, 16 cores on the H200 machine), each with its log, then one summary line a
# shard and every failure. From the repository root after scripts/gpu-prepare.sh:
#   device call (carry gpu-bundle): OUT=$OUT bash scripts/gpu-tests-sharded.sh [filters...]
# SHARDS (default 3), LIMIT (seconds a shard, default 420). s45 ran the 203 cases this way in three
# processes (benchmarks/h200-2026-12-04-s45/alpha-tests-rest/: two calls, before --shard existed);
# one process took more than 300 s.
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
