#!/usr/bin/env bash
# The whole GPU check, run on the GPU machine from the repository root after
# scripts/gpu-prepare.sh (carry gpu-bundle, and .whl for the peers). Logs go to $OUT (or
# ./gpu-logs); a summary is printed last.
#   bash gpu-bundle/scripts/gpu-check.sh [steps]   steps: tests,sanitizer,demo,bench,pytest,peers,suite,train
#   (default: all but suite)
# The peers (steps peers, suite) travel as wheels in .whl, installed into /tmp/site; fetch them
# here once with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl \
#       liger-kernel==0.8.5 cut-cross-entropy==25.1.1
# The H200 image already has torch, triton, pytest, transformers, matplotlib and tqdm; a machine
# without them needs their wheels in .whl too.
#   SUITE_ARGS="--shapes llama3 --sweep none"  narrows the suite; SANITIZER_TOOLS="memcheck" one tool.
set -uo pipefail
B=gpu-bundle
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}  # private (0700), fresh per run
steps=${1:-tests,sanitizer,demo,bench,pytest,peers}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $B/wheels/flce-*.whl
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
has() { [[ ",$steps," == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
summary=()

if has tests; then
  # in SHARDS processes at once (gpu-tests --shard=I/N; one process took more than 300 s on the
  # H200 machine, 2026-12-04): scripts/gpu-tests-sharded.sh, its logs in $OUT
  echo "== GPU tests (sharded)"
  while IFS= read -r l; do echo "$l"; summary+=("gpu tests, $l"); done \
    < <(OUT="$OUT" bash $B/scripts/gpu-tests-sharded.sh)
fi

if has sanitizer && command -v compute-sanitizer >/dev/null; then
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck}; do
    echo "== compute-sanitizer --tool $tool (small cases)"
    compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu-tests --small "(255,507,123)" "(1,64,1000)" "(129,200,5003)" chunked bad-target > "$OUT/sanitizer-$tool.log" 2>&1
    rc=$?
    summary+=("compute-sanitizer $tool: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -n 1); $(grep -E '^gpu:' "$OUT/sanitizer-$tool.log")")
  done
fi

if has demo; then
  echo "== flce demo"
  $B/flce demo 2>&1 | tee "$OUT/demo.log"
fi

if has bench; then
  echo "== flce bench"
  $B/flce bench --shapes gemma2,llama3,qwen25 --json "$OUT/bench.jsonl" 2>&1 | tee "$OUT/bench.log"
  summary+=("bench (Rust API):")
  while IFS= read -r l; do summary+=("  $l"); done < <(grep -E '^\| ' "$OUT/bench.log")
fi

if has pytest; then
  echo "== pytest (Python binding, CPU and CUDA)"
  # (in PYTEST_WORKERS processes where pytest-xdist is there: gpu-pytest.sh)
  bash $B/scripts/gpu-pytest.sh 2>&1 | tee "$OUT/pytest.log" | tail -n 15
  summary+=("pytest: $(tail -n 1 "$OUT/pytest.log")")
fi

if has peers && [ -f $B/scripts/bench_peers.py ]; then
  echo "== peers (bench_peers.py)"
  python3 $B/scripts/bench_peers.py --shapes gemma2,llama3 --data peaky --methods ${PEERS:-flce,cce,cce_nofilter,liger} --json "$OUT/peers.json" 2>&1 | tee "$OUT/peers.log" | tail -n 12
  summary+=("peers: see $OUT/peers.log")
fi

if has suite; then
  echo "== benchmark suite (benchmarks/suite.py)"
  # SUITE_ARGS narrows the default set, e.g. SUITE_ARGS="--shapes llama3 --sweep none"
  python3 benchmarks/suite.py --flce-bin $B/flce --out "$OUT/suite" ${SUITE_ARGS:-} 2>&1 | tee "$OUT/suite.log" | grep -av "%|" | tail -n 60
  # one archive: the GPU machine returns at most 8 files from $OUT
  tar czf "$OUT/suite.tgz" -C "$OUT" suite && rm -rf "$OUT/suite"
  summary+=("suite: $OUT/suite.tgz (results.json, meta.json, plots)")
fi

if has train; then
  echo "== end-to-end training step (benchmarks/train_step.py)"
  python3 benchmarks/train_step.py --out "$OUT/train_step.json" 2>&1 | tee "$OUT/train_step.log" | tail -n 14
  summary+=("train step: $OUT/train_step.log")
fi

echo
echo "== summary"
for s in "${summary[@]}"; do echo "  $s"; done
