"""workspace_budget="fast": the three-product pass (gradients computed in the forward, the
backward scales them by grad_output) against the default recomputing path and the float64
reference. On CPU tensors the op falls back to the forward + recomputing backward (same results);
on CUDA it runs flce's three-product pass."""

import contextlib

import pytest
import torch

import flce
from test_flce import CUDA, DEVICES, GRAD_TOL, make, reference, rel

cuda_only = pytest.mark.skipif(not CUDA, reason="no CUDA device")


def run(e, c, t, b=None, w=None, scale=1.0, **kw):
    xs = [x.detach().clone().requires_grad_(True) if x is not None else None for x in (e, c, b)]
    loss = flce.linear_cross_entropy(xs[0], xs[1], t, xs[2], weight=w, **kw)
    (loss * scale).sum().backward()
    return loss.detach(), [x.grad if x is not None else None for x in xs]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("opts", [dict(), dict(reduction="sum"), dict(label_smoothing=0.1, z_loss=1e-4, softcap=20.0)],
                         ids=["mean", "sum", "smooth-z-cap"])
@pytest.mark.parametrize("bias,weights", [(False, False), (True, True)])
@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_fast_matches_default_and_reference(device, dtype, opts, bias, weights, scale):
    e, c, t, b, w = make(300, 64, 1031, dtype, device, seed=4, bias=bias, weights=weights)
    loss_f, grads_f = run(e, c, t, b, w, scale, workspace_budget="fast", **opts)
    loss_d, grads_d = run(e, c, t, b, w, scale, **opts)
    want = reference(e, c, t, b, w, **opts)
    # the loss comes back in the input dtype
    assert abs(loss_f.double().item() - want.item()) <= (1e-4 if dtype == torch.float32 else 8e-3) * abs(want.item())
    assert torch.equal(loss_f, loss_d) or device == "cuda"  # CPU: the same computation
    xs = [x.double().requires_grad_(True) if x is not None else None for x in (e, c, b)]
    (reference(xs[0], xs[1], t, xs[2], w, **opts) * scale).backward()
    for got, default, x in zip(grads_f, grads_d, xs):
        if x is None:
            continue
        assert rel(got, x.grad) <= GRAD_TOL[dtype], (rel(got, x.grad), rel(default, x.grad))
        # exact gradients: as close to float64 as the recomputing path, within 5%
        assert rel(got, x.grad) <= rel(default, x.grad) * 1.05 + 1e-7


@pytest.mark.parametrize("device", DEVICES)
def test_fast_rounds_once_for_the_expected_grad_output(device):
    # Hugging Face's sum / num_items_in_batch (flce.patch): the backward brings grad_output 1/3000,
    # not a power of two. Expected, the forward forms the gradients for it and rounds them once, as
    # the recomputing path does (on the CPU, which falls back to it, bitwise); without it they are
    # rounded for 1, then scaled and rounded again
    e, c, t, _, _ = make(300, 64, 1031, torch.bfloat16, device, seed=12)
    s = torch.tensor([1 / 3000], dtype=torch.float32, device=device)

    def grads(**kw):
        xs = [x.detach().clone().requires_grad_(True) for x in (e, c)]
        loss = flce.linear_cross_entropy(xs[0], xs[1], t, reduction="sum", out_dtype=torch.float32, **kw)
        (loss * s[0]).backward()
        return [x.grad for x in xs]

    hinted, default, unhinted = grads(workspace_budget="fast", expected_grad_output=s), grads(), \
        grads(workspace_budget="fast")
    xs = [x.double().requires_grad_(True) for x in (e, c)]
    (reference(xs[0], xs[1], t, reduction="sum") * s[0].double()).backward()
    for got, want, twice, x in zip(hinted, default, unhinted, xs):
        assert rel(got, x.grad) <= rel(want, x.grad) * 1.05 + 1e-7, (rel(got, x.grad), rel(want, x.grad))
        assert rel(twice, x.grad) > rel(want, x.grad) * 1.1  # (what the hint is for)
        if device == "cpu":
            assert torch.equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_fast_only_where_gradients_are_wanted(device, monkeypatch):
    e, c, t, _, _ = make(64, 16, 200, torch.float32, device)
    with torch.no_grad():
        # no backward to come: no free-memory query, no plan (a host round trip per eval call)
        with monkeypatch.context() as m:
            m.setattr(flce.ops, "budget_bytes", lambda *a: pytest.fail("resolved a budget without a backward"))
            fast = flce.linear_cross_entropy(e, c, t, workspace_budget="fast")
        assert torch.allclose(fast, flce.linear_cross_entropy(e, c, t))
    # reduction none takes the recomputing path (per-token grad_output)
    loss, (de, dc, _) = run(e, c, t, reduction="none", workspace_budget="fast")
    loss_d, (de_d, dc_d, _) = run(e, c, t, reduction="none")
    assert torch.equal(loss, loss_d) and torch.equal(de, de_d) and torch.equal(dc, dc_d)
    # a frozen classifier: only dE
    ec = e.clone().requires_grad_(True)
    flce.linear_cross_entropy(ec, c, t, workspace_budget="fast").backward()
    assert ec.grad is not None and rel(ec.grad, run(e, c, t)[1][0]) < 1e-5
    with pytest.raises(ValueError, match="workspace_budget"):
        flce.linear_cross_entropy(e, c, t, workspace_budget="fastest")


