#!/usr/bin/env bash
# The verification of a change in one device call, from the repository root with gpu-bundle
# carried (scripts/gpu/prepare.sh; and old-bundle, an older build's, for the A/B step): every
# check with its own time cap, most important first, each log written straight into $OUT (the
# device returns at most 8 files; what is there comes back even if the call is cut short), a
# summary last.
#   bash scripts/gpu/verify.sh                 # tests, pytest, bench, memcheck, A/B, racecheck
#   STEPS="tests bench" TEST_ARGS="--small" BENCH_ARGS="--loss-options all" bash scripts/gpu/verify.sh
#   STEPS="demo peers train profile activation" bash scripts/gpu/verify.sh
#   SHARDS=4 CONCURRENT=1 T_TESTS=460 T_PYTEST=400 T_MEMCHECK=300 STEPS="tests pytest memcheck" bash scripts/gpu/verify.sh
#       # every GPU case in 4 processes balanced by their measured times (scripts/gpu/tests-sharded.sh),
#       # pytest in PYTEST_WORKERS processes (pytest-xdist) and memcheck at once: about 400 s; the
#       # cases a cut-short run did not reach are printed last in gpu-tests.log as a rerun's arguments
# Steps: tests, pytest, bench (flce bench at the three model shapes, BENCH_MODES' forward/backward
# pairs), memcheck, ab (old-bundle against gpu-bundle, interleaved), racecheck, demo, peers
# (bench_peers.py, its wheels in .whl), train (benchmarks/train_step.py), ignored
# (benchmarks/ignored_tokens.py, IGNORED_ARGS), profile
# (scripts/tools/profile_kernels.py), activation (benchmarks/activation_memory.py). Caps
# (seconds), the bench's modes and the racecheck cases can be changed with the variables below.
set -uo pipefail
B=gpu-bundle
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export FLCE_CACHE_DIR=${FLCE_CACHE_DIR:-$(mktemp -d)}  # private (0700), fresh per run
# NCCL for the two-GPU vocabulary-parallel cases (tests/gpu/nccl.rs): the pip wheel's libnccl.so.2
# is not on the loader path; flce-cuda's nccl.rs reads FLCE_NCCL_LIBRARY
if [ -z "${FLCE_NCCL_LIBRARY:-}" ]; then
  FLCE_NCCL_LIBRARY=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null) \
    && export FLCE_NCCL_LIBRARY || unset FLCE_NCCL_LIBRARY
fi
T_TESTS=${T_TESTS:-220} T_PYTEST=${T_PYTEST:-200} T_BENCH=${T_BENCH:-90} T_MEMCHECK=${T_MEMCHECK:-110}
T_AB=${T_AB:-80} T_RACECHECK=${T_RACECHECK:-60} T_PROFILE=${T_PROFILE:-60} T_ACTIVATION=${T_ACTIVATION:-240}
T_DEMO=${T_DEMO:-60} T_PEERS=${T_PEERS:-240} T_TRAIN=${T_TRAIN:-240} T_IGNORED=${T_IGNORED:-480}
STEPS=${STEPS:-tests pytest bench memcheck ab racecheck}
BENCH_MODES=${BENCH_MODES:-cublas/cublas fused/fused}
want() { [[ " $STEPS " == *" $1 "* ]]; }
# racecheck runs the f32 tile kernels at ~40 s a case: a few cases that cover every kernel
IFS='|' read -r -a RACE_CASES <<< "${RACECHECK_CASES:-bf16 all (255,507,123)|bf16 all (257,520,300)|f16 none (1,64,1000)|bad-target}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $B/wheels/flce-*.whl
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
# the peers' wheels where carried (scripts/gpu/peer-wheels.sh: .whl/small), for every step that runs a peer
if ls .whl/small/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/*.whl 2>/dev/null
  export PYTHONPATH=$PYTHONPATH:/tmp/peers
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
step() { echo "== $1 ($(date -u +%T))"; }

# CONCURRENT=1: the tests, pytest and memcheck steps at once (GPU work is small beside the f64
# oracle's CPU time and the compiles; 16 cores on the GPU machine), the rest after them
bg() { if [ "${CONCURRENT:-0}" = 1 ]; then "$@" & else "$@"; fi; }
run_tests() {
  if [ "${SHARDS:-1}" -gt 1 ]; then
    # per-shard logs in one archive (the device returns at most 8 files); their summary lines and
    # failures in gpu-tests.log
    mkdir -p /tmp/shards
    OUT=/tmp/shards LIMIT="$T_TESTS" bash scripts/gpu/tests-sharded.sh ${TEST_ARGS:-} > "$OUT/gpu-tests.log" 2>&1
    echo "exit $?" >> "$OUT/gpu-tests.log"
    tar czf "$OUT/gpu-tests-shards.tgz" -C /tmp shards
  else
    timeout "$T_TESTS" $B/gpu-tests ${TEST_ARGS:-} > "$OUT/gpu-tests.log" 2>&1; echo "exit $?" >> "$OUT/gpu-tests.log"
  fi
}
run_pytest() {
  # (in PYTEST_WORKERS processes where pytest-xdist is there: gpu-pytest.sh)
  timeout "$T_PYTEST" bash scripts/gpu/pytest.sh > "$OUT/pytest.log" 2>&1
}
run_memcheck() {
  timeout "$T_MEMCHECK" compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu-tests --small \
    "(255,507,123)" "(1,64,1000)" "(129,200,5003)" "(257,520,300)" chunked "2 SMs" bad-target bad-weights bad-pointers "vocab-parallel bf16 all" > "$OUT/memcheck.log" 2>&1
  echo "exit $?" >> "$OUT/memcheck.log"
}
if want tests; then
  step "GPU tests"
  bg run_tests
fi
if want pytest; then
  step "pytest"
  bg run_pytest
fi
if want memcheck; then
  step "memcheck"
  bg run_memcheck
fi
wait
if want bench; then
  for modes in $BENCH_MODES; do
    step "flce bench --forward ${modes%/*} --backward ${modes#*/}"
    echo "## forward ${modes%/*}, backward ${modes#*/}" >> "$OUT/bench.log"
    timeout "$T_BENCH" $B/flce bench --shapes gemma2,llama3,qwen25 --forward "${modes%/*}" --backward "${modes#*/}" \
      --workspace-budget-mb "${BUDGET_MB:-4096}" ${BENCH_ARGS:-} --json /tmp/bench.jsonl >> "$OUT/bench.log" 2>&1
  done
  cat /tmp/bench.jsonl >> "$OUT/bench.log" 2>/dev/null
