"""s49 probe: where flce's host time per call goes on the GPU machine (host µs, medians of 40,
each call queued behind ~33 ms of GPU matmuls so nothing waits on the GPU)."""
import statistics, sys, time
import torch
import flce
from flce import step
from flce._common import LossOptions, TargetCheck, target_status
sys.path.insert(0, "benchmarks")
from suite import make_data, shape_of, method_fn

x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
def busy():
    for _ in range(20):
        x @ x

def host_us(f, reps=40):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        busy()
        t0 = time.perf_counter(); r = f(); t1 = time.perf_counter()
        del r
        torch.cuda.synchronize()
        ts.append((t1 - t0) * 1e6)
    return statistics.median(ts)

for name in sys.argv[1].split(","):
    n, d, v = shape_of(name)
    e, c, t = make_data(n, d, v, "peaky", 0, torch.bfloat16, "cuda")
    eg, cg = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
    o = LossOptions(workspace_budget=step.budget_bytes(e, LossOptions(workspace_budget=-1)))
    opts = o.astuple()
    res = {}
    res["lce fast, check_targets=False (fwd)"] = host_us(lambda: flce.linear_cross_entropy(eg, cg, t, workspace_budget="fast", check_targets=False))
    def fb():
        eg.grad = cg.grad = None
        flce.linear_cross_entropy(eg, cg, t, workspace_budget="fast", check_targets=False).backward()
    res["lce fast, check_targets=False (fwd+bwd)"] = host_us(fb)
    res["lce default, check_targets=False (fwd)"] = host_us(lambda: flce.linear_cross_entropy(eg, cg, t, check_targets=False))
    res["target_status"] = host_us(lambda: target_status(e, c, t, None, None, o))
    st = target_status(e, c, t, None, None, o)
    res["TargetCheck(status)"] = host_us(lambda: TargetCheck(st))
    res["torch.ops.flce.forward_backward, autograd"] = host_us(lambda: torch.ops.flce.forward_backward(eg, cg, t, None, None, True, True, False, False, False, None, *opts))
    res["torch.ops.flce.forward_backward, no grad"] = host_us(lambda: torch.ops.flce.forward_backward(e, c, t, None, None, True, True, False, False, False, None, *opts))
    impl = step._forward_backward._init_fn
    res["impl direct"] = host_us(lambda: impl(e, c, t, None, None, True, True, False, False, False, None, *opts))
    res["step_plan_for"] = host_us(lambda: step.step_plan_for(e, c, o, (True, True, False)))
    res["torch.empty x1 (1 GB)"] = host_us(lambda: torch.empty_like(c))
    res["torch.cuda.mem_get_info"] = host_us(lambda: torch.cuda.mem_get_info(e.device))
    comp = method_fn("compile")
    res["compile (fwd)"] = host_us(lambda: comp(eg, cg, t))
    def cfb():
        eg.grad = cg.grad = None
        comp(eg, cg, t).backward()
    res["compile (fwd+bwd)"] = host_us(cfb)
    for k, val in res.items():
        print(f"{name:13s} {k:45s} {val:8.1f} us", flush=True)
    del e, c, t, eg, cg
    torch.cuda.empty_cache()
