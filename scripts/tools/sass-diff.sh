#!/usr/bin/env bash
# Compare the machine code (SASS) of every kernel between a git revision and the working tree,
# without a GPU: NVRTC compiles both (the resource_usage example), cuobjdump disassembles, and
# each cubin's instructions (encodings and addresses stripped) are compared. A refactor of
# kernels/ that reports "same" everywhere cannot change what runs on the device.
#
#   bash scripts/tools/sass-diff.sh [REV (default HEAD)]
#   TARGETS="sm_90a:bf16 sm_80:f16" bash scripts/tools/sass-diff.sh HEAD~1
#   REV_TARGET_DIR=/tmp/rev-target bash scripts/tools/sass-diff.sh   # keep the revision's build between runs
#
# Needs NVRTC (CI's nvidia-cuda-nvrtc wheel) and cuobjdump on PATH, e.g.
#   python3 -m pip install --target /tmp/cuobj nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
#   export PATH=/tmp/cuobj/nvidia/cu13/bin:$PATH
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=${1:-HEAD}
targets=${TARGETS:-"sm_90a:bf16 sm_90a:f16 sm_86:f32 sm_80:bf16"}
command -v cuobjdump >/dev/null || { echo "cuobjdump not on PATH (see the header of $0)" >&2; exit 2; }
if [ -z "${LD_LIBRARY_PATH:-}" ] || ! ls "${LD_LIBRARY_PATH%%:*}"/libnvrtc.so* >/dev/null 2>&1; then
  nvrtc=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null || true)
  export LD_LIBRARY_PATH="$nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
work=$(mktemp -d)
trap 'git worktree remove --force "$work/rev" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach "$work/rev" "$rev" >/dev/null

cubins() {  # $1: source tree, $2: output dir, $3: cargo target dir (one per tree: the kernels are
            # include_str!'d, and a shared target dir would take one tree's build for the other's)
  for t in $targets; do
    (cd "$1" && CARGO_TARGET_DIR="$3" cargo run -q --release -p flce-cuda \
      --example resource_usage "${t%:*}" "${t#*:}" "$2/${t/:/_}" >/dev/null)
  done
}
sass() { cuobjdump -sass "$1" | grep -E '^\s+/\*[0-9a-f]+\*/' | sed -E 's#/\* 0x[0-9a-f]+ \*/##; s#/\*[0-9a-f]+\*/##'; }

cubins "$work/rev" "$work/before" "${REV_TARGET_DIR:-$work/target}"
cubins "$PWD" "$work/after" "${CARGO_TARGET_DIR:-$PWD/target}"
same=0 differ=0
for f in $(cd "$work/after" && find . -name '*.cubin' | sort); do
  if [ ! -f "$work/before/$f" ]; then
    echo "new      ${f#./}"
  elif diff -q <(sass "$work/before/$f") <(sass "$work/after/$f") >/dev/null; then
    same=$((same + 1))
  else
    echo "differs  ${f#./} ($(diff <(sass "$work/before/$f") <(sass "$work/after/$f") | grep -c '^[<>]') lines)"
    differ=$((differ + 1))
  fi
done
echo "$same kernels with the same SASS as $rev, $differ different"
[ "$differ" -eq 0 ]
