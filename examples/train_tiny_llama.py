"""Train a small Llama-style model from scratch with flce's loss, on text that ships with Python
(the standard library's documentation, rendered by pydoc: no download), with a progress bar and a
loss-curve PNG.

    pip install ".[examples]"                                    # flce, transformers, tqdm, matplotlib
    python3 examples/train_tiny_llama.py                         # GPU if present: ~300 steps
    python3 examples/train_tiny_llama.py --device cpu --steps 20 --hidden 64 --vocab 4000

The vocabulary is word-level (the --vocab most frequent words of the corpus, plus <unk>), so the
classifier is large against the model, as in real LLMs; the loss never holds the logits
(flce.patch). --checkpointing turns on activation checkpointing (flce.offload's, through
transformers' checkpointing hook), --offload also keeps each layer's input in pinned host memory
until its backward, --mlp-tiles N computes each MLP in N token tiles (flce.tiled_mlp).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import pydoc
import re

import torch

MODULES = ["collections", "itertools", "functools", "os", "json", "re", "string", "textwrap", "argparse",
           "logging", "datetime", "decimal", "fractions", "statistics", "random", "heapq", "bisect", "typing",
           "pathlib", "shutil", "subprocess", "threading", "unittest", "csv", "sqlite3", "zipfile", "tarfile",
           "email.message", "http.client", "urllib.parse", "inspect", "dataclasses", "enum", "contextlib"]


def corpus() -> list:
    words = []
    for name in MODULES:
        try:
            text = pydoc.render_doc(importlib.import_module(name), renderer=pydoc.plaintext)
        except Exception:  # a module missing on this Python: skip it
            continue
        words += re.findall(r"\w+|[^\w\s]", text.lower())
    return words


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--offload", action="store_true", help="checkpointing with the layer inputs in host memory")
    ap.add_argument("--mlp-tiles", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--plot", default="loss_curve.png")
    args = ap.parse_args()

    import flce

    try:
        from tqdm import tqdm
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        raise SystemExit(f"{e.name} is missing: this example needs flce's examples extra, pip install \".[examples]\"")

    words = corpus()
    common = [w for w, _ in collections.Counter(words).most_common(args.vocab - 1)]
    index = {w: i + 1 for i, w in enumerate(common)}  # 0 is <unk>
    ids = torch.tensor([index.get(w, 0) for w in words], dtype=torch.int64)
    print(f"corpus: {len(words):,} words from {len(MODULES)} modules' documentation; vocabulary {len(common) + 1:,}")

    device = torch.device(args.device)
    torch.manual_seed(0)
    heads = max(args.hidden // 64, 1)
    cfg = LlamaConfig(hidden_size=args.hidden, intermediate_size=int(args.hidden * 8 / 3) // 8 * 8,
                      num_hidden_layers=args.layers, num_attention_heads=heads,
                      num_key_value_heads=max(heads // 2, 1), vocab_size=len(common) + 1,
                      max_position_embeddings=args.seq)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = flce.patch(LlamaForCausalLM(cfg).to(device=device, dtype=dtype), checkpoint=args.checkpointing,
                       offload=args.offload, mlp_tiles=args.mlp_tiles)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps)
    gen = torch.Generator().manual_seed(1)
    losses = []
    bar = tqdm(range(args.steps), desc="training", unit="step")
    for _ in bar:
        starts = torch.randint(0, len(ids) - args.seq - 1, (args.batch,), generator=gen)
        batch = torch.stack([ids[s:s + args.seq] for s in starts.tolist()]).to(device)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    print(f"loss: first {losses[0]:.3f}, last {losses[-1]:.3f} (log V = {torch.log(torch.tensor(len(common) + 1.0)):.3f})")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        plt.figure(figsize=(7, 4))
        plt.plot(losses)
        plt.xlabel("step")
        plt.ylabel("training loss (flce)")
        plt.title(f"{args.layers}-layer Llama-style model, hidden {args.hidden}, vocabulary {len(common) + 1:,}")
        plt.tight_layout()
        plt.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")
    except ImportError:
        print("matplotlib not installed: no plot")


if __name__ == "__main__":
    main()
