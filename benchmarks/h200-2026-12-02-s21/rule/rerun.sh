# The rerun on the warm machine after call.sh (same bundle), as run (tests-de-pass-rest.log):
mkdir -p $OUT && FLCE_CACHE_DIR=$(mktemp -d) timeout 100 gpu-bundle/gpu-tests --small "de-pass" > $OUT/tests-de-pass.log 2>&1
