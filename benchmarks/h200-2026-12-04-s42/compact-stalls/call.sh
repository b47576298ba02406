#!/usr/bin/env bash
# s42 call 4: why the staged compact forward runs ~1.2x the plain forward at Gemma 2 but ~1.0x at
# Llama 3 (one step, three-product pass at 8 GB: one chunk; profile in call 3): ncu PC sampling
# (SourceCounters + WarpStateStats + SpeedOfLight) of the compact forward (grid, the default) at
# both shapes — the top stall instructions per shape in stalls-SHAPE.txt — and its per-launch
# DRAM bytes, clock and cycles beside the plain forward's (call 3's table).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
mkdir -p $OUT/m
OUT=$OUT/m KERNEL='^flce_sm90_forward_compact$' COUNT=1 SHAPES="llama3 gemma2" BENCH_ARGS="--iters 1 --step-budget-mb 8192" \
  timeout 150 bash scripts/ncu-launch-metrics.sh compact= > $OUT/metrics.txt 2>&1
echo "metrics rc=$? ${SECONDS}s"; tail -5 $OUT/metrics.txt
for s in gemma2 llama3; do
  knob=$s
  timeout 120 ncu --clock-control none --section SourceCounters --section WarpStateStats \
    --section SpeedOfLight -k "regex:^flce_sm90_forward_compact$" -c 1 -o /tmp/rep-$knob -f \
    $B/flce bench --shapes $s --iters 1 --step-budget-mb 8192 > /tmp/ncu-$knob.log 2>&1
  echo "ncu $knob rc=$? at ${SECONDS}s"; tail -n 2 /tmp/ncu-$knob.log
  ncu -i /tmp/rep-$knob.ncu-rep --page details > "$OUT/details-$knob.txt" 2>&1
  ncu -i /tmp/rep-$knob.ncu-rep --page source --csv --print-source sass > /tmp/src-$knob.csv 2> /tmp/src-$knob.err
  echo "source $knob rc=$? $(wc -c < /tmp/src-$knob.csv) bytes"; head -c 300 /tmp/src-$knob.err
  python3 - /tmp/src-$knob.csv > "$OUT/stalls-$knob.txt" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hi = next((i for i, r in enumerate(rows) if any("Source" == c or "Address" == c for c in r)), 0)
head, body = rows[hi], [r for r in rows[hi + 1:] if len(r) == len(rows[hi])]
print("columns:", head)
key = next((i for i, c in enumerate(head) if c.startswith("Warp Stall Sampling (All")), None)
if key is None:
    sys.exit("no stall sampling column")
num = lambda v: float(v.replace(",", "") or 0) if v.replace(",", "").replace(".", "").isdigit() else 0.0
total = sum(num(r[key]) for r in body)
print(f"instructions {len(body)}, stall samples {total:.0f}")
src = head.index("Source") if "Source" in head else 1
addr = head.index("Address") if "Address" in head else 0
for r in sorted(body, key=lambda r: -num(r[key]))[:60]:
    extra = {head[i]: r[i] for i in range(len(head)) if i not in (key, src, addr) and num(r[i]) > 0 and "stall" in head[i].lower()}
    print(f"{num(r[key]) / total * 100:5.1f}%  {r[addr]}  {r[src][:90]:90s} {extra}")
# and by region: samples per 256-instruction block of the address space
print("\n# samples by address block of 64 instructions")
blocks = {}
for j, r in enumerate(body):
    blocks[j // 64] = blocks.get(j // 64, 0) + num(r[key])
for b, v in sorted(blocks.items()):
    if v / total > 0.01:
        print(f"block {b:3d} (rows {64*b}-{64*b+63}, first {body[64*b][src][:50]}): {v / total * 100:5.1f}%")
PY
  head -n 40 "$OUT/stalls-$knob.txt" | cut -c1-200
done
tar czf $OUT/m.tgz -C $OUT m && rm -rf $OUT/m
grep -E "Duration|Warp Cycles Per Issued|Issued Warp|No Eligible" "$OUT"/details-*.txt | head -20
