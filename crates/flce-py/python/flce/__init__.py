"""flce: fused linear cross-entropy for PyTorch.

``flce.linear_cross_entropy(input, linear_weight, target)`` computes
``F.cross_entropy(input @ linear_weight.T, target)`` and its exact gradients without holding the
N×V logits: on CUDA tensors through flce's CUDA backend (kernels compiled at first use by NVRTC),
on CPU tensors through flce's fused CPU implementation. It is a ``torch.library`` custom op with
a fake implementation and autograd, so ``torch.compile(fullgraph=True)`` traces it.
"""

from ._flce import Plan, Problem, __version__, cuda_device_count
from .hf import patch, unpatch
from .memory import plan, suggest
from . import offload, tiled_mlp, vocab_parallel, weights
from ._common import LossOptions
from ._counted import kernel_plans
from .ops import LinearCrossEntropyLoss, linear_cross_entropy
from .three_product import forward_backward_plan

__all__ = ["linear_cross_entropy", "plan", "suggest", "vocab_parallel", "offload", "tiled_mlp", "weights", "LinearCrossEntropyLoss", "LossOptions", "kernel_plans", "forward_backward_plan", "patch", "unpatch",
           "Problem", "Plan", "cuda_device_count", "__version__"]
