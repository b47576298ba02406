"""flce.vocab_parallel on two CPU processes (gloo) and, where there are GPUs, on CUDA (NCCL: one
process per GPU; one rank on one GPU, two on two; and "cuda-shared": two processes on GPU 0 over
gloo, which gathers CUDA tensors too — the CUDA phases with two ranks where only one GPU is lent):
the vocabulary split unevenly between the ranks, the loss and gradients equal the single-process
result within one reordering of f32 sums, the same bits on every rank and run to run, and ranks
that disagree on the problem fail together."""

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import flce

SIZES = (500, 531)  # V = 1031, split unevenly
OPTIONS = [dict(), dict(reduction="sum", label_smoothing=0.1, z_loss=1e-4, softcap=20.0),
           dict(reduction="none"), dict(shift=True, ignore_index=7)]


def problem(dtype, bias, weights, ignore=-100):
    g = torch.Generator().manual_seed(5)
    n, d, v = 96, 24, sum(SIZES)
    e = torch.randn(2, n // 2, d, generator=g).to(dtype)
    c = (torch.randn(v, d, generator=g) / d**0.5).to(dtype)
    t = torch.randint(0, v, (2, n // 2), generator=g)
    t[:, ::7] = ignore
    b = torch.randn(v, generator=g).to(dtype) if bias else None
    w = 0.25 + 1.5 * torch.rand(v, generator=g) if weights else None
    return e, c, t, b, w


def grads(fn, e, c, b):
    xs = [x.clone().requires_grad_(True) if x is not None else None for x in (e, c, b)]
    out = fn(*xs)
    scale = torch.linspace(0.5, 1.5, out.numel(), device=out.device).reshape(out.shape).to(out.dtype)
    (out * scale).sum().backward()
    return out.detach(), [x.grad if x is not None else None for x in xs]


CUDA = torch.cuda.is_available() and flce.cuda_device_count() > 0
GPUS = torch.cuda.device_count() if CUDA else 0


def on(device, *xs):
    return [None if x is None else x.to(device) for x in xs]


CASES = [(dtype, i) for dtype in (torch.float32, torch.bfloat16) for i in range(len(OPTIONS))]


def case_inputs(dtype, opts):
    bias = weights = opts.get("reduction") == "sum"
    return bias, weights, problem(dtype, bias, weights, opts.get("ignore_index", -100))


def worker(rank, size, init, results, cases, mismatch, device="cpu"):
    # NVLink multicast stays off (the GPU machines require it)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    backend = "gloo"
    if device == "cuda":
        torch.cuda.set_device(rank)
        device, backend = f"cuda:{rank}", "nccl"
    elif device == "cuda-shared":  # every rank on GPU 0, the collectives through gloo
        torch.cuda.set_device(0)
        device = "cuda:0"
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=size)
    try:
        # every case in one process group: spawning a group per case cost seconds each
        for dtype, index in cases:
            opts = OPTIONS[index]
            _, _, inputs = case_inputs(dtype, opts)
            e, c, t, b, w = on(device, *inputs)
            if mismatch == "shape" and rank == 1:
                e, t = e[:, 1:], t[:, 1:]
            sizes = SIZES if size == 2 else (sum(SIZES),)
            lo, hi = sum(sizes[:rank]), sum(sizes[:rank + 1])
            shard = lambda x: None if x is None else x[lo:hi].clone()  # noqa: E731

            w_shard = shard(w)
            if mismatch == "weight_nan" and rank == 1:
                w_shard[3] = float("nan")
            if mismatch == "weight_len" and rank == 1:
                w_shard = w_shard[1:]

            def run(e, c_shard, b_shard):
                return flce.vocab_parallel.linear_cross_entropy(e, c_shard, t, b_shard, weight_shard=w_shard, **opts)

            key = (rank, str(dtype), index)
            try:
                outs = [grads(run, e, shard(c), shard(b)) for _ in range(2)]
            except ValueError as err:
                results[key] = ("error", str(err))
                continue
            results[key] = ("ok", [(loss.cpu(), [None if g is None else g.cpu() for g in gs]) for loss, gs in outs])
    finally:
        dist.destroy_process_group()


def run_ranks(cases, mismatch=None, device="cpu", ranks=2):
    with tempfile.TemporaryDirectory() as tmp:
        results = mp.Manager().dict()
        init = "file://" + os.path.join(tmp, "rendezvous")
        mp.spawn(worker, args=(ranks, init, results, cases, mismatch, device), nprocs=ranks, join=True)
        return dict(results)


_RUNS = {}


def ranks_results(device, ranks):
    """Every case of test_ranks_equal_one on `ranks` processes, run once per place and kept."""
    if (device, ranks) not in _RUNS:
        _RUNS[(device, ranks)] = run_ranks(CASES, device=device, ranks=ranks)
    return _RUNS[(device, ranks)]


PLACES = [("cpu", 2),
          pytest.param("cuda", 1, marks=pytest.mark.skipif(GPUS < 1, reason="no CUDA device")),
          pytest.param("cuda-shared", 2, marks=pytest.mark.skipif(GPUS < 1, reason="no CUDA device")),
          pytest.param("cuda", 2, marks=pytest.mark.skipif(GPUS < 2, reason="fewer than two GPUs"))]


@pytest.mark.parametrize("device,ranks", PLACES, ids=lambda x: str(x))
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_ranks_equal_one(opts, dtype, device, ranks):
    index = OPTIONS.index(opts)
    res = ranks_results(device, ranks)
    bias, _, inputs = case_inputs(dtype, opts)
    # the reference: the single-process call on the same kind of device
    ref_device = "cuda:0" if device.startswith("cuda") else "cpu"
    e, c, t, b, w = on(ref_device, *inputs)
    want, grads_w = grads(lambda e, c, b: flce.linear_cross_entropy(e, c, t, b, weight=w, **opts), e, c, b)
    want, (de_w, dc_w, db_w) = want.cpu(), [None if g is None else g.cpu() for g in grads_w]
    tol = 1e-5 if dtype == torch.float32 else 8e-3
    rel = lambda a, b: ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()  # noqa: E731
    dcs, dbs = [], []
    for rank in range(ranks):
        status, outs = res[(rank, str(dtype), index)]
        assert status == "ok", outs
        (loss, (de, dc, db)), (loss2, (de2, dc2, db2)) = outs
        assert torch.equal(loss, loss2) and torch.equal(de, de2) and torch.equal(dc, dc2), "not reproducible"
        assert rel(loss, want) <= (1e-6 if dtype == torch.float32 else 8e-3), (loss, want)
        assert rel(de, de_w) <= tol
        dcs.append(dc)
        dbs.append(db)
    # every rank the same loss and dE, bit for bit
    for rank in range(1, ranks):
        (loss0, (de0, *_)), (loss_k, (de_k, *_)) = res[(0, str(dtype), index)][1][0], res[(rank, str(dtype), index)][1][0]
        assert torch.equal(loss0, loss_k) and torch.equal(de0, de_k)
    assert rel(torch.cat(dcs), dc_w) <= tol
    if bias:
        assert rel(torch.cat(dbs), db_w) <= tol


TWO_GPUS = pytest.mark.skipif(GPUS < 2, reason="fewer than two GPUs")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=TWO_GPUS),
                                    pytest.param("cuda-shared", marks=pytest.mark.skipif(GPUS < 1, reason="no CUDA device"))])
