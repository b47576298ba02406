"""Activation checkpointing whose saved block inputs wait in pinned host memory.

Checkpointing keeps one tensor per block between forward and backward: the block's input. At
long contexts those inputs are what is left of the activations (a Llama-3.2-1B at 64k tokens:
16 blocks × 256 MB). Here each block's input is copied to pinned host memory on a side stream
while the next blocks compute, the device copy is released once the copy is done, and in the
backward the input of the block before comes back on another side stream while the current block
recomputes — one block ahead, ordered by CUDA events, never by a device-wide synchronisation.

    offloader = flce.offload.Offloader()
    flce.offload.wrap_blocks(model.layers, offloader)      # any list of blocks
    flce.patch(hf_model, checkpoint=True, offload=True)     # Hugging Face causal LMs

``checkpoint(function, *args, offloader=...)`` is the building block, with the contract of
``torch.utils.checkpoint.checkpoint``: ``function(*args)`` runs without keeping its
intermediates, and runs again in the backward with gradients. The first floating-point tensor
argument (the block input) is the one offloaded; other tensor arguments (masks, rotary tables,
shared by every block) stay where they are. The RNG state (CPU and the block's GPU) and the
autocast state of the forward are replayed in the recompute, so dropout masks are the same and
the gradients equal plain checkpointing's bitwise.

Why Python and torch's primitives rather than the Rust device layer: the copies must be ordered
against the kernels PyTorch enqueues on its own streams, and the device memory they free belongs
to PyTorch's caching allocator (``Tensor.record_stream`` is the only safe way to release a tensor
that a side stream still reads); torch's streams, events and pinned allocator do exactly this job,
where Rust would have to reach into the same objects through their raw handles.

Like ``torch.utils.checkpoint(use_reentrant=True)``, whose mechanism it shares (the recompute
runs its own ``torch.autograd.backward``), the weights' gradients go to their ``.grad``: use
``loss.backward()``, not ``torch.autograd.grad(loss, weights)``.

Under ``torch.compile`` the wrapper is excluded from tracing (``torch.compiler.disable``): the
compiled graph breaks around each block's checkpoint and the checkpoint runs eagerly, with the
same results; ``fullgraph=True`` refuses it with dynamo's error.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import torch

__all__ = ["Offloader", "checkpoint", "wrap_blocks", "unwrap_blocks"]


def _copy_to_device(hosts: List[torch.Tensor], device: torch.device, stream=None, after=None):
    """Device copies of the host tensors ``hosts`` and the event that marks them done: on CUDA
    allocated and copied on the side ``stream`` (after the event ``after``), elsewhere clones (no
    event). Use them on another stream through :func:`_ready_here`."""
    if device.type != "cuda":
        return [h.clone() for h in hosts], None
    with torch.cuda.stream(stream):
        if after is not None:
            stream.wait_event(after)
        out = [torch.empty(h.shape, dtype=h.dtype, device=device) for h in hosts]
        for dst, src in zip(out, hosts):
            dst.copy_(src, non_blocking=True)
        done = torch.cuda.Event()
        done.record(stream)
    return out, done


def _ready_here(tensors: List[torch.Tensor], done, device: torch.device):
    """``tensors`` from :func:`_copy_to_device` ready for the current stream: it waits for
    ``done``, and the allocator reuses their memory only after this stream's work on them (they
    were allocated on the side stream, are used and freed on this one)."""
    if device.type != "cuda":
        return
    main = torch.cuda.current_stream(device)
    main.wait_event(done)
    for t in tensors:
        t.record_stream(main)


@dataclass
class _Saved:
    """One block input between its forward and its backward."""
    device: torch.device
    shape: torch.Size
    dtype: torch.dtype
    host: Optional[torch.Tensor] = None      # the pinned copy (offloaded)
    kept: Optional[torch.Tensor] = None      # the input itself (not offloaded)
    copied: Optional[torch.cuda.Event] = None  # device→host copy done
    loaded: Optional[torch.Tensor] = None    # the prefetched device copy
    arrived: Optional[torch.cuda.Event] = None  # host→device copy done
    entry: Optional["_PoolEntry"] = None     # the pool entry `host` belongs to


@dataclass
class _PoolEntry:
    buf: torch.Tensor
    free_after: Optional[torch.cuda.Event] = None  # the last copy out of it


class Offloader:
    """The pinned host buffers, side streams and per-step order of one list of blocks.

    ``offload=False`` makes it plain checkpointing (inputs stay on the device). Pinned buffers
    are allocated on first use and reused in later steps (one per block input shape in flight),
    so a training loop allocates host memory once. ``stats()`` reports what it did.
    """

    def __init__(self, offload: bool = True, prefetch: bool = True):
        self.offload = offload
        self.prefetch = prefetch
        self._pool: Dict[Tuple[Tuple[int, ...], torch.dtype], List[_PoolEntry]] = {}
        self._streams: Dict[torch.device, Tuple[torch.cuda.Stream, torch.cuda.Stream]] = {}
        # inputs saved and not yet restored, in forward order; weak, so that a graph dropped
        # without a backward takes its inputs (and their pinned buffers) with it
        self._order: List[weakref.ref] = []
        self.pinned_bytes = 0
        self.offloaded = 0
        self.prefetched = 0

    def stats(self) -> dict:
        return {"pinned_bytes": self.pinned_bytes, "offloaded": self.offloaded, "prefetched": self.prefetched,
                "pool_buffers": sum(len(v) for v in self._pool.values()), "in_flight": len(self._order)}

    # -- streams and the pinned pool -------------------------------------------------------------

    def _side_streams(self, device: torch.device):
        if device not in self._streams:
            self._streams[device] = (torch.cuda.Stream(device), torch.cuda.Stream(device))
        return self._streams[device]

    def _take_buffer(self, x: torch.Tensor) -> _PoolEntry:
        key = (tuple(x.shape), x.dtype)
        free = self._pool.setdefault(key, [])
        if free:
            return free.pop()
        buf = torch.empty(x.shape, dtype=x.dtype, pin_memory=x.is_cuda)
        self.pinned_bytes += buf.numel() * buf.element_size()
        return _PoolEntry(buf)

    def _give_back(self, entry: _PoolEntry):
        self._pool.setdefault((tuple(entry.buf.shape), entry.buf.dtype), []).append(entry)

    # -- save / restore ----------------------------------------------------------------------------

    def save(self, x: torch.Tensor) -> _Saved:
        """Keep ``x`` for the backward: copied to host (offload) or referenced."""
        s = _Saved(x.device, x.shape, x.dtype)
        if not self.offload:
            s.kept = x.detach()
            return s
        entry = self._take_buffer(x)
        if x.is_cuda:
            main = torch.cuda.current_stream(x.device)
            d2h, _ = self._side_streams(x.device)
            d2h.wait_stream(main)  # x is complete
            with torch.cuda.stream(d2h):
                if entry.free_after is not None:
                    d2h.wait_event(entry.free_after)  # its last host→device copy has left it
                entry.buf.copy_(x.detach(), non_blocking=True)
                s.copied = torch.cuda.Event()
                s.copied.record(d2h)
            # the allocator may reuse x's memory only after the copy: its owners drop it from now on
            x.record_stream(d2h)
        else:
            entry.buf.copy_(x.detach())
        s.host = entry.buf
        s.entry = entry
        self.offloaded += 1
        self._order = [r for r in self._order if r() is not None]
        self._order.append(weakref.ref(s))
        return s

    def _start_load(self, s: _Saved):
        """Enqueue the host→device copy of ``s`` (on the side stream for CUDA)."""
        if s.loaded is not None or s.host is None:
            return
        h2d = self._side_streams(s.device)[1] if s.device.type == "cuda" else None
        (s.loaded,), s.arrived = _copy_to_device([s.host], s.device, h2d, after=s.copied)
        if s.arrived is not None:
            s.entry.free_after = s.arrived  # the next device→host copy into it waits for this one

    def _prefetch(self, s: Optional[_Saved]):
        """Start bringing ``s`` back ahead of its ``restore``, if prefetching and not on its way yet."""
        if self.prefetch and s is not None and s.loaded is None:
            self._start_load(s)
            self.prefetched += 1

    def prefetch_newest(self):
        """Start bringing back the input saved last: the first one the backward needs, which
        ``restore`` alone would fetch only when asked for it (flce.patch calls this from a hook on
        the loss, so the copy overlaps the loss's backward)."""
        self._prefetch(next((r() for r in reversed(self._order) if r() is not None), None))

    def restore(self, s: _Saved) -> torch.Tensor:
        """The saved input on its device, ready for the current stream; starts the prefetch of
        the input saved before it (the next one the backward needs)."""
        if s.kept is not None:
            x = s.kept
            s.kept = None
            return x
        self._start_load(s)
        x = s.loaded
        _ready_here([x], s.arrived, s.device)
        i = next((i for i in range(len(self._order) - 1, -1, -1) if self._order[i]() is s), None)
        if i is not None:
            del self._order[i]
            self._prefetch(next((r() for r in reversed(self._order[:i]) if r() is not None), None))
        self._give_back(s.entry)
        s.loaded = s.host = s.entry = None
        return x


def _rng_state(device: torch.device):
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return torch.get_rng_state(), cuda


@contextlib.contextmanager
def _replayed_rng(state, device: torch.device):
    cpu, cuda = state
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices, enabled=True):
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, device)
        yield


