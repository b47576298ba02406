"""The loss's two autograd ops (``flce::forward``, ``flce::forward_backward``) called in eager
mode without torch.library's dispatch: a ``torch.autograd.Function`` around the same
implementation, the same ``setup_context`` and the same backward that the op registers.

Why: on the H200 machine's host, torch.library's custom-op path cost 718 of the 1,145 µs that
``torch.ops.flce.forward_backward`` took to queue its kernels at Llama 3 with 1k tokens — 510 in
its autograd wrapper, 208 in the dispatch — against 427 for the implementation itself
(journal v58). Through this path the loss's forward takes the host 0.53–0.71 ms instead of
1.04–1.15 (default) and 0.89–1.13 instead of 1.52–1.65 ("fast"), Llama 3 at 1k and 8k tokens
(benchmarks/results/2026-12-04-h200-host-cost/). The GPU's time is the same: a loop whose host runs
ahead of the GPU (the suite's timer, most training steps) hides either; a loop whose host is the
bottleneck (small models, short sequences) gains the difference.

Where the op path stays: under torch.compile, torch.export and CUDA-graph-free tracing alike
(``torch.compiler.is_compiling``), for tensor subclasses (DTensor, FakeTensor, functional
tensors), under functorch transforms, and while a torch function or dispatch mode is active
(FlopCounterMode, selective checkpointing, memory trackers see the op as one op there). Results
are the same either way: one implementation, bitwise (tests/test_eager.py).
"""

from __future__ import annotations

import os
from typing import Callable

import torch
from torch import Tensor

# FLCE_EAGER_OPS=0: every call through torch.library's ops (an A/B knob; read once)
_ENABLED = os.environ.get("FLCE_EAGER_OPS", "1") != "0"


# (nn.Parameter: a plain tensor to dispatch — it turns torch functions off for itself)
_PLAIN = (Tensor, torch.nn.Parameter)


def _modes_active() -> bool:
    """Whether a torch function mode, a dispatch mode or a functorch transform is active (private
    torch predicates; where one is missing, assume one is active: the op path)."""
    try:
        return bool(torch._C._len_torch_function_stack() > 0 or torch._C._len_torch_dispatch_stack() > 0
                    or torch._C._are_functorch_transforms_active())
    except AttributeError:
        return True


def takes_eager_path(*tensors) -> bool:
    """Whether a call with these tensors (None allowed) may bypass torch.library's dispatch."""
    if not _ENABLED or torch.compiler.is_compiling():
        return False
    if any(t is not None and type(t) not in _PLAIN for t in tensors):
        return False
    return not _modes_active()


def autograd_function(name: str, impl: Callable, setup_context: Callable, backward: Callable) -> type:
    """A ``torch.autograd.Function`` that runs ``impl(*inputs)`` (an op's implementation, its
    inputs in schema order, every output a tensor), calls ``setup_context(ctx, inputs, output)``
    on them and has ``backward(ctx, *grads)`` as its backward: the op's autograd as registered
    with ``register_autograd``, without the dispatch. ``ctx.needs_input_grad`` follows the same
    input positions as the op's."""

    def forward(ctx, *inputs):
        output = impl(*inputs)
        setup_context(ctx, inputs, output)
        return output

    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})
