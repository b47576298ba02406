set -uo pipefail
OUT=${OUT:-gpu-logs}; L=/tmp/logs4; mkdir -p "$OUT" $L
export PYTHONUNBUFFERED=1 FLCE_CACHE_DIR=$(mktemp -d)
cp scripts/.call4.sh $L/call.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site gpu-bundle/wheels/flce-*.whl
export PYTHONPATH=/tmp/site
timeout 80 python3 scripts/profile_kernels.py --shape train16k --configs auto/auto/2147483648,auto/auto/4294967296 --top 12 --launches > $L/profile-compact.log 2>&1; echo "exit $?" >> $L/profile-compact.log
FLCE_STEP_LOGITS=f32 timeout 60 python3 scripts/profile_kernels.py --shape train16k --configs auto/auto/2147483648 --top 12 > $L/profile-f32.log 2>&1; echo "exit $?" >> $L/profile-f32.log
tar czf "$OUT/logs4.tgz" -C /tmp logs4
grep -A16 "^## " $L/profile-compact.log; grep -A16 "^## " $L/profile-f32.log; tail -1 $L/profile-compact.log
