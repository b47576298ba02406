#!/usr/bin/env bash
# s20 call 8: where the ~3 ms between the three-product pass's wall time and its kernels go (profile_kernels.py
# --trace: host activity + kernels, one Chrome trace per shape), Llama 3 at 8k and 1k tokens.
set -uo pipefail
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export FLCE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
cp scripts/.call8.sh "$OUT/call.sh"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
for s in llama3 llama3_n1024; do
  PYTHONPATH=/tmp/site timeout 90 python3 scripts/profile_kernels.py --shape $s --configs auto/auto/fast,auto/auto/4294967296 --top 4 --gaps 3 --trace /tmp/traces > "$OUT/profile-$s.md" 2>&1
  grep -E "^## " "$OUT/profile-$s.md"
done
ls -la /tmp/traces; tar czf "$OUT/traces.tgz" -C /tmp traces
python3 - <<'PY'
import json, glob, collections
for f in sorted(glob.glob("/tmp/traces/*.json")):
    ev = [e for e in json.load(open(f))["traceEvents"] if e.get("ph") == "X"]
    k = sorted((e for e in ev if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    t0 = min(e["ts"] for e in ev); k0 = k[0]["ts"]
    print(f"== {f}: first event to first kernel {(k0 - t0)/1e3:.2f} ms")
    host = sorted((e for e in ev if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver", "python_function", "user_annotation") and e["ts"] < k0), key=lambda e: -e.get("dur", 0))
    for e in host[:14]:
        print(f"  {e.get('cat'):12s} {e.get('dur',0)/1e3:8.3f} ms at +{(e['ts']-t0)/1e3:7.3f}  {e['name'][:90]}")
PY
