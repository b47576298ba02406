#!/usr/bin/env bash
# The products' α with a host beta for every f32 accumulator (perf-notes v53's next step, landed as
# 0d85d2c with this check's output: benchmarks/h200-2026-12-04-s45/alpha-check/, perf-notes v54): the
# GPU check in one call (~350 s; its tests stop at a 200 s cap — the rest: s45's
# alpha-tests-rest/), from the repository root after scripts/gpu-prepare.sh, with the build before it as gpu-bundle/old/flce (stripped: the carry is 64 MiB):
#   (git worktree add /tmp/old <main-before>; cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target \
#      cargo build --release -p flce-cli) && mkdir -p gpu-bundle/old && cp /tmp/old-target/release/flce \
#      gpu-bundle/old/ && strip gpu-bundle/old/flce
#   device call (carry gpu-bundle): OUT=$OUT bash scripts/gpu-alpha-check.sh
# Gates: mean-scale ok; every case ok; memcheck 0 errors; suite errors ~2.1e-3; fwd+bwd and
# three-product ÷ old within the rounds' spread at 8k AND at 65k (s44's device-β build: 1.090 there).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
T=./gpu-bundle/gpu-tests
timeout 200 $T mean-scale "(257,520,300)" "(1,64,1000)" "de-chunks" "rest 34" "de-head" "token-chunks" "frozen" \
  "phases" "bf16 llama3 sampled fused" > "$OUT/tests.log" 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c '^test .* ok' $OUT/tests.log) failed=$(grep -c '^test .* FAILED' $OUT/tests.log) of $(grep -c '^test ' $OUT/tests.log)"
grep -h "^test mean-scale\|FAILED" "$OUT/tests.log" | cut -c1-300
FLCE_SM90_PRODUCTS=1 timeout 60 $T "bf16 all (1024,64,8000)" "bf16 sum (600,520,5000) de-chunks" "f32 all (257,520,300)" \
  > "$OUT/tests-own.log" 2>&1
echo "own products rc=$? ok=$(grep -c '^test .* ok' $OUT/tests-own.log) of $(grep -c '^test ' $OUT/tests-own.log)"
FLCE_GPU_TEST_MODES=FusedTiles timeout 50 compute-sanitizer --tool memcheck $T --small "bf16 all (257,520,300)" \
  > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $OUT/memcheck.log)"
mkdir -p /tmp/ab8 /tmp/ab65
OUT=/tmp/ab8 BENCH_ARGS="--step-budget-mb 8192" timeout 90 bash scripts/gpu-variants.sh 2 \
  "old=gpu-bundle/old/flce" "alpha=gpu-bundle/flce" > "$OUT/ab8k.txt" 2>&1
OUT=/tmp/ab65 SHAPES="65536,4096,128256" timeout 80 bash scripts/gpu-variants.sh 2 \
  "old=gpu-bundle/old/flce" "alpha=gpu-bundle/flce" > "$OUT/ab65k.txt" 2>&1
tar czf "$OUT/ab-logs.tgz" -C /tmp ab8 ab65
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
PYTHONPATH=/tmp/site timeout 90 python3 benchmarks/suite.py --flce-bin gpu-bundle/flce --out /tmp/suite --data peaky \
  --extra-dtypes "" --methods flce,flce_fast,cublas --budgets 1G --sweep 16384 --sweep-methods flce,flce_fast,cublas \
  --rep-ms 200 --max-minutes 1.4 > "$OUT/suite.log" 2>&1
echo "== A/B (÷ old)"; tail -n 8 "$OUT/ab8k.txt"; tail -n 3 "$OUT/ab65k.txt"
echo "== suite errors"; grep -a "peaky bf16" "$OUT/suite.log" | grep -av "%|" | cut -c1-120
