#!/usr/bin/env bash
# What needs two GPUs of one host, in one device call from the repository root (gpu-bundle
# carried):
#   OUT=$OUT bash scripts/gpu/two-gpu.sh
# - gpu-tests "nccl" and "device-1": the Rust vocabulary-parallel loss over NCCL on GPUs 0 and 1
#   (tests/gpu/nccl.rs) and a call on device 1;
# - pytest test_vocab_parallel.py: flce.vocab_parallel with NCCL on two processes (and one),
#   DTensor, FSDP2 and tensor-parallel models (gloo);
# - benchmarks/vocab_parallel.py --ranks 1,2: time per call and collectives.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0). Logs under $OUT; a short table last.
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
if [ -z "${FLCE_NCCL_LIBRARY:-}" ]; then
  FLCE_NCCL_LIBRARY=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null) \
    && export FLCE_NCCL_LIBRARY || unset FLCE_NCCL_LIBRARY
fi
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > "$OUT/gpus.txt"
echo "== gpu-tests nccl device-1 $(date -u +%T)"
timeout "${T_TESTS:-150}" gpu-bundle/gpu-tests nccl device-1 > "$OUT/gpu-tests-two.log" 2>&1
echo "exit $?" >> "$OUT/gpu-tests-two.log"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  gpu-bundle/wheels/flce-*.whl
echo "== pytest test_vocab_parallel $(date -u +%T)"
(cd /tmp && PYTHONPATH=/tmp/site timeout "${T_PYTEST:-240}" python3 -m pytest -q -p no:cacheprovider \
  "$OLDPWD/crates/flce-py/tests/test_vocab_parallel.py") > "$OUT/pytest-vocab-parallel.log" 2>&1
echo "== vocab_parallel.py $(date -u +%T)"
PYTHONPATH=/tmp/site timeout "${T_BENCH:-180}" python3 benchmarks/vocab_parallel.py --ranks 1,2 \
  --out "$OUT/vocab_parallel.json" > "$OUT/vocab_parallel.log" 2>&1
echo "exit $?" >> "$OUT/vocab_parallel.log"
echo "== done $(date -u +%T)"
grep -E "^test (nccl|device-1)|^gpu:|^exit" "$OUT/gpu-tests-two.log" | cut -c1-220
tail -n 2 "$OUT/pytest-vocab-parallel.log"
tail -n 12 "$OUT/vocab_parallel.log"
