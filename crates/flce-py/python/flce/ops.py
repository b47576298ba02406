"""The torch op: ``flce::forward`` / ``flce::backward`` custom ops, their autograd, and the
user-facing ``linear_cross_entropy`` / ``LinearCrossEntropyLoss``.

Every output and workspace is allocated here with torch (so the caching allocator and
``torch.cuda.max_memory_allocated`` see them); Rust receives data pointers, shapes and
``torch.cuda.current_stream().cuda_stream`` and never synchronises.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _flce

_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32", torch.float64: "f64"}
_REDUCTIONS = ("mean", "sum", "none")
_STATUS_OK = 2**31 - 1


def _ptr(t: Optional[Tensor]) -> Optional[int]:
    return None if t is None else t.data_ptr()


def _problem(e: Tensor, c: Tensor, reduction: str, ignore_index: int, label_smoothing: float, z_loss: float,
             softcap: Optional[float], shift: int) -> "_flce.Problem":
    return _flce.Problem(e.shape[0], e.shape[1], c.shape[0], _DTYPES[e.dtype], reduction, ignore_index,
                         label_smoothing, z_loss, softcap, shift if shift > 0 else None, True)


@torch.library.custom_op("flce::forward", mutates_args=())
def _forward(e: Tensor, c: Tensor, target: Tensor, bias: Optional[Tensor], weight: Optional[Tensor],
             reduction: str, ignore_index: int, label_smoothing: float, z_loss: float, softcap: Optional[float],
             shift: int, forward_mode: str, backward_mode: str,
             workspace_budget: int) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Returns (per-token loss [N] (reduction none) or [0], lse [N], scalars [4]: loss, accuracy,
    Σ w_t, W — f32, or f64 for float64 inputs — and status [1] int32: the first bad target index
    or 2**31-1).
    ``backward_mode`` is only carried to the backward."""
    p = _problem(e, c, reduction, ignore_index, label_smoothing, z_loss, softcap, shift)
    n = e.shape[0]
    f32 = dict(dtype=torch.float64 if e.dtype == torch.float64 else torch.float32, device=e.device)
    lse = torch.empty(n, **f32)
    per_token = torch.empty(n if reduction == "none" else 0, **f32)
    budget = workspace_budget if workspace_budget > 0 else None
    if e.is_cuda:
        dev = e.device.index if e.device.index is not None else torch.cuda.current_device()
        scalars = torch.empty(4, **f32)
        status = torch.empty(1, dtype=torch.int32, device=e.device)
        ws_bytes = p.forward_workspace_bytes(dev, forward_mode, budget)
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device=e.device)
        stream = torch.cuda.current_stream(e.device).cuda_stream
        p.cuda_forward(dev, stream, e.data_ptr(), c.data_ptr(), _ptr(bias), target.data_ptr(), _ptr(weight),
                       lse.data_ptr(), _ptr(per_token) if reduction == "none" else None, scalars.data_ptr(),
                       status.data_ptr(), ws.data_ptr(), ws_bytes, forward_mode, budget)
    else:
        loss, acc = p.cpu_forward(e.data_ptr(), c.data_ptr(), _ptr(bias), target.data_ptr(), _ptr(weight),
                                  lse.data_ptr(), _ptr(per_token) if reduction == "none" else None)
        scalars = torch.tensor([loss, math.nan if acc is None else acc, 0.0, 0.0], dtype=f32["dtype"])
        status = torch.full((1,), _STATUS_OK, dtype=torch.int32)
    return per_token, lse, scalars, status


@_forward.register_fake
def _forward_fake(e, c, target, bias, weight, reduction, ignore_index, label_smoothing, z_loss, softcap, shift,
                  forward_mode, backward_mode, workspace_budget):
    n = e.shape[0]
    acc = torch.float64 if e.dtype == torch.float64 else torch.float32
    per_token = e.new_empty(n if reduction == "none" else 0, dtype=acc)
    return (per_token, e.new_empty(n, dtype=acc), e.new_empty(4, dtype=acc), e.new_empty(1, dtype=torch.int32))


