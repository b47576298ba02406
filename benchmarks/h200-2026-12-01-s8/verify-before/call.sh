set -uo pipefail
export PYTHONUNBUFFERED=1
git_rev=$(cat gpu-bundle/REV 2>/dev/null || echo "?")
echo "== verify $(date -u +%T)"
OUT=$OUT STEPS="tests pytest memcheck" TEST_ARGS=--small T_TESTS=170 T_PYTEST=150 T_MEMCHECK=120 bash scripts/gpu-verify.sh
echo "== done $(date -u +%T)"
grep -E "^gpu:|^exit|FAILED|bad-weights" $OUT/gpu-tests.log | head; grep -E "ERROR SUMMARY|^gpu:|^exit" $OUT/memcheck.log; tail -2 $OUT/pytest.log
