# The two quick reruns on the warm machine after call.sh (same bundle), as run:
mkdir -p $OUT && OUT=$OUT/vplain2 SHAPES="gemma2,llama3" BENCH_ARGS="--step-budget-mb 0 --iters 5" FLCE_CACHE_DIR=$(mktemp -d) timeout 60 bash scripts/gpu-variants.sh 1 "new=gpu-bundle/flce" "old=gpu-bundle/flce-old" > $OUT/variants-plain2.md 2>&1
mkdir -p $OUT && OUT=$OUT/vplain3 SHAPES="gemma2,llama3" BENCH_ARGS="--step-budget-mb 0" FLCE_CACHE_DIR=$(mktemp -d) timeout 50 bash scripts/gpu-variants.sh 2 "old=gpu-bundle/flce-old" "new=gpu-bundle/flce" > $OUT/variants-plain3.md 2>&1
