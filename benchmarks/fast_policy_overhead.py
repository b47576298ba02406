"""Does workspace_budget="fast" cost time beyond its plan? One run of the suite (H200, journal v24) timed
flce_fast's forward+backward 3–4.5 ms slower than flce@<bytes> at the same peak memory (Gemma 2
52.79 against 48.34 ms at 4 GB, Llama 3 42.86 against 39.92 at 2 GB). "fast" differs from a byte
budget only in what the call does on the host: torch.cuda.mem_get_info (half the free memory,
in 256 MB steps) and a plan lookup keyed by that number. This times, interleaved in rounds:

  fast      workspace_budget="fast"
  bytes     workspace_budget=<the bytes "fast" resolved to before the loop>
  4G / 2G   fixed budgets

and mem_get_info alone: its host time with an idle GPU, and with a long GEMM queued (if the call
waits for the GPU, it is a synchronisation in every training step).

    python3 benchmarks/fast_policy_overhead.py [--shapes gemma2,llama3] [--rounds 3] [--iters 15]
"""

import argparse
import statistics
import time

import torch

import flce
from flce import step as flce_step
from suite import SHAPES  # benchmarks/ is first on sys.path
from train_step import step_times


def time_ms(fn, iters):
    """Median of `iters` CUDA-event timings of fn (one warm-up call)."""
    fn()
    return statistics.median(step_times(fn, torch.device("cuda"), iters))


def mem_get_info_us(queued: bool):
    """Host microseconds of one torch.cuda.mem_get_info, with or without a ~50 ms GEMM queued."""
    x = torch.randn(16384, 16384, device="cuda", dtype=torch.bfloat16)
    out = []
    for _ in range(20):
        torch.cuda.synchronize()
        if queued:
            for _ in range(5):
                x @ x
        t0 = time.perf_counter()
        torch.cuda.mem_get_info()
        out.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="gemma2,llama3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=15)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"mem_get_info host us: idle GPU {mem_get_info_us(False):.1f}, GEMMs queued {mem_get_info_us(True):.1f}")
    print("| shape | variant | budget MB | plan chunk, workspace MB | fwd+bwd ms (rounds) | median |")
    print("|---|---|---|---|---|---|")
    for name in args.shapes.split(","):
        n, d, v = SHAPES[name]
        g = torch.Generator(device="cuda").manual_seed(0)
        e = torch.randn(n, d, device="cuda", generator=g).to(torch.bfloat16)
        c = (torch.randn(v, d, device="cuda", generator=g) / d**0.5).to(torch.bfloat16)
        t = torch.randint(0, v, (n,), device="cuda", generator=g)
        eg, cg = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
        resolved = flce_step._fast_budget(eg.device)
        variants = {"fast": "fast", "bytes": resolved, "4G": 4 << 30, "2G": 2 << 30}

        def run(budget):
            eg.grad = cg.grad = None
            flce.linear_cross_entropy(eg, cg, t, workspace_budget=budget).backward()

        times = {k: [] for k in variants}
        for _ in range(args.rounds):
            for k, budget in variants.items():
                times[k].append(time_ms(lambda: run(budget), args.iters))
        for k, budget in variants.items():
            p = flce.forward_backward_plan(eg, cg, workspace_budget=budget)
            plan = "none" if p is None else f"{p.chunks[0]}, {p.workspace_bytes / 2**20:.0f}"
            mb = (resolved if budget == "fast" else budget) / 2**20
            ts = " / ".join(f"{x:.2f}" for x in times[k])
            print(f"| {name} | {k} | {mb:.0f} | {plan} | {ts} | {statistics.median(times[k]):.2f} |")
        del e, c, eg, cg
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
