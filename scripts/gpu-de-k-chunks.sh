#!/usr/bin/env bash
# The three-product pass's dE in K-chunks summed in f32 (plan::with_de_k_chunks; f16's default since
# 66e1d9a, FLCE_STEP_DE_K_CHUNK=0 for one product over V; perf-notes v57–v58; s49 ran it on
# 26475a7, before the default) checked and measured in one device call (carry gpu-bundle,
# built by scripts/gpu-prepare.sh; ~9 min of the 10 a call may take): the GPU cases of four shapes (every dtype and option
# set; check_step runs each three-product plan also with dE in K-chunks of 128 columns, its
# accumulator in dC's buffer and in the workspace) in 4 shards, memcheck on two of them, then
# benchmarks/fast_precision.py with FLCE_STEP_DE_K_CHUNK=0 and =32768, two alternating rounds,
# and benchmarks/long_k.py's dC over K = N = 65,536 (f16 and bf16: does every plan's dC at large N
# lose what dE over K = V loses?).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; cp "$0" "$OUT/call.sh"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
mkdir -p /tmp/shards
OUT=/tmp/shards SHARDS=4 LIMIT=150 bash scripts/gpu-tests-sharded.sh "(1,64,1000)" "(255,507,123)" \
  "(257,520,300)" "(2000,136,9001)" > "$OUT/gpu-tests.log" 2>&1 &
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 all (255,507,123)" "f16 none (1,64,1000)" > "$OUT/memcheck.log" 2>&1; echo "exit $?" >> "$OUT/memcheck.log"
wait
echo "exit $?" >> "$OUT/gpu-tests.log"; tar czf "$OUT/gpu-tests-shards.tgz" -C /tmp shards
tail -n 6 "$OUT/gpu-tests.log"; grep -E "ERROR SUMMARY|^gpu:" "$OUT/memcheck.log"; tail -n 1 "$OUT/memcheck.log"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
for round in 1 2; do
  FLCE_STEP_DE_K_CHUNK=0 timeout 100 python3 benchmarks/fast_precision.py one 2>&1 | grep -v Warn | tee -a "$OUT/de_k_chunks.log"
  FLCE_STEP_DE_K_CHUNK=32768 timeout 100 python3 benchmarks/fast_precision.py k32k 2>&1 | grep -v Warn \
    | tee -a "$OUT/de_k_chunks.log"
done
for dt in f16 bf16; do
  timeout 120 python3 benchmarks/long_k.py --shapes llama3_n65536 --dtype $dt --skip-de 2>&1 | grep -v Warn \
    | tee -a "$OUT/long_k.log"
done
