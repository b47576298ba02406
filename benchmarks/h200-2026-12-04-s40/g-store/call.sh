#!/usr/bin/env bash
# s40 call 2: what G's stores cost. flce-exp1 = G formed but not stored; flce-exp2 = neither
# formed nor stored (helpers only hand the staging back); timing only (G's bytes are garbage).
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; OUT=/tmp/logs2; mkdir -p $OUT
export FLCE_CACHE_DIR=$(mktemp -d)
for r in 1 2; do
  for b in flce flce-exp1 flce-exp2; do
    timeout 60 gpu-bundle/$b bench --shapes gemma2,llama3 --iters 5 --step-budget-mb 0 > "$OUT/bench-$b-r$r.log" 2>&1
    echo "== $b r$r rc=$? ${SECONDS}s"; grep -iE "gemma2|llama3|fwd" "$OUT/bench-$b-r$r.log" | head -6
  done
done
for b in flce flce-exp1 flce-exp2; do
  OUT=$OUT SHAPE=llama3 KERNEL=grad FLCE=gpu-bundle/$b NAME=$b CUBLAS=0 T_NCU=90 bash scripts/ncu-sm90.sh
  echo "ncu $b ${SECONDS}s"
done
OUT=$OUT SHAPE=llama3 KERNEL=forward NAME=flce T_NCU=90 bash scripts/ncu-sm90.sh
echo "total ${SECONDS}s"
tar czf "$FINAL/logs.tgz" -C /tmp logs2
