#!/usr/bin/env bash
# s29 call 2: the compact forward against the plain forward and cuBLAS's logits GEMM at the 16k
# training-step loss shape (D 2048: the shortest k-loop) and at Llama 3, one launch each over
# all tokens (three-product budget 6 GB / 8 GB: one chunk), same ncu conditions: time, SM clock,
# tensor-pipe activity, instructions, local-memory traffic. gpu-bundle = 8472bce.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,dram__bytes_write.sum,dram__bytes_read.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum,smsp__warps_active.avg.pct_of_peak_sustained_active
for s in "16384,2048,128256 6144" "llama3 8192"; do
  set -- $s
  timeout 120 ncu --clock-control none -k "regex:flce_sm90_forward|nvjet" -c 40 --csv --metrics $M \
    $B/flce bench --shapes $1 --iters 1 --step-budget-mb $2 > "$OUT/ncu-${1%%,*}.csv" 2> "$OUT/ncu-${1%%,*}.err"
  echo "ncu $1 rc=$? at ${SECONDS}s"
done
python3 - "$OUT" <<'PY'
import csv, sys, glob, collections
for path in sorted(glob.glob(sys.argv[1] + "/ncu-*.csv")):
    rows = [l for l in open(path) if l.startswith('"')]
    r = list(csv.DictReader(rows))
    by = collections.OrderedDict()
    for x in r:
        key = (x["ID"], x["Kernel Name"][:60])
        by.setdefault(key, {})[x["Metric Name"]] = x["Metric Value"]
    print("##", path.split("/")[-1])
    for (i, name), m in by.items():
        t = m.get("gpu__time_duration.sum"); clk = m.get("sm__cycles_elapsed.avg.per_second")
        print(f"{i:>3} {name:60s} t={t} clk={clk} tensor%={m.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active')} "
              f"inst={m.get('smsp__inst_executed.sum')} lmem_ld={m.get('l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum')} "
              f"lmem_st={m.get('l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum')} dramW={m.get('dram__bytes_write.sum')} warps%={m.get('smsp__warps_active.avg.pct_of_peak_sustained_active')}")
PY
