#!/usr/bin/env bash
# s47 call 9: the sampled cases with the faster f64 reference (sampled.rs: dE's reference row from
# whole rows of C, weights computed once), in 4 shards; then the caching allocator's accounting
# of a Qwen 2.5-sized dC (1,089,994,752 bytes) on a fresh segment
cp "$0" "$OUT/call.sh"
OUT=/tmp/shards9 LIMIT=300 SHARDS=4 bash gpu-bundle/scripts/gpu-tests-sharded.sh sampled > "$OUT/gpu-tests.log" 2>&1
echo "exit $?" >> "$OUT/gpu-tests.log"
tar czf "$OUT/gpu-tests-shards.tgz" -C /tmp shards9
python3 - > "$OUT/allocator.txt" 2>&1 <<'PY'
import torch
MiB = 2**20
for nbytes in [152064 * 3584 * 2, 128256 * 4096 * 2, 256000 * 2304 * 2]:
    torch.cuda.empty_cache()
    a0 = torch.cuda.memory_allocated()
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    print(f"request {nbytes / MiB:.3f} MiB: allocated +{(torch.cuda.memory_allocated() - a0) / MiB:.3f} MiB, reserved {torch.cuda.memory_reserved() / MiB:.1f} MiB")
    del x
PY
cat "$OUT/allocator.txt"
cat "$OUT/gpu-tests.log"
grep -h "^test " /tmp/shards9/gpu-tests-*.log | sed -E 's/^test (.*) \.\.\. (ok|FAILED).*\[([0-9]+) ms\]$/\3 ms  \2  \1/'
