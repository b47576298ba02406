#!/usr/bin/env bash
# A new user's first contact, as README.md writes it, on the CPU: a fresh virtual environment,
# `pip install ".[examples]"` from the repository root (which builds the extension and pulls
# torch, transformers, tqdm and matplotlib), then every ```python block of README.md in order and
# examples/train_tiny_llama.py. Run by .ci/run; any failure fails it.
#   bash scripts/ci/first_contact.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install --quiet --disable-pip-version-check ".[examples]"
"$py" - README.md "$work/readme" <<'PY'
import pathlib, re, sys
text = pathlib.Path(sys.argv[1]).read_text()
blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
assert blocks, "README.md has no python block"
out = pathlib.Path(sys.argv[2]); out.mkdir()
for i, b in enumerate(blocks):
    (out / f"block{i}.py").write_text(b)
print(f"{len(blocks)} python blocks in README.md")
PY
for block in "$work"/readme/block*.py; do
  echo "== README.md $(basename "$block")"
  (cd "$work" && "$py" "$block")
done
echo "== examples/train_tiny_llama.py"
(cd "$work" && "$py" "$OLDPWD/examples/train_tiny_llama.py" --device cpu --steps 5 --hidden 64 --layers 2 --vocab 2000 \
  --seq 64 --batch 4 --offload --mlp-tiles 2 --plot "$work/loss.png" 2>/dev/null | tail -n 2)
test -s "$work/loss.png"
echo "first contact: ok"
