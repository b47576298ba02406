#!/usr/bin/env bash
# s38: why the default plan runs Llama 3's 69,888-row vocabulary (the 1 GB slice's rest) at
# 1.12-1.19x four cuBLAS GEMMs against 1.05-1.07x at 128,256 rows: the forward's and G's grids
# (L2 budgets, the forward's rest) and the backward's chunk (a larger budget), two rounds each,
# `flce bench --step-budget-mb 0` at both vocabularies.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
run() {  # name, env..., -- bench args
  local name=$1; shift
  for s in 8192,4096,69888 8192,4096,128256; do
    env "$@" gpu-bundle/flce bench --shapes $s --iters 10 --step-budget-mb 0 $EXTRA 2>&1 | grep "^| 8192x" | head -1 | sed "s/^/$name /" >> "$OUT/rows.log"
  done
}
for r in 1 2; do
  EXTRA= run default FLCE_X=0
  EXTRA= run fwd-l2-0 FLCE_SM90_L2_MB=0
  EXTRA= run fwd-l2-64 FLCE_SM90_L2_MB=64
  EXTRA= run fwd-norest FLCE_SM90_REST=0
  EXTRA= run g-l2-0 FLCE_SM90_G_L2_MB=0
  EXTRA= run g-l2-64 FLCE_SM90_G_L2_MB=64
  EXTRA="--budget-mb 256" run bwd-256MB FLCE_X=0
  echo "round $r at ${SECONDS}s"
done
python3 - "$OUT/rows.log" <<'PY'
import sys, collections
acc = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, rest = line.split(" ", 1)
    cells = [c.strip() for c in rest.split("|")]
    v = cells[1].split("x")[2].split()[0]
    gemm, fwd, fb = float(cells[2]), float(cells[3].split()[0]), float(cells[4].split()[0])
    acc[(v, name)].append((fwd / gemm, fb / (4 * gemm), fwd, fb))
print("| V | variant | fwd / cuBLAS | fwd+bwd / 4 cuBLAS | fwd ms | fwd+bwd ms |")
print("|---|---|---|---|---|---|")
for (v, name), xs in sorted(acc.items()):
    f = lambda i: " / ".join(f"{x[i]:.3f}" if i < 2 else f"{x[i]:.2f}" for x in xs)
    print(f"| {v} | {name} | {f(0)} | {f(1)} | {f(2)} | {f(3)} |")
PY
echo "total ${SECONDS}s"
