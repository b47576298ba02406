#!/usr/bin/env bash
# s42 call 3: where the compact forward's time goes against the plain forward's, grid and ordered
# (FLCE_SM90_COMPACT_ORDER): ncu per launch (DRAM bytes, L2 hits, clock, cycles) at Llama 3 and
# Gemma 2, flce bench with the three-product pass at 8 GB (one chunk); then one profiled step of
# the default and of the three-product pass at 8 GB per kernel (torch.profiler), both orders.
set -uo pipefail
L=${OUT:-gpu-logs}; mkdir -p "$L"; cp "$0" "$L/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
mkdir -p $L/ncu
OUT=$L/ncu KERNEL=flce_sm90_forward COUNT=6 SHAPES="llama3 gemma2" BENCH_ARGS="--iters 1 --step-budget-mb 8192" T_NCU=120 \
  timeout 330 bash scripts/ncu-launch-metrics.sh grid=FLCE_SM90_COMPACT_ORDER=0 ordered=FLCE_SM90_COMPACT_ORDER=1 > $L/ncu.txt 2>&1
echo "ncu rc=$? ${SECONDS}s"; tail -30 $L/ncu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site gpu-bundle/wheels/flce-*.whl
for o in 0 1; do for s in llama3 gemma2; do
  FLCE_SM90_COMPACT_ORDER=$o PYTHONPATH=/tmp/site timeout 60 python3 scripts/profile_kernels.py --shape $s --top 8 --gaps 2 \
    --configs "auto/auto/8589934592" > $L/profile-$s-order$o.log 2>&1
  echo "profile $s order $o rc=$? ${SECONDS}s"; grep -E "^## |flce_sm90_forward|grad_from_compact|merge_tile" $L/profile-$s-order$o.log
done; done
tar czf $L/logs.tgz -C $L ncu profile-llama3-order0.log profile-llama3-order1.log profile-gemma2-order0.log profile-gemma2-order1.log
rm -rf $L/ncu $L/profile-*.log
