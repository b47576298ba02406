#!/usr/bin/env bash
# s35 call 4: the new G defaults with logit options (their modules keep G in registers, now on the
# 3-stage ring and the L2 grid), dE only once more, memcheck of one case to its summary; then the
# suite at the model shapes with flce's curve down to 24 MB beside the peers (no Liger Hopper).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
timeout 100 compute-sanitizer --error-exitcode 9 $B/gpu-tests --small "bf16 none (255,507,123)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|passed" "$OUT/memcheck.log" | tail -2
old="old=$B/flce:FLCE_SM90_MAINLOOP=gfold=0,FLCE_SM90_G_L2_MB=0"
v() { SHAPES="$1" BENCH_ARGS="--iters 5 --step-budget-mb 0 $2" OUT=$OUT/var-$3 bash scripts/gpu-variants.sh $4 "new=$B/flce" "$old" > "$OUT/v-$3.md" 2>&1; tail -n 3 "$OUT/v-$3.md"; }
v gemma2,llama3 "--loss-options softcap" softcap 2
v llama3 "--loss-options all" all 2
v llama3 "--grads de" de 3
cat "$OUT"/v-*.md > "$OUT/variants.md"; rm -f "$OUT"/v-*.md
tar czf "$OUT/var.tgz" -C "$OUT" $(cd "$OUT" && ls -d var-*) && rm -rf "$OUT"/var-*
echo "variants done at ${SECONDS}s"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl .whl/small/cut_cross_entropy-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site $B/wheels/flce-*.whl
PYTHONPATH=/tmp/site:/tmp/peers timeout 240 python3 benchmarks/suite.py --flce-bin $B/flce --out /tmp/suite --data peaky \
  --extra-dtypes "" --methods flce,flce_fast,cublas,compile,liger,cce --budgets 24M,48M --sweep none --rep-ms 500 \
  --max-minutes 3.3 > "$OUT/suite.log" 2>&1
echo "suite rc=$? at ${SECONDS}s"
grep -av "%|" "$OUT/suite.log" | tail -n 30
