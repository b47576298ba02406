"""The host's time per call: how long a method's forward and backward take to queue their GPU work
while the GPU is busy with earlier work (as in a training loop, where the host runs ahead), and
where flce's Python path spends it (cProfile). A method whose host time exceeds the GPU time of
what precedes it leaves the GPU idle; one that waits on the GPU (a sync) shows the busy work's time.

    python3 benchmarks/host_cost.py [--shapes gemma2,llama3,llama3_n1024] [--methods flce,flce_fast,compile]
        [--reps 20] [--cprofile flce_fast] [--prompt-fraction 0.5 [--new-counts]]

Per (shape, method): the median host ms of the forward call and of backward() (each queued
behind ~30 ms of GPU matmuls, then synchronised), and the suite's timed forward+backward for
reference (its timer: L2 flushed, the host's time before the first kernel counted). With
--prompt-fraction f each sequence's first f tokens are ignored (suite.make_data): flce reads the
count in the forward (flce/_counted.py), so its host forward includes the wait for the busy work;
--new-counts gives every timed call one more ignored token, a count (and plans) not seen before.
The sync's price is not the host time: it is the GPU's idle gap after the wait (while the host
queues the loss's first kernels), which the timed forward+backward contains."""
import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite import make_data, method_fn, shape_of  # noqa: E402
from suite_measure import grad_step, timer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="gemma2,llama3,llama3_n1024")
    ap.add_argument("--methods", default="flce,flce_fast,compile")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--cprofile", default="flce_fast", help="a method to profile on the host ('' for none)")
    ap.add_argument("--prompt-fraction", type=float, default=None)
    ap.add_argument("--new-counts", action="store_true",
                    help="each timed call ignores one more token than the last (a new count each call)")
    a = ap.parse_args()
    bench = timer("cuda", rep_ms=300)
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def busy():  # ~30 ms of GPU work on an H200, queued at once
        for _ in range(20):
            x @ x

    for name in a.shapes.split(","):
        n, d, v = shape_of(name)
        e, c, t = make_data(n, d, v, "peaky", 0, torch.bfloat16, "cuda", prompt_fraction=a.prompt_fraction)
        # the targets of each timed call: one more counted token ignored each time with --new-counts
        counted = (t != -100).nonzero().squeeze(1)
        targets = [t.clone().index_fill_(0, counted[-1 - k:], -100) if a.new_counts else t for k in range(a.reps)]
        for mname in a.methods.split(","):
            fn = method_fn(mname)
            eg = e.detach().clone().requires_grad_(True)
            cg = c.detach().clone().requires_grad_(True)
            for _ in range(3):
                eg.grad = cg.grad = None
                fn(eg, cg, t).backward()
            torch.cuda.synchronize()
            fwd, bwd = [], []
            for k in range(a.reps):
                eg.grad = cg.grad = None
                busy()
                t0 = time.perf_counter()
                loss = fn(eg, cg, targets[k])
                t1 = time.perf_counter()
                loss.backward()
                t2 = time.perf_counter()
                torch.cuda.synchronize()
                fwd.append((t1 - t0) * 1e3)
                bwd.append((t2 - t1) * 1e3)
            step, _, _ = grad_step(fn, e, c, t)
            timed = bench(step)
            print(f"{name:13s} {mname:10s} host fwd {statistics.median(fwd):6.3f} ms  bwd {statistics.median(bwd):6.3f} ms"
                  f"  (max {max(fwd):6.3f} / {max(bwd):6.3f})  timed fwd+bwd {timed:8.3f} ms", flush=True)
            if mname == a.cprofile:
                prof = cProfile.Profile()
                for _ in range(a.reps):
                    eg.grad = cg.grad = None
                    busy()
                    prof.enable()
                    fn(eg, cg, t).backward()
                    prof.disable()
                    torch.cuda.synchronize()
                s = io.StringIO()
                pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(28)
                print(f"### cProfile {name} {mname}, {a.reps} steps (tottime)\n{s.getvalue()}", flush=True)
        del e, c, t
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
