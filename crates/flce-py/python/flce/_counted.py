"""The counted rows: the tokens whose target is not ``ignore_index``, the only ones the products see.

A batch whose prompts are masked (completion-only SFT, RL) ignores 30-70% of its tokens; their
logits, gradients and products are work for rows that contribute nothing. Each op (flce::forward,
flce::backward, flce::forward_backward) therefore resolves ``shift`` into the effective targets,
gathers the counted rows of E and the targets into compact [N_counted, D] / [N_counted] operands
(once: index_select, one read and one write of N_counted·D elements), runs its pass on those with
plans for N_counted, and scatters per-row results back: per-token loss and lse 0 on ignored rows,
dE's ignored rows 0 (as the full pass writes them). dC, db and the reductions are sums over the
same rows in another order: the results are those of the full pass within f32 reordering, and
bitwise repeatable (the gather and scatter move values, unique indices, no atomics).

The count is read on the host (one synchronisation, inside the forward, before its kernels are
queued: the host waits for the work queued ahead of the loss, then queues the gather at once).
The forward hands its rows to the backward as an output whose size is the count (a dynamic size
under torch.compile), so the backward reads nothing from the device. Every row is computed
instead — ``rows`` empty — where no host read may happen (CUDA-graph capture), where nothing is
ignored or everything is, where the caller asked for every row (``skip_ignored=False``, or
``return_lse``, whose lse covers ignored rows too), and on the CPU for a call with an
out-of-range target (so that its error names the token by its own index).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _flce
from ._common import (_DTYPES, _STATUS_OK, PEAK, LossOptions, _backward_plan, _device_index, _forward_plan, _problem,
                      _problem_of, budget_option, peak_budget)


def effective_target(target: Tensor, o: LossOptions) -> Tensor:
    """The target each row is scored against: ``target``, or with ``shift`` (o.shift = S, the
    sequence length) row k's next target within its sequence and ignore_index for the last row
    of each sequence — what the kernels read for a shifted call (kernels/shared/prep.cu)."""
    if o.shift == 0:
        return target
    t = target.view(-1, o.shift)
    return torch.cat([t[:, 1:], t.new_full((t.shape[0], 1), o.ignore_index)], dim=1).reshape(-1)


def no_rows(e: Tensor) -> Tensor:
    """The ``rows`` of a call that computed every row: an empty int64 tensor."""
    return torch.empty(0, dtype=torch.int64, device=e.device)


def counted_rows(e: Tensor, target: Tensor, o: LossOptions, v: int) -> Optional[Tensor]:
    """The ascending indices (int64 [N_counted], on e's device) of the rows whose effective target
    is not ignore_index, or None where every row is computed (the module doc says when). Reads the
    count on the host: on CUDA a synchronisation with the stream."""
    if not o.skip_ignored or (e.is_cuda and torch.cuda.is_current_stream_capturing()):
        return None
    t = effective_target(target, o)
    counted = t != o.ignore_index
    rows = counted.nonzero().squeeze(1)
    n_counted = rows.numel()
    if n_counted == 0 or n_counted == e.shape[0]:
        return None
    if not e.is_cuda and bool(((t < 0) | (t >= v))[counted].any()):
        return None  # the CPU pass raises for it, naming the target by its own index
    return rows


def counted_inputs(e: Tensor, target: Tensor, rows: Tensor, o: LossOptions) -> Tuple[Tensor, Tensor, LossOptions]:
    """(E's counted rows [N_counted, D], their effective targets, the options without shift): the
    operands of the compact pass."""
    t = target.index_select(0, rows + 1) if o.shift else target.index_select(0, rows)
    return e.index_select(0, rows), t, dataclasses.replace(o, shift=0)


def scatter_rows(x: Tensor, rows: Tensor, n: int) -> Tensor:
    """[n, ...] zeros with ``x``'s rows at ``rows`` (the compact pass's per-row results placed)."""
    return x.new_zeros((n, *x.shape[1:])).index_copy_(0, rows, x)


def status_of_rows(status: Tensor, rows: Tensor, o: LossOptions) -> Tensor:
    """The compact pass's status word with a bad target's index mapped to the caller's target
    position (row + 1 with shift, as the full pass reports it); OK and class-weight codes as they
    are. On the device, without a host read."""
    if status.numel() == 0:
        return status
    bad_row = (status >= 0) & (status != _STATUS_OK)
    row = rows.index_select(0, status.clamp(0, rows.numel() - 1).to(torch.int64))
    position = (row + (1 if o.shift else 0)).to(status.dtype)
    return torch.where(bad_row, position, status)


def kernel_plans(input: Tensor, linear_weight: Tensor, *, wants: Tuple[bool, bool, bool] = (True, True, False),
                 target: Optional[Tensor] = None, **options) -> Tuple["_flce.Plan", "_flce.Plan"]:
    """The CUDA plans of the recomputing path (forward, backward) flce would use for these tensors
    (2-D input [N, D]) and options: each has ``workspace_bytes``, ``family`` and a readable repr.
    ``workspace_budget`` as the loss takes it (None, "min", "fast", "peak" or bytes): what these
    plans get where no three-product plan pays (``flce.forward_backward_plan`` says which runs) — the
    default's for "fast", the headroom's bytes for "peak". With ``target`` ([N]), the plans of the
    rows that count (flce/_counted.py: N_counted rows, no shift — what an eager or torch.compile
    call runs; under CUDA-graph capture a call runs the plans for every row, those without
    ``target``). For introspection; the ops make and cache the same plans themselves."""
    budget = options.pop("workspace_budget", None)
    o = LossOptions(**options)
    p = counted_problem(input, linear_weight, target, o)
    dev = _device_index(input)
    budget = budget_option(budget) if budget is None or isinstance(budget, str) else budget
    if budget == PEAK:
        budget = peak_budget(input, linear_weight)
    budget = max(budget, 0)
    return (_forward_plan(p, dev, o.forward_mode, budget),
            _backward_plan(p, dev, tuple(wants), o.backward_mode, budget))


def counted_problem(e: Tensor, c: Tensor, target: Optional[Tensor], o: LossOptions) -> "_flce.Problem":
    """The problem a call on these tensors runs: every row's, or with ``target`` (and
    ``o.skip_ignored``) the counted rows' (flce/_counted.py) — the plans' introspection."""
    if target is None:
        return _problem_of(e, c, o)
    if tuple(target.shape) != (e.shape[0],):
        raise ValueError(f"target must be [N] = [{e.shape[0]}], got {tuple(target.shape)}")
    rows = counted_rows(e, target.to(torch.int64), o, c.shape[0])
    if rows is None:
        return _problem_of(e, c, o)
    return _problem(rows.numel(), e.shape[1], c.shape[0], _DTYPES[e.dtype], dataclasses.replace(o, shift=0))
