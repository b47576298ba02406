"""``flce.plan``: what one training step of a model needs on a GPU, and the longest context that
fits, for every combination of loss (PyTorch, torch.compile, flce) and activation handling (kept,
checkpointing, checkpointing + offload). The estimates come from Rust (crates/flce-memory) and
are the same as ``flce plan`` on the command line."""

from __future__ import annotations

from typing import List, Optional

from . import _flce


def plan(model: str = "Llama-3.2-1B", gpu_gb: float = 10.0, seq: int = 4096, batch: int = 1,
         optimizer: str = "adamw", lora_rank: int = 16, print_table: bool = True,
         plot: Optional[str] = None, mlp_tiles: int = 1, attention: str = "flash",
         norm_tiles: int = 1, stream_weights: bool = False) -> List[dict]:
    """``model``: a built-in name (Llama-3.2-1B, Llama-3.1-8B, Qwen2.5-0.5B / 1.5B / 7B,
    Gemma-2-2B / 9B) or the path of a Hugging Face config.json. ``optimizer``: adamw (f32
    moments), adamw-bf16 (moments in the bf16 weights' dtype: ``torch.optim.AdamW`` on bf16
    parameters), adamw-fused / adamw-bf16-fused (``torch.optim.AdamW(fused=True)``: no
    temporaries in the step), adamw8bit or sgd; ``lora_rank`` 0 for a full fine-tune. Returns one dict per
    combination (bytes of each term, ``peak``, ``fits``, ``longest_seq``); prints the table.
    ``plot``: also write peak memory against sequence length (256 tokens to 1M, the GPU's size
    drawn across) as a chart at that path: a PNG where it ends in ``.png``, an SVG otherwise. ``mlp_tiles``: the MLPs computed in that many token
    tiles (``flce.patch(..., mlp_tiles=...)``), ``norm_tiles`` the layers' RMSNorms
    (``flce.patch(..., norm_tiles=...)``); ``stream_weights``: the layers' frozen weights from
    pinned host memory (``flce.patch(..., stream_weights=True)``). ``attention``: Hugging Face's attention kernel, for
    models with sliding-window layers (Gemma 2): "flash" (flash_attention_2 or flex_attention: the
    window without a mask; the default) or "sdpa" (past the window a dense [T, T] mask, T² bytes
    held and 4·T² more in each layer's attention backward; transformers ≤ 5.17)."""
    table, rows = _flce.memory_plan(model, float(gpu_gb), int(seq), int(batch), optimizer, int(lora_rank), plot,
                                    int(mlp_tiles), str(attention), int(norm_tiles),
                                    bool(stream_weights))
    if print_table:
        print(table)
    return rows


def suggest(model: str = "Llama-3.2-1B", gpu_gb: float = 10.0, seq: int = 4096, batch: int = 1,
            optimizer: str = "adamw", lora_rank: int = 16, attention: str = "flash") -> dict:
    """The cheapest of ``flce.patch``'s memory options (checkpointing, offload, MLP and norm tiles,
    streamed frozen weights, in order of what they cost in step time) whose planned peak fits
    ``gpu_gb`` at ``seq`` tokens, by the planner of :func:`plan` (same arguments). Returns
    ``{"options": patch's keyword arguments, "patch": the call as text, "peak": planned bytes,
    "fits": bool}``; ``fits`` False gives the last rung's options and peak (nothing fits)::

        s = flce.suggest("Gemma-2-2B", gpu_gb=10, seq=32768, lora_rank=16)
        flce.patch(model, **s["options"])
    """
    return _flce.memory_suggest(model, float(gpu_gb), int(seq), int(batch), optimizer, int(lora_rank), str(attention))