@torch.library.custom_op("flce::backward", mutates_args=())
def _backward(e: Tensor, c: Tensor, target: Tensor, bias: Optional[Tensor], weight: Optional[Tensor], lse: Tensor,
              grad_output: Tensor, reduction: str, ignore_index: int, label_smoothing: float, z_loss: float,
              softcap: Optional[float], shift: int, want_de: bool, want_dc: bool, want_db: bool, backward_mode: str,
              workspace_budget: int) -> Tuple[Tensor, Tensor, Tensor]:
    """Returns (dE, dC, db) in the input dtype; a gradient not wanted is an empty tensor."""
    p = _problem(e, c, reduction, ignore_index, label_smoothing, z_loss, softcap, shift)
    want_db = want_db and bias is not None
    de = torch.empty_like(e) if want_de else e.new_empty(0)
    dc = torch.empty_like(c) if want_dc else c.new_empty(0)
    db = torch.empty(c.shape[0], dtype=e.dtype, device=e.device) if want_db else e.new_empty(0)
    if not (want_de or want_dc or want_db):
        return de, dc, db
    go = grad_output.to(torch.float32).contiguous()
    budget = workspace_budget if workspace_budget > 0 else None
    ptr = lambda t, want: t.data_ptr() if want else None  # noqa: E731
    if e.is_cuda:
        dev = e.device.index if e.device.index is not None else torch.cuda.current_device()
        ws_bytes = p.backward_workspace_bytes(dev, want_de, want_dc, want_db, backward_mode, budget)
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device=e.device)
        stream = torch.cuda.current_stream(e.device).cuda_stream
        p.cuda_backward(dev, stream, e.data_ptr(), c.data_ptr(), _ptr(bias), target.data_ptr(), _ptr(weight),
                        lse.data_ptr(), go.data_ptr(), ptr(de, want_de), ptr(dc, want_dc), ptr(db, want_db),
                        ws.data_ptr(), ws_bytes, backward_mode, budget)
    else:
        p.cpu_backward(e.data_ptr(), c.data_ptr(), _ptr(bias), target.data_ptr(), _ptr(weight), lse.data_ptr(),
                       go.data_ptr(), ptr(de, want_de), ptr(dc, want_dc), ptr(db, want_db))
    return de, dc, db


@_backward.register_fake
def _backward_fake(e, c, target, bias, weight, lse, grad_output, reduction, ignore_index, label_smoothing, z_loss,
                   softcap, shift, want_de, want_dc, want_db, backward_mode, workspace_budget):
    want_db = want_db and bias is not None
    return (torch.empty_like(e) if want_de else e.new_empty(0), torch.empty_like(c) if want_dc else c.new_empty(0),
            e.new_empty(c.shape[0]) if want_db else e.new_empty(0))


def _setup_context(ctx, inputs, output):
    (e, c, target, bias, weight, reduction, ignore_index, label_smoothing, z_loss, softcap, shift, _forward_mode,
     backward_mode, budget) = inputs
    _, lse, _, _ = output
    ctx.save_for_backward(e, c, target, bias, weight, lse)
    ctx.loss_args = (reduction, ignore_index, label_smoothing, z_loss, softcap, shift)
    ctx.backward_mode, ctx.budget = backward_mode, budget


def _autograd_backward(ctx, g_per_token, g_lse, g_scalars, g_status):
    e, c, target, bias, weight, lse = ctx.saved_tensors
    reduction = ctx.loss_args[0]
    if reduction == "none":
        go = g_per_token if g_per_token is not None else torch.zeros_like(lse)
    else:
        go = g_scalars[:1] if g_scalars is not None else lse.new_zeros(1)
    want_de, want_dc, want_db = ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[3]
    de, dc, db = torch.ops.flce.backward(e, c, target, bias, weight, lse, go, *ctx.loss_args, want_de, want_dc,
                                         want_db, ctx.backward_mode, ctx.budget)
    return (de if want_de else None, dc if want_dc else None, None, db if (want_db and bias is not None) else None,
            None, None, None, None, None, None, None, None, None, None)


