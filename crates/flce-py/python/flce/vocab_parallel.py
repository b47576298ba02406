"""Vocabulary-parallel linear cross-entropy on ``torch.distributed``: each rank holds rows of the
classifier (its shard of the vocabulary, sizes may differ) and the same hidden states and targets.
The ranks exchange O(N) per-token statistics in the forward and dE's shares (N·D) in the
backward — never logits.

    loss = flce.vocab_parallel.linear_cross_entropy(hidden, lm_head_shard, labels, process_group=pg)

Forward: each rank computes partial statistics over its rows (flce_core::cpu::vocab_parallel's steps), all-gathers
them and merges them in rank order (the same bits on every rank, and for a fixed number of
ranks), then finishes the loss. Backward: each rank computes its shard's dC (and db) and its share
of dE in f32; the shares are all-gathered and summed in rank order, then rounded once.

CPU tensors run flce's CPU steps (gloo); CUDA tensors the CUDA ones (kernels/shared/vocab_parallel.cu,
NCCL): the partials, the merge and dE's shares stay on the GPU, on the caller's stream.
"""

from __future__ import annotations

import functools
import sys
from typing import Optional

import torch
from torch import Tensor

from . import _flce
from ._common import (_DTYPES, _REDUCTIONS, LossOptions, _cuda_of, _device_index, _forward_plan, _inputs, _problem,
                      _ptr, raise_bad_input)

_FIELDS = 6  # per token: max, Σexp, Σw·z, argmax, target logit, target weight (float64)


def _gather(t: Tensor, group) -> list:
    out = [torch.empty_like(t) for _ in range(torch.distributed.get_world_size(group))]
    torch.distributed.all_gather(out, t.contiguous(), group=group)
    return out


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
        go, de_part, dc, db = _slice_backward_buffers(ctx, e, c, b, g_out)
        _flce.phase_backward_slice(local, _inputs(e, c, b, t, w), ctx.offset, ctx.total, lse.data_ptr(),
                                   merged.data_ptr(), ctx.w_all, go.data_ptr(),
                                   (de_part.data_ptr(), _ptr(dc), _ptr(db)))
        return (_whole_de(ctx, de_part, e), dc, db) + (None,) * 6


def _slice_backward_buffers(ctx, e, c, b, g_out):
    """grad_output as f32 ([N] for none, [1] else), dE's f32 share (every rank computes it: every
    rank takes part in the gather of the shares) and this rank's dC / db where wanted."""
    n, d = e.shape
    none = ctx.o.reduction == "none"
    go = g_out if g_out is not None else torch.zeros(n if none else 1, device=e.device)
    go = go.to(torch.float32).reshape(-1).contiguous()
    de_part = torch.empty(n, d, dtype=torch.float32, device=e.device)
    dc = torch.empty_like(c) if ctx.needs_input_grad[1] else None
    db = torch.empty_like(b) if b is not None and ctx.needs_input_grad[2] else None
    return go, de_part, dc, db


def _whole_de(ctx, de_part, e):
    """dE: every rank's f32 share gathered and summed in rank order, rounded once (None when not
    wanted; the gather runs either way, as on every other rank)."""
    shares = _gather(de_part, ctx.group)
    return _sum_in_rank_order(shares).to(e.dtype) if ctx.needs_input_grad[0] else None


def _sum_in_rank_order(shares: list) -> Tensor:
    total = shares[0].clone()
    for s in shares[1:]:
        total += s  # rank order: the same bits on every rank
    return total


