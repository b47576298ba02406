#!/usr/bin/env bash
# s42 call 5: what the compact forward's q costs, per launch under ncu (cycles, clock, DRAM bytes)
# at Gemma 2 and Llama 3 (flce bench's three-product pass at 8 GB: one chunk): main's build
# (flce-base), an experiment build without the q TMA stores (flce-nostore: the fold warps still
# write q over the staging; results wrong, timing only), and one without q at all (flce-noq: no
# q written to the staging, no stores; m_ref and the statistics as main's) — experiment.patch
# (and flce-gst: q stored by the fold warps straight to global memory, st.global.cs 16 bytes a
# chunk, no TMA store — experiment-gst.patch; a candidate fix, not checked for correctness here)
# beside this file; and main's plain forward in the same runs.
set -uo pipefail
L=${OUT:-gpu-logs}; mkdir -p "$L"; cp "$0" "$L/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
files=()
for b in base gst nostore noq; do
  mkdir -p $L/m-$b
  for r in 1 2; do
  BIN=gpu-bundle/flce-$b OUT=$L/m-$b KERNEL='^flce_sm90_forward_compact$' COUNT=1 SHAPES="gemma2 llama3" \
    BENCH_ARGS="--iters 1 --step-budget-mb 8192" timeout 100 bash scripts/ncu-launch-metrics.sh $b$r= > $L/m-$b-$r.txt 2>&1
  echo "$b r$r rc=$? ${SECONDS}s"; tail -2 $L/m-$b-$r.txt
  done
done
mkdir -p $L/m-plain
BIN=gpu-bundle/flce-base OUT=$L/m-plain KERNEL='^flce_sm90_forward$' COUNT=1 SHAPES="gemma2 llama3" \
  BENCH_ARGS="--iters 1 --step-budget-mb 0" timeout 100 bash scripts/ncu-launch-metrics.sh plain= > $L/m-plain.txt 2>&1
echo "plain rc=$? ${SECONDS}s"
python3 scripts/ncu_launch_table.py $L/m-*/ncu-*.csv | tee $L/table.txt
tar czf $L/m.tgz -C $L m-base m-gst m-nostore m-noq m-plain && rm -rf $L/m-base $L/m-gst $L/m-nostore $L/m-noq $L/m-plain $L/m-*-?.txt
