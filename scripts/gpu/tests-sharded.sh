#!/usr/bin/env bash
# Every GPU test case in one device call: gpu-tests in SHARDS processes at once (--shard=I/N; the
# f64 oracle is CPU work, 16 cores on the GPU machine), each with its log, then one summary line a
# shard and every failure. From the repository root, gpu-bundle carried:
#   OUT=$OUT bash scripts/gpu/tests-sharded.sh [filters...]
# SHARDS (default 3), LIMIT (seconds a shard, default 420). The shards are balanced by the cases'
# measured times (crates/flce-cuda/tests/gpu/case_ms.txt, refreshed from a full run's logs with
# scripts/tools/case-costs.sh). A shard cut short names the cases it did not reach (not-reached.txt,
# as exact-name filters "=NAME": the rerun's arguments, printed last).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
SHARDS=${SHARDS:-3} LIMIT=${LIMIT:-420}
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
T=./gpu-bundle/gpu-tests
$T --small "(1,64,1000)" > "$OUT/warm-up.log" 2>&1  # the kernel cache filled once, not by every shard
rm -f "$OUT/not-reached.txt"
for i in $(seq 1 "$SHARDS"); do
  timeout "$LIMIT" $T --shard="$i/$SHARDS" "$@" > "$OUT/gpu-tests-$i.log" 2>&1 &
done
wait
status=0
for i in $(seq 1 "$SHARDS"); do
  log="$OUT/gpu-tests-$i.log"
  last=$(tail -n 1 "$log")
  case "$last" in
    gpu:*) ;;
    *)
      last="did not finish (timeout $LIMIT s?): $(grep -c '^test ' "$log") cases reached"; status=1
      # the cases it did not reach (the shard's list, --list, less those with a result line), as
      # exact-name filters for a rerun
      $T --list --shard="$i/$SHARDS" "$@" | while IFS= read -r name; do
        grep -qF "test $name ... " "$log" || printf '"=%s" ' "$name"
      done >> "$OUT/not-reached.txt"
      ;;
  esac
  echo "shard $i/$SHARDS: $last"
  grep -h "^test .* FAILED" "$log" | cut -c1-300 && status=1
done
if [ -s "$OUT/not-reached.txt" ]; then
  echo "not reached ($(grep -o '"=' "$OUT/not-reached.txt" | wc -l) cases; in $OUT/not-reached.txt); rerun them with:"
  echo "  OUT=\$OUT bash scripts/gpu/tests-sharded.sh $(cat "$OUT/not-reached.txt")"
fi
exit $status
