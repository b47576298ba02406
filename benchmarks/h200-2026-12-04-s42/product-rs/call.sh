#!/usr/bin/env bash
# s42 call 6: the product kernel's K-major A (dE = G·C) read into registers (FLCE_SM90_MAINLOOP
# prs=1: ldmatrix, wgmma with A from registers) — the step products that form A from compact
# logits need. Own products on (FLCE_SM90_PRODUCTS=1, a measurement mode): GPU cases against f64
# (twice bitwise) with prs=1; then one profiled step per kernel at Llama 3 and Gemma 2, prs 0 / 1
# (the product kernel's time: dE changes, dC does not), two rounds.
set -uo pipefail
L=${OUT:-gpu-logs}; mkdir -p "$L"; cp "$0" "$L/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d) FLCE_SM90_PRODUCTS=1
FLCE_SM90_MAINLOOP=prs=1 timeout 110 ./gpu-bundle/gpu-tests --small "bf16 plain (129,200,5003)" "bf16 all (1024,64,8000)" \
  "f16 zloss (640,520,3000) pairs" "bf16 plain (1,64,1000)" "plain (1024,64,8000) pairs 2 SMs" "f16 none (300,128,2049)" > $L/tests.log 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c '^test .* ok ' $L/tests.log) failed=$(grep -c 'FAILED' $L/tests.log) of $(grep -c '^test ' $L/tests.log)"
grep -E "FAILED|panicked" $L/tests.log | head -5
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site gpu-bundle/wheels/flce-*.whl
for r in 1 2; do for v in 0 1; do for s in llama3 gemma2; do
  FLCE_SM90_MAINLOOP=prs=$v PYTHONPATH=/tmp/site timeout 40 python3 scripts/profile_kernels.py --shape $s --top 6 --gaps 1 \
    --configs "auto/auto/min" > $L/profile-$s-prs$v-r$r.log 2>&1
  echo "r$r prs=$v $s rc=$? ${SECONDS}s $(grep -E '^\| flce_sm90_product ' $L/profile-$s-prs$v-r$r.log) $(grep -E '^## ' $L/profile-$s-prs$v-r$r.log | cut -c1-60)"
done; done; done
tar czf $L/profiles.tgz -C $L $(cd $L && ls profile-*.log) && rm -f $L/profile-*.log
