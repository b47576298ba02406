#!/usr/bin/env bash
# s38: is the slice's rest forward slower per vocabulary tile than the whole forward? (profile:
# Gemma 2's rest over 90% of V took 12.56 ms against 12.19 for all of V). The default forward
# alone (`flce bench --step-budget-mb 0`) at the shapes of the whole and of the rests, 2 rounds.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
for r in 1 2; do
  for s in 8192,2304,256000 8192,2304,230656 8192,2304,197888 8192,4096,128256 8192,4096,69888; do
    gpu-bundle/flce bench --shapes $s --iters 10 --step-budget-mb 0 --json "$OUT/fwd.jsonl" >> "$OUT/bench.log" 2>&1
  done
  echo "round $r at ${SECONDS}s"
done
python3 - "$OUT/fwd.jsonl" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
print(sorted(rows[0].keys()))
by = collections.defaultdict(list)
for r in rows:
    by[(r.get("n"), r.get("d"), r.get("v"))].append(r)
for k, rs in by.items():
    print(k, [(round(x.get("fwd_ms", float("nan")), 2), round(x.get("cublas_ms", float("nan")), 2)) for x in rs])
PY
