"""pytest suite of the PyTorch binding. Runs on CPU anywhere (CPU tensors go to flce's CPU
implementation) and on CUDA where a GPU is present (the CUDA cases are skipped otherwise).

    pip install <the built wheel> && python -m pytest crates/flce-py/tests
"""

import math
import os
import warnings

import pytest
import torch
import torch.nn.functional as F

import flce

CUDA = torch.cuda.is_available() and flce.cuda_device_count() > 0
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="no CUDA device"))]
cuda_only = pytest.mark.skipif(not CUDA, reason="no CUDA device")


def reference(e, c, t, b=None, w=None, reduction="mean", ignore_index=-100, label_smoothing=0.0, z_loss=0.0,
              softcap=None, shift=False):
    """The loss in float64 through PyTorch: F.cross_entropy on materialised logits (+ z-loss)."""
    e, c = e.double(), c.double()
    logits = e.reshape(-1, e.shape[-1]) @ c.T
    if b is not None:
        logits = logits + b.double()
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    t = t.reshape(-1).clone()
    if shift:
        seq = e.shape[-2] if e.dim() >= 3 else t.shape[0]
        tt = t.reshape(-1, seq)
        t = torch.cat([tt[:, 1:], torch.full_like(tt[:, :1], ignore_index)], dim=1).reshape(-1)
    wd = w.double() if w is not None else None
    loss = F.cross_entropy(logits, t, weight=wd, reduction="none", ignore_index=ignore_index,
                           label_smoothing=label_smoothing)
    valid = t != ignore_index
    if z_loss:
        lse = torch.logsumexp(logits, dim=-1)
        loss = loss + torch.where(valid, z_loss * lse * lse, torch.zeros_like(lse))
    if reduction == "none":
        return loss.reshape(e.shape[:-1])
    if reduction == "sum":
        return loss.sum()
    denom = wd[t[valid]].sum() if wd is not None else valid.sum()
    return loss.sum() / denom


