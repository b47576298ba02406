"""Where the time of one flce forward+backward goes, kernel by kernel (torch.profiler / CUPTI).

Runs on the GPU machine (torch, the flce wheel on PYTHONPATH); no nsys needed. For each config:
two warm-up steps, then one profiled step; prints per-kernel GPU time (sum over launches), the
launch count, and the step's total kernel time against its wall time (the gap is launch and
host overhead).

    python3 scripts/tools/profile_kernels.py --shape gemma2 --configs "auto/cublas/min,auto/fused/min,auto/cublas/fast"

A config is forward_mode/backward_mode/workspace_budget ("min", "fast" or bytes). `--steps K`
profiles K steps queued back to back, as a training loop runs them (the host free to run ahead;
one sync at the end): the GPU idle between kernels then counts only what the host could not hide.
`--host` also records the host's side and lists the ops that took its time (self CPU ms), to
say where a gap before a kernel goes (docs/journal.md v46: 0.62 ms before the slice and three-product
passes' first kernel in a one-step profile). `--by-product` splits the step's kernel time into the
four products of an exact loss — the forward, G (the recomputed logits), dE = G·C and dC = Gᵀ·E —
each against cuBLAS's product of the same shape timed here as the suite times its floors
(benchmarks/suite.py `measure_cublas`: L2 flushed, medians), as docs/journal.md v48 did by hand at
Llama 3 65k. It names cuBLAS's launches by their layout (`…_NTN`:
the middle letter T is dC's Gᵀ, N is dE's), which holds for the fused families' backward plans
(no cuBLAS logits): use it with the auto/auto configs.
"""
import argparse
import collections
import os
import re
import sys
import time

import torch

import flce

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from suite import measure_cublas, timer  # noqa: E402  (the suite's floors, timed the same way)

SHAPES = {"gemma2": (8192, 2304, 256000), "llama3": (8192, 4096, 128256), "qwen25": (8192, 3584, 152064),
          # the loss of benchmarks/train_step.py's model at 16k tokens
          "train16k": (16384, 2048, 128256),
          # the suite's smallest Llama 3 sweep point
          "llama3_n1024": (1024, 4096, 128256),
          # the large-N points where flce runs furthest from its floor (1.25-1.31x four GEMMs)
          "llama3_n65536": (65536, 4096, 128256), "llama3_n131072": (131072, 4096, 128256)}


def short(name: str) -> str:
    """A kernel's name without template arguments and parameter lists, cuBLAS's kept readable."""
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"<.*", "", name)
    return name[:70]


def inputs(n, d, v, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    e = (torch.randn(n, d, device="cuda", generator=g) / d ** 0.25).bfloat16().requires_grad_()
    c = (torch.randn(v, d, device="cuda", generator=g) / d ** 0.25).bfloat16().requires_grad_()
    t = torch.randint(0, v, (n,), device="cuda", generator=g)
    return e, c, t


def step(e, c, t, fwd, bwd, budget):
    e.grad = c.grad = None
    loss = flce.linear_cross_entropy(e, c, t, forward_mode=fwd, backward_mode=bwd, workspace_budget=budget)
    loss.backward()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="gemma2", choices=sorted(SHAPES))
    ap.add_argument("--configs", default="auto/cublas/min,auto/fused/min,auto/cublas/fast")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--gaps", type=int, default=6, help="list the N longest idle gaps between kernels")
    ap.add_argument("--launches", action="store_true",
                    help="also list every kernel launch of the profiled step in order: name, grid, µs")
    ap.add_argument("--trace", default=None,
                    help="also record host activity and write one Chrome trace per config into this folder")
    ap.add_argument("--steps", type=int, default=1,
                    help="profile this many steps queued back to back (no sync between them); per-step times")
    ap.add_argument("--host", action="store_true",
                    help="also record host activity and list the ops with the most self CPU time")
    ap.add_argument("--by-product", action="store_true",
                    help="also split the step's kernel time by product (forward, G, dE, dC) against "
                         "cuBLAS's product of the same shape, timed here")
    a = ap.parse_args()
    steps = max(1, a.steps)
    n, d, v = SHAPES[a.shape]
    e, c, t = inputs(n, d, v)
    print(f"# {torch.cuda.get_device_name()} {a.shape} (N {n}, D {d}, V {v}) bf16, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    floors = measure_cublas(e.detach(), c.detach(), timer("cuda")) if a.by_product else None
    for cfg in a.configs.split(","):
        fwd, bwd, budget = cfg.split("/")
        budget = None if budget == "min" else ("fast" if budget == "fast" else int(budget))
        for _ in range(2):
            step(e, c, t, fwd, bwd, budget)
        torch.cuda.synchronize()
        acts = [torch.profiler.ProfilerActivity.CUDA]
        if a.trace or a.host:
            acts.append(torch.profiler.ProfilerActivity.CPU)
        with torch.profiler.profile(activities=acts) as prof:
            w0 = time.perf_counter()
            for _ in range(steps):
                step(e, c, t, fwd, bwd, budget)
            torch.cuda.synchronize()
            wall = (time.perf_counter() - w0) * 1e3 / steps
        if a.trace:
            os.makedirs(a.trace, exist_ok=True)
            prof.export_chrome_trace(os.path.join(a.trace, f"{a.shape}-{cfg.replace('/', '-')}.json"))
        if a.launches:
            print_launches(prof)
        kernels, per, total = kernel_times(prof, copies=False)
        span, gaps = timeline(kernels)
        each = f" ({steps} steps back to back; per step)" if steps > 1 else ""
        print(f"\n## {cfg}{each}: kernels {total / steps:.2f} ms, first kernel start to last kernel end "
              f"{span / steps:.2f} ms, wall {wall:.2f} ms")
        print("| kernel | launches | ms | share |")
        print("|---|---|---|---|")
        for name, (ms, cnt) in sorted(per.items(), key=lambda kv: -kv[1][0])[: a.top]:
            print(f"| {name} | {cnt / steps:g} | {ms / steps:.2f} | {100 * ms / total:.0f}% |")
        idle = sum(g[0] for g in gaps)
        print(f"\nGPU idle between kernels: {idle / steps:.2f} ms a step over {len(gaps)} gaps in all; the longest:")
        for ms, before, after in sorted(gaps, key=lambda g: -g[0])[: a.gaps]:
            print(f"- {ms:.3f} ms between {before} and {after}")
        if floors:
            print_by_product(per, steps, floors)
        if a.host:
            print(f"\nHost ops by self CPU time ({steps} step(s) together):")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.top))


