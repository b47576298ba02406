#!/usr/bin/env bash
# s43 call 5: main at 6fc7e98 (crates = bccaf83 but for comments): GPU cases and memcheck on the final commit
set -uo pipefail
cp "$0" "$OUT/call.sh"
export FLCE_CACHE_DIR=$(mktemp -d)
timeout 100 ./gpu-bundle/gpu-tests --small "bf16 plain (129,200,5003)" "bf16 all (257,520,300)" "f16 nosoftcap (257,520,300)" \
  "bf16 none (1,64,1000)" "de-chunks" > "$OUT/tests.log" 2>&1
echo "tests rc=$? ${SECONDS}s ok=$(grep -c '^test .* ok ' $OUT/tests.log) of $(grep -c '^test ' $OUT/tests.log)"; tail -n 1 "$OUT/tests.log"
FLCE_GPU_TEST_MODES=FusedTiles timeout 40 compute-sanitizer --tool memcheck ./gpu-bundle/gpu-tests --small "bf16 plain (129,200,5003)" \
  > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? ${SECONDS}s $(grep -E 'ERROR SUMMARY|^gpu:' $OUT/memcheck.log | tr '\n' ' ')"
