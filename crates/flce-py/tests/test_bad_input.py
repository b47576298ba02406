"""Bad input, on every device: out-of-range targets and bad class weights raise ValueError in
eager mode (from the call, or on CUDA from the backward of the recomputing plans: ops.py), and
where no host reads the status word (check_targets=False, torch.compile, CUDA-graph replay) the
loss and gradient rows are NaN (kernels/shared/prep.cu); the status-only op (_common.target_status)
gives the call's own status word."""

import pytest
import torch

import flce
from test_flce import CUDA, DEVICES, make

cuda_only = pytest.mark.skipif(not CUDA, reason="no CUDA device")


@pytest.mark.parametrize("device", DEVICES)
def test_bad_input_raises_before_any_kernel(device):
    e, c, t, _, _ = make(10, 8, 20, torch.float32, device)
    with pytest.raises(ValueError, match="linear_weight"):
        flce.linear_cross_entropy(e, c[:, :7], t)
    with pytest.raises(ValueError, match="target shape"):
        flce.linear_cross_entropy(e, c, t[:9])
    with pytest.raises(TypeError, match="dtype"):
        flce.linear_cross_entropy(e, c.double(), t)
    with pytest.raises(TypeError, match="dtype"):
        flce.linear_cross_entropy(e.half().to(torch.int32), c, t)
    with pytest.raises(TypeError, match="integer"):
        flce.linear_cross_entropy(e, c, t.float())
    with pytest.raises(ValueError, match="label_smoothing"):
        flce.linear_cross_entropy(e, c, t, label_smoothing=1.5)
    with pytest.raises(ValueError, match="reduction"):
        flce.linear_cross_entropy(e, c, t, reduction="avg")
    bad = t.clone()
    bad[4] = 20
    with pytest.raises(ValueError, match=r"target\[4\] = 20"):
        flce.linear_cross_entropy(e, c, bad)
    # the context is still usable
    assert torch.isfinite(flce.linear_cross_entropy(e, c, t))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("budget", [None, "fast"])
def test_bad_target_with_gradients_to_come(device, budget):
    """On CUDA, a call whose gradients autograd will want leaves the target check to the
    backward, which reads the status word after queueing its own kernels (a read in the call
    would drain the stream before the backward could be queued) — except the three-product pass,
    whose backward has no kernels: the call reads the word of a status-only op queued ahead of
    the pass and raises itself. Without gradients (on CUDA through the same status-only op), and
    on the CPU, the call raises."""
    e, c, t, _, _ = make(10, 8, 20, torch.float32, device)
    bad = t.clone()
    bad[4] = 20
    e.requires_grad_()
    three_products = device == "cuda" and flce.forward_backward_plan(e, c, workspace_budget=budget) is not None
    assert three_products == (device == "cuda" and budget == "fast")  # both paths are exercised
    if device == "cpu" or three_products:
        with pytest.raises(ValueError, match=r"target\[4\] = 20 is outside \[0, 20\)") as raised:
            flce.linear_cross_entropy(e, c, bad, workspace_budget=budget)
        assert "backward" not in str(raised.value)
    else:
        loss = flce.linear_cross_entropy(e, c, bad, workspace_budget=budget)
        with pytest.raises(ValueError, match=r"target\[4\] = 20 .*backward"):
            loss.backward()
    with torch.no_grad(), pytest.raises(ValueError, match=r"target\[4\] = 20") as raised:
        flce.linear_cross_entropy(e, c, bad, workspace_budget=budget)
    assert "backward" not in str(raised.value)
    e.grad = None
    flce.linear_cross_entropy(e, c, t, workspace_budget=budget).backward()
    assert torch.isfinite(e.grad).all()
    if device == "cuda":  # check_targets=False: no check anywhere (the CPU passes always check)
        flce.linear_cross_entropy(e, c, bad, workspace_budget=budget, check_targets=False).backward()


