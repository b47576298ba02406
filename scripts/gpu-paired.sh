#!/usr/bin/env bash
# Pairs of token tiles in clusters of 2 for the sm90 forward and the compact three-product forward:
# the default since 2026-12-02 (plan::Sm90Tuning; perf-notes v24), FLCE_SM90_CLUSTER=1 turns them
# off, FLCE_SM90_G_CLUSTER=2 pairs the G kernel too. From the repository root after
# scripts/gpu-prepare.sh, carry gpu-bundle and .whl/small (bash scripts/peer-wheels.sh), one or
# two device calls:
#   OUT=$OUT PARTS=tests bash scripts/gpu-paired.sh      # ~7 min (caps 90 + 200 + 60 + 100 s)
#   OUT=$OUT PARTS=timing bash scripts/gpu-paired.sh     # ~2 min
#   OUT=$OUT PARTS=train bash scripts/gpu-paired.sh      # ~3.5 min
# tests (the default, paired, build): the "pairs" and "unpaired" cases (every kernel paired / none,
#   whatever the knobs), the small GPU cases in the default tuning (every case runs the
#   three-product pass with both logit storages, at one chunk and at 128-token chunks), memcheck
#   of two, Llama 3 sampled (compact, one chunk);
# timing: gpu-variants.sh 3, unpaired (FLCE_SM90_CLUSTER=1) against the default and against
#   paired G too, at Gemma 2 / Llama 3 / Qwen 2.5 with a 4 GB three-product budget and at the
#   train step's loss shape (16384, 2048, 128256) with 2 GB;
# train: benchmarks/train_step.py at 16k tokens, liger / flce@2G, default then unpaired.
# Logs in $OUT/logs.tgz; the table last.
set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs-paired; mkdir -p "$OUT" $L
PARTS=${PARTS:-timing}
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
if [[ $PARTS == *tests* ]]; then
  echo "== tests $(date -u +%T)"
  # the pairs / unpaired cases (tests/gpu/cases.rs: a backend with that tuning, whatever the knobs)
  timeout 90 gpu-bundle/gpu-tests --small "pairs" "unpaired" > $L/gpu-tests-cluster-cases.log 2>&1
  echo "exit $?" >> $L/gpu-tests-cluster-cases.log
  timeout 200 gpu-bundle/gpu-tests --small > $L/gpu-tests-small.log 2>&1
  echo "exit $?" >> $L/gpu-tests-small.log
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small \
    "bf16 plain (1024,64,8000)" "bf16 zloss (257,520,300)" > $L/memcheck.log 2>&1
  echo "exit $?" >> $L/memcheck.log
  timeout 100 gpu-bundle/gpu-tests "bf16 llama3 sampled" > $L/gpu-tests-sampled.log 2>&1
  echo "exit $?" >> $L/gpu-tests-sampled.log
fi
if [[ $PARTS == *timing* ]]; then
  echo "== timing $(date -u +%T)"
  mkdir -p $L/models $L/train16k
  OUT=$L/models BENCH_ARGS="--step-budget-mb 4096" timeout 260 bash scripts/gpu-variants.sh 3 \
    "default=gpu-bundle/flce" "unpaired=gpu-bundle/flce:FLCE_SM90_CLUSTER=1" \
    "paired-g=gpu-bundle/flce:FLCE_SM90_G_CLUSTER=2" > $L/variants-models.md 2>&1
  OUT=$L/train16k SHAPES=16384,2048,128256 BENCH_ARGS="--step-budget-mb 2048" timeout 100 bash scripts/gpu-variants.sh 3 \
    "default=gpu-bundle/flce" "unpaired=gpu-bundle/flce:FLCE_SM90_CLUSTER=1" \
    "paired-g=gpu-bundle/flce:FLCE_SM90_G_CLUSTER=2" > $L/variants-train16k.md 2>&1
fi
if [[ $PARTS == *train* ]]; then
  echo "== train step $(date -u +%T)"
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/liger_kernel-*.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
  for mode in default unpaired; do
    env $([ $mode = unpaired ] && echo FLCE_SM90_CLUSTER=1) PYTHONPATH=/tmp/site:/tmp/peers timeout 100 \
      python3 benchmarks/train_step.py --tokens 16384 --repeats 5 --methods liger,flce@2G \
      --out $L/train-$mode.json > $L/train-$mode.log 2>&1
    echo "exit $?" >> $L/train-$mode.log
  done
fi
echo "== done $(date -u +%T)"
tar czf "$OUT/logs.tgz" -C /tmp logs-paired
for f in gpu-tests-cluster-cases gpu-tests-small gpu-tests-sampled memcheck; do
  [ -f $L/$f.log ] && echo "$f: $(grep -c '\.\.\. ok' $L/$f.log) ok, $(grep -c FAILED $L/$f.log) failed; $(grep -h '^exit\|^gpu:\|ERROR SUMMARY' $L/$f.log | tr '\n' ' ')"
done
grep -h FAILED $L/gpu-tests*.log 2>/dev/null | head -3 | cut -c1-300
cat $L/variants-*.md 2>/dev/null
for mode in default unpaired; do [ -f $L/train-$mode.log ] && { echo "== train $mode"; grep -A4 "^| tokens" $L/train-$mode.log; }; done
