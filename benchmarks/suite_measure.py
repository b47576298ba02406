"""The suite's shapes and measurements (benchmarks/suite.py): the timer (CUDA events, L2 flushed before
each call), peak memory, a method's forward and forward + backward with its gradients, cuBLAS's
products (the floors), and further rounds of times reduced to their medians (suite.py --rounds).
"""

from __future__ import annotations

import statistics
import time

import torch

SHAPES = {
    "gemma2": (8192, 2304, 256000),
    "llama3": (8192, 4096, 128256),
    "qwen25": (8192, 3584, 152064),
    "tiny": (300, 64, 1000),
}
SWEEP = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def shape_of(name):
    if name.startswith("llama3_n"):
        return int(name[len("llama3_n"):]), 4096, 128256
    return SHAPES[name]


def inputs_mb(n, d, v, dtype):
    """MB of E and C, and so of their gradients."""
    return (n + v) * d * torch.empty((), dtype=DTYPES[dtype]).element_size() / 2**20


def timer(device, rep_ms=200.0, min_reps=3, max_reps=100):
    """Median time in ms of `fn`. CUDA: per-call CUDA events, L2 flushed (256 MB write) before
    each call, as triton's do_bench does, but with one estimating call instead of five, so the
    1-second calls of the token sweep cost 4 calls, not 7."""
    if device == "cuda":
        flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")

        def cuda_bench(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush.zero_()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            reps = int(min(max_reps, max(min_reps, rep_ms / max(start.elapsed_time(end), 1e-3))))
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
            for s, e in events:
                flush.zero_()
                s.record()
                fn()
                e.record()
            torch.cuda.synchronize()
            ts = sorted(s.elapsed_time(e) for s, e in events)
            return ts[len(ts) // 2]

        return cuda_bench

    def cpu_bench(fn, reps=3):
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return sorted(ts)[len(ts) // 2]

    return cpu_bench


def peak_mb(fn, device):
    if device != "cuda":
        return float("nan")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def grad_step(fn, e, c, t):
    """(step, eg, cg): copies of E and C that require gradients, and a forward + backward of `fn`
    on them from no gradients (what the suite times as fb_ms)."""
    eg = e.detach().clone().requires_grad_(True)
    cg = c.detach().clone().requires_grad_(True)

    def step():
        eg.grad = None
        cg.grad = None
        fn(eg, cg, t).backward()

    return step, eg, cg


def measure(fn, e, c, t, bench, device, grad_scale=1.0):
    res = {}
    with torch.no_grad():
        fn(e, c, t)
        res["fwd_mem_mb"] = peak_mb(lambda: fn(e, c, t), device)
        res["fwd_ms"] = bench(lambda: fn(e, c, t))
    step, eg, cg = grad_step(fn, e, c, t)
    step()
    eg.grad = cg.grad = None
    res["fb_mem_mb"] = peak_mb(step, device)
    res["fb_ms"] = bench(step)
    res["bwd_ms"] = res["fb_ms"] - res["fwd_ms"]
    res["fb_extra_mb"] = res["fb_mem_mb"] - (e.numel() + c.numel()) * e.element_size() / 2**20
    eg.grad = cg.grad = None
    loss = fn(eg, cg, t)
    (loss * grad_scale).backward()  # (the errors' run: grad_output = grad_scale, as AMP's loss scale)
    return res, (loss.detach().float(), eg.grad.detach(), cg.grad.detach())


def measure_cublas(e, c, bench):
    """The products an exact loss is made of, each timed through cuBLAS (torch.matmul): the
    logits E·Cᵀ [N, V] in the input dtype, dE = G·C [N, D] (K = V) and dC = Gᵀ·E [V, D] (K = N),
    with a G of the logits' shape and dtype (the logits themselves: on an H200 cuBLAS runs dE and
    dC on the loss's real gradient at 0.98-1.02x of that time; values do matter to a power-bound
    GEMM — on zeros it runs 14-17% faster, journal v49). fwd_ms is
    the logits; bwd_ms floor3 = logits + dE + dC (what a recomputing backward, or a pass that keeps
    the logits, must multiply); fb_ms floor4 = 2·logits + dE + dC."""
    logits_ms = bench(lambda: e @ c.T)
    g = e @ c.T
    de_ms = bench(lambda: g @ c)
    dc_ms = bench(lambda: g.T @ e)
    del g
    floor3 = logits_ms + de_ms + dc_ms
    return {"fwd_ms": logits_ms, "de_ms": de_ms, "dc_ms": dc_ms, "floor3_ms": floor3, "floor4_ms": floor3 + logits_ms,
            "bwd_ms": floor3, "fb_ms": floor3 + logits_ms, "fwd_mem_mb": float("nan"), "fb_mem_mb": float("nan"),
            "fb_extra_mb": float("nan")}


def time_again(fn, e, c, t, bench):
    """Another round of a measured method's times: (fwd_ms, fb_ms) — the forward without
    gradients and forward + backward, as `measure` times them (no memory, no errors); `fn` None
    for cuBLAS's products (`measure_cublas`: its logits and floor4)."""
    if fn is None:
        r = measure_cublas(e, c, bench)
        return r["fwd_ms"], r["fb_ms"]
    with torch.no_grad():
        fwd = bench(lambda: fn(e, c, t))
    step, _, _ = grad_step(fn, e, c, t)
    return fwd, bench(step)


def take_median_of_rounds(res, rounds):
    """A row's times as the median of its rounds ([(fwd_ms, fb_ms)], the first round's
    included), each round kept; bwd_ms (and cublas's floors) follow."""
    fwds, fbs = [r[0] for r in rounds], [r[1] for r in rounds]
    res["fwd_ms_rounds"], res["fb_ms_rounds"] = fwds, fbs
    if "floor3_ms" in res:  # cublas: the floors are its fb and fb − fwd
        res["floor4_ms"] = statistics.median(fbs)
        res["floor3_ms"] = res["floor4_ms"] - statistics.median(fwds)
    res["fwd_ms"], res["fb_ms"] = statistics.median(fwds), statistics.median(fbs)
    res["bwd_ms"] = res["fb_ms"] - res["fwd_ms"]


def floors(floor_row):
    """(floor4, floor3) ms of a cublas row; rows from before the products were timed (fb_ms four
    logits GEMMs) give 4 and 3 logits GEMMs."""
    one = floor_row["fwd_ms"]
    return floor_row.get("floor4_ms", 4 * one), floor_row.get("floor3_ms", 3 * one)
