#!/usr/bin/env bash
# s27 call 4 (at 7aaf818): the status-only op also for calls without gradients on CUDA (7aaf818).
# Checks: pytest of the bad-input / status / budget tests and test_fast.py; timing: the default
# call and flce_fast through benchmarks/time_call.py, old wheel (old-bundle = 978e276) against new,
# interleaved, 2 rounds, at the Llama 3 sweep's 1k / 4k and Llama 3; then issue 11's suite at
# Llama 3 and 1k / 4k (flce_fast against torch.compile, Liger's Triton FLCE and cuBLAS's floor3,
# REP_MS 600 as scripts/gpu-suite-fast.sh) if the time allows.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 100 python3 -m pytest -q -p no:cacheprovider -rs \
  -k "bad or status_only or nan_where or budget or no_grad" $OLDPWD/$B/python-tests/test_flce.py \
  $OLDPWD/$B/python-tests/test_fast.py) > "$OUT/pytest.log" 2>&1
echo "pytest rc=$? at ${SECONDS}s"; tail -n 2 "$OUT/pytest.log"
AB_SHAPES=llama3_n1024,llama3_n4096,llama3 OUT=$OUT/ab-default timeout 110 bash scripts/gpu-ab-python.sh old-bundle $B 2 > $OUT/ab-default.md 2>&1
AB_METHOD=flce_fast AB_SHAPES=llama3_n1024,llama3_n4096 OUT=$OUT/ab-fast timeout 70 bash scripts/gpu-ab-python.sh old-bundle $B 2 > $OUT/ab-fast.md 2>&1
echo "ab at ${SECONDS}s"; cat $OUT/ab-default.md $OUT/ab-fast.md
cat $OUT/ab-default/ab-python.jsonl $OUT/ab-fast/ab-python.jsonl > $OUT/ab-python.jsonl; cat $OUT/ab-*/ab-python.err > $OUT/ab-python.err
rm -rf $OUT/ab-fast $OUT/ab-default
export PYTHONPATH=/tmp/site
timeout 250 python3 benchmarks/suite.py --flce-bin $B/flce --out /tmp/suite --shapes llama3 --data peaky \
  --extra-dtypes "" --methods flce,flce_fast,cublas,compile,liger --budgets none --rep-ms 600 --sweep 1024,4096 \
  --sweep-methods flce,flce_fast,cublas,compile,liger --max-minutes 3.8 > "$OUT/suite.log" 2>&1
echo "suite rc=$? at ${SECONDS}s"; grep -av "%|" "$OUT/suite.log" | tail -n 22
