#!/usr/bin/env bash
# s41 call 6: issue 10's measure (benchmarks/suite.py: flce's default and cuBLAS's floor4 at the
# model shapes, bf16 peaky, REP_MS 600) on 5912082's wheel and a9ea9fc's, alternating, two rounds.
set -uo pipefail
FINAL=${OUT:-gpu-logs}; mkdir -p "$FINAL"; cp "$0" "$FINAL/call.sh"; L=/tmp/logs6; mkdir -p $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/new gpu-bundle/wheels/flce-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/old gpu-bundle/wheels-old/flce-*.whl
for r in 1 2; do
  for b in new old; do
    PYTHONPATH=/tmp/$b timeout 150 python3 benchmarks/suite.py --flce-bin gpu-bundle/flce --out $L/suite-$b-$r --data peaky \
      --extra-dtypes "" --methods flce,cublas --budgets none --sweep none --rep-ms 600 --max-minutes 2.4 > $L/suite-$b-$r.log 2>&1
    echo "$b r$r rc=$? ${SECONDS}s"
  done
done
tar czf "$FINAL/logs.tgz" -C /tmp logs6
for f in $L/suite-*/results.json; do echo $f; python3 -c '
import json,sys
d=json.load(open(sys.argv[1]))
rows=d if isinstance(d,list) else d.get("results",d)
print(type(rows).__name__, (list(rows[0].keys()) if isinstance(rows,list) and rows else list(rows)[:10]))
' $f; break; done
