#!/usr/bin/env bash
# s46 call 2: the one-chunk three-product plan's per-token state in dC's buffer (4915ef8): every
# small gpu-tests case (3 processes) + the model shapes' sampled cases (one process), the
# binding's pytest files on the trading passes and bad input plus s45's new CUDA tests,
# compute-sanitizer memcheck on small cases — all at once; then (2) the suite's flce_fast against
# torch.compile and cuBLAS at the model shapes and the Llama 3 sweep to 16k (memory beyond the
# gradients; bf16 peaky).
set -uo pipefail
cp "$0" "$OUT/call.sh"
B=gpu-bundle
export FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
$B/gpu-tests --small "(1,64,1000)" > "$OUT/warm.log" 2>&1
P=$PWD/$B/python-tests
(cd /tmp && timeout 230 python3 -m pytest -q -p no:cacheprovider -rs $P/test_fast.py $P/test_bad_input.py > "$OUT/pytest.log" 2>&1; echo "pytest rc $?" >> "$OUT/pytest.log") &
(cd /tmp && timeout 230 python3 -m pytest -q -p no:cacheprovider -rs $P/test_flce.py $P/test_hf.py -k "autocast_returns or patched_model_matches_unpatched or rounds_once_for or f16_gradients" > "$OUT/pytest-s45.log" 2>&1; echo "pytest rc $?" >> "$OUT/pytest-s45.log") &
(timeout 230 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small "(1,64,1000)" "(129,200,5003)" > "$OUT/memcheck.log" 2>&1; echo "memcheck rc $?" >> "$OUT/memcheck.log") &
(timeout 230 $B/gpu-tests "gemma2 sampled" "llama3 sampled" > "$OUT/sampled.log" 2>&1; echo "sampled rc $?" >> "$OUT/sampled.log") &
mkdir -p "$OUT/t"
OUT="$OUT/t" SHARDS=3 LIMIT=230 bash $B/scripts/gpu-tests-sharded.sh --small > "$OUT/t/summary.txt" 2>&1
wait
timeout 200 python3 benchmarks/suite.py --flce-bin $B/flce --out "$OUT/suite" --data peaky --extra-dtypes "" \
  --methods flce_fast,cublas,compile --budgets none --rep-ms 400 --sweep 1024,4096,16384 \
  --sweep-methods flce_fast,cublas,compile --max-minutes 3 > "$OUT/suite.log" 2>&1
echo "suite exit $?" >> "$OUT/suite.log"
cd "$OUT" && rm -f suite/*.png && tar czf tests.tgz t warm.log suite && rm -rf t warm.log suite
echo "== summary"; tar xzOf tests.tgz t/summary.txt
grep -h "state in dC" -c <(tar xzOf tests.tgz) | sed 's/^/lines with state in dC: /'
grep -E "^test .*sampled" sampled.log | cut -c1-160; tail -n 2 sampled.log
grep -a -E "^\| (shape|gemma2|llama3|qwen25)" suite.log | head -12; tail -n 1 suite.log
tail -n 1 memcheck.log; grep -E "ERROR SUMMARY" memcheck.log | tail -1
for f in pytest.log pytest-s45.log; do grep -E "passed|failed" $f | tail -1; tail -n 1 $f; done
