"""s49: the eager path's A/B (run once per FLCE_EAGER_OPS value): host µs of a call queued behind
~33 ms of GPU matmuls (medians of 25) and the suite's one-step timer (L2 flushed, medians), flce
default and "fast", the call the suite makes (check_targets on)."""
import os, statistics, sys, time
import torch
import flce
sys.path.insert(0, "benchmarks")
from suite import make_data, shape_of
from suite_measure import grad_step, timer

tag = os.environ.get("FLCE_EAGER_OPS", "1")
bench = timer("cuda", rep_ms=300)
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
def busy():
    for _ in range(20):
        x @ x
for name in ("llama3_n1024", "llama3"):
    n, d, v = shape_of(name)
    e, c, t = make_data(n, d, v, "peaky", 0, torch.bfloat16, "cuda")
    for budget in (None, "fast"):
        fn = lambda e_, c_, t_: flce.linear_cross_entropy(e_, c_, t_, out_dtype=torch.float32, workspace_budget=budget)
        fn_nc = lambda e_, c_, t_: flce.linear_cross_entropy(e_, c_, t_, out_dtype=torch.float32, workspace_budget=budget,
                                                            check_targets=False)
        step, eg, cg = grad_step(fn, e, c, t)
        step_nc, _, _ = grad_step(fn_nc, e, c, t)
        for _ in range(3):
            step(); step_nc()
        torch.cuda.synchronize()
        hf = []
        for _ in range(25):
            eg.grad = cg.grad = None
            busy()
            t0 = time.perf_counter(); loss = fn_nc(eg, cg, t); t1 = time.perf_counter()
            loss.backward(); torch.cuda.synchronize()
            hf.append((t1 - t0) * 1e6)
        timed = [bench(step) for _ in range(3)]
        print(f"EAGER_OPS={tag} {name:13s} {budget or 'default':8s} host fwd (check off) {statistics.median(hf):7.1f} us"
              f"  timed fwd+bwd {' '.join(f'{m:.3f}' for m in timed)} ms (median {statistics.median(timed):.3f})", flush=True)
    del e, c, t
    torch.cuda.empty_cache()
