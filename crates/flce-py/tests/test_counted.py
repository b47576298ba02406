"""Ignored tokens skipped (flce/_counted.py), on every device: the passes run on the counted rows
only, and their results are those of the pass over every row (``skip_ignored=False``) within f32
reordering — errors against float64 no larger —, with ignored rows' dE and per-token loss 0, bad
targets named by their own index, bitwise repeatable, and the same under torch.compile."""

import pytest
import torch

import flce
from flce import _counted
from test_flce import CUDA, DEVICES, GRAD_TOL, make, reference, rel

cuda_only = pytest.mark.skipif(not CUDA, reason="no CUDA device")


def prompt_masked(t, seq, fraction, ignore_index=-100):
    """``t`` with the first ``fraction`` of every sequence of ``seq`` tokens ignored (a masked
    prompt: the realistic layout, contiguous spans)."""
    t = t.clone().reshape(-1, seq)
    t[:, :int(round(fraction * seq))] = ignore_index
    return t.reshape(-1)


def spy_counts(monkeypatch):
    """The N_counted of each compact pass run while the test goes on."""
    counts = []
    real = _counted.counted_inputs

    def spy(e, target, rows, o):
        counts.append(rows.numel())
        return real(e, target, rows, o)

    monkeypatch.setattr(_counted, "counted_inputs", spy)
    return counts


def run(e, c, t, b=None, w=None, **kw):
    """(loss, dE, dC, db) of flce.linear_cross_entropy with these options (the loss summed with
    weights for reduction none, so that every row's gradient is exercised)."""
    e = e.detach().clone().requires_grad_(True)
    c = c.detach().clone().requires_grad_(True)
    b = b.detach().clone().requires_grad_(True) if b is not None else None
    loss = flce.linear_cross_entropy(e, c, t, b, weight=w, **kw)
    scale = torch.linspace(0.5, 1.5, loss.numel(), device=loss.device).reshape(loss.shape)
    (loss if loss.dim() == 0 else loss.float() * scale).sum().backward()
    return loss.detach(), e.grad, c.grad, (b.grad if b is not None else None)


def reference_grads(e, c, t, b=None, w=None, **kw):
    """(loss, dE, dC, db) in float64 through PyTorch (test_flce.reference), the same weighting."""
    xs = [x.detach().double().requires_grad_(True) if x is not None else None for x in (e, c, b)]
    loss = reference(xs[0], xs[1], t, xs[2], w, **kw)
    scale = torch.linspace(0.5, 1.5, loss.numel(), device=loss.device, dtype=torch.float64).reshape(loss.shape)
    (loss if loss.dim() == 0 else loss * scale).sum().backward()
    return loss.detach(), xs[0].grad, xs[1].grad, (xs[2].grad if b is not None else None)


CASES = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(weights=True),
    dict(label_smoothing=0.1, z_loss=1e-3),
    dict(softcap=20.0, bias=True),
    dict(shift=True),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("budget", [None, "fast"])
def test_skipping_gives_the_every_row_results(device, dtype, case, budget, monkeypatch):
    """Awkward shapes (N, D, V off every tile), a masked prompt of 55% plus scattered ignored
    tokens, planted outlier logits: skipping runs N_counted rows and gives every output within f32
    reordering of computing every row, each error against float64 no larger."""
    opts = dict(CASES[case])
    bias, weights, shift = opts.pop("bias", False), opts.pop("weights", False), opts.get("shift", False)
    batch, seq, d, v = 3, 173, 72, 1003
    e, c, t, b, w = make(batch * seq, d, v, dtype, device, seed=31 + case, ignore=0.1, bias=bias, weights=weights)
    t = prompt_masked(t, seq, 0.55)
    if shift:  # the 3-D layout: position k predicts target k+1 of its sequence
        e, t = e.reshape(batch, seq, d), t.reshape(batch, seq)
    counts = spy_counts(monkeypatch)
    skipped = run(e, c, t, b, w, workspace_budget=budget, **opts)
    effective = _counted.effective_target(t.reshape(-1), flce.LossOptions(shift=seq if shift else 0))
    n_counted = int((effective != -100).sum())
    assert counts and set(counts) == {n_counted}, (counts, n_counted)  # the compact pass ran, on those rows
    every = run(e, c, t, b, w, workspace_budget=budget, skip_ignored=False, **opts)
    ref = reference_grads(e, c, t.reshape(-1) if not shift else t, b, w, **opts)
    loss_tol = 1e-6 if dtype == torch.float32 else 5e-3
    for name, s, a, r in zip(("loss", "dE", "dC", "db"), skipped, every, ref):
        if r is None:
            continue
        tol = loss_tol if name == "loss" else GRAD_TOL[dtype]
        assert rel(s, a) <= tol, (name, rel(s, a))
        err_s, err_a = rel(s, r), rel(a, r)
        assert err_s <= 1.25 * err_a + 1e-6, (name, err_s, err_a)
    ignored = (effective != -100).logical_not().reshape(skipped[1].shape[:-1])
    assert torch.all(skipped[1][ignored] == 0), "dE is 0 on ignored rows"
    if opts.get("reduction") == "none":
        assert torch.all(skipped[0][ignored] == 0), "the per-token loss is 0 on ignored rows"