_forward.register_autograd(_autograd_backward, setup_context=_setup_context)


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, linear_bias: Optional[Tensor] = None,
                         *, weight: Optional[Tensor] = None, reduction: str = "mean", ignore_index: int = -100,
                         label_smoothing: float = 0.0, z_loss: float = 0.0, softcap: Optional[float] = None,
                         shift: bool = False, return_lse: bool = False, return_accuracy: bool = False,
                         check_targets: bool = True, forward_mode: str = "cublas", backward_mode: str = "cublas",
                         workspace_budget: Optional[int] = None, out_dtype: Optional[torch.dtype] = None):
    """``F.cross_entropy(input @ linear_weight.T + linear_bias, target, ...)`` without the logits.

    input [..., D], linear_weight [V, D], target [...] (integer), linear_bias [V]; weight [V] are
    PyTorch's class weights. Extras: ``z_loss`` (adds z_loss·lse² per token), ``softcap``
    (logits become softcap·tanh(logits/softcap)), ``shift`` (position k predicts target k+1 of
    its sequence — the second-to-last dimension of ``input``, or all tokens for 2-D input),
    ``return_lse`` / ``return_accuracy`` (extra outputs, not differentiable). Returns the loss in
    the input dtype (or ``out_dtype``: it is computed in float32), or a tuple
    (loss, lse?, accuracy?) when extras are asked for. ``forward_mode`` / ``backward_mode``
    ("cublas" or "fused") pick the CUDA kernel family and ``workspace_budget`` (bytes) its
    workspace; see the README.

    Under autocast, ``input`` and ``linear_weight`` are cast to the autocast dtype first (as
    F.linear would); the loss is accumulated in float32 either way. A target outside [0, V) that
    is not ``ignore_index`` raises ValueError (``check_targets``; eager mode only: it reads one
    status word from the device).
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if input.dim() < 1 or linear_weight.dim() != 2:
        raise ValueError(f"input must be [..., D] and linear_weight [V, D]; got {tuple(input.shape)} and "
                         f"{tuple(linear_weight.shape)}")
    d = input.shape[-1]
    v = linear_weight.shape[0]
    if linear_weight.shape[1] != d:
        raise ValueError(f"linear_weight is {tuple(linear_weight.shape)}, expected [V, {d}] for input "
                         f"{tuple(input.shape)}")
    if tuple(target.shape) != tuple(input.shape[:-1]):
        raise ValueError(f"target shape {tuple(target.shape)} must equal input.shape[:-1] = {tuple(input.shape[:-1])}")
    if target.dtype.is_floating_point or target.dtype == torch.bool:
        raise TypeError(f"target must hold class indices (an integer dtype), got {target.dtype}")
    devices = {t.device for t in (input, linear_weight, target, linear_bias, weight) if t is not None}
    if len(devices) != 1:
        raise ValueError(f"all tensors must be on one device, got {sorted(str(x) for x in devices)}")
    dev_type = input.device.type
    if dev_type not in ("cpu", "cuda"):
        raise ValueError(f"flce runs on CPU and CUDA tensors, got {input.device}")
    if torch.is_autocast_enabled(dev_type) if hasattr(torch, "is_autocast_enabled") else False:
        dt = torch.get_autocast_dtype(dev_type)
        input, linear_weight = input.to(dt), linear_weight.to(dt)
        linear_bias = linear_bias.to(dt) if linear_bias is not None else None
    if input.dtype not in _DTYPES or (input.dtype == torch.float64 and dev_type != "cpu"):
        raise TypeError(f"input dtype must be bfloat16, float16 or float32 (or float64 on CPU, which runs flce's "
                        f"f64 oracle), got {input.dtype} on {input.device}")
    if linear_weight.dtype != input.dtype or (linear_bias is not None and linear_bias.dtype != input.dtype):
        raise TypeError(f"linear_weight ({linear_weight.dtype}) and linear_bias must have the input dtype "
                        f"({input.dtype})")
    if linear_bias is not None and tuple(linear_bias.shape) != (v,):
        raise ValueError(f"linear_bias must be [V] = [{v}], got {tuple(linear_bias.shape)}")
    if weight is not None and tuple(weight.shape) != (v,):
        raise ValueError(f"weight (class weights) must be [V] = [{v}], got {tuple(weight.shape)}")

    lead = input.shape[:-1]
    e = input.reshape(-1, d).contiguous()
    if e.shape[0] == 0:
        raise ValueError("input has no tokens (N = 0)")
    seq = 0
    if shift:
        seq = input.shape[-2] if input.dim() >= 3 else e.shape[0]
    c = linear_weight.contiguous()
    b = linear_bias.contiguous() if linear_bias is not None else None
    w = weight.to(torch.float32).contiguous() if weight is not None else None
    t = target.reshape(-1).to(torch.int64).contiguous()
    per_token, lse, scalars, status = torch.ops.flce.forward(
        e, c, t, b, w, reduction, ignore_index, float(label_smoothing), float(z_loss),
        None if softcap is None else float(softcap), seq, forward_mode, backward_mode, workspace_budget or 0)
    if check_targets and not torch.compiler.is_compiling() and not (
            e.is_cuda and torch.cuda.is_current_stream_capturing()):
        bad = int(status.item())
        if bad != _STATUS_OK:
            raise ValueError(f"target[{bad}] = {int(t[bad])} is outside [0, {v}) and is not "
                             f"ignore_index ({ignore_index})")
    loss = per_token.reshape(lead) if reduction == "none" else scalars[0]
    loss = loss.to(out_dtype or input.dtype)
    extras = []
    if return_lse:
        extras.append(lse.detach().reshape(lead))
    if return_accuracy:
        extras.append(scalars[1].detach())
    return (loss, *extras) if extras else loss


class LinearCrossEntropyLoss(torch.nn.Module):
    """Module form of :func:`linear_cross_entropy`: ``loss(input, linear_weight, target, linear_bias)``."""

    def __init__(self, weight: Optional[Tensor] = None, reduction: str = "mean", ignore_index: int = -100,
                 label_smoothing: float = 0.0, z_loss: float = 0.0, softcap: Optional[float] = None,
                 shift: bool = False):
        super().__init__()
        self.register_buffer("weight", weight)
        self.reduction, self.ignore_index = reduction, ignore_index
        self.label_smoothing, self.z_loss, self.softcap, self.shift = label_smoothing, z_loss, softcap, shift

    def forward(self, input: Tensor, linear_weight: Tensor, target: Tensor,
                linear_bias: Optional[Tensor] = None) -> Tensor:
        return linear_cross_entropy(input, linear_weight, target, linear_bias, weight=self.weight,
                                    reduction=self.reduction, ignore_index=self.ignore_index,
                                    label_smoothing=self.label_smoothing, z_loss=self.z_loss,
                                    softcap=self.softcap, shift=self.shift)
