"""float16 in the "fast" path: the three-product pass for float16 only with ``loss_scale`` (AMP's
factor: the gradients are then rounded at their final scale), as exact as the recomputing path,
and its dE over a long vocabulary in K-chunks summed in float32 (``Plan.de_k_chunk``). On CPU
tensors the op falls back to the forward + recomputing backward."""

import pytest
import torch

import flce
from test_three_product import run
from test_flce import DEVICES, GRAD_TOL, make, reference, rel


@pytest.mark.parametrize("device", DEVICES)
def test_fast_keeps_f16_gradients_exact_under_a_loss_scale(device):
    # AMP's f16 recipe: the loss times 2^16 (GradScaler's start). A mean over 4096 tokens with small
    # logits has its dE mostly in f16's subnormals at grad_output 1 (rounding the exact dE there
    # alone costs 3e-3, at 2^16 2e-4): the three-product pass, which rounded the gradients in the
    # forward for grad_output 1, lost that precision (docs/journal.md v54); "fast" must be as
    # exact as the recomputing path
    # (on the CPU, and under torch.compile, "fast" ran the op's own fallback: the recomputing
    # plans, but for grad_output 1, then scaled — the same loss)
    e, c, t, _, _ = make(4096, 64, 3000, torch.float16, device, seed=9)
    c = (c.float() * 0.05).half()
    # (the loss in float32, as autocast gives F.cross_entropy's: 2^16 is past float16's largest)
    _, grads_f = run(e, c, t, scale=65536.0, workspace_budget="fast", out_dtype=torch.float32)
    _, grads_d = run(e, c, t, scale=65536.0, out_dtype=torch.float32)
    xs = [x.double().requires_grad_(True) for x in (e, c)]
    (reference(xs[0], xs[1], t) * 65536.0).backward()
    for got, default, x in zip(grads_f, grads_d, xs):
        assert rel(default, x.grad) <= GRAD_TOL[torch.float16]
        assert rel(got, x.grad) <= rel(default, x.grad) * 1.05 + 1e-7, (rel(got, x.grad), rel(default, x.grad))


@pytest.mark.parametrize("device", DEVICES)
def test_fast_trades_f16_with_its_loss_scale(device):
    """float16 with ``loss_scale`` (AMP's, the factor the loss is multiplied by before backward):
    the forward rounds the gradients at that scale, so the three-product pass runs for float16 too
    (without it, none: the test above) and is as exact as the recomputing path; a tensor scale
    (GradScaler's) gives the same gradients as the float."""
    e, c, t, _, _ = make(4096, 64, 3000, torch.float16, device, seed=9)
    c = (c.float() * 0.05).half()
    scale = 65536.0
    budget = 1 << 30
    if device == "cuda":
        assert flce.forward_backward_plan(e, c, workspace_budget=budget) is None
        plan = flce.forward_backward_plan(e, c, workspace_budget=budget, loss_scale=scale)
        assert plan is not None and plan.kind == "three_product", plan
    _, grads_f = run(e, c, t, scale=scale, workspace_budget=budget, loss_scale=scale, out_dtype=torch.float32)
    _, grads_t = run(e, c, t, scale=scale, workspace_budget=budget, out_dtype=torch.float32,
                     loss_scale=torch.tensor([scale], device=device))
    _, grads_d = run(e, c, t, scale=scale, out_dtype=torch.float32)
    xs = [x.double().requires_grad_(True) for x in (e, c)]
    (reference(xs[0], xs[1], t) * scale).backward()
    for got, tensor, default, x in zip(grads_f, grads_t, grads_d, xs):
        assert torch.equal(got, tensor)
        assert rel(default, x.grad) <= GRAD_TOL[torch.float16]
        assert rel(got, x.grad) <= rel(default, x.grad) * 1.05 + 1e-7, (rel(got, x.grad), rel(default, x.grad))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,k_chunk", [(torch.float16, 32768), (torch.bfloat16, None)])
def test_fast_sums_f16_de_over_a_long_vocabulary_in_f32(device, dtype, k_chunk):
    """float16's three-product pass forms dE over a vocabulary longer than 32,768 in K-chunks of
    that many columns summed in float32, then rounds once (``Plan.de_k_chunk``: one product over
    so long a K lost precision in cuBLAS's own sum, docs/journal.md v57–v58); bfloat16's in one
    product (there G's rounding hides it). Either as exact as the recomputing path."""
    e, c, t, _, _ = make(512, 64, 40000, dtype, device, seed=12)
    c = (c.float() * 0.05).to(dtype)
    scale = 65536.0
    budget = 1 << 30
    if device == "cuda":
        plan = flce.forward_backward_plan(e, c, workspace_budget=budget, loss_scale=scale)
        assert plan is not None and plan.kind == "three_product" and plan.de_k_chunk == k_chunk, plan
    _, grads_f = run(e, c, t, scale=scale, workspace_budget=budget, loss_scale=scale, out_dtype=torch.float32)
    _, grads_d = run(e, c, t, scale=scale, out_dtype=torch.float32)
    xs = [x.double().requires_grad_(True) for x in (e, c)]
    (reference(xs[0], xs[1], t) * scale).backward()
    for got, default, x in zip(grads_f, grads_d, xs):
        assert rel(default, x.grad) <= GRAD_TOL[dtype]
        assert rel(got, x.grad) <= rel(default, x.grad) * 1.05 + 1e-7, (rel(got, x.grad), rel(default, x.grad))
