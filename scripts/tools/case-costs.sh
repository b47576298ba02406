#!/usr/bin/env bash
# The GPU cases' measured times, for gpu-tests' cost-balanced shards (tests/gpu/shards.rs): from
# the logs of a full run (every case, e.g. scripts/gpu/tests-sharded.sh's gpu-tests-*.log), one
# "ms<TAB>name" line a case that passed or failed, sorted by name. Refresh the table after cases
# are added or made slower:
#   bash scripts/tools/case-costs.sh LOGS... > crates/flce-cuda/tests/gpu/case_ms.txt
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 gpu-tests-logs..." >&2; exit 2; }
grep -h -E '^test .* \.\.\. (ok|FAILED).*\[[0-9]+ ms\]$' "$@" \
  | sed -E 's/^test (.*) \.\.\. (ok|FAILED).*\[([0-9]+) ms\]$/\3\t\1/' \
  | sort -t$'\t' -k2
