#!/usr/bin/env bash
# s41 call 8: the new tail layout (5912082's wheel) against a9ea9fc's over the Llama 3 token
# sweep (benchmarks/suite.py, flce and cuBLAS only, one round each): a regression check where
# the tail and the chunk count differ from the model shapes.
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; L=/tmp/logs8; mkdir -p $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/new gpu-bundle/wheels/flce-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/old gpu-bundle/wheels-old/flce-*.whl
for b in new old; do
  PYTHONPATH=/tmp/$b timeout 105 python3 benchmarks/suite.py --flce-bin gpu-bundle/flce --out $L/sweep-$b --data peaky \
    --extra-dtypes "" --shapes llama3 --methods cublas --sweep-methods flce,cublas --budgets none --sweep 1024,4096,16384,65536 \
    --rep-ms 400 --max-minutes 1.6 > $L/sweep-$b.log 2>&1
  echo "$b rc=$? ${SECONDS}s"
done
tar czf "$FINAL/logs.tgz" -C /tmp logs8
python3 - <<'PY'
import json
for b in ["new", "old"]:
    try:
        rows = json.load(open(f"/tmp/logs8/sweep-{b}/results.json"))
    except Exception as e:
        print(b, "no results", e); continue
    fl = {r["shape"]: r for r in rows if r["method"] == "flce"}
    cb = {r["shape"]: r for r in rows if r["method"] == "cublas"}
    for s in fl:
        f4 = cb.get(s, {}).get("floor4_ms")
        print(b, s, "flce", round(fl[s].get("fb_ms", 0), 2), "floor4", f4 and round(f4, 2), "ratio", f4 and round(fl[s]["fb_ms"] / f4, 3))
PY
