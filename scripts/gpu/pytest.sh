#!/usr/bin/env bash
# The binding's pytest suite on the GPU machine, from /tmp (so that the installed wheel, not the
# source tree, is imported), in PYTEST_WORKERS processes where pytest-xdist is there (default 6;
# 0: one process). The tests share nothing but the kernel cache, which takes concurrent writers,
# and the vocabulary-parallel ones rendezvous in their own temp files. Extra arguments go to
# pytest. Run from the repository root with the wheel on PYTHONPATH (scripts/gpu/verify.sh does).
#   bash scripts/gpu/pytest.sh [pytest args...]
set -uo pipefail
tests=$PWD/crates/flce-py/tests
xdist=()
if [ "${PYTEST_WORKERS:-6}" != 0 ] && python3 -c "import xdist" 2>/dev/null; then xdist=(-n "${PYTEST_WORKERS:-6}"); fi
cd /tmp && exec python3 -m pytest -q -p no:cacheprovider "${xdist[@]}" "$@" "$tests"
