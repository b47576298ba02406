#!/usr/bin/env bash
# The three-product pass with compact logits (plan::StepLogits::Compact: the sm90 forward writes
# each logit as f16 q = exp(z − m), G formed in place) against the f32-logits pass, in one device
# call from the repository root after scripts/gpu-prepare.sh (carry gpu-bundle):
#   OUT=$OUT bash scripts/gpu-compact-step.sh
# - GPU tests of the cases the compact form takes (bf16 / f16, plain, sum, none, z-loss, ignore,
#   shift, N = 1), each with both storages at one chunk and at 128-token chunks, against the f64
#   oracle, twice each (bitwise); the sampled Llama 3 and Gemma 2 shapes;
# - memcheck of the compact kernels on two cases;
# - timing, interleaved (gpu-variants.sh 2): FLCE_STEP_LOGITS=f32 against the default (compact)
#   at the train step's loss shape (16384, 2048, 128256) with 2 GB and at Gemma 2 / Llama 3 /
#   Qwen 2.5 with 4 GB.
# About 8 minutes; logs in $OUT/logs.tgz, the tables last.
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
echo "== tests $(date -u +%T)"
timeout "${T_TESTS:-150}" gpu-bundle/gpu-tests --small "f16 plain" "f16 sum" "f16 none" "f16 zloss" "ignore7" \
  "f16 shift" > $L/gpu-tests.log 2>&1
echo "exit $?" >> $L/gpu-tests.log
timeout "${T_SAMPLED:-100}" gpu-bundle/gpu-tests "bf16 llama3 sampled" "bf16 gemma2 sampled" > $L/gpu-tests-sampled.log 2>&1
echo "exit $?" >> $L/gpu-tests-sampled.log
echo "== memcheck $(date -u +%T)"
timeout 70 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
  "bf16 plain (1024,64,8000)" "bf16 zloss (257,520,300)" > $L/memcheck.log 2>&1
echo "exit $?" >> $L/memcheck.log
echo "== timing $(date -u +%T)"
mkdir -p /tmp/v1 /tmp/v2
OUT=/tmp/v1 SHAPES=16384,2048,128256 BENCH_ARGS="--step-budget-mb 2048" timeout 100 bash scripts/gpu-variants.sh 2 \
  "f32=gpu-bundle/flce:FLCE_STEP_LOGITS=f32" "compact=gpu-bundle/flce" > $L/variants-train-shape.md 2>&1
OUT=/tmp/v2 BENCH_ARGS="--step-budget-mb 4096" timeout 150 bash scripts/gpu-variants.sh 2 \
  "f32=gpu-bundle/flce:FLCE_STEP_LOGITS=f32" "compact=gpu-bundle/flce" > $L/variants-models.md 2>&1
cp -r /tmp/v1 /tmp/v2 $L/
echo "== done $(date -u +%T)"
tar czf "$OUT/logs.tgz" -C /tmp logs
for f in gpu-tests gpu-tests-sampled memcheck; do
  echo "$f: $(grep -c '\.\.\. ok' $L/$f.log) ok, $(grep -c 'FAILED' $L/$f.log) failed; $(grep -h '^exit\|ERROR SUMMARY' $L/$f.log | tr '\n' ' ')"
done
grep -h "FAILED" $L/gpu-tests*.log | head -5 | cut -c1-400
grep -h "three-product" $L/gpu-tests-sampled.log | cut -c1-300
cat $L/variants-train-shape.md $L/variants-models.md
