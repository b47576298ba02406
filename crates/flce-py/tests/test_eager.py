"""The eager path (flce/_eager.py): in eager mode on plain tensors the loss's autograd ops run as a
torch.autograd.Function around their implementation, without torch.library's dispatch. Its
results must be the op path's bitwise — the default and the "fast" calls, every reduction and
option set, with lse and accuracy returned —, it must be taken exactly where it says, and
backward-twice must behave as through the op."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import flce
from flce import _eager, ops, three_product
from test_flce import DEVICES, make

OPTION_SETS = [dict(), dict(reduction="sum"), dict(reduction="none"),
               dict(label_smoothing=0.1, z_loss=1e-4, softcap=20.0), dict(reduction="none", z_loss=1e-3)]


@pytest.fixture
def op_path(monkeypatch):
    """A context in which every call takes torch.library's ops (FLCE_EAGER_OPS=0's switch)."""
    def set_enabled(on: bool):
        monkeypatch.setattr(_eager, "_ENABLED", on)
    return set_enabled


def run(e, c, t, b, w, **kw):
    xs = [x.detach().clone().requires_grad_(True) if x is not None else None for x in (e, c, b)]
    out = flce.linear_cross_entropy(xs[0], xs[1], t, xs[2], weight=w, return_lse=True, return_accuracy=True, **kw)
    loss = out[0]
    (loss.float() * torch.linspace(0.5, 1.5, loss.numel(), device=loss.device).reshape(loss.shape)).sum().backward()
    return [o.detach() for o in out] + [x.grad for x in xs if x is not None]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("opts", OPTION_SETS, ids=["mean", "sum", "none", "smooth-z-cap", "none-z"])
@pytest.mark.parametrize("budget", [None, "fast"])
def test_eager_path_is_the_op_path_bitwise(device, dtype, opts, budget, op_path):
    e, c, t, b, w = make(97, 40, 333, dtype, device, seed=21, bias=True, weights=True)
    assert _eager.takes_eager_path(e, c, t, b, w)
    got = run(e, c, t, b, w, workspace_budget=budget, **opts)
    op_path(False)
    assert not _eager.takes_eager_path(e, c, t, b, w)
    want = run(e, c, t, b, w, workspace_budget=budget, **opts)
    assert len(got) == len(want) == 6
    for g, x in zip(got, want):
        assert g.dtype == x.dtype and g.shape == x.shape
        assert torch.equal(g.nan_to_num(7.0), x.nan_to_num(7.0))


@pytest.mark.parametrize("device", DEVICES)
def test_eager_path_taken_only_for_plain_tensors_outside_modes(device):
    e, c, t, _, _ = make(8, 16, 50, torch.float32, device)
    assert _eager.takes_eager_path(e, torch.nn.Parameter(c), t, None, None)
    with FlopCounterMode(display=False):
        assert not _eager.takes_eager_path(e, c, t)
    with torch.overrides.TorchFunctionMode():
        assert not _eager.takes_eager_path(e, c, t)

    class Sub(torch.Tensor):
        pass

    assert not _eager.takes_eager_path(e.as_subclass(Sub), c, t)


@pytest.mark.parametrize("device", DEVICES)
def test_loss_under_a_dispatch_mode_takes_the_op(device, monkeypatch):
    """Under FlopCounterMode the ops are counted as ops (the op path), and the results are the
    eager path's."""
    e, c, t, _, _ = make(33, 24, 77, torch.float32, device, seed=2)
    calls = []
    for cls in (ops._ForwardEager, three_product._ForwardBackwardEager):
        monkeypatch.setattr(cls, "apply", lambda *a, _f=cls.apply: calls.append(1) or _f(*a))
    eager = run(e, c, t, None, None)
    assert calls, "plain tensors take the eager path"
    calls.clear()
    with FlopCounterMode(display=False):
        counted = run(e, c, t, None, None)
    assert not calls, "a dispatch mode takes the op path"
    for g, x in zip(eager, counted):
        assert torch.equal(g.nan_to_num(7.0), x.nan_to_num(7.0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("budget", [None, "fast"])
def test_backward_twice_as_through_the_op(device, budget, op_path):
    """retain_graph=True and a second backward: the same outcome on both paths (the default's
    backward recomputes, so twice gives twice the gradients; "fast"'s scales its saved gradients
    in place, which autograd refuses the second time)."""
    e, c, t, _, _ = make(40, 16, 90, torch.float32, device, seed=5)

    def twice():
        eg, cg = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
        loss = flce.linear_cross_entropy(eg, cg, t, workspace_budget=budget)
        loss.backward(retain_graph=True)
        first = eg.grad.clone()
        try:
            loss.backward()
        except RuntimeError as err:
            return first, type(err)
        return first, eg.grad.clone()

    got = twice()
    op_path(False)
    want = twice()
    assert torch.equal(got[0], want[0])
    if isinstance(want[1], type):
        assert got[1] is want[1]
    else:
        assert torch.equal(got[1], want[1])
