#!/usr/bin/env bash
# s47 call 2: the 19 cases call 1's shards did not reach (cut at 420 s with pytest and memcheck beside them)
cp "$0" "$OUT/call.sh"
OUT=/tmp/shards2 LIMIT=300 SHARDS=4 bash gpu-bundle/scripts/gpu-tests-sharded.sh \
  "=bad-pointers" "=bad-weights" "=bad-target" "=phases bf16 plain (300,128,2049)" "=phases f32 all (257,64,1000)" \
  "=context-restored" "=phases bf16 all (300,128,2049)" "=phases bf16 none (1,64,1000)" "=two-threads" "=sm90-mn-major" \
  "=bf16 none (1100,136,9001) frozen-classifier" "=f32 all (2000,96,10000) frozen-classifier" \
  "=bf16 all (3000,64,12000) token-chunks" "=bf16 past-2^31 (16384,256,256000) sampled fused" \
  "=bf16 all (5000,64,3000) token-chunks" "=bf16 plain (5000,64,3000) de-pass default" \
  "=bf16 llama3-128k sampled fused" "=bf16 gemma2 sampled" "=bf16 llama3 sampled fused" > "$OUT/gpu-tests.log" 2>&1
echo "exit $?" >> "$OUT/gpu-tests.log"
tar czf "$OUT/gpu-tests-shards.tgz" -C /tmp shards2
cat "$OUT/gpu-tests.log"