def make(n, d, v, dtype, device, seed=0, ignore=0.2, bias=False, weights=False):
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(n, d, generator=g)
    c = torch.randn(v, d, generator=g) / math.sqrt(d)
    c[torch.randint(0, v, (max(v // 50, 1),), generator=g)] *= 20.0  # planted outlier logits
    t = torch.randint(0, v, (n,), generator=g)
    t[torch.rand(n, generator=g) < ignore] = -100
    b = torch.randn(v, generator=g) if bias else None
    w = 0.25 + 1.5 * torch.rand(v, generator=g) if weights else None
    cast = lambda x: None if x is None else x.to(device=device, dtype=dtype)  # noqa: E731
    return cast(e), cast(c), t.to(device), cast(b), (w.to(device) if w is not None else None)


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def grads_of(fn, *tensors):
    xs = [x.detach().clone().requires_grad_(True) if x is not None else None for x in tensors]
    out = fn(*xs)
    (out if out.dim() == 0 else (out * torch.linspace(0.5, 1.5, out.numel(), device=out.device,
                                                      dtype=out.dtype).reshape(out.shape)).sum()).backward()
    return out.detach(), [x.grad if x is not None else None for x in xs]


GRAD_TOL = {torch.float32: 1e-4, torch.float16: 3e-3, torch.bfloat16: 1.5e-2}
OPTIONS = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(label_smoothing=0.1),
    dict(z_loss=1e-3),
    dict(softcap=30.0),
    dict(ignore_index=7),
    dict(label_smoothing=0.2, z_loss=1e-4, softcap=15.0),
    dict(label_smoothing=1.0),  # PyTorch's range includes 1: the uniform target alone
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
@pytest.mark.parametrize("bias,weights", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("shape", [(255, 507, 123), (1, 64, 1000), (65, 33, 300)])
def test_matches_pytorch(device, dtype, opts, bias, weights, shape):
    n, d, v = shape
    e, c, t, b, w = make(n, d, v, dtype, device, seed=n + d + v, bias=bias, weights=weights)
    t = torch.where(t == -100, torch.full_like(t, opts.get("ignore_index", -100)), t)
    mine, (de, dc, db) = grads_of(lambda e, c, b: flce.linear_cross_entropy(e, c, t, b, weight=w, **opts), e, c, b)
    want, (de_r, dc_r, db_r) = grads_of(lambda e, c, b: reference(e, c, t, b, w, **opts), e, c, b)
    assert mine.dtype == dtype
    if want.dim() == 0 and torch.isnan(want):
        assert torch.isnan(mine)
        return
    # the loss comes back in the input dtype, as F.cross_entropy's does: one rounding
    loss_tol = {torch.float32: 2e-5, torch.float16: 1e-3, torch.bfloat16: 4e-3}[dtype]
    assert rel(mine.float(), want) <= loss_tol, f"loss {rel(mine.float(), want):.2e}"
    tol = GRAD_TOL[dtype]
    assert rel(de, de_r) <= tol, f"dE {rel(de, de_r):.2e}"
    assert rel(dc, dc_r) <= tol, f"dC {rel(dc, dc_r):.2e}"
    if b is not None:
        assert rel(db, db_r) <= tol, f"db {rel(db, db_r):.2e}"


@pytest.mark.parametrize("device", DEVICES)
def test_shift_and_leading_batch_dims(device):
    e, c, t, _, _ = make(4 * 16, 32, 200, torch.float32, device, seed=3)
    e, t = e.reshape(4, 16, 32), t.reshape(4, 16)
    for reduction in ["mean", "none"]:
        mine, (de, dc) = grads_of(lambda e, c: flce.linear_cross_entropy(e, c, t, shift=True, reduction=reduction),
                                  e, c)
        want, (de_r, dc_r) = grads_of(lambda e, c: reference(e, c, t, shift=True, reduction=reduction), e, c)
        assert mine.shape == want.shape == ((4, 16) if reduction == "none" else ())
        assert rel(mine, want) < 2e-5 and rel(de, de_r) < 1e-4 and rel(dc, dc_r) < 1e-4


@pytest.mark.parametrize("device", DEVICES)
def test_extras_lse_and_accuracy(device):
    e, c, t, _, _ = make(50, 16, 90, torch.float32, device, seed=5, ignore=0.0)
    loss, lse, acc = flce.linear_cross_entropy(e, c, t, return_lse=True, return_accuracy=True)
    logits = e.double() @ c.double().T
    assert rel(lse, torch.logsumexp(logits, -1)) < 1e-6
    assert abs(acc.item() - (logits.argmax(-1) == t).double().mean().item()) < 1e-6


@pytest.mark.parametrize("device", DEVICES)
def test_module_and_all_ignored(device):
    e, c, t, _, _ = make(20, 16, 50, torch.float32, device)
    loss_fn = flce.LinearCrossEntropyLoss(label_smoothing=0.1)
    assert torch.allclose(loss_fn(e, c, t), flce.linear_cross_entropy(e, c, t, label_smoothing=0.1))
    ign = torch.full_like(t, -100)
    assert torch.isnan(flce.linear_cross_entropy(e, c, ign))  # PyTorch: mean over nothing is NaN
    assert flce.linear_cross_entropy(e, c, ign, reduction="sum").item() == 0.0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("wanted", ["input", "weight", "bias", "input+bias", "all"])
def test_only_the_wanted_gradients(device, dtype, wanted):
    """A frozen classifier or frozen hidden states: only the gradients autograd asks for are
    computed (the CUDA backward plans differ: with both dE and dC, dE's f32 accumulator may live
    in dC's tail, at this shape in bf16; with dE alone it lives in the workspace)."""
    n, d, v = 129, 200, 5003
    e, c, t, b, _ = make(n, d, v, dtype, device, seed=9, bias=True)
    names = ["input", "weight", "bias"]
    want = [wanted == "all" or x in wanted.split("+") for x in names]
    mine = [x.detach().clone().requires_grad_(w) for x, w in zip((e, c, b), want)]
    ref = [x.detach().double().requires_grad_(w) for x, w in zip((e, c, b), want)]
    flce.linear_cross_entropy(*mine[:2], t, mine[2]).backward()
    reference(*ref[:2], t, ref[2]).backward()
    for name, m, r, w in zip(names, mine, ref, want):
        if not w:
            assert m.grad is None, name
            continue
        assert rel(m.grad, r.grad) <= GRAD_TOL[dtype], f"{name}: {rel(m.grad, r.grad):.2e}"


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_inputs_are_copied(device):
    e, c, t, _, _ = make(30, 16, 40, torch.float32, device)
    et = e.t().contiguous().t()  # same values, column-major strides
    assert not et.is_contiguous()
    assert torch.allclose(flce.linear_cross_entropy(et, c, t), flce.linear_cross_entropy(e, c, t))


def test_torch_compile_fullgraph():
    e, c, t, _, _ = make(64, 32, 100, torch.float32, "cuda" if CUDA else "cpu")

    @torch.compile(fullgraph=True)
    def step(e, c):
        return flce.linear_cross_entropy(e, c, t, label_smoothing=0.1, check_targets=False) * 2.0

    e1, c1 = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
    # tracing flce warns of nothing (Dynamo warns of what it cannot trace faithfully, such as
    # a functools.lru_cache wrapper on the traced path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = step(e1, c1)
        out.backward()
    from_flce = [str(w.message) for w in caught if "flce" in w.filename or "flce" in str(w.message) or "lru_cache" in str(w.message)]
    assert not from_flce, from_flce
    e2, c2 = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
    (flce.linear_cross_entropy(e2, c2, t, label_smoothing=0.1) * 2.0).backward()
    assert torch.allclose(out, (flce.linear_cross_entropy(e, c, t, label_smoothing=0.1) * 2.0))
    assert torch.allclose(e1.grad, e2.grad) and torch.allclose(c1.grad, c2.grad)


def test_deterministic():
    e, c, t, _, _ = make(100, 40, 300, torch.bfloat16, "cuda" if CUDA else "cpu")
    a = grads_of(lambda e, c: flce.linear_cross_entropy(e, c, t), e, c)
    b = grads_of(lambda e, c: flce.linear_cross_entropy(e, c, t), e, c)
    assert torch.equal(a[0], b[0]) and all(torch.equal(x, y) for x, y in zip(a[1], b[1]))


@cuda_only
def test_error_no_worse_than_pytorch_bf16():
    e, c, t, _, _ = make(512, 256, 5000, torch.bfloat16, "cuda", seed=11)
    _, (de_r, dc_r) = grads_of(lambda e, c: reference(e, c, t), e.float(), c.float())
    _, (de, dc) = grads_of(lambda e, c: flce.linear_cross_entropy(e, c, t), e, c)
    _, (de_t, dc_t) = grads_of(lambda e, c: F.cross_entropy((e @ c.T).float(), t), e, c)
    assert rel(de, de_r) <= rel(de_t, de_r) * 1.05 and rel(dc, dc_r) <= rel(dc_t, dc_r) * 1.05


@cuda_only
def test_non_default_stream_and_cuda_graph():
    e, c, t, _, _ = make(256, 64, 1000, torch.bfloat16, "cuda", seed=2)
    want = flce.linear_cross_entropy(e, c, t)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = flce.linear_cross_entropy(e, c, t)
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(got, want)
    # CUDA graph capture after warm-up (no target check: it would synchronise)
    static_e = e.clone()
    for _ in range(2):
        flce.linear_cross_entropy(static_e, c, t, check_targets=False)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = flce.linear_cross_entropy(static_e, c, t, check_targets=False)
    static_e.copy_(e * 0.5)
    g.replay()
    torch.cuda.synchronize()
    assert torch.allclose(out.float(), flce.linear_cross_entropy(e * 0.5, c, t).float(), rtol=1e-3)


@cuda_only
def test_expandable_segments_pass_the_pointer_check():
    """torch's expandable segments map memory with cuMemMap: the entry points' pointer check
    (device memory of the call's GPU) must accept it, forward and backward."""
    import subprocess
    import sys
    code = ("import torch, flce\n"
            "e = torch.randn(300, 64, device='cuda', requires_grad=True)\n"
            "c = torch.randn(1000, 64, device='cuda', requires_grad=True)\n"
            "t = torch.randint(0, 1000, (300,), device='cuda')\n"
            "flce.linear_cross_entropy(e, c, t).backward()\n"
            "assert torch.isfinite(e.grad).all() and torch.isfinite(c.grad).all()\n")
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.skipif(not CUDA or torch.cuda.device_count() < 2, reason="fewer than two GPUs")
def test_a_second_gpu_gives_the_first_ones_bits_and_keeps_the_current_device():
    e, c, t, _, _ = make(300, 128, 2049, torch.bfloat16, "cuda:0", seed=6)
    runs = []
    for dev in ("cuda:0", "cuda:1"):
        torch.cuda.set_device(0)
        x, w, y = e.to(dev).requires_grad_(True), c.to(dev).requires_grad_(True), t.to(dev)
        loss = flce.linear_cross_entropy(x, w, y)
        loss.backward()
        assert torch.cuda.current_device() == 0, "the call changed torch's current device"
        runs.append([r.detach().cpu() for r in (loss, x.grad, w.grad)])
    assert all(torch.equal(a, b) for a, b in zip(*runs))


@cuda_only
def test_memory_stays_below_gradients_plus_ten_percent():
    n, d, v = 8192, 2304, 256000  # Gemma 2
    e = torch.randn(n, d, device="cuda", dtype=torch.bfloat16).requires_grad_(True)
    c = (torch.randn(v, d, device="cuda") / d**0.5).to(torch.bfloat16).requires_grad_(True)
    t = torch.randint(0, v, (n,), device="cuda")
    flce.linear_cross_entropy(e, c, t).backward()  # warm-up: kernels, cuBLAS handle
    e.grad = c.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    flce.linear_cross_entropy(e, c, t).backward()
    torch.cuda.synchronize()
    grads = (n + v) * d * 2
    extra = torch.cuda.max_memory_allocated() - base
    assert extra <= grads * 1.10, f"{extra / 2**20:.0f} MiB > gradients {grads / 2**20:.0f} MiB + 10%"


@pytest.mark.parametrize("opts", [dict(), dict(reduction="none"), dict(reduction="sum", ignore_index=4),
                                  dict(label_smoothing=0.2, z_loss=0.01, softcap=5.0)],
                         ids=["mean", "none", "sum", "smoothing+zloss+softcap"])
@pytest.mark.parametrize("weights", [False, True])
def test_gradcheck_float64_cpu(opts, weights):
    g = torch.Generator().manual_seed(4)
    e = torch.randn(6, 5, dtype=torch.float64, generator=g, requires_grad=True)
    c = torch.randn(7, 5, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(7, dtype=torch.float64, generator=g, requires_grad=True)
    t = torch.tensor([0, 3, opts.get("ignore_index", -100), 6, 2, 1])
    w = torch.rand(7, dtype=torch.float64, generator=g) + 0.5 if weights else None
    fn = lambda e, c, b: flce.linear_cross_entropy(e, c, t, b, weight=w, **opts)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (e, c, b))
    assert torch.allclose(fn(e, c, b), reference(e, c, t, b, w, **opts), rtol=1e-6)


def test_option_schema_is_defined_once():
    # the custom ops' schemas, the autograd context and the module form all come from LossOptions
    names = [f.name for f in __import__("dataclasses").fields(flce.LossOptions)]
    for op in (torch.ops.flce.forward.default, torch.ops.flce.backward.default):
        args = [a.name for a in op._schema.arguments]
        assert args[-len(names):] == names, (op, args)
    loss_fn = flce.LinearCrossEntropyLoss(reduction="sum", z_loss=1e-4)
    assert "z_loss=0.0001" in repr(loss_fn)
    with pytest.raises(TypeError, match="unknown options"):
        flce.LinearCrossEntropyLoss(label_smoothin=0.1)


@cuda_only
def test_kernel_plans_are_made_once_and_introspectable():
    e = torch.randn(300, 64, device="cuda", dtype=torch.bfloat16)
    c = torch.randn(5003, 64, device="cuda", dtype=torch.bfloat16)
    fwd, bwd = flce.kernel_plans(e, c)
    assert (fwd.kind, bwd.kind) == ("forward", "backward")
    hopper = torch.cuda.get_device_capability() == (9, 0)
    # the default ("auto") forward: the Hopper fused kernels on H100/H200, cuBLAS chunks elsewhere
    assert fwd.family == ("sm90" if hopper else "cublas") and bwd.workspace_bytes > 0
    # the default ("auto") backward likewise, for calls without bias, softcap or smoothing
    assert bwd.family == ("sm90" if hopper else "cublas")
    assert flce.kernel_plans(e, c, backward_mode="cublas")[1].family == "cublas"
    # logit options (here a softcap) run in the Hopper family's option modules
    assert flce.kernel_plans(e, c, softcap=30.0)[1].family == ("sm90" if hopper else "cublas")
    fused, _ = flce.kernel_plans(e, c, forward_mode="fused")
    assert fused.family == ("sm90" if hopper else "sm80")
    assert fused.workspace_bytes <= (1 << 20) + 16 * 300 + 1024
    assert flce.kernel_plans(e, c, forward_mode="sm80")[0].family == "sm80"
    assert flce.kernel_plans(e, c, forward_mode="cublas")[0].family == "cublas"
    # the same call shape returns the cached plan objects
    assert flce.kernel_plans(e, c)[0] is fwd


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_returns_the_loss_in_float32_as_cross_entropy(device):
    # autocast runs F.linear in its dtype and F.cross_entropy in float32: the fused op's loss is
    # float32 too (its gradients flow back in the inputs' dtypes), unless out_dtype says otherwise
    e, c, t, _, _ = make(64, 32, 100, torch.float32, device, seed=3)
    dt = torch.float16 if device == "cuda" else torch.bfloat16
    e, c = e.requires_grad_(True), c.requires_grad_(True)
    with torch.autocast(device_type=device, dtype=dt):
        loss = flce.linear_cross_entropy(e, c, t)
        want = F.cross_entropy(F.linear(e, c), t)
        asked = flce.linear_cross_entropy(e, c, t, out_dtype=dt)
    assert loss.dtype == want.dtype == torch.float32 and asked.dtype == dt
    assert abs(loss.item() - want.item()) <= 1e-2 * abs(want.item())
    (loss * 65536.0).backward()  # GradScaler's first scale: finite on the way back
    assert e.grad.dtype == torch.float32 and torch.isfinite(e.grad).all() and torch.isfinite(c.grad).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_no_tokens_follows_pytorch(device, dtype):
    # an empty micro-batch shard: NaN for mean, 0 for sum, empty for none; zero-size dE, zero dC
    e, c, t, b, _ = make(0, 16, 50, dtype, device, bias=True)
    for reduction, check in [("mean", lambda x: torch.isnan(x)), ("sum", lambda x: x.item() == 0.0),
                             ("none", lambda x: x.shape == (0,))]:
        ec, cc, bc = (x.clone().requires_grad_(True) for x in (e, c, b))
        loss, lse = flce.linear_cross_entropy(ec, cc, t, bc, reduction=reduction, z_loss=1e-4, softcap=30.0,
                                              return_lse=True)
        assert check(loss) and loss.dtype == dtype and lse.shape == (0,)
        loss.sum().backward()
        assert ec.grad.shape == (0, 16)
        assert torch.all(torch.nan_to_num(cc.grad) == 0) and cc.grad.shape == c.shape
    want = torch.nn.functional.cross_entropy((e @ c.T).float(), t)
    assert torch.isnan(want)  # what PyTorch does
    e3 = e.reshape(2, 0, 16)
    assert flce.linear_cross_entropy(e3, c, t.reshape(2, 0), reduction="none").shape == (2, 0)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_cpu_path_in_a_forked_worker():
    # a DataLoader worker forked after the parent used flce on the CPU must not hang
    import os
    import signal

    # (forked right after the parent's call, while its pool's threads settle: several times, since
    # a child hung on a lock held at the fork is a race)
    import faulthandler

    e, c, t, _, _ = make(200, 32, 3000, torch.float32, "cpu")
    for _ in range(5):
        want = flce.linear_cross_entropy(e, c, t)
        pid = os.fork()
        if pid == 0:
            # a hung child prints its threads' Python stacks (exit 1), then the alarm ends it
            faulthandler.dump_traceback_later(50, exit=True)
            signal.alarm(60)
            try:
                torch.set_num_threads(1)
                ok = torch.equal(flce.linear_cross_entropy(e, c, t), want)
            except BaseException:
                ok = False
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
