#!/usr/bin/env bash
# The peers' wheels for side-by-side runs on the GPU machine (no network there), in .whl/
# (git-excluded): liger-kernel 0.8.5, cut-cross-entropy 25.1.1, trl 1.16.0 and, for Liger's Hopper kernel
# (`liger_sm90`), nvidia-cutlass-dsl 4.8.1 with its -libs-core, -libs-base and -libs-cu13. The
# last is 92 MB, over one call's 64 MiB carry, so it is split in three parts of 31 MB that travel
# in back-to-back calls, each alone (scripts/gpu/suite.sh's PART=cut / wheel put them together).
#   bash scripts/gpu/peer-wheels.sh                        # here, once
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl' .git/info/exclude || echo '/.whl' >> .git/info/exclude
mkdir -p .whl/small
pip_get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$1" "${@:2}"
}
pip_get .whl/small liger-kernel==0.8.5 cut-cross-entropy==25.1.1 trl==1.16.0 nvidia-cutlass-dsl==4.8.1 \
  nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1
tmp=$(mktemp -d)
pip_get "$tmp" nvidia-cutlass-dsl-libs-cu13==4.8.1
(cd "$tmp" && split -b 31000000 nvidia_cutlass_dsl_libs_cu13-*.whl cu13.part.)
for part in "$tmp"/cu13.part.*; do
  mkdir -p ".whl/c-${part##*.}" && mv "$part" ".whl/c-${part##*.}/"
done
sha256sum "$tmp"/nvidia_cutlass_dsl_libs_cu13-*.whl
rm -rf "$tmp"
du -sh .whl/*