class _VocabParallelCuda(torch.autograd.Function):
    """The CUDA steps (flce::cuda::vocab_parallel): partials of this rank's rows, all-gathered [P, N, 6]
    f64 rows and [P] Σ w_j, the merge in rank order on the device; in the backward this rank's
    dC / db and its f32 share of dE, all-gathered and summed in rank order, rounded once."""

    @staticmethod
    def forward(ctx, e, c, b, t, w, group, offset, total, o, check):
        n, d = e.shape
        dt = _DTYPES[e.dtype]
        local, whole = _problem(n, d, c.shape[0], dt, o), _problem(n, d, total, dt, o)
        dev = _device_index(e)
        cuda = _cuda_of(e)
        f64 = dict(dtype=torch.float64, device=e.device)
        f32 = dict(dtype=torch.float32, device=e.device)
        plan = _forward_plan(local, dev, o.forward_mode, max(o.workspace_budget, 0))
        ws = torch.empty(max(plan.workspace_bytes, 1), dtype=torch.uint8, device=e.device)
        part, wsum = torch.empty(n, _FIELDS, **f64), torch.empty(1, **f64)
        status = torch.empty(1, dtype=torch.int32, device=e.device)
        _flce.cuda_phase_forward_partials(local, cuda, _inputs(e, c, b, t, w), offset, total,
                                          (part.data_ptr(), wsum.data_ptr(), status.data_ptr()),
                                          (ws.data_ptr(), ws.numel()), plan)
        parts = torch.stack(_gather(part, group)).contiguous()
        sums = torch.cat(_gather(wsum, group)).contiguous()
        lse, scalars = torch.empty(n, **f32), torch.empty(4, **f32)
        per_token = torch.empty(n if o.reduction == "none" else 0, **f32)
        merged = torch.empty(n, _FIELDS, **f64)
        fws = torch.empty(4 * n, dtype=torch.uint8, device=e.device)
        outputs = (lse.data_ptr(), per_token.data_ptr() if o.reduction == "none" else None, scalars.data_ptr(),
                   status.data_ptr())
        _flce.cuda_phase_finish(whole, cuda, t.data_ptr(), (parts.data_ptr(), sums.data_ptr(), parts.shape[0]),
                                outputs, merged.data_ptr(), (fws.data_ptr(), fws.numel()))
        if check:
            raise_bad_input(int(status.item()), t, total, o.ignore_index)
        ctx.save_for_backward(e, c, b, t, w, lse, merged, sums)
        ctx.group, ctx.offset, ctx.total, ctx.o = group, offset, total, o
        ctx.mark_non_differentiable(lse)
        return (per_token if o.reduction == "none" else scalars[0].clone()), lse

    @staticmethod
    def backward(ctx, g_out, g_lse):
        e, c, b, t, w, lse, merged, sums = ctx.saved_tensors
        n, d = e.shape
        o = ctx.o
        local = _problem(n, d, c.shape[0], _DTYPES[e.dtype], o)
        dev = _device_index(e)
        cuda = _cuda_of(e)
        go, de_part, dc, db = _slice_backward_buffers(ctx, e, c, b, g_out)
        plan, ws_bytes = _slice_backward_plan(local, dev, (True, dc is not None, db is not None), w is not None)
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device=e.device)
        _flce.cuda_phase_backward_slice(local, cuda, _inputs(e, c, b, t, w), ctx.offset, ctx.total, lse.data_ptr(),
                                        merged.data_ptr(), (0, sums.data_ptr(), sums.shape[0]), go.data_ptr(),
                                        (de_part.data_ptr(), _ptr(dc), _ptr(db)), (ws.data_ptr(), ws.numel()), plan)
        return (_whole_de(ctx, de_part, e), dc, db) + (None,) * 7


@functools.lru_cache(maxsize=64)
def _slice_backward_plan(problem, device: int, wants, class_weights: bool):
    return _flce.cuda_slice_backward_plan(problem, device, wants, class_weights)


def _dtensor_types():
    """(DTensor, Replicate, Shard), or None where torch.distributed.tensor is not imported — then
    nothing can be a DTensor. Every flce.linear_cross_entropy call asks, so this imports nothing
    (the module takes a second to import) and caches nothing (torch.compile traces it)."""
    mod = sys.modules.get("torch.distributed.tensor")
    return None if mod is None else (mod.DTensor, mod.Replicate, mod.Shard)


def is_sharded_dtensor(x) -> bool:
    """Whether ``x`` is a DTensor (the classifier of a tensor-parallel model)."""
    types = _dtensor_types()
    return types is not None and isinstance(x, types[0])


def _local(x, name: str, want: str):
    """A DTensor argument as its local tensor and its mesh's process group; plain tensors as
    they are (group None). ``want``: "rows" (sharded on dim 0 over a 1-D mesh: the classifier,
    bias and class weights) or "replicated" (the hidden states and targets)."""
    types = _dtensor_types()
    if x is None or types is None or not isinstance(x, types[0]):
        return x, None
    _, Replicate, Shard = types
    mesh, placements = x.device_mesh, tuple(x.placements)
    ok = mesh.ndim == 1 and placements == ((Shard(0),) if want == "rows" else (Replicate(),))
    if not ok:
        what = "sharded on dim 0 (Shard(0))" if want == "rows" else "replicated (Replicate())"
        raise ValueError(f"{name}: a DTensor must be {what} over a 1-D device mesh, got placements "
                         f"{placements} on a {mesh.ndim}-D mesh")
    return x.to_local(), mesh.get_group()