def _autocast_state(device_type: str):
    return {t: (torch.is_autocast_enabled(t), torch.get_autocast_dtype(t)) for t in {device_type, "cpu"}}


def _replayed_autocast(state):
    stack = contextlib.ExitStack()
    for t, (enabled, dtype) in state.items():
        stack.enter_context(torch.autocast(t, dtype=dtype, enabled=enabled))
    return stack


class _OffloadedCheckpoint(torch.autograd.Function):
    @staticmethod
    def forward(ctx, function, offloader, weights, anchor, *args):
        ctx.function = function
        ctx.offloader = offloader
        ctx.weights = weights
        first = next((i for i, a in enumerate(args) if torch.is_tensor(a) and a.is_floating_point()), None)
        if first is None:
            raise TypeError("flce.offload.checkpoint: the function needs a floating-point tensor argument "
                            "(the block input)")
        x = args[first]
        ctx.device = x.device
        ctx.rng = _rng_state(x.device)
        ctx.autocast = _autocast_state(x.device.type)
        outputs = function(*args)
        ctx.saved = offloader.save(x)
        others = [a for i, a in enumerate(args) if torch.is_tensor(a) and i != first]
        ctx.save_for_backward(*others)
        ctx.layout = [("x" if i == first else "t" if torch.is_tensor(a) else a) for i, a in enumerate(args)]
        ctx.grad_inputs = [torch.is_tensor(a) and a.requires_grad for a in args]
        flat = outputs if isinstance(outputs, tuple) else (outputs,)
        ctx.mark_non_differentiable(*[o for o in flat if torch.is_tensor(o) and not o.is_floating_point()])
        return outputs

    @staticmethod
    def backward(ctx, *grad_outputs):
        # streamed frozen weights (flce.weights): held from the recompute to the end of the
        # block's backward, which reads them again; the block before's start coming meanwhile
        if ctx.weights is not None:
            ctx.weights.hold(-1)
        try:
            return (None, None, None, None) + _OffloadedCheckpoint._recompute_backward(ctx, grad_outputs)
        finally:
            if ctx.weights is not None:
                ctx.weights.release()

    @staticmethod
    def _recompute_backward(ctx, grad_outputs):
        x = ctx.offloader.restore(ctx.saved)
        others = iter(ctx.saved_tensors)
        inputs = []
        for i, slot in enumerate(ctx.layout):
            if isinstance(slot, str) and slot == "x":
                t = x
            elif isinstance(slot, str) and slot == "t":
                t = next(others)
            else:
                inputs.append(slot)
                continue
            t = t.detach()
            t.requires_grad_(ctx.grad_inputs[i])
            inputs.append(t)
        with torch.enable_grad(), _replayed_rng(ctx.rng, ctx.device), _replayed_autocast(ctx.autocast):
            outputs = ctx.function(*inputs)
        flat = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(flat, grad_outputs)
                 if torch.is_tensor(o) and o.requires_grad and g is not None]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return tuple(t.grad if torch.is_tensor(t) and ctx.grad_inputs[i] else None for i, t in enumerate(inputs))


