# s37 call 1 (the device tool's command, from the repository root, carry gpu-bundle/gpu-tests):
# racecheck of the token-outer path (the frozen-classifier cases on flce's fused family only,
# FLCE_GPU_TEST_MODES from c429e11: cuBLAS's logits mode left out, whose racecheck stalled s36)
export FLCE_CACHE_DIR=$(mktemp -d); mkdir -p $OUT; cp scripts/.call1.sh $OUT/call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
(time FLCE_GPU_TEST_MODES=FusedTiles gpu-bundle/gpu-tests --small "(1100,136,9001) frozen"; echo "plain rc=$?") > $OUT/plain.log 2>&1
(timeout 400 env FLCE_GPU_TEST_MODES=FusedTiles compute-sanitizer --tool racecheck --error-exitcode 9 gpu-bundle/gpu-tests --small "(1100,136,9001) frozen"
 echo "racecheck token-outer rc=$? at ${SECONDS}s") > $OUT/racecheck-token-outer.log 2>&1
tail -3 $OUT/plain.log; grep -E "RACECHECK SUMMARY|passed|rc=" $OUT/racecheck-token-outer.log | tail -5
