#!/usr/bin/env bash
# The benchmark suite with every peer: flce (default), flce_fast and the budget curve beside
# cuBLAS, torch.compile, Liger (Triton and its Hopper kernel) and CCE, at Gemma 2 / Llama 3 /
# Qwen 2.5 (bf16, peaky) and over the Llama 3 token sweep. Liger's Hopper kernel needs the 92 MB
# nvidia-cutlass-dsl-libs-cu13 wheel, more than one call carries (64 MiB with the tree), so it
# travels in three parts of 31 MB (scripts/gpu/peer-wheels.sh writes .whl/c-aa, c-ab, c-ac) in
# back-to-back device calls from the repository root (the machine keeps /tmp while warm):
#   calls 1–3 (.whl/c-aa, then c-ab, then c-ac there):   PART=cut bash scripts/gpu/suite.sh
#   call 4 (gpu-bundle/wheels and .whl/small there):        PART=wheel bash scripts/gpu/suite.sh
#   call 5 (with gpu-bundle there):                           OUT=$OUT ROUNDS=2 bash scripts/gpu/suite.sh
# The budgets: 24M and 48M below the default's, 256M and 512M about Liger's Hopper kernel's memory,
# then the vocabulary-slice and three-product plans. SWEEP (default "1024,4096,16384,65536,131072")
# and SUITE_MINUTES (default 8.5) bound call 5; REP_MS (default 600: ~12 timed calls of a 50 ms
# forward+backward) sets the timer; ROUNDS (default 1) times each shape's methods that many times
# in turn and reports the medians (suite.py --rounds).
set -uo pipefail
if [ "${PART:-2}" = cut ]; then
  # whichever part this call carried (.whl/c-*: the others are not on the device)
  mkdir -p /tmp/cut && cp .whl/c-*/cu13.part.* /tmp/cut/ && ls -la /tmp/cut
  exit 0
fi
if [ "${PART:-2}" = wheel ]; then
  mkdir -p /tmp/whl /tmp/small && cp gpu-bundle/wheels/flce-*.whl /tmp/whl/ && cp .whl/small/*.whl /tmp/small/ \
    && ls -la /tmp/whl /tmp/small
  exit 0
fi
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
cat /tmp/cut/cu13.part.* > /tmp/cut/nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers /tmp/small/*.whl /tmp/cut/*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site /tmp/whl/flce-*.whl
export PYTHONPATH=/tmp/peers/nvidia_cutlass_dsl/dsl_packages:/tmp/site:/tmp/peers
python3 benchmarks/suite.py --flce-bin gpu-bundle/flce --out "$OUT/suite" --data peaky --extra-dtypes "" \
  --methods flce,flce_fast,cublas,compile,liger,liger_sm90,cce --budgets 24M,48M,256M,512M,1G,1536M,2G,4G --rep-ms "${REP_MS:-600}" \
  --sweep "${SWEEP:-1024,4096,16384,65536,131072}" --sweep-methods flce,flce_fast,cublas,liger,cce,compile \
  --rounds "${ROUNDS:-1}" --max-minutes "${SUITE_MINUTES:-8.5}" > "$OUT/suite.log" 2>&1
echo "exit $?" >> "$OUT/suite.log"
grep -av "%|" "$OUT/suite.log" | tail -n 60
