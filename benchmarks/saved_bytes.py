"""What one decoder layer's autograd keeps, byte for byte, against the planner's per-token count.

Runs one Hugging Face decoder layer (Llama-3.2-1B, Gemma-2-2B or Qwen2.5-1.5B shapes, bf16, random
weights) forward on the CPU under `torch.autograd.graph.saved_tensors_hooks` and sums the distinct
storages it saves (parameters excluded), per token — what stays on the GPU while that layer waits
for its backward, or what its recompute rebuilds under checkpointing. Full fine-tune, or LoRA r on
q/k/v/o (base weights frozen, adapters as peft builds them: base(x) + B(A(x))·scale). Attention is
sdpa without a mask (T below every window), the layout flash / flex attention saves too.

    python3 benchmarks/saved_bytes.py --tokens 512

Prints per model and setup: measured bytes a token, the planner's (`flce_memory`'s
layer_activation_bytes_per_token, less LoRA's frozen MLP), their ratio, and (with flce importable)
the saved bytes with the layer's norms in token tiles (`flce.patch(..., norm_tiles=N)`). No GPU needed: which
tensors autograd saves does not depend on the device (the attention kernel's own saved tensors
do, a few bytes a token: the f32 logsumexp).
"""

from __future__ import annotations

import argparse

import torch
import transformers

MODELS = {
    # (hidden, intermediate, heads, kv heads, head dim, norms per layer, family)
    "Llama-3.2-1B": (2048, 8192, 32, 8, 64, 2, "llama"),
    "Gemma-2-2B": (2304, 9216, 8, 4, 256, 4, "gemma2"),
    "Qwen2.5-1.5B": (1536, 8960, 12, 2, 128, 2, "qwen2"),
}


class LoRA(torch.nn.Module):
    """peft's LoRA forward: base(x) + lora_B(lora_A(x)) · scale (dropout 0), base frozen."""

    def __init__(self, base: torch.nn.Linear, r: int):
        super().__init__()
        self.base = base
        self.a = torch.nn.Linear(base.in_features, r, bias=False, dtype=base.weight.dtype)
        self.b = torch.nn.Linear(r, base.out_features, bias=False, dtype=base.weight.dtype)

    def forward(self, x):
        return self.base(x) + self.b(self.a(x)) * 2.0


def layer_for(name: str):
    h, i, heads, kv, hd, _, family = MODELS[name]
    common = dict(hidden_size=h, intermediate_size=i, num_hidden_layers=1, num_attention_heads=heads,
                  num_key_value_heads=kv, vocab_size=256, max_position_embeddings=8192)
    if family == "gemma2":
        cfg = transformers.Gemma2Config(head_dim=hd, attn_logit_softcapping=None, **common)
        model = transformers.Gemma2ForCausalLM(cfg)
    elif family == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    model.config._attn_implementation = "sdpa"
    return model.to(torch.bfloat16)


def saved_bytes_per_token(name: str, tokens: int, lora: int, norm_tiles: int = 1) -> float:
    torch.manual_seed(0)
    model = layer_for(name)
    layer = model.model.layers[0]
    if norm_tiles > 1:
        import flce  # the norms in token tiles, as flce.patch(..., norm_tiles=N) wraps them
        norms = [m for m in layer.modules() if type(m).__name__.endswith("RMSNorm")]
        flce.tiled_mlp.wrap_mlps(norms, norm_tiles)
    if lora:
        for p in model.parameters():
            p.requires_grad_(False)
        attn = layer.self_attn
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(attn, proj, LoRA(getattr(attn, proj), lora))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    x = torch.randn(1, tokens, MODELS[name][0], dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(tokens).unsqueeze(0)
    rope = model.model.rotary_emb(x, pos)
    seen: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params and s.data_ptr() != x.untyped_storage().data_ptr():
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = layer(x, attention_mask=None, position_ids=pos, position_embeddings=rope)
    out = out[0] if isinstance(out, tuple) else out
    del out
    return sum(seen.values()) / tokens


def planner_bytes_per_token(name: str, lora: bool) -> int:
    """flce_memory's count (crates/flce-memory/src/estimate.rs), the layer input excluded."""
    h, i, heads, kv, hd, norms, _ = MODELS[name]
    q, kvd = heads * hd, kv * hd
    per = norms * 6 * h + 2 * (2 * h + 5 * q + 4 * kvd + 4 * i) + 4 * heads
    return per - (2 * h + 2 * i if lora else 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--lora", type=int, default=16)
    a = ap.parse_args()
    print(f"one decoder layer, {a.tokens} tokens, bf16, CPU autograd (transformers {transformers.__version__})")
    try:
        import flce  # noqa: F401
        tiled = True
    except ImportError:
        tiled = False
    print("| model | setup | saved bytes a token | planner | planner / saved | norms in 4 tiles (flce) |")
    print("|---|---|---|---|---|---|")
    for name in a.models.split(","):
        for lora in (0, a.lora):
            got = saved_bytes_per_token(name, a.tokens, lora)
            want = planner_bytes_per_token(name, bool(lora))
            setup = f"LoRA r {lora}" if lora else "full fine-tune"
            norms = f"{saved_bytes_per_token(name, a.tokens, lora, 4):,.0f}" if tiled else "-"
            print(f"| {name} | {setup} | {got:,.0f} | {want:,} | {want / got:.3f} | {norms} |")


if __name__ == "__main__":
    main()
