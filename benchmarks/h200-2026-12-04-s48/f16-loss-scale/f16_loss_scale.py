"""s48: float16 with loss_scale (AMP's 2^16) — the three-product pass for f16 — against the
default and "fast" without it (the recomputing plans), at Gemma 2 and Llama 3, peaky data: time
(the suite's timer) and dE / dC errors of 2^16 × the loss against the suite's fp32 reference."""
import sys
import torch
import flce
sys.path.insert(0, "benchmarks")
from suite import make_data, reference, rel
from suite_measure import measure, timer

S = 65536.0
bench = timer("cuda", rep_ms=600)
methods = {
    "default": lambda e, c, t: flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32),
    "fast": lambda e, c, t: flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32, workspace_budget="fast"),
    "fast+loss_scale": lambda e, c, t: flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32,
                                                               workspace_budget="fast", loss_scale=S),
}
for name, (n, d, v) in {"gemma2": (8192, 2304, 256000), "llama3": (8192, 4096, 128256)}.items():
    e, c, t = make_data(n, d, v, "peaky", 0, torch.float16, "cuda")
    ref = reference(e, c, t, grad_scale=S)
    plan = flce.three_product_plan(e, c, workspace_budget="fast", loss_scale=S)
    print(f"## {name} f16 (N {n}, D {d}, V {v}); with loss_scale the plan is {plan}")
    for mname, fn in methods.items():
        res, (loss, de, dc) = measure(fn, e, c, t, bench, "cuda", grad_scale=S)
        print(f"{name:8s} {mname:16s} fwd {res['fwd_ms']:7.2f}  fwd+bwd {res['fb_ms']:7.2f} ms  extra {res['fb_extra_mb']:8.1f} MB"
              f"  loss {rel(loss, ref[0]):.2e}  dE {rel(de, ref[1]):.2e}  dC {rel(dc, ref[2]):.2e}")
    del e, c, t, ref
    torch.cuda.empty_cache()
