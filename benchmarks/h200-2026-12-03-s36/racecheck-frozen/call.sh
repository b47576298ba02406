# s36 call 9 (the device tool's command, from the repository root, carry gpu-bundle/gpu-tests):
# racecheck on the frozen-classifier case alone (call 8's filter also took its de-pass case)
export FLCE_CACHE_DIR=$(mktemp -d); mkdir -p $OUT
(timeout 170 compute-sanitizer --tool racecheck --error-exitcode 9 gpu-bundle/gpu-tests --small "(1100,136,9001) frozen"
 echo "racecheck frozen rc=$? at ${SECONDS}s") > $OUT/racecheck-frozen-only.log 2>&1
