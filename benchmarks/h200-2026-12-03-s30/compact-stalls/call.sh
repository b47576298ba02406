#!/usr/bin/env bash
# Where the compact forward (TMA q stores, evict-first: perf-notes v38) still loses to the plain
# forward at the 16k loss shape (one chunk): ncu stall reasons of the plain forward and the
# compact forward of main (flce-main) and of the bundle; GPU cases of the bundle; main / new at
# Llama 3 and the 16k loss (2 GB), 2 rounds, beside main under two L2 load policies (the
# FLCE_SM90_MAINLOOP l2a / l2b knob), a 3-stage ring and the fold off the MMA warpgroups (stages=3,fold=1:
# its GPU cases and memcheck first); racecheck of the TMA store path. ~6 minutes.
# Written in s29 for docs/parked/compact-mref-after-stores.patch (the rows' m written after the
# tile's q stores, so the stores' proxy fences — MEMBAR.ALL.CTA in SASS — do not wait for those
# global stores); the session's device time ran out before it ran. To run it:
#   cp gpu-bundle/flce /tmp/flce-main    # a bundle of main (scripts/gpu-prepare.sh)
#   git apply docs/parked/compact-mref-after-stores.patch && bash scripts/gpu-prepare.sh
#   cp /tmp/flce-main gpu-bundle/flce-main
# then through the device tool, carrying gpu-bundle: OUT=$OUT bash scripts/gpu-compact-stalls.sh
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
M="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|gpu__time_duration\.sum|smsp__issue_active\.avg\.pct_of_peak_sustained_active|lts__t_sector_hit_rate\.pct|dram__bytes_read\.sum|sm__pipe_tensor_op_hmma_cycles_active\.avg\.pct_of_peak_sustained_active|smsp__inst_executed\.sum"
prof() {  # name binary kernel
  timeout 40 ncu --clock-control none -k "regex:^$3\$" -c 1 --csv --metrics "$M" $2 bench --shapes 16384,2048,128256 \
    --iters 1 --step-budget-mb 6144 2> /dev/null | grep '^"' > /tmp/ncu-$1.csv
  echo "ncu $1 rc=$? at ${SECONDS}s"
  { echo "# $1"; cat /tmp/ncu-$1.csv; } >> "$OUT/ncu.csv"
}
prof plain $B/flce-main flce_sm90_forward
prof compact $B/flce-main flce_sm90_forward_compact
prof compact-mref $B/flce flce_sm90_forward_compact
python3 - "$OUT" <<'PY2'
import csv, sys
vals, ks = {}, ["plain", "compact", "compact-mref"]
for k in ks:
    for x in csv.DictReader(open(f"/tmp/ncu-{k}.csv")):
        vals.setdefault(x["Metric Name"], {})[k] = x["Metric Value"]
with open(sys.argv[1] + "/stalls.md", "w") as f:
    print("| metric | " + " | ".join(ks) + " |\n|---|---|---|---|", file=f)
    for m in sorted(vals):
        name = m.replace("smsp__average_warps_issue_stalled_", "stall ").replace("_per_issue_active.ratio", "")
        print(f"| {name} | " + " | ".join(str(vals[m].get(k)) for k in ks) + " |", file=f)
print(open(sys.argv[1] + "/stalls.md").read())
PY2
timeout 25 $B/gpu-tests --small "bf16 plain (" "bf16 nosoftcap (" "f16 plain (129" > "$OUT/tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests.log" | cut -c1-300 | head -4
# the fold off the MMA warpgroups (FLCE_SM90_MAINLOOP stages=3,fold=1: kernels/sm90/forward_staged.cuh,
# perf-notes v38), correctness first: plain and option modules, bf16 / f16, their compact runs
FOLD="stages=3,fold=1"
FLCE_SM90_MAINLOOP=$FOLD timeout 60 $B/gpu-tests --small "bf16 plain (" "bf16 nosoftcap (" "bf16 all (257" \
  "bf16 softcap (257" "f16 plain (129" "bf16 ignore7 (257" > "$OUT/tests-fold.log" 2>&1
echo "fold tests rc=$? at ${SECONDS}s: $(grep -c '\.\.\. ok' "$OUT/tests-fold.log") ok"; grep -E "FAILED|\.\.\. fail" "$OUT/tests-fold.log" | cut -c1-300 | head -4
FLCE_SM90_MAINLOOP=$FOLD timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small \
  "bf16 plain (129,200,5003)" "bf16 nosoftcap (1,64,1000)" > /tmp/memcheck-fold.log 2>&1
echo "fold memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|gpu:" /tmp/memcheck-fold.log | tail -n 2
{ echo "== compute-sanitizer --tool memcheck (fold)"; cat /tmp/memcheck-fold.log; } >> "$OUT/tests-fold.log"
runs=$(mktemp -d)
# (and main's kernels with the main loop's loads under L2 policies: FLCE_SM90_MAINLOOP l2a / l2b,
# 3 = evict_last — E's boxes are reused by every vocabulary tile of a block's run, C's by every
# slot of its split; and main with the 16k pass's 3 chunks balanced — 5504 / 5504 / 5376 tokens
# instead of 6144 / 6144 / 4096 — through the FLCE_STEP_MAX_TOKENS knob; and main's kernels with a
# 3-stage ring (FLCE_SM90_MAINLOOP stages=3), what a 64 KB staging of each tile for an off-loaded
# fold would leave: v38)
SHAPES="llama3 16384,2048,128256" BENCH_ARGS="--iters 5 --step-budget-mb 2048" OUT=$runs timeout 200 bash scripts/gpu-variants.sh 2 \
  "main=$B/flce-main" "mref=$B/flce" "a-last=$B/flce-main:FLCE_SM90_MAINLOOP=l2a=3" \
  "b-last=$B/flce-main:FLCE_SM90_MAINLOOP=l2b=3" "bal=$B/flce-main:FLCE_STEP_MAX_TOKENS=5504" \
  "stages3=$B/flce-main:FLCE_SM90_MAINLOOP=stages=3" "fold=$B/flce-main:FLCE_SM90_MAINLOOP=$FOLD" > "$OUT/variants.md" 2>&1
# (the 16k pass at 1792 MB — about what workspace_budget="peak" gives in the 16k training step — plans
# 5120 × 3 + 1024 tokens; balanced, 4 × 4096)
SHAPES="16384,2048,128256" BENCH_ARGS="--iters 5 --step-budget-mb 1792" OUT=$runs/peak timeout 40 bash scripts/gpu-variants.sh 2 \
  "main=$B/flce-main" "bal4=$B/flce-main:FLCE_STEP_MAX_TOKENS=4096" >> "$OUT/variants.md" 2>&1
echo "variants at ${SECONDS}s"; cat "$OUT/variants.md"
grep -H "" $runs/var-*.jsonl $runs/peak/var-*.jsonl | sed "s|^$runs/||" > "$OUT/variants.jsonl"
timeout 35 compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "bf16 nosoftcap (1,64,1000)" \
  > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$? at ${SECONDS}s"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|gpu:" "$OUT/racecheck.log" | tail -n 2
