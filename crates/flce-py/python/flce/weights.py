"""Frozen block weights that wait in pinned host memory and come to the GPU one block ahead
(what lets a 10 GiB card train long contexts with LoRA).

With checkpointing, offload and tiled MLPs, what stays on the GPU through a LoRA step is mostly
the frozen base weights: Gemma-2-2B's 26 layers hold 4.05 GB of its 5.2 GB. A ``WeightStreamer``
moves every frozen parameter that belongs to exactly one block into pinned host memory (the
parameter keeps an empty placeholder) and gives it back to the GPU only while its block runs:
each block's weights are copied in on a side stream while the block before it computes (one block
ahead in the forward, one block behind in the backward, ordered by CUDA events), and released
when the block is done — in the backward, after the block's recompute *and* its backward, which
reads the weights again for the input gradient. So at most two blocks' frozen weights are on the
GPU at any time, whatever the depth.

    streamer = flce.weights.WeightStreamer(model.model.layers)   # any list of blocks
    flce.patch(hf_model, checkpoint=True, offload=True, stream_weights=True)

Hooks: a forward pre-hook / forward hook pair on every block (so that a call outside
checkpointing, e.g. evaluation, finds its weights), and the checkpoint's backward
(flce.offload.checkpoint(..., weights=streamer.block(i))) holding them from the recompute to the
end of the block's backward. Holds nest (a counter), so the recompute's own module hooks inside
the checkpoint's hold do not release early. The results are bitwise those of the resident model:
the same values, the same kernels.

Only frozen parameters (``requires_grad`` False) are streamed: trainable ones need their
gradients and optimizer states on the GPU. While streaming, the blocks' frozen parameters are
placeholders outside their block's call: ``stream.close()`` (or ``flce.unpatch``) puts them back
before saving, merging LoRA weights, or moving the model.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import torch

from .offload import _copy_to_device, _ready_here

__all__ = ["WeightStreamer"]


class _BlockWeights:
    """One block's streamed parameters, their host copies and their device copies in flight."""

    def __init__(self, streamer: "WeightStreamer", index: int, params: List[torch.nn.Parameter]):
        self.streamer, self.index, self.params = streamer, index, params
        self.device = params[0].device if params else torch.device("cpu")
        cuda = self.device.type == "cuda"
        self.host = [torch.empty(p.shape, dtype=p.dtype, pin_memory=cuda).copy_(p.data) for p in params]
        self.placeholders = [torch.empty(0, dtype=p.dtype, device=self.device) for p in params]
        self.bytes = sum(h.numel() * h.element_size() for h in self.host)
        self.loaded: Optional[List[torch.Tensor]] = None  # device copies, from start_load
        self.arrived: Optional[torch.cuda.Event] = None
        self.holds = 0
        for p, empty in zip(params, self.placeholders):
            p.data = empty

    def start_load(self):
        """Enqueue the host→device copies (a side stream on CUDA), unless on their way already."""
        if self.loaded is not None or not self.params:
            return
        s = self.streamer
        stream = s._stream(self.device) if self.device.type == "cuda" else None
        self.loaded, self.arrived = _copy_to_device(self.host, self.device, stream)
        s.loads += 1
        s.streamed_bytes += self.bytes

    def hold(self, step: int):
        """The weights in their parameters for the current stream (loading them if no prefetch
        did), then the prefetch of block ``index + step`` (the next one this pass needs)."""
        self.holds += 1
        if self.holds > 1:
            return
        self.start_load()
        if self.loaded is not None:
            _ready_here(self.loaded, self.arrived, self.device)
            for p, t in zip(self.params, self.loaded):
                p.data = t
        self.streamer._prefetch(self.index + step)

    def release(self):
        """Back to placeholders once the last hold ends (the device copies go back to the caching
        allocator, stream-ordered behind the work that used them)."""
        if self.holds == 0:
            return
        self.holds -= 1
        if self.holds > 0:
            return
        for p, empty in zip(self.params, self.placeholders):
            p.data = empty
        self.loaded = self.arrived = None

    def close(self):
        """The parameters back on their device for good."""
        for p, h in zip(self.params, self.host):
            p.data = h.to(self.device)
        self.loaded = self.arrived = None
        self.holds = 0


class WeightStreamer:
    """The frozen weights of ``blocks`` (in the order they run) in pinned host memory, each
    block's on the GPU only while it runs (and the next one's on its way). Parameters shared by
    two blocks, or trainable, stay where they are. ``stats()`` reports what it moved."""

    def __init__(self, blocks, prefetch: bool = True):
        self.prefetch = prefetch
        self.loads = self.prefetched = self.streamed_bytes = 0
        self._streams: Dict[torch.device, torch.cuda.Stream] = {}
        blocks = list(blocks)
        seen: Dict[int, int] = {}
        for b in blocks:
            for p in b.parameters():
                seen[id(p)] = seen.get(id(p), 0) + 1
        self.blocks = [_BlockWeights(self, i, [p for p in b.parameters() if not p.requires_grad and seen[id(p)] == 1])
                       for i, b in enumerate(blocks)]
        self.pinned_bytes = sum(w.bytes for w in self.blocks)
        self._hooks = []
        for b, w in zip(blocks, self.blocks):
            self._hooks.append(b.register_forward_pre_hook(lambda m, a, w=w: w.hold(+1)))
            self._hooks.append(b.register_forward_hook(lambda m, a, o, w=w: w.release(), always_call=True))

    def block(self, i: int) -> _BlockWeights:
        return self.blocks[i]

    def stats(self) -> dict:
        return {"pinned_bytes": self.pinned_bytes, "loads": self.loads, "prefetched": self.prefetched,
                "streamed_bytes": self.streamed_bytes, "held": sum(w.holds > 0 for w in self.blocks)}

    def _stream(self, device: torch.device) -> torch.cuda.Stream:
        if device not in self._streams:
            self._streams[device] = torch.cuda.Stream(device)
        return self._streams[device]

    def _prefetch(self, i: int):
        if self.prefetch and 0 <= i < len(self.blocks) and self.blocks[i].loaded is None:
            self.blocks[i].start_load()
            self.prefetched += 1

    def prefetch_last(self):
        """Start loading the last block's weights: the first the backward needs (flce.patch calls
        this from a hook on the loss, as it does for the offloaded inputs)."""
        self._prefetch(len(self.blocks) - 1)

    def close(self):
        """Every streamed parameter back on its device, the hooks removed."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        for w in self.blocks:
            w.close()
