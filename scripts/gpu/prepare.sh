#!/usr/bin/env bash
# Build everything the GPU machine needs (it has no Rust) into gpu-bundle/ (git-ignored):
#   gpu-tests   the GPU test binary (crates/flce-cuda/tests/gpu.rs)
#   flce        the CLI (demo, bench)
#   wheels/     the flce Python wheel (abi3), python-tests/ its pytest suite
#   scripts     the run-side scripts (pytest itself travels as wheels in .whl, see gpu-check.sh)
# Then run on the GPU machine:  bash gpu-bundle/scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf gpu-bundle && mkdir -p gpu-bundle/scripts
test_bin=$(cargo test --release -p flce-cuda --test gpu --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu":
        print(m["executable"])' | tail -n 1)
cp "$test_bin" gpu-bundle/gpu-tests
cargo build --release -p flce-cli
cp target/release/flce gpu-bundle/flce
python3 -m pip install --quiet maturin==1.16.0
maturin build --release --quiet -m crates/flce-py/Cargo.toml -o gpu-bundle/wheels
cp -r crates/flce-py/tests gpu-bundle/python-tests
cp scripts/gpu/*.sh scripts/tools/profile_kernels.py gpu-bundle/scripts/
# the peers harness from the shared folder (not part of the repository)
[ -f ../shared/peers/bench_peers.py ] && cp ../shared/peers/bench_peers.py gpu-bundle/scripts/
strip gpu-bundle/gpu-tests gpu-bundle/flce
du -sh gpu-bundle