def test_fast_under_torch_compile():
    e, c, t, _, _ = make(64, 32, 100, torch.float32, "cuda" if CUDA else "cpu")

    @torch.compile(fullgraph=True)
    def step(e, c):
        return flce.linear_cross_entropy(e, c, t, workspace_budget="fast", check_targets=False) * 2.0

    e1, c1 = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
    step(e1, c1).backward()
    _, (de, dc, _) = run(e, c, t, scale=2.0)
    assert rel(e1.grad, de) < 1e-5 and rel(c1.grad, dc) < 1e-5


@cuda_only
def test_fast_plan_is_the_three_product_pass():
    e, c, t, _, _ = make(512, 64, 5000, torch.bfloat16, "cuda")
    p = flce.Problem(512, 64, 5000, "bf16")
    plan = p.forward_backward_plan(0, True, True, False, 1 << 30)
    assert plan.kind == "three_product" and plan.chunks == (512, 5000) and plan.workspace_bytes < 1 << 30
    assert p.forward_backward_plan(0, True, True, False, 1 << 10) is None


@pytest.mark.parametrize("device", DEVICES)
def test_three_product_plan_says_which_path_a_call_runs(device):
    e, c, _, _, _ = make(512, 64, 5000, torch.bfloat16, device)
    fast = flce.forward_backward_plan(e, c, workspace_budget="fast")
    if device == "cpu":
        assert fast is None  # the CPU runs the recomputing path whatever the budget
        return
    assert fast.kind == "three_product" and fast.chunks == (512, 5000) and fast.workspace_bytes > 0
    assert flce.forward_backward_plan(e, c, workspace_budget=1 << 30).chunks == (512, 5000)
    # the default budget, reduction none, no gradients, a budget without a chunk that pays: none
    assert flce.forward_backward_plan(e, c) is None
    assert flce.forward_backward_plan(e, c, workspace_budget="fast", reduction="none") is None
    assert flce.forward_backward_plan(e, c, workspace_budget="fast", wants=(False, False, False)) is None
    assert flce.forward_backward_plan(e, c, workspace_budget=2 << 20) is None
    # kernel_plans takes the budget as the loss does: "fast" leaves the recomputing plans the default's
    assert flce.kernel_plans(e, c, workspace_budget="fast") == flce.kernel_plans(e, c)
    with pytest.raises(ValueError, match="workspace_budget"):
        flce.forward_backward_plan(e, c, workspace_budget="fastest")


