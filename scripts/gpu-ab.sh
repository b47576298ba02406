#!/usr/bin/env bash
# A/B timing of two builds on the GPU machine, in one call: `flce bench` of bundle A and bundle B
# interleaved (A B A B ...), so clock drift and neighbours hit both alike; prints the median of
# each shape's forward and forward+backward per bundle and B/A, last.
#   bash scripts/gpu-ab.sh OLD_BUNDLE NEW_BUNDLE [rounds]     (each bundle from gpu-prepare.sh)
# Carry both bundle folders. Logs under $OUT (or ./gpu-logs): 4 files a round, so point OUT at a
# folder that is archived afterwards when the caller's $OUT returns only a few files.
set -uo pipefail
A=${1:?bundle A}; B=${2:?bundle B}; rounds=${3:-3}
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}  # private (0700), fresh per run
for r in $(seq 1 "$rounds"); do
  for side in A B; do
    bundle=$([ $side = A ] && echo "$A" || echo "$B")
    "$bundle/flce" bench --shapes gemma2,llama3,qwen25 --json "$OUT/ab-$side-$r.jsonl" > "$OUT/ab-$side-$r.log" 2>&1 \
      || { echo "bench $side round $r failed"; tail -n 5 "$OUT/ab-$side-$r.log"; }
  done
done
python3 - "$OUT" "$rounds" <<'PY'
import json, statistics, sys, glob
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for side in "AB":
    for r in range(1, rounds + 1):
        try:
            lines = open(f"{out}/ab-{side}-{r}.jsonl").read().split("\n")
        except OSError:
            continue
        for line in filter(None, lines):
            j = json.loads(line)
            rows.setdefault(j["shape"], {}).setdefault(side, []).append((j["fwd_ms"], j["fb_ms"], j["cublas_ms"]))
print("| shape | A fwd ms | B fwd ms | B/A | A fwd+bwd ms | B fwd+bwd ms | B/A | cuBLAS ms A / B |")
print("|---|---|---|---|---|---|---|---|")
for shape, sides in rows.items():
    med = {s: tuple(statistics.median(x[k] for x in v) for k in range(3)) for s, v in sides.items()}
    if "A" in med and "B" in med:
        a, b = med["A"], med["B"]
        print(f"| {shape} | {a[0]:.2f} | {b[0]:.2f} | {b[0]/a[0]:.3f} | {a[1]:.2f} | {b[1]:.2f} | {b[1]/a[1]:.3f} "
              f"| {a[2]:.2f} / {b[2]:.2f} |")
PY
