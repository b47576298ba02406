#!/usr/bin/env bash
# The default sm90 forward against cuBLAS's logits GEMM under ncu, one launch each, at the model
# shapes (issue 10's forward target: ≤ 1.0× the logits GEMM) and the 16k training-step loss:
# time, SM clock, tensor-pipe activity, DRAM reads, local-memory loads (the staged fold's fold
# warps run at 40 registers and reload a few spilled values). s30 measured 1.001× at the 16k
# shape (benchmarks/h200-2026-12-03-s30/forward-ncu-cublas-grad/forward-ncu.md); the model shapes
# were 1.04–1.05× before the staged fold (s20's suite) and have not been measured since.
# ~3 minutes, 2 files. Build with scripts/gpu-prepare.sh; through the device tool, carrying
# gpu-bundle: OUT=$OUT bash scripts/gpu-forward-ncu.sh
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call-forward-ncu.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum
for s in gemma2 llama3 qwen25 16384,2048,128256; do
  # (flce bench times cuBLAS's logits GEMM first, then the forward: -c 8 takes a few of each)
  timeout 60 ncu --clock-control none -k "regex:^flce_sm90_forward$|nvjet|gemm" -c 8 --csv --metrics $M \
    $B/flce bench --shapes $s --iters 1 2> /dev/null | grep '^"' > /tmp/ncu-$s.csv
  echo "ncu $s rc=$? at ${SECONDS}s"
done
python3 - /tmp/ncu-*.csv > "$OUT/forward-ncu.md" <<'PY'
import csv, sys, collections, statistics
scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}
print("| shape | kernel | launches | median ms | MHz | tensor % | DRAM rd GB | lmem ld sectors |")
print("|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    by = collections.OrderedDict()
    for x in csv.DictReader(open(path)):
        v = x["Metric Value"].replace(",", "")
        u = x.get("Metric Unit", "")
        try:
            v = float(v) * (scale.get(u, 1.0) if x["Metric Name"] == "gpu__time_duration.sum" else
                            {"byte": 1e-9, "Kbyte": 1e-6, "Mbyte": 1e-3, "Gbyte": 1.0}.get(u, 1.0) if "bytes" in x["Metric Name"] else
                            {"hz": 1e-6, "Khz": 1e-3, "Mhz": 1.0, "Ghz": 1e3, "cycle/nsecond": 1e3, "cycle/usecond": 1.0}.get(u, 1.0) if "per_second" in x["Metric Name"] else 1.0)
        except ValueError:
            continue
        by.setdefault((x["ID"], x["Kernel Name"][:40]), {})[x["Metric Name"]] = v
    kinds = collections.OrderedDict()
    for (_, name), m in by.items():
        kinds.setdefault(name, []).append(m)
    for name, ms in kinds.items():
        med = lambda k: statistics.median(m.get(k, float("nan")) for m in ms)
        print(f"| {path.split('ncu-')[1][:-4]} | {name} | {len(ms)} | {med('gpu__time_duration.sum'):.3f} | "
              f"{med('sm__cycles_elapsed.avg.per_second'):.0f} | {med('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'):.1f} | "
              f"{med('dram__bytes_read.sum'):.2f} | {med('l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum'):.0f} |")
PY
cat "$OUT/forward-ncu.md"
