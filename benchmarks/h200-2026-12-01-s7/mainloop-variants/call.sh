set -uo pipefail
export PYTHONUNBUFFERED=1
export FLCE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
echo "== variants bench $(date -u +%T)"
mkdir -p /tmp/var
OUT=/tmp/var timeout 200 bash scripts/gpu-variants.sh 2 "base=gpu-bundle/flce" \
  "inflight=gpu-bundle/flce:FLCE_SM90_MAINLOOP=inflight=1" "skew1inf=gpu-bundle/flce:FLCE_SM90_MAINLOOP=skew=1,inflight=1" \
  "skew2inf=gpu-bundle/flce:FLCE_SM90_MAINLOOP=skew=2,inflight=1" "skew2=gpu-bundle/flce:FLCE_SM90_MAINLOOP=skew=2" > $OUT/variants.md 2>&1
tar czf $OUT/variants-logs.tgz -C /tmp var
cat $OUT/variants.md
# the winner by mean fwd+bwd ratio over the shapes
best=$(python3 - $OUT/variants.md <<'PY'
import sys, collections
r = collections.defaultdict(list)
for line in open(sys.argv[1]):
    c = [x.strip() for x in line.split("|")]
    if len(c) > 7 and c[1] not in ("shape", "---") and c[6] not in ("-", "/first"):
        try: r[c[2]].append(float(c[6]))
        except ValueError: pass
print(min(r, key=lambda k: sum(r[k]) / len(r[k])) if r else "base")
PY
)
declare -A envs=([base]="" [inflight]="inflight=1" [skew1inf]="skew=1,inflight=1" [skew2inf]="skew=2,inflight=1" [skew2]="skew=2")
export FLCE_SM90_MAINLOOP="${envs[$best]}"
echo "== winner $best (FLCE_SM90_MAINLOOP=$FLCE_SM90_MAINLOOP): tests $(date -u +%T)" | tee $OUT/winner.txt
timeout 150 gpu-bundle/gpu-tests --small > $OUT/gpu-tests.log 2>&1; echo "exit $?" >> $OUT/gpu-tests.log
echo "== memcheck $(date -u +%T)"
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/gpu-tests --small "(255,507,123)" "(1,64,1000)" "(129,200,5003)" "(257,520,300)" bad-target > $OUT/memcheck.log 2>&1; echo "exit $?" >> $OUT/memcheck.log
echo "== pytest $(date -u +%T)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
(cd /tmp && PYTHONPATH=/tmp/site timeout 170 python3 -m pytest -q -p no:cacheprovider -x "$OLDPWD/gpu-bundle/python-tests") > $OUT/pytest.log 2>&1
echo "== done $(date -u +%T)"
cat $OUT/winner.txt; grep -E "^gpu:|^exit|FAILED" $OUT/gpu-tests.log | head; grep -E "ERROR SUMMARY|^gpu:|^exit" $OUT/memcheck.log; tail -2 $OUT/pytest.log