def linear_cross_entropy(input: Tensor, linear_weight_shard: Tensor, target: Tensor,
                         linear_bias_shard: Optional[Tensor] = None, *, process_group=None,
                         weight_shard: Optional[Tensor] = None, reduction: str = "mean", ignore_index: int = -100,
                         label_smoothing: float = 0.0, z_loss: float = 0.0, softcap: Optional[float] = None,
                         shift: bool = False, return_lse: bool = False, check_targets: bool = True,
                         out_dtype: Optional[torch.dtype] = None):
    """:func:`flce.linear_cross_entropy` with the classifier sharded by vocabulary rows across
    ``process_group`` (default: the world): rank k passes its rows (``linear_weight_shard``
    [V_k, D], in rank order; the V_k may differ), the matching rows of the bias and of the class
    weights, and the same ``input`` [..., D] and ``target`` (indices into the whole vocabulary)
    as every other rank. Every rank gets the same loss; gradients are the rank's dC / db rows
    and the whole dE. Ranks that disagree on N or D, shards of the wrong length and bad class
    weights raise ValueError on every rank together, before any work.

    DTensors are accepted: the classifier (and bias, class weights) sharded on dim 0 over a 1-D
    device mesh — a tensor-parallel LM head — and replicated hidden states and targets; the
    group is then the mesh's (``process_group``, if given, must be the same), and the
    classifier's gradient is a DTensor with its placement."""
    dist = torch.distributed
    locals_ = [_local(x, name, want) for x, name, want in (
        (input, "input", "replicated"), (target, "target", "replicated"),
        (linear_weight_shard, "linear_weight_shard", "rows"), (linear_bias_shard, "linear_bias_shard", "rows"),
        (weight_shard, "weight_shard", "rows"))]
    input, target, linear_weight_shard, linear_bias_shard, weight_shard = (x for x, _ in locals_)
    meshes = {id(g): g for _, g in locals_ if g is not None}
    if len(meshes) > 1:
        raise ValueError("the DTensor arguments live on different device meshes")
    if meshes:
        mesh_group = next(iter(meshes.values()))
        same = process_group is None or process_group is mesh_group or (
            dist.get_process_group_ranks(process_group) == dist.get_process_group_ranks(mesh_group))
        if not same:
            raise ValueError("process_group holds other ranks than the DTensor arguments' device mesh")
        process_group = mesh_group
    group = process_group if process_group is not None else dist.group.WORLD
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    devices = {x.device for x in (input, linear_weight_shard, target, linear_bias_shard, weight_shard) if x is not None}
    if len(devices) != 1 or next(iter(devices)).type not in ("cpu", "cuda"):
        raise ValueError(f"all tensors must be on one CPU or CUDA device, got {sorted(str(x) for x in devices)}")
    d = input.shape[-1]
    e = input.reshape(-1, d).contiguous()
    n = e.shape[0]
    rows = linear_weight_shard.shape[0]
    # Every check that can differ between ranks travels in one all-gather and raises on every rank
    # together (a rank that raised alone would leave the others waiting in a collective): the
    # shapes, the shard lengths of the bias and class weights, and the first class weight of the
    # shard that is negative or not finite (-1: none; found on the device, read with the gather).
    # On the input's device: NCCL gathers CUDA tensors only.
    dev = input.device
    lengths = [linear_weight_shard.shape[1],
               linear_bias_shard.numel() if linear_bias_shard is not None else rows,
               weight_shard.numel() if weight_shard is not None else rows]
    meta = torch.tensor([n, d, rows] + lengths, dtype=torch.int64, device=dev)
    first_bad = torch.full((1,), -1, dtype=torch.int64, device=dev)
    if weight_shard is not None and weight_shard.numel() > 0:
        wf = weight_shard.detach().reshape(-1).to(torch.float32)
        bad = ~(torch.isfinite(wf) & (wf >= 0))
        first_bad = torch.where(bad.any(), bad.to(torch.int64).argmax(), first_bad[0]).reshape(1)
    seen = [m.tolist() for m in _gather(torch.cat([meta, first_bad]), group)]
    if any(m[0] != n or m[1] != d or m[3] != d for m in seen):
        raise ValueError(f"ranks disagree on the problem: (N, D, rows, classifier D) per rank = "
                         f"{[m[:4] for m in seen]}")
    for k, m in enumerate(seen):
        if m[4] != m[2] or m[5] != m[2]:
            raise ValueError(f"rank {k}: the bias shard ({m[4]}) and class-weight shard ({m[5]}) must have the "
                             f"classifier shard's {m[2]} rows")
        if m[6] >= 0:
            raise ValueError(f"rank {k}: weight_shard[{m[6]}] (a class weight) is negative or not finite: class "
                             f"weights must be finite and >= 0")
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
    if e.is_cuda:
        eager = not torch.compiler.is_compiling() and not torch.cuda.is_current_stream_capturing()
        loss, lse = _VocabParallelCuda.apply(e, c, b, t, w, group, offset, total, o, check_targets and eager)
    else:
        loss, lse = _VocabParallel.apply(e, c, b, t, w, group, offset, total, o)
    loss = (loss.reshape(input.shape[:-1]) if reduction == "none" else loss).to(out_dtype or input.dtype)
    return (loss, lse.reshape(input.shape[:-1])) if return_lse else loss
