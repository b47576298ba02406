#!/usr/bin/env bash
# s30 call 5 (~150 s of device time left): the three-product pass at the 16k loss (2 GB) under
# a smaller forward L2 budget (FLCE_SM90_L2_MB=16: the compact forward reads 2.5x the plain one's
# DRAM bytes, perf-notes v39; 16 MB is the only other grid within the planner's balance at these
# chunks — 16 slots x 8 splits instead of 12 x 11, and 16 x 8 instead of 32 x 4 for the last), 3 rounds; then where the default compact forward's warps stall, per SASS
# instruction (ncu PC sampling: SourceCounters + WarpStateStats), first chunk (6144 tokens).
# gpu-bundle = 0808260. The top instructions by stall samples in stalls-*.txt.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
runs=$(mktemp -d)
SHAPES=16384,2048,128256 BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs timeout 50 bash scripts/gpu-variants.sh 3 \
  "l2-32=$B/flce" "l2-16=$B/flce:FLCE_SM90_L2_MB=16" > "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"; cat "$OUT/variants.md"
grep -H "" $runs/var-*.jsonl | sed "s|^$runs/||" > "$OUT/variants.jsonl"
for knob in fold=2; do
  FLCE_SM90_MAINLOOP=$knob timeout 60 ncu --clock-control none --section SourceCounters --section WarpStateStats \
    --section SpeedOfLight -k "regex:^flce_sm90_forward_compact$" -c 1 -o /tmp/rep-$knob -f \
    $B/flce bench --shapes 16384,2048,128256 --iters 1 --step-budget-mb 2048 > /tmp/ncu-$knob.log 2>&1
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
  gzip -c /tmp/src-$knob.csv > /tmp/src-$knob.csv.gz
  [ $(wc -c < /tmp/src-$knob.csv.gz) -lt 3000000 ] && cp /tmp/src-$knob.csv.gz "$OUT/"
  head -n 45 "$OUT/stalls-$knob.txt" | cut -c1-220
done
grep -E "Duration|Compute \(SM\) Throughput|Warp Cycles Per Issued|Stall" "$OUT"/details-*.txt | head -30
