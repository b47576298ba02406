"""What the ops share: the option schema (``LossOptions``), the cached ``Problem`` per call shape,
and the pointer helpers."""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _flce

_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32", torch.float64: "f64"}
_REDUCTIONS = ("mean", "sum", "none")
_STATUS_OK = 2**31 - 1
_STATUS_BAD_CLASS_WEIGHT = -2**31


@dataclasses.dataclass(frozen=True)
class LossOptions:
    """The loss options as the ops carry them: the one schema from which the ``torch.library``
    signatures, the autograd context and the planning cache are derived."""

    reduction: str = "mean"
    ignore_index: int = -100
    label_smoothing: float = 0.0
    z_loss: float = 0.0
    softcap: Optional[float] = None
    shift: int = 0  # sequence length of shifted targets, 0 for none
    forward_mode: str = "auto"
    backward_mode: str = "auto"
    workspace_budget: int = 0  # bytes; 0 for the default ("min"); FAST (-1) for "fast", PEAK (-2) for "peak"
    # the backward checks the forward's status word (see TargetCheck); the kernels ignore it
    check_targets: bool = False
    # the passes see only the rows whose target is not ignore_index (flce/_counted.py)
    skip_ignored: bool = True

    @classmethod
    def schema(cls) -> str:
        """The options' part of a torch.library schema, in field order."""
        types = {"str": "str", "int": "int", "float": "float", "Optional[float]": "float?", "bool": "bool"}
        return ", ".join(f"{types[f.type]} {f.name}" for f in dataclasses.fields(cls))

    def astuple(self) -> tuple:
        """The values in schema order (what the ops take after their tensors)."""
        return tuple(getattr(self, name) for name in _OPTION_NAMES)


# workspace_budget="fast": half the free device memory (the three-product pass when gradients are wanted)
FAST = -1
# workspace_budget="peak": what the call can take without raising the process's peak (peak_budget)
PEAK = -2


def budget_option(workspace_budget) -> int:
    """``workspace_budget`` as the ops carry it: None or "min" → 0 (the default plans), "fast" →
    FAST, "peak" → PEAK, bytes → bytes."""
    if workspace_budget is None or workspace_budget == "min":
        return 0
    if workspace_budget == "fast":
        return FAST
    if workspace_budget == "peak":
        return PEAK
    if isinstance(workspace_budget, int) and not isinstance(workspace_budget, bool) and workspace_budget >= 0:
        return workspace_budget
    raise ValueError(
        f"workspace_budget must be None, 'min', 'fast', 'peak' or a number of bytes >= 0, got {workspace_budget!r}")


_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(LossOptions))

_GRANULE = 256 << 20
# workspace_budget="peak": the margin under the peak, and the steps its budget moves in (a few
# plans cached for a loop's nearly equal headrooms)
_PEAK_MARGIN = 64 << 20
_PEAK_STEP = 64 << 20


