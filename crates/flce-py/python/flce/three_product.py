"""The three-product pass as a torch op (``workspace_budget="fast"``): ``flce::forward_backward``
returns the forward's outputs and the gradients for grad_output 1, computed in one pass over
token chunks that keeps each chunk's logits over the whole vocabulary (three products instead of
the four of a recomputing backward). Its autograd backward only scales the saved gradients by
grad_output, in place (``flce::scale_grads_``: exact, and free, when grad_output is 1 — or the
``expected_grad_output`` the forward formed them for).

Where the budget holds no token chunk that pays, but a slice of the classifier's rows does (on
Hopper, for bf16 inputs with dC wanted: ``flce::cuda::plan::VocabSlicePlan``), the same op runs the
vocabulary-slice pass: three products for the first rows of C over every token (their logits
kept as f16 q), the recomputing backward's four for the rest — the budget's bytes buy speed in
proportion, instead of nothing until a whole token chunk fits.

The workspace (the f32 dC accumulator, unless one chunk holds every token, and a token chunk's
logits and G: f32 logits, or on Hopper — for every call but one with a softcap and label
smoothing together — 2 bytes a logit: ``flce::cuda::plan::ThreeProductLogits``) is planned within
the caller's byte budget, or for "fast" within half the free device memory in 256 MB steps; when
the budget holds no token chunk that pays (``flce::cuda::plan::MIN_THREE_PRODUCT_TOKEN_CHUNK``: 1024
tokens, or the whole batch), and on the CPU, the op runs the usual forward and recomputing
backward within the same budget instead — same results.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _counted, _eager, _flce
from ._common import (_DTYPES, _OPTION_NAMES, _TENSORS_FWD, PEAK, LossOptions, TargetCheck, _cuda_of, _device_index,
                      _inputs, _problem_of, budget_bytes, budget_option, peak_budget)

@functools.lru_cache(maxsize=256)
def _forward_backward_plan(problem: "_flce.Problem", device: int, wants: Tuple[bool, bool, bool],
               budget: int, known_grad_output: bool) -> Optional["_flce.Plan"]:
    return problem.forward_backward_plan(device, *wants, budget, known_grad_output)


def forward_backward_plan_for(e: Tensor, c: Tensor, o: LossOptions, wants: Tuple[bool, bool, bool],
                  known_grad_output: bool = False) -> Optional["_flce.Plan"]:
    """The forward-and-gradients plan of this call within its budget ("fast" or bytes): the
    three-product or the vocabulary-slice pass, where one pays; None elsewhere (then the
    recomputing plans run, the budget passed on to them) — and for float16 unless
    ``known_grad_output`` (the pass is given the grad_output its backward will bring, AMP's loss
    scale included: the gradients are then rounded at their final scale)."""
    if not e.is_cuda:
        return None
    return _forward_backward_plan(_problem_of(e, c, o), _device_index(e), wants, budget_bytes(e, o), known_grad_output)


def forward_backward_plan(input: Tensor, linear_weight: Tensor, *, wants: Tuple[bool, bool, bool] = (True, True, False),
                       bias: bool = False, loss_scale=None, target: Optional[Tensor] = None,
                       **options) -> Optional["_flce.Plan"]:
    """The plan that computes the forward and the gradients at once which a call with these
    tensors (2-D input [N, D]) and options takes when gradients are wanted: ``kind`` "three_product"
    (the three-product pass; ``chunks`` = (token chunk, V)) or "vocab_slice" (the vocabulary-slice pass:
    ``chunks`` = (N, the rows of C that take three products)), with ``workspace_bytes``,
    ``family`` and ``de_k_chunk`` (float16's dE over K-chunks of that many vocabulary columns
    summed in float32, None for one product over V); or None where it runs the recomputing plans
    instead (``flce.kernel_plans``): on the CPU, with the default budget ("min"), with reduction
    "none", or where the budget holds neither a token chunk nor a slice that pays.
    ``workspace_budget`` as the loss takes it; "fast" and "peak" read the device's memory now, as
    the call does. ``bias`` (whether the call carries a linear bias) is accepted and changes
    nothing: the plan is the same with one. float16 inputs trade only with
    ``loss_scale`` (as the loss takes it; its value changes no plan). With ``target`` ([N]), the
    plan of the rows that count, as ``flce.kernel_plans`` takes it."""
    budget = budget_option(options.pop("workspace_budget", None))
    if not input.is_cuda or options.get("reduction", "mean") == "none" or not any(wants):
        return None
    if budget == PEAK:
        budget = peak_budget(input, linear_weight)
    if budget == 0:
        return None
    # (forward_backward_plan_for reads "fast"'s free memory itself)
    del bias
    o = LossOptions(**options, workspace_budget=budget)
    return _forward_backward_plan(_counted.counted_problem(input, linear_weight, target, o), _device_index(input), tuple(wants),
                                  budget_bytes(input, o), loss_scale is not None)


def _forward_backward_impl(e: Tensor, c: Tensor, target: Tensor, bias: Optional[Tensor], weight: Optional[Tensor],
                           want_de: bool, want_dc: bool, want_db: bool, want_lse: bool, want_status: bool,
                           grad_output: Optional[Tensor], *options):
    """(per-token loss or [0], lse, scalars, status) as flce::forward, then (dE, dC, db) for
    grad_output 1, or for ``grad_output`` (float32 [1] on e's device: the one the backward will
    bring, which then rescales nothing) — empty where not wanted, lse too (``want_lse`` False: a
    plan that keeps lse itself, ``Plan.keeps_lse``, then holds no 4·N bytes for it). The status
    word likewise (``want_status`` False: a caller that checked the targets ahead of the call, as
    the binding's eager loss does; a plan that keeps the word itself, ``Plan.keeps_status``, then
    holds no block for it) — always there when the options' ``check_targets`` has the op's
    backward read it. Reduction mean or sum. The pass runs on the counted rows only
    (flce/_counted.py; dE 0 on the ignored ones) unless ``want_lse``: lse covers every row."""
    o = LossOptions(*options)
    if o.reduction == "none":
        raise ValueError("flce::forward_backward takes reduction 'mean' or 'sum'")
    rows = None if want_lse else _counted.counted_rows(e, target, o, c.shape[0])
    every_row = dataclasses.replace(o, skip_ignored=False)
    args = (want_de, want_dc, want_db, want_lse, want_status, grad_output)
    if rows is None:
        return _forward_backward_rows(e, c, target, bias, weight, *args, every_row)
    e_c, t_c, o_c = _counted.counted_inputs(e, target, rows, every_row)
    per_token, lse, scalars, status, de, dc, db = _forward_backward_rows(e_c, c, t_c, bias, weight, *args, o_c)
    del e_c  # (before dE's full rows are allocated)
    n = e.shape[0]
    de = _counted.scatter_rows(de, rows, n) if de.numel() else de
    return per_token, lse, scalars, _counted.status_of_rows(status, rows, o), de, dc, db


def _forward_backward_rows(e: Tensor, c: Tensor, target: Tensor, bias: Optional[Tensor], weight: Optional[Tensor],
                           want_de: bool, want_dc: bool, want_db: bool, want_lse: bool, want_status: bool,
                           grad_output: Optional[Tensor], o: LossOptions):
    """flce::forward_backward over every row of ``e`` (``o.skip_ignored`` False)."""
    want_db = want_db and bias is not None
    want_status = want_status or o.check_targets
    wants = (want_de, want_dc, want_db)
    # (float16 trades only for a grad_output given: its gradients are then rounded at their scale)
    plan = forward_backward_plan_for(e, c, o, wants, known_grad_output=grad_output is not None)
    if plan is None:
        regular = dataclasses.replace(o, workspace_budget=max(o.workspace_budget, 0))
        per_token, lse, scalars, status, rows = torch.ops.flce.forward(e, c, target, bias, weight, *regular.astuple())
        g = grad_output if grad_output is not None else torch.ones(1, dtype=torch.float32, device=e.device)
        de, dc, db = torch.ops.flce.backward(e, c, target, bias, weight, lse, g, rows, *wants, *regular.astuple())
        return _unwanted_emptied((per_token, lse, scalars, status, de, dc, db), want_lse, want_status)
    n = e.shape[0]
    f32 = dict(dtype=torch.float32, device=e.device)
    own_lse = not want_lse and plan.keeps_lse
    lse = torch.empty(0 if own_lse else n, **f32)
    scalars, per_token = torch.empty(4, **f32), torch.empty(0, **f32)
    own_status = not want_status and plan.keeps_status
    status = torch.empty(0 if own_status else 1, dtype=torch.int32, device=e.device)
    de = torch.empty_like(e) if want_de else e.new_empty(0)
    dc = torch.empty_like(c) if want_dc else c.new_empty(0)
    db = torch.empty(c.shape[0], dtype=e.dtype, device=e.device) if want_db else e.new_empty(0)
    grads = tuple(t.data_ptr() if want else None for t, want in zip((de, dc, db), wants))
    ws = torch.empty(max(plan.workspace_bytes, 1), dtype=torch.uint8, device=e.device)
    outputs = (None if own_lse else lse.data_ptr(), None, scalars.data_ptr(),
               None if own_status else status.data_ptr())
    expected = None if grad_output is None else grad_output.data_ptr()
    _problem_of(e, c, o).cuda_forward_backward(_cuda_of(e), _inputs(e, c, bias, target, weight), outputs, grads,
                                               (ws.data_ptr(), ws.numel()), plan, expected)
    return _unwanted_emptied((per_token, lse, scalars, status, de, dc, db), want_lse, want_status)


_forward_backward = torch.library.custom_op(
    "flce::forward_backward", mutates_args=(),
    schema=f"({_TENSORS_FWD}, bool want_de, bool want_dc, bool want_db, bool want_lse, bool want_status, "
           f"Tensor? grad_output, "
           f"{LossOptions.schema()}) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)")(_forward_backward_impl)


def _unwanted_emptied(outputs, want_lse: bool, want_status: bool):
    """The op's seven outputs with lse and the status word empty where not wanted (the fake's
    shapes)."""
    per_token, lse, scalars, status, de, dc, db = outputs
    return (per_token, lse if want_lse else lse.new_empty(0), scalars, status if want_status else status.new_empty(0),
            de, dc, db)


@_forward_backward.register_fake
def _forward_backward_fake(e, c, target, bias, weight, want_de, want_dc, want_db, want_lse, want_status, grad_output,
                           *options):
    n = e.shape[0]
    acc = torch.float64 if e.dtype == torch.float64 else torch.float32
    want_db = want_db and bias is not None
    status = 1 if want_status or LossOptions(*options).check_targets else 0
    return (e.new_empty(0, dtype=acc), e.new_empty(n if want_lse else 0, dtype=acc), e.new_empty(4, dtype=acc),
            e.new_empty(status, dtype=torch.int32), torch.empty_like(e) if want_de else e.new_empty(0),
            torch.empty_like(c) if want_dc else c.new_empty(0), e.new_empty(c.shape[0]) if want_db else e.new_empty(0))


@torch.library.custom_op("flce::scale_grads_", mutates_args=("de", "dc", "db"))
def _scale_grads_(de: Tensor, dc: Tensor, db: Tensor, scale: Tensor) -> None:
    """dE, dC, db *= scale[0] in place (scale: f32 [1] on their device); nothing to do when 1."""
    for t in (de, dc, db):
        if t.numel() == 0:
            continue
        if t.is_cuda:
            _flce.scale_gradients(_cuda_of(t), _DTYPES[t.dtype], t.data_ptr(), t.numel(),
                                  scale.data_ptr())
        else:
            t.mul_(scale[0])


@_scale_grads_.register_fake
def _scale_grads_fake(de, dc, db, scale):
    return None


_N_INPUTS = 11  # e, c, target, bias, weight, want_de, want_dc, want_db, want_lse, want_status, grad_output


def _setup_context(ctx, inputs, output):
    ctx.mark_non_differentiable(*output[4:])
    # outputs without a gradient come to the backward as None, not as zeros: autograd otherwise
    # materialises a zero tensor for each (non-differentiable outputs included), dE- and dC-sized
    # here — a second copy of the gradients at the backward's peak (2,020 MB against 1,010 at
    # N 1k, Llama 3: H200, journal v25)
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(*output[4:], output[3], inputs[2], inputs[10])
    ctx.wants = (inputs[5], inputs[6], inputs[7] and inputs[3] is not None)
    ctx.options = LossOptions(*inputs[_N_INPUTS:])
    ctx.v = inputs[1].shape[0]


def _autograd_backward(ctx, g_per_token, g_lse, g_scalars, g_status, g_de, g_dc, g_db):
    de, dc, db, status, target, expected = ctx.saved_tensors
    check = TargetCheck.start(status, ctx.options)
    if g_scalars is None:
        scale = torch.zeros(1, dtype=torch.float32, device=de.device)
    else:
        scale = g_scalars[:1].to(torch.float32).contiguous()
        if expected is not None:
            # the gradients are for `expected` already: 1 (nothing to do) when it is what came
            scale = scale / expected
    torch.ops.flce.scale_grads_(de, dc, db, scale)
    if check is not None:
        check.finish(target, ctx.v, ctx.options.ignore_index)
    want_de, want_dc, want_db = ctx.wants
    grads = (de if want_de else None, dc if want_dc else None, None, db if want_db else None, None)
    return grads + (None,) * (_N_INPUTS - 5 + len(_OPTION_NAMES))


_forward_backward.register_autograd(_autograd_backward, setup_context=_setup_context)
_ForwardBackwardEager = _eager.autograd_function("_ForwardBackwardEager", _forward_backward_impl, _setup_context,
                                                 _autograd_backward)


def forward_backward_op(*args):
    """flce::forward_backward on these inputs: in eager mode on plain tensors without
    torch.library's dispatch (flce/_eager.py says why and when), else through the op."""
    if _eager.takes_eager_path(*args[:5], args[_N_INPUTS - 1]):  # the tensors: the inputs and grad_output
        return _ForwardBackwardEager.apply(*args)
    return torch.ops.flce.forward_backward(*args)


