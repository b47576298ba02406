#!/usr/bin/env bash
# Why flce@2G's 16k training step now peaks at Liger's 3,271 MB where 5106265 (s19) measured
# 1,788 (perf-notes v36). Both wheels (old = 5106265, new = main): the three-product plan each
# takes for the step's loss shape (16384, 2048, 128256) with 2 and 3 GB, then the step at 16k
# tokens with the default call and with 2 GB (benchmarks/train_step.py, 3 timed steps each).
# Build here first (wheels-old/ and wheels-new/ git-excluded, carried):
#   git worktree add /tmp/w19 5106265 && (cd /tmp/w19 && CARGO_TARGET_DIR=/tmp/w19-target \
#     maturin build --release --quiet -m crates/flce-py/Cargo.toml -o /work/main/wheels-old)
#   maturin build --release --quiet -m crates/flce-py/Cargo.toml -o wheels-new
#   printf '/wheels-old\n/wheels-new\n' >> .git/info/exclude
# then, carrying wheels-old and wheels-new (about 2 minutes):  OUT=$OUT bash scripts/gpu-peak-16k.sh
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
export FLCE_CACHE_DIR=$(mktemp -d)
for side in old new; do
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/$side wheels-$side/flce-*.whl
  PYTHONPATH=/tmp/$side timeout 60 python3 - > $OUT/plan-$side.log 2>&1 <<'PY'
import torch, flce
e = torch.randn(16384, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
c = torch.randn(128256, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
for budget in (2 << 30, 3 << 30):
    print(budget >> 20, "MB:", flce.three_product_plan(e, c, workspace_budget=budget))
print("default:", flce.kernel_plans(e, c))
PY
  echo "plan $side rc=$?"; cat $OUT/plan-$side.log | cut -c1-400
  PYTHONPATH=/tmp/$side timeout 120 python3 benchmarks/train_step.py --tokens 16384 --methods flce,flce@2G --repeats 3 \
    --out $OUT/train-$side.json > $OUT/train-$side.log 2>&1
  echo "train $side rc=$? at ${SECONDS}s"; tail -n 4 $OUT/train-$side.log
done