@cuda_only
def test_out_of_range_target_is_nan_where_no_host_checks():
    """Under torch.compile(fullgraph=True), CUDA-graph replay and check_targets=False no host reads
    the status word: the out-of-range target's loss and gradient row are NaN instead."""
    n, v = 64, 100
    e, c, t, _, _ = make(n, 32, v, torch.float32, "cuda", seed=4)
    bad = t.clone()
    bad[3] = v
    others = torch.arange(n, device="cuda") != 3

    @torch.compile(fullgraph=True)
    def compiled(e, c, t):
        return flce.linear_cross_entropy(e, c, t)

    assert torch.isfinite(compiled(e, c, t)) and torch.isnan(compiled(e, c, bad))
    per = flce.linear_cross_entropy(e, c, bad, reduction="none", check_targets=False)
    assert torch.isnan(per[3]) and torch.isfinite(per[others]).all()
    for budget in (None, "fast"):
        e1 = e.clone().requires_grad_(True)
        flce.linear_cross_entropy(e1, c, bad, workspace_budget=budget, check_targets=False).backward()
        assert torch.isnan(e1.grad[3]).all() and torch.isfinite(e1.grad[others]).all(), budget
    # a graph captured with good targets, replayed with a bad one in its target buffer
    static_t = t.clone()
    for _ in range(2):
        flce.linear_cross_entropy(e, c, static_t, check_targets=False)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = flce.linear_cross_entropy(e, c, static_t, check_targets=False)
    g.replay()
    torch.cuda.synchronize()
    assert torch.isfinite(out)
    static_t.copy_(bad)
    g.replay()
    torch.cuda.synchronize()
    assert torch.isnan(out)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf")])
def test_bad_class_weights_raise(device, bad):
    """A class weight that is negative or not finite is an error on every device: from the call
    without gradients, and on CUDA from the backward of a call with them (the deferred check)."""
    e, c, t, _, w = make(64, 32, 100, torch.float32, device, seed=5, weights=True)
    w[7] = bad
    with torch.no_grad(), pytest.raises(ValueError, match="weight"):
        flce.linear_cross_entropy(e, c, t, weight=w)
    e1 = e.clone().requires_grad_(True)
    with pytest.raises(ValueError, match="weight"):
        flce.linear_cross_entropy(e1, c, t, weight=w).backward()
    # the three-product pass (its backward has no kernels): the call itself raises on CUDA
    with pytest.raises(ValueError, match=r"weight.*\[7\]"):
        flce.linear_cross_entropy(e1, c, t, weight=w, workspace_budget="fast").backward()


@cuda_only
@pytest.mark.parametrize("shift", [False, True])
def test_status_only_op_gives_the_pass_status_word(shift):
    """target_status (the two kernels the three-product call's check reads) writes the same
    status word as the pass itself, for good input, a bad target (the first one named, also where
    shift moves targets), a bad class weight (ahead of any target) and an ignored token."""
    from flce._common import LossOptions, _STATUS_OK, target_status

    e, c, t, _, w = make(300, 64, 1000, torch.bfloat16, "cuda", seed=8, weights=True)
    e.requires_grad_()
    o = LossOptions(shift=300 if shift else 0, workspace_budget=1 << 30)
    bad_t, bad_w = t.clone(), w.clone()
    bad_t[[17, 250]] = torch.tensor([1000, -5], device="cuda")
    bad_w[33] = float("nan")
    for targets, weights, expected in [(t, w, _STATUS_OK), (bad_t, w, 17), (bad_t, bad_w, -2**31 + 33),
                                       (torch.full_like(t, -100), None, _STATUS_OK)]:
        early = target_status(e.detach(), c, targets, None, weights, o)
        out = torch.ops.flce.forward_backward(e.detach(), c, targets, None, weights, True, True, False, False, True, None,
                                              *o.astuple())
        torch.cuda.synchronize()
        assert int(early) == int(out[3]) == expected, (int(early), int(out[3]), expected)


@cuda_only
def test_bad_class_weights_are_nan_where_no_host_checks():
    """Where no host reads the status word (check_targets=False, torch.compile), a bad class weight
    makes every token's loss and every gradient row NaN — as an out-of-range target does for its
    own token."""
    e, c, t, _, w = make(64, 32, 100, torch.float32, "cuda", seed=6, weights=True)
    bad = w.clone()
    bad[99] = -1.0  # a class no token needs to target: still caught
    for reduction in ("mean", "sum", "none"):
        out = flce.linear_cross_entropy(e, c, t, weight=bad, reduction=reduction, check_targets=False)
        active = (t != -100) if reduction == "none" else slice(None)
        assert torch.isnan(out[active]).all() if reduction == "none" else torch.isnan(out), reduction
        assert torch.isfinite(flce.linear_cross_entropy(e, c, t, weight=w, reduction=reduction)).all()
    e1 = e.clone().requires_grad_(True)
    flce.linear_cross_entropy(e1, c, t, weight=bad, check_targets=False).backward()
    assert torch.isnan(e1.grad[t != -100]).all()

    @torch.compile(fullgraph=True)
    def compiled(e, c, t, w):
        return flce.linear_cross_entropy(e, c, t, weight=w)

    assert torch.isfinite(compiled(e, c, t, w)) and torch.isnan(compiled(e, c, t, bad))
