#!/usr/bin/env bash
# s27 call 2 (at 978e276): (a) ncu warp-stall samples by SASS line of the forward in 128-column
# halves (73e28b5, FLCE_SM90_MAINLOOP=halves=1,overlap=0|4: its fold cost ~3.5x the 256-wide
# fold per element, perf-notes v32's open question) beside main's forward, Gemma 2 plain;
# (b) the training step (benchmarks/train_step.py) at 8k and 16k tokens: Liger against flce with
# 2 GB and 3 GB of loss workspace and the "fast" policy (issue 11's end-to-end target).
# Binaries: gpu-bundle (scripts/gpu-prepare.sh at 978e276) + gpu-bundle/flce-halves (73e28b5).
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
cp "$0" "$OUT/call.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
export FLCE_CACHE_DIR=$(mktemp -d)
B=gpu-bundle; L=/tmp/src; mkdir -p $L
src() {  # name binary [bench options…]: the forward's stall samples by SASS line, CSV
  local name=$1 bin=$2; shift 2
  timeout 120 ncu --clock-control none -k 'regex:^flce_sm90_forward$' -c 1 --section SpeedOfLight \
    --section WarpStateStats --section SourceCounters --page source --csv --print-source sass \
    $bin bench --shapes gemma2 --forward auto --backward auto --step-budget-mb 0 "$@" > $L/$name.csv 2>&1
  echo "ncu $name rc=$? at ${SECONDS}s, $(wc -l < $L/$name.csv) lines"
}
src main-plain $B/flce
FLCE_SM90_MAINLOOP=halves=1,overlap=4 src halves4-plain $B/flce-halves
FLCE_SM90_MAINLOOP=halves=1 src halves0-plain $B/flce-halves
tar czf "$OUT/source.tgz" -C /tmp src
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $B/wheels/flce-*.whl .whl/small/liger_kernel-*.whl
export PYTHONPATH=/tmp/site
timeout 330 python3 benchmarks/train_step.py --tokens 8192,16384 --methods liger,flce@2G,flce@3G,flce_fast --rounds 2 \
  --versus liger --repeats 5 --out $OUT/train.json > $OUT/train.log 2>&1
echo "train rc=$? at ${SECONDS}s"; tail -n 16 $OUT/train.log
