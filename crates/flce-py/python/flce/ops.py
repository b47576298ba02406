"""The torch op: ``flce::forward`` / ``flce::backward`` custom ops, their autograd (in eager mode
on plain tensors run without torch.library's dispatch: flce/_eager.py), and the user-facing
``linear_cross_entropy`` / ``LinearCrossEntropyLoss``.

Every output and workspace is allocated here with torch (so the caching allocator and
``torch.cuda.max_memory_allocated`` see them); Rust receives data pointers, shapes and
``torch.cuda.current_stream().cuda_stream`` and never synchronises.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _counted, _eager, vocab_parallel
from ._common import (_DTYPES, _OPTION_NAMES, _REDUCTIONS, _STATUS_OK, _TENSORS_FWD, FAST, PEAK, LossOptions, TargetCheck,
                      _backward_plan, _cuda_of, _device_index, _forward_plan, _inputs, _problem_of, _ptr, budget_bytes,
                      budget_option, peak_budget, raise_bad_input, target_status)


def _forward_impl(e: Tensor, c: Tensor, target: Tensor, bias: Optional[Tensor], weight: Optional[Tensor],
                  *options) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Returns (per-token loss [N] (reduction none) or [0], lse [N], scalars [4]: loss, accuracy,
    Σ w_t, W — f32, or f64 for float64 inputs —, status [1] int32: the first bad target index
    or 2**31-1, and rows: the counted rows the pass ran on, int64 [N_counted], empty where it ran
    on every row — flce/_counted.py)."""
    o = LossOptions(*options)
    rows = _counted.counted_rows(e, target, o, c.shape[0])
    if rows is None:
        return (*_forward_rows(e, c, target, bias, weight, o), _counted.no_rows(e))
    e_c, t_c, o_c = _counted.counted_inputs(e, target, rows, o)
    per_token, lse, scalars, status = _forward_rows(e_c, c, t_c, bias, weight, o_c)
    n = e.shape[0]
    if o.reduction == "none":
        per_token = _counted.scatter_rows(per_token, rows, n)
    return per_token, _counted.scatter_rows(lse, rows, n), scalars, _counted.status_of_rows(status, rows, o), rows


def _forward_rows(e: Tensor, c: Tensor, target: Tensor, bias: Optional[Tensor], weight: Optional[Tensor],
                  o: LossOptions) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """The forward pass over every row of ``e``: (per-token loss, lse, scalars, status)."""
    p = _problem_of(e, c, o)
    n = e.shape[0]
    f32 = dict(dtype=torch.float64 if e.dtype == torch.float64 else torch.float32, device=e.device)
    lse = torch.empty(n, **f32)
    per_token = torch.empty(n if o.reduction == "none" else 0, **f32)
    per_token_ptr = _ptr(per_token) if o.reduction == "none" else None
    if e.is_cuda:
        dev = _device_index(e)
        fplan = _forward_plan(p, dev, o.forward_mode, max(o.workspace_budget, 0))
        scalars = torch.empty(4, **f32)
        status = torch.empty(1, dtype=torch.int32, device=e.device)
        ws = torch.empty(max(fplan.workspace_bytes, 1), dtype=torch.uint8, device=e.device)
        outputs = (lse.data_ptr(), per_token_ptr, scalars.data_ptr(), status.data_ptr())
        p.cuda_forward(_cuda_of(e), _inputs(e, c, bias, target, weight), outputs, (ws.data_ptr(), ws.numel()), fplan)
    else:
        loss, acc = p.cpu_forward(_inputs(e, c, bias, target, weight), lse.data_ptr(), per_token_ptr)
        scalars = torch.tensor([loss, math.nan if acc is None else acc, 0.0, 0.0], dtype=f32["dtype"])
        status = torch.full((1,), _STATUS_OK, dtype=torch.int32)
    return per_token, lse, scalars, status


_forward = torch.library.custom_op(
    "flce::forward", mutates_args=(),
    schema=f"({_TENSORS_FWD}, {LossOptions.schema()}) -> (Tensor, Tensor, Tensor, Tensor, Tensor)")(_forward_impl)


