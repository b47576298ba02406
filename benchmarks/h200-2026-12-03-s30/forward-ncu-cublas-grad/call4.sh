#!/usr/bin/env bash
# s30 call 4: (1) the forwards against cuBLAS's logits GEMM at the 16k loss shape (one chunk: 6 GB),
# ncu: the new default's plain forward (fold off the MMA warpgroups), its compact forward (in
# registers, 3-stage ring), the compact forward staged (fold=1), cuBLAS (nvjet) — time, clock,
# tensor pipe, instructions, local memory, DRAM, stall reasons; flce-main here = b5b36d3's bundle.
# (2) scripts/gpu-cublas-grad-modules.sh: gpu-bundle/flce = b5b36d3 + docs/parked/cublas-grad-modules.patch,
# flce-main = b5b36d3.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call4.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
S=smsp__average_warps_issue_stalled
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,${S}_barrier_per_issue_active.ratio,${S}_long_scoreboard_per_issue_active.ratio,${S}_wait_per_issue_active.ratio,${S}_gmma_per_issue_active.ratio,${S}_mio_throttle_per_issue_active.ratio,${S}_membar_per_issue_active.ratio,${S}_short_scoreboard_per_issue_active.ratio,${S}_math_pipe_throttle_per_issue_active.ratio
timeout 110 ncu --clock-control none -k "regex:flce_sm90_forward|nvjet" -c 14 --csv --metrics $M \
  $B/flce-main bench --shapes 16384,2048,128256 --iters 1 --step-budget-mb 6144 2> /dev/null | grep '^"' > /tmp/ncu-default.csv
echo "ncu default rc=$? at ${SECONDS}s"
FLCE_SM90_MAINLOOP=fold=1 timeout 45 ncu --clock-control none -k "regex:flce_sm90_forward_compact" -c 1 --csv --metrics $M \
  $B/flce-main bench --shapes 16384,2048,128256 --iters 1 --step-budget-mb 6144 2> /dev/null | grep '^"' > /tmp/ncu-fold1.csv
echo "ncu fold=1 rc=$? at ${SECONDS}s"
python3 - /tmp/ncu-default.csv /tmp/ncu-fold1.csv > "$OUT/forward-ncu.md" <<'PY'
import csv, sys, collections
print("| run | id | kernel | ms | MHz | tensor % | inst (M) | lmem ld sectors | DRAM rd GB | DRAM wr GB | stalls per issue: barrier / long_sb / wait / gmma / mio / membar / short_sb / math |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    by = collections.OrderedDict()
    for x in csv.DictReader(open(path)):
        u = x.get("Metric Unit", "").lower()
        v = x["Metric Value"].replace(",", "")
        try:  # to ns, bytes, hertz
            f = {"usecond": 1e3, "msecond": 1e6, "second": 1e9, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9,
                 "khz": 1e3, "mhz": 1e6, "ghz": 1e9, "cycle/nsecond": 1e9, "cycle/usecond": 1e6}.get(u, 1.0)
            v = str(float(v) * f)
        except ValueError:
            pass
        by.setdefault((x["ID"], x["Kernel Name"][:48]), {})[x["Metric Name"]] = v
    for (i, name), m in by.items():
        g = lambda k: m.get(k, "nan")
        st = " / ".join(g(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio") for s in
                        ["barrier", "long_scoreboard", "wait", "gmma", "mio_throttle", "membar", "short_scoreboard", "math_pipe_throttle"])
        print(f"| {path.split('ncu-')[1][:-4]} | {i} | {name} | {float(g('gpu__time_duration.sum'))/1e6:.3f} | {float(g('sm__cycles_elapsed.avg.per_second'))/1e6:.0f} | "
              f"{g('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active')} | {float(g('smsp__inst_executed.sum'))/1e6:.0f} | "
              f"{g('l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum')} | {float(g('dram__bytes_read.sum'))/1e9:.2f} | {float(g('dram__bytes_write.sum'))/1e9:.2f} | {st} |")
PY
cat "$OUT/forward-ncu.md"
OUT=$OUT bash scripts/gpu-cublas-grad-modules.sh
