"""What torch.compile itself changes in a Hugging Face model's gradients, so that the tests of
flce.patch under torch.compile can ask for "bitwise, except where compiling the unpatched model
already moves the last bits" instead of plain bitwise equality.

On some machines (seen with torch 2.11.0 and transformers 5.24.0 on CPU, f64) the
unpatched tiny Llama compiled with backend="eager" gives k_proj, v_proj and input_layernorm
gradients a few ulps away from eager mode (|Δ| ≤ 5e-17 against values ~0.1): the attention's
grouped k/v gradients are summed in another order. flce's own pieces must add nothing beyond that.
"""

import torch


def step_grads(model, step, compiled):
    """`step(m)` -> (loss, grads) on `model` eagerly or compiled with backend="eager"."""
    return step(torch.compile(model, backend="eager") if compiled else model)


def compile_drift(model, step):
    """Per-gradient max |eager − compiled| of `model` (unpatched) under `step`: 0 where
    torch.compile leaves a gradient bitwise."""
    _, eager = step_grads(model, step, False)
    _, compiled = step_grads(model, step, True)
    return [(a - b).abs().max().item() for a, b in zip(eager, compiled)]


def within_compile_drift(ref, got, drift, factor=4.0):
    """Whether every tensor of `got` equals `ref`'s bitwise where the drift is 0, and within
    `factor` times the drift elsewhere; the first offender's description otherwise (None: all
    within)."""
    if len(ref) != len(got) or len(ref) != len(drift):
        return f"{len(ref)} reference tensors, {len(got)} results, {len(drift)} drifts"
    for i, (a, b, d) in enumerate(zip(ref, got, drift)):
        diff = (a - b).abs().max().item()
        if diff > factor * d:
            return f"tensor {i}: |Δ| {diff:.3e} against the unpatched model's compile drift {d:.3e}"
    return None
