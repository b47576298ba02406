export FLCE_CACHE_DIR=$(mktemp -d); python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl; cd benchmarks
for conf in "" "expandable_segments:True"; do tag=${conf:+expandable}; tag=${tag:-default}
  PYTORCH_CUDA_ALLOC_CONF=$conf PYTHONPATH=/tmp/site timeout 100 python3 activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 --tokens 16384 \
    --modes offload,offload_tiled --repeats 1 --out $OUT/activation-16k-cap10-$tag.json > $OUT/activation-16k-cap10-$tag.log 2>&1
  echo "exit $?" >> $OUT/activation-16k-cap10-$tag.log
done
# (the call also printed each row's mode, peak_mb, peak_reserved_mb, plan_peak_mb, step_ms)