fi
if want ab && [ -d old-bundle ]; then
  step "A/B bench (old-bundle vs gpu-bundle, one round)"
  OUT=/tmp/ab timeout "$T_AB" bash scripts/tools/ab.sh old-bundle gpu-bundle 1 > "$OUT/ab.txt" 2>&1
fi
if want profile; then
  step "profile (scripts/tools/profile_kernels.py)"
  for s in gemma2 llama3; do
    timeout "$T_PROFILE" python3 scripts/tools/profile_kernels.py --shape $s --configs "${PROFILE_CONFIGS:-auto/auto/min,auto/cublas/min,auto/cublas/fast}" \
      > "$OUT/profile-$s.md" 2>&1
  done
fi
if want demo; then
  step "flce demo"
  timeout "$T_DEMO" $B/flce demo > "$OUT/demo.log" 2>&1
fi
if want peers && [ -f $B/bench_peers.py ]; then
  step "peers (bench_peers.py, wheels from .whl)"
  timeout "$T_PEERS" python3 $B/bench_peers.py --shapes gemma2,llama3 --data peaky \
    --methods ${PEERS:-flce,cce,liger} --json "$OUT/peers.json" > "$OUT/peers.log" 2>&1
fi
if want train; then
  step "training step (benchmarks/train_step.py)"
  PYTHONUNBUFFERED=1 timeout "$T_TRAIN" python3 benchmarks/train_step.py ${TRAIN_ARGS:-} --out "$OUT/train_step.json" \
    > "$OUT/train_step.log" 2>&1
fi
if want ignored; then
  step "ignored tokens (benchmarks/ignored_tokens.py)"
  PYTHONUNBUFFERED=1 timeout "$T_IGNORED" python3 benchmarks/ignored_tokens.py ${IGNORED_ARGS:-} --out /tmp/ignored \
    > "$OUT/ignored.log" 2>&1
  cp /tmp/ignored/results.json "$OUT/ignored.json" 2>/dev/null
fi
if want activation; then
  step "activation memory (benchmarks/activation_memory.py)"
  PYTHONUNBUFFERED=1 timeout "$T_ACTIVATION" python3 benchmarks/activation_memory.py ${ACTIVATION_ARGS:---model Llama-3.2-1B --tokens 16384,32768 --repeats 2} \
    --out "$OUT/activation.json" > "$OUT/activation.log" 2>&1
fi
if want racecheck; then
  step "racecheck"
  timeout "$T_RACECHECK" compute-sanitizer --tool racecheck --error-exitcode 9 $B/gpu-tests --small "${RACE_CASES[@]}" \
    > "$OUT/racecheck.log" 2>&1
  echo "exit $?" >> "$OUT/racecheck.log"
fi

echo; echo "== summary"
[ -f "$OUT/gpu-tests.log" ] && echo "gpu tests: $(grep -E '^(gpu:|shard )' "$OUT/gpu-tests.log" | tr '\n' ' ')($(tail -n 1 "$OUT/gpu-tests.log"))" \
  && grep -E "FAILED" "$OUT/gpu-tests.log" | head -n 8 | cut -c1-300
[ -f "$OUT/pytest.log" ] && echo "pytest: $(tail -n 1 "$OUT/pytest.log")"
[ -f "$OUT/memcheck.log" ] && echo "memcheck: $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -n 1); $(grep -E '^gpu:' "$OUT/memcheck.log") ($(tail -n 1 "$OUT/memcheck.log"))"
[ -f "$OUT/racecheck.log" ] && echo "racecheck: $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck.log" | tail -n 1); $(grep -cE '^test .* ok' "$OUT/racecheck.log") cases ok ($(tail -n 1 "$OUT/racecheck.log"))"
[ -f "$OUT/bench.log" ] && grep -E '^(## |\| [a-z])' "$OUT/bench.log"
[ -f "$OUT/ab.txt" ] && tail -n 5 "$OUT/ab.txt"
[ -f "$OUT/activation.log" ] && grep -E '^\| [0-9]' "$OUT/activation.log"
[ -f "$OUT/demo.log" ] && tail -n 4 "$OUT/demo.log"
[ -f "$OUT/peers.log" ] && tail -n 12 "$OUT/peers.log"
[ -f "$OUT/train_step.log" ] && grep -E '^\| [0-9]' "$OUT/train_step.log"
[ -f "$OUT/ignored.log" ] && sed -n '/^## targets/,$p' "$OUT/ignored.log"
ls "$OUT"/profile-*.md >/dev/null 2>&1 && grep -h -E '^## ' "$OUT"/profile-*.md