@_forward.register_fake
def _forward_fake(e, c, target, bias, weight, *options):
    o = LossOptions(*options)
    n = e.shape[0]
    acc = torch.float64 if e.dtype == torch.float64 else torch.float32
    per_token = e.new_empty(n if o.reduction == "none" else 0, dtype=acc)
    rows = e.new_empty(torch.library.get_ctx().new_dynamic_size(), dtype=torch.int64)  # the count: data-dependent
    return (per_token, e.new_empty(n, dtype=acc), e.new_empty(4, dtype=acc), e.new_empty(1, dtype=torch.int32), rows)


def _backward_impl(e: Tensor, c: Tensor, target: Tensor, bias: Optional[Tensor], weight: Optional[Tensor], lse: Tensor,
                   grad_output: Tensor, rows: Tensor, want_de: bool, want_dc: bool, want_db: bool,
                   *options) -> Tuple[Tensor, Tensor, Tensor]:
    """Returns (dE, dC, db) in the input dtype; a gradient not wanted is an empty tensor. ``rows``:
    the forward's counted rows (empty: every row)."""
    o = LossOptions(*options)
    want_db = want_db and bias is not None
    wants = (want_de, want_dc, want_db)
    if rows.numel() == 0:
        return _backward_rows(e, c, target, bias, weight, lse, grad_output, wants, o)
    e_c, t_c, o_c = _counted.counted_inputs(e, target, rows, o)
    go = grad_output.index_select(0, rows) if o.reduction == "none" else grad_output
    de, dc, db = _backward_rows(e_c, c, t_c, bias, weight, lse.index_select(0, rows), go, wants, o_c)
    del e_c  # (before dE's full rows are allocated: the scatter's peak holds dE_c and dE)
    return (_counted.scatter_rows(de, rows, e.shape[0]) if want_de else de), dc, db


def _backward_rows(e: Tensor, c: Tensor, target: Tensor, bias: Optional[Tensor], weight: Optional[Tensor], lse: Tensor,
                   grad_output: Tensor, wants: Tuple[bool, bool, bool], o: LossOptions) -> Tuple[Tensor, Tensor, Tensor]:
    """The recomputing backward over every row of ``e``."""
    want_de, want_dc, want_db = wants
    de = torch.empty_like(e) if want_de else e.new_empty(0)
    dc = torch.empty_like(c) if want_dc else c.new_empty(0)
    db = torch.empty(c.shape[0], dtype=e.dtype, device=e.device) if want_db else e.new_empty(0)
    if not (want_de or want_dc or want_db):
        return de, dc, db
    p = _problem_of(e, c, o)
    go = grad_output.to(torch.float32).contiguous()
    grads = (de.data_ptr() if want_de else None, dc.data_ptr() if want_dc else None,
             db.data_ptr() if want_db else None)
    if e.is_cuda:
        dev = _device_index(e)
        bplan = _backward_plan(p, dev, wants, o.backward_mode, max(o.workspace_budget, 0))
        ws = torch.empty(max(bplan.workspace_bytes, 1), dtype=torch.uint8, device=e.device)
        p.cuda_backward(_cuda_of(e), _inputs(e, c, bias, target, weight), lse.data_ptr(), go.data_ptr(), grads,
                        (ws.data_ptr(), ws.numel()), bplan)
    else:
        p.cpu_backward(_inputs(e, c, bias, target, weight), lse.data_ptr(), go.data_ptr(), grads)
    return de, dc, db


_backward = torch.library.custom_op(
    "flce::backward", mutates_args=(),
    schema=f"({_TENSORS_FWD}, Tensor lse, Tensor grad_output, Tensor rows, bool want_de, bool want_dc, bool want_db, "
           f"{LossOptions.schema()}) -> (Tensor, Tensor, Tensor)")(_backward_impl)


_N_TENSORS = 5  # e, c, target, bias, weight