def _fast_budget(device: torch.device) -> int:
    free, _ = torch.cuda.mem_get_info(device)
    return max(free // 2 // _GRANULE * _GRANULE, _GRANULE)


def peak_budget(e: Tensor, c: Tensor) -> int:
    """``workspace_budget="peak"`` in bytes: what the call can take without raising the process's
    peak so far (torch.cuda.max_memory_allocated; in a training loop, the last step's peak): the
    headroom under that peak less the gradients the call creates (dE and dC, which the default
    plans create as well) and 64 MB for the allocator's rounding of the call's buffers (2 MB
    blocks), in 64 MB steps — 0 (the default plans) below 256 MB, at most "fast"'s half of the
    free memory. After the first step of a loop the loss then runs the fastest plan its headroom
    holds; the peak stays where the rest of the step puts it. (A 10% margin in 256 MB steps left
    the 16k-token training step of benchmarks/train_step.py 1,792 MB of its 2,187 MB: chunks of
    4,096 tokens where 6,144 fit, the step 1.6% slower than with 2 GB, and at 8k tokens 4.6%
    slower: two chunks where one fit; journal v42.)"""
    head = torch.cuda.max_memory_allocated(e.device) - torch.cuda.memory_allocated(e.device)
    grads = (e.numel() + c.numel()) * e.element_size()
    budget = (head - grads - _PEAK_MARGIN) // _PEAK_STEP * _PEAK_STEP
    return min(budget, _fast_budget(e.device)) if budget >= _GRANULE else 0


def budget_bytes(e: Tensor, o: LossOptions) -> int:
    """The call's workspace budget in bytes: "fast" is half the free device memory; "peak" comes
    resolved to bytes (ops.py) except under torch.compile, where it is the default's."""
    if o.workspace_budget == FAST:
        return _fast_budget(e.device)
    return max(o.workspace_budget, 0)


def raise_bad_input(bad: int, target: Tensor, v: int, ignore_index: int, where: str = "") -> None:
    """The ValueError of bad input, from the status word's value (kernels/common/types.cuh):
    _STATUS_OK, the first out-of-range target's token index, or _STATUS_BAD_CLASS_WEIGHT + j for
    the first class j whose weight is negative or not finite."""
    if bad == _STATUS_OK:
        return
    if bad < 0:
        raise ValueError(f"weight[{bad - _STATUS_BAD_CLASS_WEIGHT}] (a class weight) is negative or not finite: "
                         f"class weights must be finite and >= 0{where}")
    raise ValueError(f"target[{bad}] = {int(target.reshape(-1)[bad])} is outside [0, {v}) and is not "
                     f"ignore_index ({ignore_index}){where}")


class TargetCheck:
    """The status word of a call, read without stalling the GPU: a copy into pinned host memory
    and an event, queued behind the kernels that write the word, and finished (the event waited
    for) once more work is queued behind them. In the backward of the recomputing plans it is
    started before the backward's kernels are queued — the host then waits for the forward's end
    only, while the GPU has the backward to run; the forward's own check (``.item()``) would
    drain the stream before the backward could be queued: ~2 ms of idle GPU per call on an H200.
    Calls without such a backward start it on a status-only op queued ahead of their kernels
    (target_status below, ops.py). None under torch.compile and CUDA-graph capture (no host reads
    there)."""

    def __init__(self, status: Tensor):
        self.host = torch.empty(1, dtype=torch.int32, pin_memory=True)
        self.host.copy_(status, non_blocking=True)
        self.done = torch.cuda.Event()
        self.done.record(torch.cuda.current_stream(status.device))

    @classmethod
    def start(cls, status: Tensor, options: "LossOptions") -> Optional["TargetCheck"]:
        if not options.check_targets or not status.is_cuda or torch.compiler.is_compiling() \
                or torch.cuda.is_current_stream_capturing():
            return None
        return cls(status)

    def finish(self, target: Tensor, v: int, ignore_index: int, where: str = " (found by the backward's check)") -> None:
        self.done.synchronize()
        raise_bad_input(int(self.host[0]), target, v, ignore_index, where)


def _ptr(t: Optional[Tensor]) -> Optional[int]:
    return None if t is None else t.data_ptr()


def _device_index(t: Tensor) -> int:
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


def _cuda_of(t: Tensor) -> Tuple[int, int]:
    """(device ordinal, torch's current stream there): the `cuda` argument of the CUDA entry points."""
    return _device_index(t), torch.cuda.current_stream(t.device).cuda_stream


@functools.lru_cache(maxsize=256)
def _problem(n: int, d: int, v: int, dtype: str, o: LossOptions) -> "_flce.Problem":
    return _flce.Problem(n, d, v, dtype, o.reduction, o.ignore_index, o.label_smoothing, o.z_loss, o.softcap,
                         o.shift if o.shift > 0 else None, True)


def _problem_of(e: Tensor, c: Tensor, o: LossOptions) -> "_flce.Problem":
    return _problem(e.shape[0], e.shape[1], c.shape[0], _DTYPES[e.dtype], o)


@functools.lru_cache(maxsize=256)
def _forward_plan(problem: "_flce.Problem", device: int, mode: str, budget: int) -> "_flce.Plan":
    return problem.forward_plan(device, mode, budget or None)


@functools.lru_cache(maxsize=256)
def _backward_plan(problem: "_flce.Problem", device: int, wants: Tuple[bool, bool, bool], mode: str,
                   budget: int) -> "_flce.Plan":
    return problem.backward_plan(device, *wants, mode, budget or None)


def _inputs(e, c, bias, target, weight):
    return (e.data_ptr(), c.data_ptr(), _ptr(bias), target.data_ptr(), _ptr(weight))


_TENSORS_FWD = "Tensor e, Tensor c, Tensor target, Tensor? bias, Tensor? weight"


def target_status(e: Tensor, c: Tensor, target: Tensor, bias: Optional[Tensor], weight: Optional[Tensor],
                  o: LossOptions) -> Tensor:
    """The status word of a call with these inputs (int32 [1] on the device: the first bad class
    weight or out-of-range target, or OK) from the two small kernels every call starts with
    (``CudaLoss::target_status``), queued on torch's current stream; eager CUDA calls only. For
    the calls whose backward cannot read the word behind kernels of its own (TargetCheck): queued
    ahead of the call, it lets the host wait for these kernels instead of the whole call."""
    status = torch.empty(1, dtype=torch.int32, device=e.device)
    scratch = torch.empty(e.shape[0], dtype=torch.int32, device=e.device)
    _problem_of(e, c, o).cuda_target_status(_cuda_of(e), _inputs(e, c, bias, target, weight), scratch.data_ptr(),
                                            status.data_ptr())
    return status
