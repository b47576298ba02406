#!/usr/bin/env bash
# The peers' wheels for side-by-side runs on the GPU machine (no network there), in .whl/
# (git-excluded): liger-kernel 0.8.5, cut-cross-entropy 25.1.1 and, for Liger's Hopper kernel
# (`liger_sm90`), nvidia-cutlass-dsl 4.8.1 with its -libs-core, -libs-base and -libs-cu13. The
# last is 92 MB, over one call's 64 MiB carry (the tracked tree counts too: 19.9 MB on
# 2026-12-04, when a 46 MB half no longer fit beside it), so it is split in three parts of 31 MB
# that travel in back-to-back calls, each alone (the machine keeps /tmp while warm, 30 s;
# scripts/gpu-suite-fast.sh's PART=cut / wheel do this):
#   bash scripts/peer-wheels.sh                        # here, once
#   calls 1–3 (carry .whl/c-aa, then c-ab, then c-ac):  mkdir -p /tmp/cut && cp .whl/c-*/cu13.part.* /tmp/cut/
#   call 4 (carry .whl/small and what the run needs), at once:
#     cat /tmp/cut/cu13.part.* > /tmp/cut/nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
#     python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers .whl/small/*.whl /tmp/cut/*.whl
#     export PYTHONPATH=/tmp/peers/nvidia_cutlass_dsl/dsl_packages:/tmp/site:/tmp/peers
#     python3 benchmarks/suite.py --methods flce,cublas,liger_sm90,liger,cce ...
# (2026-12-01: benchmarks/h200-2026-12-01/peers/ was made this way.)
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl' .git/info/exclude || echo '/.whl' >> .git/info/exclude
mkdir -p .whl/small
pip_get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$1" "${@:2}"
}
pip_get .whl/small liger-kernel==0.8.5 cut-cross-entropy==25.1.1 nvidia-cutlass-dsl==4.8.1 \
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