def _backward_op(*args):
    """flce::backward on these inputs: the implementation itself in eager mode on plain tensors
    (no autograd to wire: only torch.library's dispatch skipped, flce/_eager.py), else the op."""
    if _eager.takes_eager_path(*args[:_N_TENSORS + 3]):  # the inputs, lse, grad_output and rows
        return _backward_impl(*args)
    return torch.ops.flce.backward(*args)


@_backward.register_fake
def _backward_fake(e, c, target, bias, weight, lse, grad_output, rows, want_de, want_dc, want_db, *options):
    want_db = want_db and bias is not None
    return (torch.empty_like(e) if want_de else e.new_empty(0), torch.empty_like(c) if want_dc else c.new_empty(0),
            e.new_empty(c.shape[0]) if want_db else e.new_empty(0))


def _setup_context(ctx, inputs, output):
    e, c, target, bias, weight = inputs[:_N_TENSORS]
    _, lse, _, status, rows = output
    ctx.save_for_backward(e, c, target, bias, weight, lse, status, rows)
    ctx.options = LossOptions(*inputs[_N_TENSORS:])
    ctx.set_materialize_grads(False)  # outputs without a gradient come as None (no zero tensors)


def _autograd_backward(ctx, g_per_token, g_lse, g_scalars, g_status, g_rows):
    e, c, target, bias, weight, lse, status, rows = ctx.saved_tensors
    o = ctx.options
    check = TargetCheck.start(status, o)
    if o.reduction == "none":
        go = g_per_token if g_per_token is not None else torch.zeros_like(lse)
    else:
        go = g_scalars[:1] if g_scalars is not None else lse.new_zeros(1)
    want_de, want_dc, want_db = ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[3]
    de, dc, db = _backward_op(e, c, target, bias, weight, lse, go, rows, want_de, want_dc, want_db, *o.astuple())
    if check is not None:
        check.finish(target, c.shape[0], o.ignore_index)
    grads = (de if want_de else None, dc if want_dc else None, None,
             db if (want_db and bias is not None) else None, None)
    return grads + (None,) * len(_OPTION_NAMES)


_forward.register_autograd(_autograd_backward, setup_context=_setup_context)
_ForwardEager = _eager.autograd_function("_ForwardEager", _forward_impl, _setup_context, _autograd_backward)


