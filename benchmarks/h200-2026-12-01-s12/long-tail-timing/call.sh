set -uo pipefail
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== timing $(date -u +%T)"
mkdir -p /tmp/t
for r in 1 2; do
  for s in "43008,4096,128256:757" "65536,4096,128256:1153" "131072,4096,128256:2306" "131072,2304,256000:1410"; do
    shape=${s%%:*}; old=${s##*:}
    timeout 60 gpu-bundle/flce bench --shapes $shape --step-budget-mb 0 --iters 5 --json /tmp/t/new-$r-${shape%%,*}-${shape##*,}.jsonl >> /tmp/t/new-$r.log 2>&1
    timeout 60 gpu-bundle/flce bench --shapes $shape --step-budget-mb 0 --iters 5 --budget-mb $old --json /tmp/t/old-$r-${shape%%,*}-${shape##*,}.jsonl >> /tmp/t/old-$r.log 2>&1
  done
done
tar czf $OUT/timing-logs.tgz -C /tmp t
echo "== pytest $(date -u +%T)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 200 python3 -m pytest -q -x -p no:cacheprovider $OLDPWD/gpu-bundle/python-tests > $OUT/pytest.log 2>&1; echo "exit $?" >> $OUT/pytest.log)
echo "== done $(date -u +%T)"
tail -3 $OUT/pytest.log
python3 - <<'PY'
import glob, json, statistics
rows = {}
for f in glob.glob("/tmp/t/*.jsonl"):
    var = f.split("/")[-1].split("-")[0]
    for line in open(f):
        if line.strip():
            j = json.loads(line); rows.setdefault((j["n"], j["d"], j["v"]), {}).setdefault(var, []).append(j)
print("| N, D, V | old fwd+bwd ms | old bwd MB | new fwd+bwd ms | new bwd MB | new/old | runs |")
for k in sorted(rows):
    o, n = rows[k].get("old", []), rows[k].get("new", [])
    med = lambda r, f: statistics.median(x[f] for x in r) if r else float("nan")
    print(f"| {k} | {med(o,'fb_ms'):.2f} | {med(o,'fb_mem_mb'):.0f} | {med(n,'fb_ms'):.2f} | {med(n,'fb_mem_mb'):.0f} | {med(n,'fb_ms')/med(o,'fb_ms'):.3f} | {len(o)}/{len(n)} |")
PY
grep -h "^| " /tmp/t/new-1.log | grep -v "^| shape\|---" | cut -c1-300
