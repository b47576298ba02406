#!/usr/bin/env bash
# Build what the GPU machine runs into gpu-bundle/ (git-ignored); the machine has no Rust, the
# scripts and tests run there from the repository's own tree.
#   gpu-bundle/gpu-tests      the GPU test binary (crates/flce-cuda/tests/gpu/)
#   gpu-bundle/flce           the CLI (demo, bench, plan)
#   gpu-bundle/wheels/        the flce Python wheel (abi3)
#   gpu-bundle/bench_peers.py the peers' harness, where ../shared/peers has it
# Then, on the GPU machine (with gpu-bundle there):  bash scripts/gpu/verify.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf gpu-bundle && mkdir -p gpu-bundle
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
maturin build --release --quiet -o gpu-bundle/wheels
[ -f ../shared/peers/bench_peers.py ] && cp ../shared/peers/bench_peers.py gpu-bundle/
strip gpu-bundle/gpu-tests gpu-bundle/flce
du -sh gpu-bundle