def _forward_op(*args):
    """flce::forward on these inputs: in eager mode on plain tensors without torch.library's
    dispatch (flce/_eager.py says why and when), else through the op."""
    if _eager.takes_eager_path(*args[:_N_TENSORS]):
        return _ForwardEager.apply(*args)
    return torch.ops.flce.forward(*args)


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, linear_bias: Optional[Tensor] = None,
                         *, weight: Optional[Tensor] = None, reduction: str = "mean", ignore_index: int = -100,
                         label_smoothing: float = 0.0, z_loss: float = 0.0, softcap: Optional[float] = None,
                         shift: bool = False, return_lse: bool = False, return_accuracy: bool = False,
                         check_targets: bool = True, forward_mode: str = "auto", backward_mode: str = "auto",
                         workspace_budget=None, out_dtype: Optional[torch.dtype] = None, process_group=None,
                         expected_grad_output: Optional[Tensor] = None, loss_scale=None, skip_ignored: bool = True):
    """``F.cross_entropy(input @ linear_weight.T + linear_bias, target, ...)`` without the logits.

    input [..., D], linear_weight [V, D], target [...] (integer), linear_bias [V]; weight [V] are
    PyTorch's class weights. Extras: ``z_loss`` (adds z_loss·lse² per token), ``softcap``
    (logits become softcap·tanh(logits/softcap)), ``shift`` (position k predicts target k+1 of
    its sequence — the second-to-last dimension of ``input``, or all tokens for 2-D input),
    ``return_lse`` / ``return_accuracy`` (extra outputs, not differentiable). ``skip_ignored``
    (the default): the products see only the tokens whose target is not ``ignore_index`` — a
    batch that is half masked prompt costs about half — for one host read of their count in the
    forward (on CUDA, a synchronisation; none under CUDA-graph capture, which computes every
    row); results within f32 reordering of computing every row. False computes every row, as
    does ``return_lse`` (its lse covers the ignored tokens too). Returns the loss in
    the input dtype — float32 under autocast, as F.cross_entropy's — or ``out_dtype`` (it is
    computed in float32), or a tuple
    (loss, lse?, accuracy?) when extras are asked for. ``forward_mode`` and ``backward_mode``
    ("auto": the GPU's fastest — the fused Hopper kernels on H100/H200 for 16-bit inputs, cuBLAS
    chunks otherwise — "cublas", "fused" or "sm80", the
    portable fused kernels) pick the CUDA kernel family. ``workspace_budget``: None or "min" (the
    default: workspace ≤ 10% of the gradient bytes, or the smallest good chunk's where that is
    more; logits recomputed in the backward, and past ~V/3 tokens part of the vocabulary's a
    second time — 1.12-1.26x the time of a budget that holds dE's f32 accumulator), a number
    of bytes, "fast" (up to half the free device memory), or "peak" (on CUDA, what the call can
    take without raising the process's peak memory so far — for training loops, where the last
    step set the peak; the default's at the first step, on the CPU and under torch.compile). With
    bytes, "fast" or "peak", when
    gradients are wanted (and reduction is not "none") and the budget holds token chunks of at
    least 1024 tokens (or the whole batch) besides the f32 dC accumulator, the forward computes
    the gradients too, keeping a chunk's logits over the whole vocabulary (three products
    instead of four) and the backward only scales them by grad_output (exact for 1, or for
    ``expected_grad_output``: a float32 [1] tensor on the input's device holding the grad_output
    the backward will bring — e.g. ``s`` for ``loss * s`` with ``s`` that tensor, as flce.patch
    passes for Hugging Face's sum / num_items_in_batch —, for which the forward computes them;
    another grad_output costs one more rounding); ``loss_scale`` (a float, or a float32 [1]
    tensor on the input's device such as GradScaler's scale) is the factor the loss will be
    multiplied by before its backward — AMP's —, and multiplies the expected grad_output. Otherwise,
    and for float16 inputs without ``loss_scale`` (whose gradients at grad_output 1 are mostly
    subnormals, so the loss scale must reach them before their rounding), the recomputing plans
    run within the budget.
    docs/semantics.md and docs/tuning.md say more.

    Under autocast, ``input`` and ``linear_weight`` are cast to the autocast dtype first (as
    F.linear would) and the loss comes back in float32 (as F.cross_entropy's, which autocast runs
    in float32); the loss is accumulated in float32 either way. A target outside [0, V) that
    is not ``ignore_index``, or a class weight that is negative or not finite, raises ValueError
    (``check_targets``; eager mode only: it reads one status word from the device; elsewhere the
    loss and gradients are NaN) — on CUDA, when gradients will be computed by the recomputing
    plans, from the backward (``loss.backward()``), which reads the word after its own kernels
    are queued so that the GPU never waits for the host; otherwise from this call (on CUDA from a
    status-only op queued ahead of the call's kernels: the host waits for that op's two small
    kernels, not for the call).

    Vocabulary-parallel (tensor-parallel LM heads): with ``process_group``, or with a
    ``linear_weight`` that is a DTensor sharded on dim 0, ``linear_weight``, ``linear_bias`` and
    ``weight`` are this rank's rows of the whole classifier and the call is
    :func:`flce.vocab_parallel.linear_cross_entropy` (O(N) statistics exchanged in the forward, dE's
    shares in the backward; ``return_accuracy`` and the kernel and workspace options are not
    offered there).
    """
    if process_group is not None or vocab_parallel.is_sharded_dtensor(linear_weight):
        chosen = {"return_accuracy": return_accuracy, "forward_mode": forward_mode != "auto",
                  "backward_mode": backward_mode != "auto", "workspace_budget": workspace_budget is not None}
        unsupported = [k for k, v in chosen.items() if v]
        if unsupported:
            raise ValueError(f"{', '.join(unsupported)}: not offered with a vocabulary-sharded classifier "
                             f"(process_group or a sharded DTensor)")
        return vocab_parallel.linear_cross_entropy(
            input, linear_weight, target, linear_bias, process_group=process_group, weight_shard=weight,
            reduction=reduction, ignore_index=ignore_index, label_smoothing=label_smoothing, z_loss=z_loss,
            softcap=softcap, shift=shift, return_lse=return_lse, check_targets=check_targets, out_dtype=out_dtype)
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
        # the loss as autocast gives F.cross_entropy's, an op it runs in float32 (a float16 loss
        # would also turn GradScaler's first scale, 2^16, into inf on its way back)
        if out_dtype is None:
            out_dtype = torch.float32
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
        return _no_tokens(e, linear_weight, target, linear_bias, weight, lead, reduction, ignore_index,
                          label_smoothing, z_loss, softcap, return_lse, return_accuracy, out_dtype or input.dtype)
    seq = 0
    if shift:
        seq = input.shape[-2] if input.dim() >= 3 else e.shape[0]
    c = linear_weight.contiguous()
    b = linear_bias.contiguous() if linear_bias is not None else None
    w = weight.to(torch.float32).contiguous() if weight is not None else None
    t = target.reshape(-1).to(torch.int64).contiguous()
    wants = (e.requires_grad, c.requires_grad, b is not None and b.requires_grad)
    eager = not torch.compiler.is_compiling() and not (e.is_cuda and torch.cuda.is_current_stream_capturing())
    # on CUDA, a call with a backward to come leaves the check to it (TargetCheck: no stall)
    defer_check = check_targets and eager and e.is_cuda and torch.is_grad_enabled() and any(wants)
    o = LossOptions(reduction, int(ignore_index), float(label_smoothing), float(z_loss),
                    None if softcap is None else float(softcap), seq, forward_mode, backward_mode,
                    budget_option(workspace_budget), defer_check, bool(skip_ignored) and not return_lse)
    # "fast" or a byte budget: the three-product pass where it pays within the budget (three_product.py);
    # where it does not, the recomputing plans below take the budget (a "fast" call, the default's).
    # Under torch.compile the planner cannot be asked here: the op falls back by itself.
    if o.workspace_budget == PEAK:
        # bytes now, like a byte budget (the recomputing plans take it where no three-product plan
        # pays); on the CPU and under torch.compile (no memory statistics to read) the default's
        peak = peak_budget(e, c) if e.is_cuda and not torch.compiler.is_compiling() else 0
        o = dataclasses.replace(o, workspace_budget=peak)
    # (the gradients are computed in the forward never for a call without a backward to come: no
    # free-memory query, no plan; nor for float16 without loss_scale, whose gradients at grad_output 1 are mostly subnormals, so the
    # backward's loss scale must reach them before their rounding — also under torch.compile,
    # where the op's own fallback would compute them for grad_output 1: docs/journal.md v54;
    # with it the forward rounds them at the scale the backward brings, v57)
    in_forward = (o.workspace_budget == FAST or (o.workspace_budget > 0 and e.is_cuda)) and reduction != "none" \
        and torch.is_grad_enabled() and any(wants) and (e.dtype != torch.float16 or loss_scale is not None)
    known = expected_grad_output is not None or loss_scale is not None
    o_fb = o
    if in_forward and e.is_cuda and not torch.compiler.is_compiling():
        # "fast" resolved to bytes once here (free memory read once), so the op plans with the same
        o_fb = dataclasses.replace(o, workspace_budget=budget_bytes(e, o))
        in_forward = three_product.forward_backward_plan_for(e, c, o_fb, wants, known_grad_output=known) is not None
    # The status word on CUDA where no backward reads it behind its own kernels (TargetCheck):
    # calls without gradients, and the three-product pass, whose backward has no kernels. Read
    # from a status-only op queued ahead of the call (target_status), the host waits for its two
    # small kernels, not for the call: the GPU keeps the call to run while the host goes on.
    early = None
    if check_targets and eager and e.is_cuda and (in_forward or not defer_check):
        early = TargetCheck(target_status(e, c, t, b, w, o_fb))
        if in_forward:  # the pass's backward then checks nothing more
            o_fb = dataclasses.replace(o_fb, check_targets=False)
    if in_forward:
        expected = None
        if expected_grad_output is not None:
            expected = torch.as_tensor(expected_grad_output, dtype=torch.float32, device=e.device).reshape(1)
        if loss_scale is not None:
            scale = torch.as_tensor(loss_scale, dtype=torch.float32, device=e.device).reshape(1)
            # (a copy: the caller's scale tensor may change before the backward reads it)
            expected = scale.clone() if expected is None else expected * scale
        # (lse only where it is returned, the status word only where the host reads it after the
        # call — the CPU's eager check —: the pass may then keep them in its own state)
        want_status = check_targets and eager and early is None
        per_token, lse, scalars, status, _, _, _ = three_product.forward_backward_op(
            e, c, t, b, w, *wants, return_lse, want_status, expected, *o_fb.astuple())
    else:
        per_token, lse, scalars, status, _ = _forward_op(e, c, t, b, w, *o.astuple())
    if early is not None:
        early.finish(t, v, ignore_index, "")
    elif check_targets and eager and not defer_check:  # the CPU's word: the call has finished
        raise_bad_input(int(status.item()), t, v, ignore_index)
    loss = per_token.reshape(lead) if reduction == "none" else scalars[0]
    loss = loss.to(out_dtype or input.dtype)
    extras = []
    if return_lse:
        extras.append(lse.detach().reshape(lead))
    if return_accuracy:
        extras.append(scalars[1].detach())
    return (loss, *extras) if extras else loss