@cuda_only
def test_a_byte_budget_takes_the_three_product_pass_where_it_pays():
    e, c, t, _, _ = make(512, 64, 5000, torch.bfloat16, "cuda", seed=5)
    loss_fast, grads_fast = run(e, c, t, workspace_budget="fast")
    # 1 GB holds the whole batch as one chunk: the same plan as "fast", the same bits
    loss_b, grads_b = run(e, c, t, workspace_budget=1 << 30)
    assert torch.equal(loss_b, loss_fast) and all(torch.equal(a, b) for a, b in zip(grads_b[:2], grads_fast[:2]))
    # 2 MB does not hold the f32 dC accumulator and a chunk: the recomputing pass within 2 MB
    p = flce.Problem(512, 64, 5000, "bf16")
    assert p.forward_backward_plan(0, True, True, False, 2 << 20) is None
    loss_s, grads_s = run(e, c, t, workspace_budget=2 << 20)
    xs = [x.double().requires_grad_(True) for x in (e, c)]
    want = reference(xs[0], xs[1], t)
    want.backward()
    assert abs(loss_s.double().item() - want.item()) <= 8e-3 * abs(want.item())
    assert rel(grads_s[0], xs[0].grad) <= GRAD_TOL[torch.bfloat16]
    assert rel(grads_s[1], xs[1].grad) <= GRAD_TOL[torch.bfloat16]


@pytest.mark.parametrize("device", DEVICES)
def test_peak_budget_is_the_default_where_there_is_no_headroom(device):
    e, c, t, _, _ = make(300, 64, 1031, torch.bfloat16, device, seed=6)
    loss_d, grads_d = run(e, c, t)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    # no headroom under the peak (just reset; on the CPU: no statistics): the default plans, bitwise
    loss_p, grads_p = run(e, c, t, workspace_budget="peak")
    assert torch.equal(loss_p, loss_d) and all(torch.equal(a, b) for a, b in zip(grads_p[:2], grads_d[:2]))
    with pytest.raises(ValueError, match="peak"):
        flce.linear_cross_entropy(e, c, t, workspace_budget="peaky")


def test_peak_budget_is_the_headroom_less_the_gradients_and_64_mb(monkeypatch):
    """The rule itself, on the memory statistics a CUDA device would report (monkeypatched, so
    that it runs without one): headroom under the peak, less dE and dC, less 64 MB, in 64 MB
    steps; 0 under 256 MB; at most "fast"'s half of the free memory."""
    from flce._common import peak_budget

    mb = 1 << 20
    e = torch.empty(16384, 2048, dtype=torch.bfloat16)
    c = torch.empty(128256, 2048, dtype=torch.bfloat16)
    grads = (e.numel() + c.numel()) * 2  # 565 MB
    stats = {"peak": 0, "now": 0, "free": 80 << 30}
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: stats["peak"])
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: stats["now"])
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (stats["free"], 141 << 30))
    # the 16k training step of benchmarks/train_step.py (journal v42): 2,752 MB of headroom
    stats.update(peak=10_000 * mb + 2752 * mb, now=10_000 * mb)
    budget = peak_budget(e, c)
    assert budget == (2752 * mb - grads - 64 * mb) // (64 * mb) * (64 * mb) == 2112 * mb
    # exactly the margin short of the next step: one step less
    stats.update(peak=stats["now"] + grads + 64 * mb + 2112 * mb - 1)
    assert peak_budget(e, c) == 2048 * mb
    # under 256 MB: the default plans
    stats.update(peak=stats["now"] + grads + 64 * mb + 255 * mb)
    assert peak_budget(e, c) == 0
    stats.update(peak=stats["now"] + grads)
    assert peak_budget(e, c) == 0
    # never past "fast"'s half of the free memory (in 256 MB steps)
    stats.update(peak=stats["now"] + (100 << 30), free=3 << 30)
    assert peak_budget(e, c) == 1536 * mb


@cuda_only
def test_peak_budget_uses_the_headroom_and_keeps_the_peak():
    from flce._common import peak_budget

    e, c, t, _, _ = make(512, 64, 5000, torch.bfloat16, "cuda", seed=5)
    loss_fast, grads_fast = run(e, c, t, workspace_budget="fast")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    # a step that peaked 1.5 GB above what is allocated at the loss: the loss may use that
    spike = torch.empty(3 << 29, dtype=torch.uint8, device="cuda")
    del spike
    assert peak_budget(e, c) >= 1 << 30
    peak_before = torch.cuda.max_memory_allocated()
    loss_p, grads_p = run(e, c, t, workspace_budget="peak")
    torch.cuda.synchronize()
    # the three-product pass as "fast" took it (the whole batch one chunk: the same bits) ...
    assert torch.equal(loss_p, loss_fast) and all(torch.equal(a, b) for a, b in zip(grads_p[:2], grads_fast[:2]))
    # ... and the process's peak did not move
    assert torch.cuda.max_memory_allocated() <= peak_before