@pytest.mark.parametrize("device", DEVICES)
def test_skipping_is_bitwise_repeatable(device):
    e, c, t, _, _ = make(517, 64, 999, torch.bfloat16, device, seed=3, ignore=0.5)
    first, second = run(e, c, t), run(e, c, t)
    for a, b in zip(first[:3], second[:3]):
        assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_return_lse_and_skip_ignored_false_compute_every_row(device, monkeypatch):
    """lse covers ignored tokens too: a call that returns it computes every row, as does
    skip_ignored=False; both give PyTorch's lse on every row."""
    e, c, t, _, _ = make(200, 48, 700, torch.float32, device, seed=5, ignore=0.6)
    counts = spy_counts(monkeypatch)
    _, lse = flce.linear_cross_entropy(e, c, t, return_lse=True)
    flce.linear_cross_entropy(e, c, t, skip_ignored=False)
    assert counts == []
    torch.testing.assert_close(lse.double(), torch.logsumexp(e.double() @ c.double().T, dim=-1), rtol=1e-5, atol=1e-5)
    flce.linear_cross_entropy(e, c, t)
    assert counts == [int((t != -100).sum())]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nothing_counted_and_everything_counted(device, reduction, monkeypatch):
    """Every token ignored (mean NaN, as PyTorch's; sum 0; gradients 0) or none (one token, N = 1,
    included): every row is computed, no compact pass."""
    counts = spy_counts(monkeypatch)
    e, c, t, _, _ = make(33, 16, 50, torch.float32, device, seed=6, ignore=0.0)
    loss, de, dc, _ = run(e, c, torch.full_like(t, -100), reduction=reduction)
    if reduction == "mean":
        assert torch.isnan(loss)
    else:
        assert torch.all(loss == 0) and torch.all(de == 0) and torch.all(dc == 0)
    loss1, _, _, _ = run(e[:1], c, t[:1], reduction=reduction)
    torch.testing.assert_close(loss1.double().reshape(-1), reference(e[:1], c, t[:1], reduction=reduction).reshape(-1),
                               rtol=1e-5, atol=1e-5)
    assert counts == []


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shift", [False, True])
@pytest.mark.parametrize("grads", [False, True])
def test_bad_target_named_by_its_own_index(device, shift, grads):
    """An out-of-range target among many ignored ones is named by its position in ``target``
    (not its row among the counted ones), from the call or, on CUDA with gradients to come, from
    the backward."""
    e, c, t, _, _ = make(300, 32, 100, torch.float32, device, seed=7, ignore=0.7)
    bad = t.clone()
    bad[:250] = -100
    bad[261] = 100
    e = e.clone().requires_grad_(grads)
    with pytest.raises(ValueError, match=r"target\[261\] = 100 is outside"):
        with torch.set_grad_enabled(grads):
            loss = flce.linear_cross_entropy(e, c, bad, shift=shift)
        if grads:
            loss.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_compiled_calls_skip_too(device, monkeypatch):
    """Under torch.compile(fullgraph=True) the ops skip the same rows (the count a dynamic size of
    the forward's outputs): results as eager mode's, for batches of different counts, without a
    host read in the backward."""
    torch._dynamo.reset()
    counts = spy_counts(monkeypatch)

    @torch.compile(fullgraph=True)
    def step(e, c, t):
        return flce.linear_cross_entropy(e, c, t, shift=True)

    batch, seq = 2, 96
    e, c, t, _, _ = make(batch * seq, 32, 301, torch.float32, device, seed=8, ignore=0.0)
    e = e.reshape(batch, seq, 32)
    for fraction in (0.3, 0.7):
        tt = prompt_masked(t, seq, fraction).reshape(batch, seq)
        got = run(e, c, tt, shift=True)
        ec = e.detach().clone().requires_grad_(True)
        cc = c.detach().clone().requires_grad_(True)
        loss = step(ec, cc, tt)
        loss.backward()
        torch.testing.assert_close(loss, got[0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ec.grad, got[1], rtol=1e-4, atol=1e-7)
        torch.testing.assert_close(cc.grad, got[2], rtol=1e-4, atol=1e-7)
    counted = [(prompt_masked(t, seq, f).reshape(batch, seq)[:, 1:] != -100).sum().item() for f in (0.3, 0.7)]
    assert set(counts) == set(counted), (counts, counted)


@cuda_only
def test_plans_follow_the_counted_rows():
    """flce.kernel_plans / flce.forward_backward_plan with ``target``: the plans of N_counted rows,
    workspace bytes no larger than every row's."""
    e, c, t, _, _ = make(4096, 256, 8000, torch.bfloat16, "cuda", seed=9, ignore=0.0)
    t = prompt_masked(t, 1024, 0.5)
    full_f, full_b = flce.kernel_plans(e, c)
    f, b = flce.kernel_plans(e, c, target=t)
    assert full_f.chunks[0] == 4096 and f.chunks[0] == 2048, (f, full_f)  # a forward plan's N
    assert f.workspace_bytes <= full_f.workspace_bytes and b.workspace_bytes <= full_b.workspace_bytes
    fb = flce.forward_backward_plan(e, c, workspace_budget="fast", target=t)
    assert fb is not None and fb.chunks[0] <= 2048, fb
