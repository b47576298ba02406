#!/usr/bin/env bash
# The binding's pytest on the GPU machine, from /tmp (so the installed wheel, not the source tree,
# is imported) over gpu-bundle/python-tests, in PYTEST_WORKERS processes where pytest-xdist is
# there (the H200 image has it; default 6; 0: one process — 354 s on the H200 machine in s45).
# The tests share nothing but the kernel cache, which takes concurrent writers, and the
# distributed ones rendezvous in their own temp files. Extra arguments go to pytest.
#   bash gpu-bundle/scripts/gpu-pytest.sh [pytest args...]   (from the repository root)
set -uo pipefail
tests=$PWD/gpu-bundle/python-tests
xdist=()
if [ "${PYTEST_WORKERS:-6}" != 0 ] && python3 -c "import xdist" 2>/dev/null; then xdist=(-n "${PYTEST_WORKERS:-6}"); fi
cd /tmp && exec python3 -m pytest -q -p no:cacheprovider "${xdist[@]}" "$@" "$tests"