@cuda_only
def test_peak_budget_under_torch_compile_and_cuda_graph_capture():
    """"peak" where the call cannot read the process's memory (torch.compile: the default's
    plans) and inside a CUDA-graph capture (the headroom read while capturing, the pass captured
    and replayed), with headroom under the peak: gradients within the float64 reference's
    tolerance either way. (The evidence wanted before "peak" becomes flce.patch's default.)"""
    e, c, t, _, _ = make(512, 64, 5000, torch.bfloat16, "cuda", seed=7)
    xs = [x.double().requires_grad_(True) for x in (e, c)]
    reference(xs[0], xs[1], t).backward()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    spike = torch.empty(3 << 29, dtype=torch.uint8, device="cuda")
    del spike

    @torch.compile(fullgraph=True)
    def compiled(e, c):
        return flce.linear_cross_entropy(e, c, t, workspace_budget="peak", check_targets=False)

    e1, c1 = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
    compiled(e1, c1).backward()
    _, (de, dc, _) = run(e, c, t)
    assert rel(e1.grad, de) < 1e-5 and rel(c1.grad, dc) < 1e-5

    e2, c2 = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # warm-up off the capture: kernels loaded, plans cached
            e2.grad = c2.grad = None
            flce.linear_cross_entropy(e2, c2, t, workspace_budget="peak", check_targets=False).backward()
    torch.cuda.current_stream().wait_stream(side)
    e2.grad = c2.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        flce.linear_cross_entropy(e2, c2, t, workspace_budget="peak", check_targets=False).backward()
    g.replay()
    torch.cuda.synchronize()
    tol = GRAD_TOL[torch.bfloat16]
    assert rel(e2.grad, xs[0].grad) <= tol and rel(c2.grad, xs[1].grad) <= tol, (rel(e2.grad, xs[0].grad),
                                                                                  rel(c2.grad, xs[1].grad))


@contextlib.contextmanager
def spied_backward():
    """The three-product op's autograd backward, spied on while the block runs: yields a list
    that gets (the gradients it was handed, the data pointers of those it returned) for each
    call. Pointers, not the tensors: a reference held here would keep autograd from stealing the
    returned gradients into .grad (it copies a tensor someone else still holds). Both paths: the
    op's registered autograd and the eager path's autograd.Function (flce/_eager.py)."""
    import flce._eager as eager
    import flce.three_product as three_product
    calls, original, original_eager = [], three_product._autograd_backward, three_product._ForwardBackwardEager

    def spy(ctx, *grads):
        out = original(ctx, *grads)
        calls.append((grads, tuple(None if x is None else x.data_ptr() for x in out)))
        return out

    three_product._forward_backward.register_autograd(spy, setup_context=three_product._setup_context)
    three_product._ForwardBackwardEager = eager.autograd_function("_Spied", three_product._forward_backward_impl, three_product._setup_context, spy)
    try:
        yield calls
    finally:
        three_product._forward_backward.register_autograd(original, setup_context=three_product._setup_context)
        three_product._ForwardBackwardEager = original_eager


@pytest.mark.parametrize("device", DEVICES)
def test_fast_backward_gets_no_zero_gradients_for_its_gradient_outputs(device):
    """dE and dC are outputs of the three-product op without a gradient of their own: autograd
    must hand its backward None for them, not zero tensors of their size (it materialises zeros
    unless told not to: a second copy of the gradients at the backward's peak, measured on the
    H200 at N 1k, Llama 3: 2,020 MB against 1,010)."""
    e, c, t, _, _ = make(64, 32, 500, torch.float32, device, seed=12)
    eg, cg = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
    with spied_backward() as calls:
        flce.linear_cross_entropy(eg, cg, t, workspace_budget="fast").backward()
    assert len(calls) == 1, "the three-product op's backward did not run"
    seen = calls[0][0]
    g_per_token, g_lse, g_scalars, g_status, g_de, g_dc, g_db = seen
    assert g_scalars is not None
    assert all(g is None for g in (g_de, g_dc, g_db, g_lse, g_status)), [type(g) for g in seen]
    assert eg.grad is not None and cg.grad is not None


