"""Vocabulary-parallel linear cross-entropy on ``torch.distributed``: each rank holds rows of the
classifier (its shard of the vocabulary, sizes may differ) and the same hidden states and targets.
The ranks exchange O(N) per-token statistics in the forward and dE's shares (N·D) in the
backward — never logits.

    loss = flce.distributed.linear_cross_entropy(hidden, lm_head_shard, labels, process_group=pg)

Forward: each rank computes partial statistics over its rows (flce's loss phases), all-gathers
them and merges them in rank order (the same bits on every rank, and for a fixed number of
ranks), then finishes the loss. Backward: each rank computes its shard's dC (and db) and its share
of dE in f32; the shares are all-gathered and summed in rank order, then rounded once.

CPU tensors (gloo) for now: on the GPU the kernels still take the whole vocabulary; giving them a
vocabulary offset is the next step (issue 14).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import _flce
from ._common import _DTYPES, _REDUCTIONS, LossOptions, _problem

_FIELDS = 6  # per token: max, Σexp, Σw·z, argmax, target logit, target weight (float64)


def _gather(t: Tensor, group) -> list:
    out = [torch.empty_like(t) for _ in range(torch.distributed.get_world_size(group))]
    torch.distributed.all_gather(out, t.contiguous(), group=group)
    return out


def _inputs(e, c, b, t, w):
    return (e.data_ptr(), c.data_ptr(), None if b is None else b.data_ptr(), t.data_ptr(),
            None if w is None else w.data_ptr())


class _VocabParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, e, c, b, t, w, group, offset, total, o):
        n, d = e.shape
        dt = _DTYPES[e.dtype]
        local, whole = _problem(n, d, c.shape[0], dt, o), _problem(n, d, total, dt, o)
        part = torch.empty(n, _FIELDS, dtype=torch.float64)
        w_k = _flce.phase_forward_partials(local, _inputs(e, c, b, t, w), offset, total, part.data_ptr())
        parts = torch.stack(_gather(part, group)).contiguous()
        w_all = float(sum(x.item() for x in _gather(torch.tensor([w_k], dtype=torch.float64), group)))
        lse = torch.empty(n, dtype=torch.float32)
        per_token = torch.empty(n if o.reduction == "none" else 0, dtype=torch.float32)
        merged = torch.empty(n, _FIELDS, dtype=torch.float64)
        loss, _ = _flce.phase_finish(whole, parts.data_ptr(), parts.shape[0], w_all, t.data_ptr(), lse.data_ptr(),
                                     per_token.data_ptr() if o.reduction == "none" else None, merged.data_ptr())
        ctx.save_for_backward(e, c, b, t, w, lse, merged)
        ctx.group, ctx.offset, ctx.total, ctx.o, ctx.w_all = group, offset, total, o, w_all
        ctx.mark_non_differentiable(lse)
        out = per_token if o.reduction == "none" else torch.tensor(loss, dtype=torch.float32)
        return out, lse

    @staticmethod
    def backward(ctx, g_out, g_lse):
        e, c, b, t, w, lse, merged = ctx.saved_tensors
        n, d = e.shape
        o = ctx.o
        local = _problem(n, d, c.shape[0], _DTYPES[e.dtype], o)
        go = (g_out if g_out is not None else torch.zeros(n if o.reduction == "none" else 1))
        go = go.to(torch.float32).reshape(-1).contiguous()
        want_de, want_dc = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        want_db = b is not None and ctx.needs_input_grad[2]
        de_part = torch.empty(n, d, dtype=torch.float32)  # every rank takes part in the gather below
        dc = torch.empty_like(c) if want_dc else None
        db = torch.empty_like(b) if want_db else None
        _flce.phase_backward_slice(local, _inputs(e, c, b, t, w), ctx.offset, ctx.total, lse.data_ptr(),
                                   merged.data_ptr(), ctx.w_all, go.data_ptr(),
                                   (de_part.data_ptr(), None if dc is None else dc.data_ptr(),
                                    None if db is None else db.data_ptr()))
        de = None
        shares = _gather(de_part, ctx.group)
        if want_de:
            total = shares[0].clone()
            for s in shares[1:]:
                total += s  # rank order: the same bits on every rank
            de = total.to(e.dtype)
        return de, dc, db, None, None, None, None, None, None


def linear_cross_entropy(input: Tensor, linear_weight_shard: Tensor, target: Tensor,
                         linear_bias_shard: Optional[Tensor] = None, *, process_group=None,
                         weight_shard: Optional[Tensor] = None, reduction: str = "mean", ignore_index: int = -100,
                         label_smoothing: float = 0.0, z_loss: float = 0.0, softcap: Optional[float] = None,
                         shift: bool = False, return_lse: bool = False):
    """:func:`flce.linear_cross_entropy` with the classifier sharded by vocabulary rows across
    ``process_group`` (default: the world): rank k passes its rows (``linear_weight_shard``
    [V_k, D], in rank order; the V_k may differ), the matching rows of the bias and of the class
    weights, and the same ``input`` [..., D] and ``target`` (indices into the whole vocabulary)
    as every other rank. Every rank gets the same loss; gradients are the rank's dC / db rows
    and the whole dE. Ranks that disagree on N or D raise ValueError together, before any work."""
    dist = torch.distributed
    group = process_group if process_group is not None else dist.group.WORLD
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if input.device.type != "cpu" or linear_weight_shard.device.type != "cpu":
        raise NotImplementedError("flce.distributed runs on CPU tensors for now; the CUDA kernels do not yet take a "
                                  "vocabulary offset (issue 14)")
    d = input.shape[-1]
    e = input.reshape(-1, d).contiguous()
    n = e.shape[0]
    rows = linear_weight_shard.shape[0]
    meta = torch.tensor([n, d, rows, linear_weight_shard.shape[1]], dtype=torch.int64)
    seen = [m.tolist() for m in _gather(meta, group)]
    if any(m[0] != n or m[1] != d or m[3] != d for m in seen):
        raise ValueError(f"ranks disagree on the problem: (N, D, rows, classifier D) per rank = {seen}")
    sizes = [m[2] for m in seen]
    rank = dist.get_rank(group)
    offset, total = sum(sizes[:rank]), sum(sizes)
    seq = (input.shape[-2] if input.dim() >= 3 else n) if shift else 0
    o = LossOptions(reduction, int(ignore_index), float(label_smoothing), float(z_loss),
                    None if softcap is None else float(softcap), seq)
    c = linear_weight_shard.contiguous()
    b = linear_bias_shard.contiguous() if linear_bias_shard is not None else None
    w = weight_shard.to(torch.float32).contiguous() if weight_shard is not None else None
    t = target.reshape(-1).to(torch.int64).contiguous()
    loss, lse = _VocabParallel.apply(e, c, b, t, w, group, offset, total, o)
    loss = (loss.reshape(input.shape[:-1]) if reduction == "none" else loss).to(input.dtype)
    return (loss, lse.reshape(input.shape[:-1])) if return_lse else loss
