# s36 call 8 (the device tool's command, from the repository root, carry gpu-bundle): racecheck on
# the frozen-classifier path (the token-outer plan's G on the (slots, splits) grid inside the
# ordered module), then the binding's tests on the final wheel (pytest-call.sh).
export FLCE_CACHE_DIR=$(mktemp -d); mkdir -p $OUT
(timeout 230 compute-sanitizer --tool racecheck --error-exitcode 9 gpu-bundle/gpu-tests --small "bf16 none (1100,136,9001)"
 echo "racecheck frozen rc=$?") > $OUT/racecheck-frozen.log 2>&1
OUT=$OUT bash pytest-call.sh   # (run as /tmp/b.sh: s35's binding/call.sh with its header line changed, pytest timeout 200)