@cuda_only
@pytest.mark.parametrize("shape", [(1024, 256, 8000), (1024, 4096, 128256)], ids=["small", "llama3-n1k"])
def test_fast_gradients_become_grad_without_a_copy(shape):
    """The three-product pass's dE and dC go to .grad as they are (autograd steals them), so a
    step holds one copy of the gradients: the suite once measured flce_fast's peak at
    N 1024, Llama 3 (D 4096, V 128256) as twice the gradients (2,020 MB) where the plan's
    workspace is 265 MB — as if .grad were a clone. Checked by pointer and by peak memory, at a
    small shape and at that one (4.3 GB of inputs, gradients and workspace)."""
    n, d, v = shape
    if n * d * v > 1 << 30 and torch.cuda.mem_get_info()[0] < 8 << 30:
        pytest.skip("needs 8 GB of free device memory")
    e, c, t, _, _ = make(n, d, v, torch.bfloat16, "cuda", seed=11)
    eg, cg = e.detach().clone().requires_grad_(True), c.detach().clone().requires_grad_(True)
    plan = flce.forward_backward_plan(eg, cg, workspace_budget="fast")
    assert plan is not None, "no three-product plan at this shape: the test checks nothing"
    with spied_backward() as calls:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        flce.linear_cross_entropy(eg, cg, t, workspace_budget="fast").backward()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    assert calls, "the three-product op did not run"
    returned = calls[0][1]
    assert (eg.grad.data_ptr(), cg.grad.data_ptr()) == returned[:2], \
        "a copy went to .grad"
    grads = (eg.numel() + cg.numel()) * 2
    assert peak <= grads + plan.workspace_bytes + (4 << 20), (peak, grads, plan.workspace_bytes)


