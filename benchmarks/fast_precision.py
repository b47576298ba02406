"""flce's default and "fast" plans in bf16 and f16 at Gemma 2 and Llama 3 (peaky data, the suite's
generator): forward / forward+backward time (the suite's timer) and the loss, dE and dC errors of
S × the loss against the suite's fp32 reference — S 1 for bf16, AMP's 2^16 for f16, which "fast"
is given as ``loss_scale`` (without it f16 keeps the recomputing plans).

    python3 benchmarks/fast_precision.py LABEL [--shapes gemma2,llama3] [--rep-ms 600]

One line a (dtype, shape, method), LABEL first: run it once per build or knob setting (e.g.
``FLCE_THREE_PRODUCT_DE_K_CHUNK=0`` / ``32768``: fast's dE in one product over V / in K-chunks summed in
f32, plan::with_de_k_chunks; f16's default is the latter) and compare the lines
(benchmarks/results/2026-12-04-h200-f16-precision/)."""
import argparse
import os
import sys

import torch

import flce

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite import make_data, reference, rel, shape_of  # noqa: E402
from suite_measure import measure, timer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--shapes", default="gemma2,llama3")
    ap.add_argument("--rep-ms", type=float, default=600.0)
    a = ap.parse_args()
    bench = timer("cuda", rep_ms=a.rep_ms)
    for dtype, scale in ((torch.bfloat16, 1.0), (torch.float16, 65536.0)):
        loss_scale = scale if dtype == torch.float16 else None
        methods = {
            "default": lambda e, c, t: flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32),
            "fast": lambda e, c, t: flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32,
                                                              workspace_budget="fast", loss_scale=loss_scale),
        }
        for name in a.shapes.split(","):
            n, d, v = shape_of(name)
            e, c, t = make_data(n, d, v, "peaky", 0, dtype, "cuda")
            ref = reference(e, c, t, grad_scale=scale)
            plan = flce.forward_backward_plan(e, c, workspace_budget="fast", loss_scale=loss_scale)
            for mname, fn in methods.items():
                res, (loss, de, dc) = measure(fn, e, c, t, bench, "cuda", grad_scale=scale)
                # (fast's dE K-chunk: Plan.de_k_chunk, None for one product over V)
                k_chunk = f"  dE K-chunk {plan.de_k_chunk}" if mname == "fast" and plan is not None else ""
                print(f"{a.label} {str(dtype)[6:]:9s} {name:7s} {mname:8s} fwd {res['fwd_ms']:7.2f}  "
                      f"fwd+bwd {res['fb_ms']:7.2f} ms  loss {rel(loss, ref[0]):.2e}  dE {rel(de, ref[1]):.3e}  "
                      f"dC {rel(dc, ref[2]):.3e}{k_chunk}", flush=True)
            del e, c, t, ref
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