def _no_tokens(e, c, target, b, w, lead, reduction, ignore_index, label_smoothing, z_loss, softcap, return_lse,
               return_accuracy, out_dtype):
    """N = 0 (an empty micro-batch shard): PyTorch's results — NaN for mean, 0 for sum, an empty
    tensor for none — with zero-size dE and zero dC / db, through PyTorch's own ops on the empty
    [0, V] logits (no memory, no kernel of flce)."""
    logits = (e @ c.T).float()
    if b is not None:
        logits = logits + b.float()
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    t = target.reshape(-1).to(torch.int64)
    loss = torch.nn.functional.cross_entropy(logits, t, weight=w, reduction=reduction, ignore_index=ignore_index,
                                             label_smoothing=label_smoothing)
    if z_loss and reduction != "mean":  # z-loss adds nothing over no tokens; the mean stays NaN
        loss = loss + 0.0 * logits.sum()
    loss = (loss.reshape(lead) if reduction == "none" else loss).to(out_dtype)
    extras = []
    if return_lse:
        extras.append(torch.logsumexp(logits, dim=-1).detach().reshape(lead))
    if return_accuracy:
        extras.append(torch.full((), float("nan"), device=e.device))
    return (loss, *extras) if extras else loss


_MODULE_OPTIONS = tuple(name for name, prm in inspect.signature(linear_cross_entropy).parameters.items()
                        if prm.kind == inspect.Parameter.KEYWORD_ONLY and name != "weight")


class LinearCrossEntropyLoss(torch.nn.Module):
    """Module form of :func:`linear_cross_entropy`: ``loss(input, linear_weight, target, linear_bias)``.
    Takes the class weights (a buffer) and any keyword option of the function."""

    def __init__(self, weight: Optional[Tensor] = None, **options):
        super().__init__()
        unknown = sorted(set(options) - set(_MODULE_OPTIONS))
        if unknown:
            raise TypeError(f"LinearCrossEntropyLoss got unknown options {unknown}; it takes {list(_MODULE_OPTIONS)}")
        self.register_buffer("weight", weight)
        self.options = options

    def forward(self, input: Tensor, linear_weight: Tensor, target: Tensor,
                linear_bias: Optional[Tensor] = None) -> Tensor:
        return linear_cross_entropy(input, linear_weight, target, linear_bias, weight=self.weight, **self.options)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.options.items())


from . import three_product  # noqa: E402,F401  (registers flce::forward_backward, which uses the ops above)
