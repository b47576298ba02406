"""A transformer block's MLP computed in token tiles (Arctic Long Sequence Training's "tiled MLP").

With checkpointing (and offload, flce.offload) the activations held between forward and backward
are one tensor per block; what remains is the peak *inside* one block's recompute, and at long
contexts its MLP dominates it: a Gemma-2-2B MLP at 64k tokens holds gate, up and their product,
3 × 64k × 9216 bf16 values (3.4 GiB), plus their gradients in the backward. ``tiled_mlp`` runs
the MLP over ``tiles`` slices of the tokens: the forward keeps only its input, the backward
recomputes one slice at a time and accumulates the weight gradients slice by slice, so the MLP's
intermediates exist for one slice at a time.

Rows of an MLP are independent, so the outputs and the input gradient are per-token results of
the same formulas, though a GEMM over fewer rows may block and round differently; the weight
gradients are sums over slices instead of one GEMM over all tokens. Equal to rounding, not
bitwise (f64 tests: 1e-13 relative). As with flce.offload, the weights' gradients go to their
``.grad`` (``loss.backward()``, not ``torch.autograd.grad``). The RNG state of the
forward is replayed for the recompute, so dropout inside the MLP keeps its masks.

    flce.tiled_mlp.wrap_mlps([layer.mlp for layer in model.model.layers], tiles=4)
    flce.patch(hf_model, checkpoint=True, offload=True, mlp_tiles=4)
"""

from __future__ import annotations

from typing import Callable

import torch

from .offload import _anchor, _replayed_rng, _restore_forward, _rng_state

__all__ = ["tiled_mlp", "wrap_mlps", "unwrap_mlps"]


def _slices(rows: int, tiles: int):
    per = -(-rows // max(1, tiles))
    return [(s, min(s + per, rows)) for s in range(0, rows, per)] if rows else []


class _TiledMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, function, tiles, anchor, x):
        ctx.function, ctx.tiles = function, tiles
        ctx.rng = _rng_state(x.device)
        ctx.save_for_backward(x)
        x2 = x.reshape(-1, x.shape[-1])
        outs = [function(x2[a:b]) for a, b in _slices(x2.shape[0], tiles)]
        out = torch.cat(outs) if outs else function(x2)
        return out.reshape(*x.shape[:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        x2 = x.detach().reshape(-1, x.shape[-1])
        g2 = grad_out.reshape(-1, grad_out.shape[-1])
        gx = torch.empty_like(x2) if ctx.needs_input_grad[3] else None
        with torch.enable_grad(), _replayed_rng(ctx.rng, x.device):
            for a, b in _slices(x2.shape[0], ctx.tiles):
                xt = x2[a:b].detach().requires_grad_(gx is not None)
                out = ctx.function(xt)
                if not out.requires_grad:
                    # nothing upstream wants a gradient from this function: frozen weights and an
                    # input without one (a LoRA model's first norm, on the frozen embeddings). The
                    # anchor still calls this backward; every slice is alike, so stop here.
                    break
                torch.autograd.backward(out, g2[a:b])
                if gx is not None:
                    gx[a:b] = xt.grad
        return None, None, None, (gx.reshape(x.shape) if gx is not None else None)


@torch.compiler.disable
def tiled_mlp(function: Callable, x: torch.Tensor, tiles: int) -> torch.Tensor:
    """``function(x)`` (a token-wise MLP over the last dimension) with its intermediates held for
    one of ``tiles`` token slices at a time; the weights of ``function`` get their gradients
    from the slice-by-slice recompute. Without gradients it is just ``function(x)``."""
    if tiles < 1:
        raise ValueError(f"tiles must be >= 1, got {tiles}")
    if not torch.is_grad_enabled() or tiles == 1:
        return function(x)
    return _TiledMLP.apply(function, tiles, _anchor(x.device), x)


def wrap_mlps(mlps, tiles: int):
    """Make every module of ``mlps`` compute through :func:`tiled_mlp` (its ``forward`` replaced on
    the instance; it must take the hidden states as its one argument and work row by row over
    the last dimension: MLPs, and norms as ``flce.patch(..., norm_tiles=N)`` wraps them). Undo
    with :func:`unwrap_mlps`."""
    if tiles < 1:
        raise ValueError(f"tiles must be >= 1, got {tiles}")
    for mlp in mlps:
        original = getattr(mlp, "_flce_tiled_forward", None) or mlp.forward

        def forward(x, _original=original):
            return tiled_mlp(_original, x, tiles)

        mlp._flce_tiled_forward = original
        mlp.forward = forward


def unwrap_mlps(mlps):
    """Undo :func:`wrap_mlps`."""
    _restore_forward(mlps, "_flce_tiled_forward")
