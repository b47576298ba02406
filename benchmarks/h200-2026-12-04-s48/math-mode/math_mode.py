"""s48: cuBLAS's math mode, A/B in separate processes (the build on PYTHONPATH): bf16 (default,
"fast") and f16 (default, "fast" with loss_scale 2^16) at Gemma 2 and Llama 3, peaky: time (the
suite's timer) and dE / dC errors of S × the loss (S 1 for bf16, 2^16 for f16) against the
suite's fp32 reference."""
import sys
import torch
import flce
sys.path.insert(0, "benchmarks")
from suite import make_data, reference, rel
from suite_measure import measure, timer

label = sys.argv[1]
bench = timer("cuda", rep_ms=600)
for dtype, S in ((torch.bfloat16, 1.0), (torch.float16, 65536.0)):
    methods = {"default": lambda e, c, t: flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32),
               "fast": lambda e, c, t: flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32,
                                                                 workspace_budget="fast",
                                                                 loss_scale=S if S != 1.0 else None)}
    for name, (n, d, v) in {"gemma2": (8192, 2304, 256000), "llama3": (8192, 4096, 128256)}.items():
        e, c, t = make_data(n, d, v, "peaky", 0, dtype, "cuda")
        ref = reference(e, c, t, grad_scale=S)
        for mname, fn in methods.items():
            res, (loss, de, dc) = measure(fn, e, c, t, bench, "cuda", grad_scale=S)
            print(f"{label:4s} {str(dtype)[6:]:9s} {name:7s} {mname:8s} fwd {res['fwd_ms']:7.2f}  fwd+bwd {res['fb_ms']:7.2f} ms"
                  f"  loss {rel(loss, ref[0]):.2e}  dE {rel(de, ref[1]):.3e}  dC {rel(dc, ref[2]):.3e}", flush=True)
        del e, c, t, ref
        torch.cuda.empty_cache()