# A leaf that requires grad, passed to every checkpoint: its output then takes part in autograd
# even when no input does (frozen embeddings under LoRA), so the block's trainable weights still
# get their gradients from the recompute.
_ANCHOR: Dict[torch.device, torch.Tensor] = {}


def _anchor(device: torch.device) -> torch.Tensor:
    if device not in _ANCHOR:
        _ANCHOR[device] = torch.empty(0, device=device, requires_grad=True)
    return _ANCHOR[device]


@torch.compiler.disable
def checkpoint(function: Callable, *args, offloader: Offloader, weights=None):
    """``function(*args)`` checkpointed, its first floating-point tensor argument kept by
    ``offloader`` (in pinned host memory when it offloads). Without gradients (inference, or
    ``torch.no_grad``) it just calls ``function``. ``weights``: the block's streamed frozen weights
    (``flce.weights.WeightStreamer.block(i)``), held through its backward."""
    if not torch.is_grad_enabled():
        return function(*args)
    device = next((a.device for a in args if torch.is_tensor(a)), torch.device("cpu"))
    return _OffloadedCheckpoint.apply(function, offloader, weights, _anchor(device), *args)


def wrap_blocks(blocks, offloader: Optional[Offloader] = None, offload: bool = True, streamer=None):
    """Checkpoint every module of ``blocks`` (an ``nn.ModuleList`` or any iterable of modules)
    through ``offloader`` (a new one if None): each block's ``forward`` is replaced on the
    instance; keyword arguments are bound as they are (no gradients flow to them). ``streamer``: a
    ``flce.weights.WeightStreamer`` over the same blocks, in the same order, whose block weights
    each checkpoint holds through its backward. Returns the offloader. Undo with
    :func:`unwrap_blocks`."""
    offloader = offloader if offloader is not None else Offloader(offload=offload)
    for i, block in enumerate(blocks):
        if getattr(block, "_flce_offload_forward", None) is not None:
            continue
        original = block.forward
        weights = streamer.block(i) if streamer is not None else None

        def forward(*args, _original=original, _weights=weights, **kwargs):
            return checkpoint(functools.partial(_original, **kwargs), *args, offloader=offloader, weights=_weights)

        block._flce_offload_forward = original
        block.forward = forward
    return offloader


def _restore_forward(modules, key: str):
    """Give every module of ``modules`` back the ``forward`` saved under attribute ``key``."""
    for module in modules:
        original = getattr(module, key, None)
        if original is not None:
            module.forward = original
            setattr(module, key, None)


def unwrap_blocks(blocks):
    """Undo :func:`wrap_blocks`."""
    _restore_forward(blocks, "_flce_offload_forward")