def kernel_times(prof, copies=True):
    """The profile's GPU activities (without memcpy / memset unless `copies`), the GPU ms and
    launch count of each kernel name ([ms, launches] by `short` name) and their total ms."""
    kernels = [ev for ev in prof.events() if ev.device_type == torch.autograd.DeviceType.CUDA and ev.name
               and (copies or not (ev.name.startswith("Memcpy") or ev.name.startswith("Memset")))]
    per = collections.defaultdict(lambda: [0.0, 0])
    for ev in kernels:
        k = per[short(ev.name)]
        k[0] += ev.time_range.elapsed_us() / 1e3
        k[1] += 1
    return kernels, per, sum(x[0] for x in per.values())


def product_of(name):
    """Which product of an exact loss a kernel (by `short` name) computes: "forward", "G", "dE",
    "dC", "own products" (flce's sm90 product kernel, FLCE_SM90_PRODUCTS=1: dE or dC), or "other"
    (finishing, scaling and conversion kernels)."""
    if name in ("flce_sm90_forward", "flce_sm90_forward_compact", "flce_forward_tiles"):
        return "forward"
    if name in ("flce_sm90_grad", "flce_grad_tiles", "flce_grad_from_compact", "flce_grad_from_logits"):
        return "G"
    if name == "flce_sm90_product":
        return "own products"
    layout = re.search(r"_([NT])([NT])([NT])$", name)
    if layout and (name.startswith("nvjet") or "gemm" in name.lower()):
        return "dC" if layout.group(2) == "T" else "dE"
    return "other"


def print_by_product(per, steps, floors):
    """The step's kernel ms by product against cuBLAS's (`floors`: benchmarks/suite.py's
    `measure_cublas` row, the suite's floors)."""
    ms = collections.defaultdict(float)
    for name, (t, _) in per.items():
        ms[product_of(name)] += t / steps
    floor = {"forward": floors["fwd_ms"], "G": floors["fwd_ms"], "dE": floors["de_ms"], "dC": floors["dc_ms"]}
    print("\n| product | flce ms | cuBLAS ms | ÷ cuBLAS |")
    print("|---|---|---|---|")
    for k in ("forward", "G", "dE", "dC"):
        print(f"| {k} | {ms[k]:.2f} | {floor[k]:.2f} | {ms[k] / floor[k]:.3f} |")
    total, floor4 = sum(ms.values()), floors["floor4_ms"]
    if ms["own products"]:
        print(f"| own products (dE and dC) | {ms['own products']:.2f} | {floor['dE'] + floor['dC']:.2f} | "
              f"{ms['own products'] / (floor['dE'] + floor['dC']):.3f} |")
    print(f"| other | {ms['other']:.2f} | | |")
    print(f"| step | {total:.2f} | {floor4:.2f} (floor4) | {total / floor4:.3f} |")


def print_launches(prof):
    """Every kernel launch of the profile in start order, with its grid (from the Chrome trace)."""
    import json
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name)).get("traceEvents", [])
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    print("\n| # | kernel | grid | µs |")
    print("|---|---|---|---|")
    for i, e in enumerate(kernels):
        grid = e.get("args", {}).get("grid", "")
        print(f"| {i} | {short(e['name'])} | {grid} | {e.get('dur', 0):.1f} |")


def timeline(kernels):
    """The span from the first kernel's start to the last one's end (ms), and every idle gap
    between consecutive kernels as (ms, kernel before, kernel after)."""
    evs = sorted(kernels, key=lambda ev: ev.time_range.start)
    if not evs:
        return 0.0, []
    gaps, end, prev = [], evs[0].time_range.end, short(evs[0].name)
    for ev in evs[1:]:
        if ev.time_range.start > end:
            gaps.append(((ev.time_range.start - end) / 1e3, prev, short(ev.name)))
        if ev.time_range.end >= end:
            end, prev = ev.time_range.end, short(ev.name)
    return (end - evs[0].time_range.start) / 1e3, gaps


if __name__ == "__main__":
    main()