@pytest.mark.parametrize("fault,message", [("shape", "disagree"), ("weight_nan", "rank 1: weight_shard[3]"),
                                           ("weight_len", "rank 1: the bias shard")])
def test_ranks_that_disagree_fail_together(device, fault, message):
    """What differs on one rank (its shapes, its shard lengths, a bad class weight in its shard)
    raises on every rank before any collective of the loss — none is left waiting."""
    # the class-weighted case (OPTIONS[1]: sum, smoothing, ...) for the weight faults
    index = 0 if fault == "shape" else 1
    res = run_ranks([(torch.float32, index)], mismatch=fault, device=device)
    for rank in (0, 1):
        status, msg = res[(rank, str(torch.float32), index)]
        assert status == "error" and message in msg, (rank, status, msg)


def dtensor_worker(rank, size, init, results):
    """The tensor-parallel LM head as DTensors on a 1-D CPU mesh: the classifier, bias and class
    weights sharded on dim 0 (torch.chunk's split: 516 + 515 rows), through the main API; and a
    classifier DTensor placed otherwise, refused."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=size)
    try:
        mesh = init_device_mesh("cpu", (size,))
        opts = OPTIONS[1]  # sum, smoothing, z-loss, softcap, bias, class weights
        _, _, (e, c, t, b, w) = case_inputs(torch.float32, opts)
        cd = distribute_tensor(c, mesh, [Shard(0)]).requires_grad_()
        bd = distribute_tensor(b, mesh, [Shard(0)]).requires_grad_()
        wd = distribute_tensor(w, mesh, [Shard(0)])
        e_ = e.clone().requires_grad_()
        # process_group naming the mesh's ranks is accepted (here: the world)
        loss = flce.linear_cross_entropy(e_, cd, t, bd, weight=wd, process_group=dist.group.WORLD, **opts)
        loss.backward()
        placed = isinstance(cd.grad, DTensor) and tuple(cd.grad.placements) == (Shard(0),)
        out = (loss.detach(), e_.grad, cd.grad.full_tensor(), bd.grad.full_tensor(), placed, cd.to_local().shape[0])
        try:
            flce.linear_cross_entropy(e, distribute_tensor(c, mesh, [Replicate()]), t)
            refused = None
        except ValueError as err:
            refused = str(err)
        # the same rows as plain tensors with process_group: the same loss, bit for bit
        rows = cd.to_local().detach()
        plain = flce.linear_cross_entropy(e, rows, t, bd.to_local().detach(), weight=wd.to_local(),
                                          process_group=dist.group.WORLD, **opts)
        try:
            flce.linear_cross_entropy(e, rows, t, process_group=dist.group.WORLD, return_accuracy=True)
            refused_option = None
        except ValueError as err:
            refused_option = str(err)
        results[rank] = (out, refused, torch.equal(plain, loss.detach()), refused_option)
    finally:
        dist.destroy_process_group()


def test_dtensor_classifier_sharded_by_rows():
    with tempfile.TemporaryDirectory() as tmp:
        results = mp.Manager().dict()
        init = "file://" + os.path.join(tmp, "rendezvous")
        mp.spawn(dtensor_worker, args=(2, init, results), nprocs=2, join=True)
        results = dict(results)
    opts = OPTIONS[1]
    _, _, (e, c, t, b, w) = case_inputs(torch.float32, opts)
    e, c, b = (x.clone().requires_grad_() for x in (e, c, b))
    want = flce.linear_cross_entropy(e, c, t, b, weight=w, **opts)
    want.backward()
    rel = lambda a, b: ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()  # noqa: E731
    rows = []
    for rank in (0, 1):
        (loss, de, dc, db, placed, local_rows), refused, same_as_plain, refused_option = results[rank]
        assert same_as_plain and refused_option is not None and "return_accuracy" in refused_option
        rows.append(local_rows)
        assert rel(loss, want.detach()) <= 1e-6 and rel(de, e.grad) <= 1e-5 and rel(dc, c.grad) <= 1e-5
        assert rel(db, b.grad) <= 1e-5 and placed
        assert refused is not None and "Shard(0)" in refused
    assert torch.equal(results[0][0][0], results[1][0][0]) and torch.equal(results[0][0][1], results[1][0][1])
    assert rows == [516, 515]


class _TinyLM(torch.nn.Module):
    """Embedding, one layer and an LM head whose loss is flce's, as a model's forward calls it."""

    def __init__(self, vocab=1031, hidden=24):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, hidden)
        self.mid = torch.nn.Linear(hidden, hidden)
        self.head = torch.nn.Linear(hidden, vocab, bias=False)

    def forward(self, x, t):
        h = torch.tanh(self.mid(self.emb(x)))
        return flce.linear_cross_entropy(h, self.head.weight, t, label_smoothing=0.1)


def _tiny_batch():
    g = torch.Generator().manual_seed(3)
    return torch.randint(0, 1031, (64,), generator=g), torch.randint(0, 1031, (64,), generator=g)


def wrapped_model_worker(rank, size, init, results, wrap):
    """The same model and batch on every rank, its LM head under FSDP2 (fully_shard: every rank
    sees the whole gathered weight in forward) or tensor-parallel (ColwiseParallel: the weight a
    DTensor sharded by vocabulary rows, so flce's vocabulary-parallel path runs)."""
    from torch.distributed.device_mesh import init_device_mesh
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=size)
    try:
        torch.manual_seed(0)
        model = _TinyLM()
        mesh = init_device_mesh("cpu", (size,))
        if wrap == "fsdp2":
            from torch.distributed.fsdp import fully_shard
            fully_shard(model.mid, mesh=mesh)
            fully_shard(model.head, mesh=mesh)
            fully_shard(model, mesh=mesh)
        else:
            from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
            from torch.distributed.tensor import Shard
            parallelize_module(model.head, mesh, ColwiseParallel())
            assert flce.vocab_parallel.is_sharded_dtensor(model.head.weight)
            assert tuple(model.head.weight.placements) == (Shard(0),)  # vocabulary rows per rank
        x, t = _tiny_batch()
        loss = model(x, t)
        loss.backward()
        full = lambda g: g.full_tensor() if hasattr(g, "full_tensor") else g  # noqa: E731
        results[rank] = (loss.detach(), full(model.head.weight.grad), full(model.mid.weight.grad))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("wrap", ["fsdp2", "tensor_parallel"])
def test_inside_fsdp2_and_tensor_parallel_models(wrap):
    with tempfile.TemporaryDirectory() as tmp:
        results = mp.Manager().dict()
        init = "file://" + os.path.join(tmp, "rendezvous")
        mp.spawn(wrapped_model_worker, args=(2, init, results, wrap), nprocs=2, join=True)
        results = dict(results)
    torch.manual_seed(0)
    model = _TinyLM()
    x, t = _tiny_batch()
    want = model(x, t)
    want.backward()
    rel = lambda a, b: ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()  # noqa: E731
    for rank in (0, 1):
        loss, head_grad, mid_grad = results[rank]
        assert rel(loss, want.detach()) <= 1e-6, (rank, loss, want)
        assert rel(head_grad, model.head.weight.grad) <= 1e-5 and rel(mid_grad, model.mid.weight.grad) <= 1e-5
