#!/usr/bin/env bash
# A/B timing of two flce wheels through the Python call a user makes (benchmarks/time_call.py),
# interleaved (A B A B ...) in one device call; prints each shape's median forward and
# forward+backward per wheel and B/A last.
#   bash scripts/tools/ab-python.sh OLD_BUNDLE NEW_BUNDLE [rounds]   (bundles from scripts/gpu/prepare.sh)
#   AB_SHAPES=llama3_n1024,llama3 AB_METHOD=flce_fast bash scripts/tools/ab-python.sh …   (time_call.py options)
set -uo pipefail
A=${1:?bundle A}; B=${2:?bundle B}; rounds=${3:-3}
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
for side in A B; do
  bundle=$([ $side = A ] && echo "$A" || echo "$B")
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "/tmp/ab-$side" \
    "$bundle"/wheels/flce-*.whl
done
for r in $(seq 1 "$rounds"); do
  for side in A B; do
    (cd benchmarks && PYTHONPATH="/tmp/ab-$side" python3 time_call.py --label "$side" ${AB_SHAPES:+--shapes $AB_SHAPES} ${AB_METHOD:+--method $AB_METHOD}) \
      >> "$OUT/ab-python.jsonl" 2>> "$OUT/ab-python.err"
  done
done
python3 - "$OUT/ab-python.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| shape | A fwd ms | B fwd ms | B/A | A fwd+bwd ms | B fwd+bwd ms | B/A | runs |")
print("|---|---|---|---|---|---|---|---|")
for shape in dict.fromkeys(r["shape"] for r in rows):
    med = {s: [statistics.median(r[k] for r in rows if r["shape"] == shape and r["label"] == s) for k in ("fwd_ms", "fb_ms")]
           for s in "AB" if any(r["shape"] == shape and r["label"] == s for r in rows)}
    if len(med) == 2:
        a, b = med["A"], med["B"]
        n = sum(r["shape"] == shape for r in rows) // 2
        print(f"| {shape} | {a[0]:.2f} | {b[0]:.2f} | {b[0]/a[0]:.3f} | {a[1]:.2f} | {b[1]:.2f} | {b[1]/a[1]:.3f} | {n} |")
PY