@pytest.mark.parametrize("device", DEVICES)
def test_fast_holds_no_lse_it_does_not_return(device):
    """Without return_lse the pass returns no lse (a plan that keeps lse in its own state,
    Plan.keeps_lse, then allocates none: 4·N bytes fewer at its peak); every other output is
    bitwise the same as with it, and the lse it returns when asked equals the default path's."""
    from flce._common import LossOptions

    e, c, t, _, _ = make(1024, 256, 8000, torch.bfloat16, device, seed=12)
    # (every row computed both ways: want_lse computes every row, whose lse it returns)
    o = LossOptions(workspace_budget=1 << 30, skip_ignored=False)
    if device == "cuda":
        plan = flce.forward_backward_plan(e, c, workspace_budget=1 << 30)
        assert plan is not None and plan.keeps_lse, plan
    outs = [torch.ops.flce.forward_backward(e, c, t, None, None, True, True, False, want_lse, True, None, *o.astuple())
            for want_lse in (False, True)]
    without, with_lse = outs
    assert without[1].numel() == 0 and with_lse[1].shape == (1024,)
    for i in (0, 2, 3, 4, 5, 6):
        assert torch.equal(without[i], with_lse[i]), i
    # the lse it returns, and through linear_cross_entropy, as the default path's
    _, lse_default = flce.linear_cross_entropy(e, c, t, return_lse=True)
    torch.testing.assert_close(with_lse[1], lse_default, rtol=1e-5, atol=1e-5)
    eg = e.detach().clone().requires_grad_(True)
    loss, lse = flce.linear_cross_entropy(eg, c, t, workspace_budget=1 << 30, return_lse=True)
    loss.backward()
    torch.testing.assert_close(lse, lse_default, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_fast_holds_no_status_word_it_does_not_read(device):
    """A caller that has checked the targets ahead of the call (the binding's eager loss, on CUDA)
    asks for no status word (want_status False): a plan that keeps the word in its own state,
    Plan.keeps_status, then allocates none, and every other output is bitwise as with it; an
    out-of-range target still makes the loss and its gradient rows NaN, and the eager loss still
    raises for it. Where the op's own backward reads the word (check_targets) it is there anyway."""
    import dataclasses

    from flce._common import LossOptions

    e, c, t, _, _ = make(1024, 256, 8000, torch.bfloat16, device, seed=13)
    o = LossOptions(workspace_budget=1 << 30)
    if device == "cuda":
        plan = flce.forward_backward_plan(e, c, workspace_budget=1 << 30)
        assert plan is not None and plan.keeps_status, plan

    def op(targets, want_status, options):
        return torch.ops.flce.forward_backward(e, c, targets, None, None, True, True, False, False, want_status, None,
                                               *options.astuple())

    without, with_status = op(t, False, o), op(t, True, o)
    assert without[3].numel() == 0 and with_status[3].shape == (1,) and int(with_status[3]) == 2**31 - 1
    for i in (0, 2, 4, 5, 6):
        assert torch.equal(without[i], with_status[i]), i
    assert op(t, False, dataclasses.replace(o, check_targets=True))[3].shape == (1,)
    bad = t.clone()
    bad[77] = 8000
    if device == "cuda":  # (the CPU's op raises for it itself)
        out = op(bad, False, o)
        assert out[3].numel() == 0 and torch.isnan(out[2][0]) and torch.isnan(out[4][77].float()).all()
    with pytest.raises(ValueError, match="77"):
        flce.linear_cross_entropy(e.detach().clone().requires_grad_(True), c, bad, workspace_budget=1 << 30)
    # the eager loss (its early check, then the pass without a word) against torch.compile's graph
    compiled = torch.compile(lambda e: flce.linear_cross_entropy(e, c, t, workspace_budget=1 << 30), fullgraph=True)
    eg = e.detach().clone().requires_grad_(True)
    compiled(eg).backward()
    ed = e.detach().clone().requires_grad_(True)
    flce.linear_cross_entropy(ed, c, t, workspace_budget=1 << 30).backward()
    assert torch.equal(eg.grad, ed.grad)


def _hopper():
    return CUDA and torch.cuda.get_device_capability() == (9, 0)


@cuda_only
@pytest.mark.parametrize("opts", [dict(), dict(label_smoothing=0.1, z_loss=1e-4), dict(softcap=20.0, reduction="sum")],
                         ids=["mean", "smooth-z", "softcap-sum"])
@pytest.mark.parametrize("bias,weights", [(False, False), (True, True)])
def test_a_budget_below_a_token_chunk_takes_the_vocabulary_slice_pass(opts, bias, weights):
    # N 1024, V 32768: the three-product pass holds every token at once (1024 is its smallest
    # chunk), 64 MB of f16 logits; 40 MB holds the slice pass's head of ~18k rows and its rest
    e, c, t, b, w = make(1024, 128, 32768, torch.bfloat16, "cuda", seed=6, bias=bias, weights=weights)
    budget = 40 << 20
    plan = flce.forward_backward_plan(e, c, workspace_budget=budget, wants=(True, True, bias), **opts)
    if not _hopper():
        assert plan is None  # compact logits (the slice's head) are the sm90 forward's
        return
    assert plan.kind == "vocab_slice" and plan.family == "sm90" and plan.workspace_bytes <= budget
    n, head = plan.chunks
    assert n == 1024 and head % 256 == 0 and 4096 <= head < 32768, plan.chunks
    loss_s, grads_s = run(e, c, t, b, w, 0.5, workspace_budget=budget, **opts)
    again, grads_again = run(e, c, t, b, w, 0.5, workspace_budget=budget, **opts)
    assert torch.equal(loss_s, again) and all(
        g is None or torch.equal(g, h) for g, h in zip(grads_s, grads_again)), "not reproducible"
    loss_d, grads_d = run(e, c, t, b, w, 0.5, **opts)
    want = reference(e, c, t, b, w, **opts)
    assert abs(loss_s.double().item() - want.item()) <= 8e-3 * abs(want.item())
    xs = [x.double().requires_grad_(True) if x is not None else None for x in (e, c, b)]
    (reference(xs[0], xs[1], t, xs[2], w, **opts) * 0.5).backward()
    for got, default, x in zip(grads_s, grads_d, xs):
        if x is None:
            continue
        assert rel(got, x.grad) <= GRAD_TOL[torch.bfloat16], (rel(got, x.grad), rel(default, x.grad))
        # as close to float64 as the recomputing path, within 5% (the head's q: one f16 rounding)
        assert rel(got, x.grad) <= rel(default, x.grad) * 1.05 + 1e-7, (rel(got, x.grad), rel(default, x.grad))
