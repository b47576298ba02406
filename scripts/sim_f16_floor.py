#!/usr/bin/env python3
"""CPU simulation: where f16's dE error comes from (the suite's Gemma 2 f16 row, dE 9.2e-3 against
bf16's 2.1e-3, benchmarks/h200-2026-12-04-s45/alpha-errors/suite.log).

f16 has 3 more mantissa bits than bf16, but its exponent stops at 2⁻¹⁴ (normal) / 2⁻²⁴ (subnormal).
A mean over N tokens makes dE = (1/N)·G·C: at N 8192 most of its elements are subnormal in f16,
where the spacing is 2⁻²⁴ whatever the value, so the one rounding of the *output* costs ~1e-2
relative — the format's floor for any method, not flce's (PyTorch measured 2.35e-2 there on
2026-11-30). AMP's f16 recipe scales the loss (GradScaler, 2¹⁶ at start), and then the floor is
f16's 2⁻¹¹: this also checks that the sm90 G kernel's staging of u = f16(x·log2e − lse·log2e)
(sm90/grad_staged.cuh: |error| ≤ 2⁻¹¹·|x − lse|) stays near that floor.

`python3 scripts/sim_f16_floor.py` (torch, CPU, ~2 min, ~10 GB): the suite's peaky data (its
make_data and rel) at V 256000, f64 products, only the roundings differ.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from suite import make_data, rel  # noqa: E402

from sim_row_reference import f16  # noqa: E402


def logit_grad(p, t, valid):
    """G = p − onehot(t) on valid rows, 0 elsewhere (grad_output 1 a token)."""
    g = p * valid[:, None].double()
    rows = valid.nonzero()[:, 0]
    g[rows, t[rows]] -= 1.0
    return g


def main():
    v, tokens = 256000, 8192
    print(f"V {v}, a mean over {tokens} tokens; relative errors ‖a − b‖ / ‖b‖ against f64")
    for n, d in ((64, 2304), (256, 1024)):
        e, c, t = make_data(n, d, v, "peaky", 1, torch.float16, "cpu")
        e, c = e.double(), c.double()
        z = e @ c.T
        valid = t >= 0
        lse = torch.logsumexp(z, 1, keepdim=True)
        exact = logit_grad(torch.exp(z - lse), t, valid)
        log2e = 1 / math.log(2)
        staged_u = f16((z * log2e - lse * log2e).float().double())
        staged = logit_grad(torch.pow(2.0, staged_u), t, valid)
        del z, staged_u
        de0, dc0 = exact @ c, exact.T @ e
        g = 1.0 / (tokens * valid.double().mean().item())
        print(f"D {d} (rows sampled: {n})")
        print(f"  grad_output 1:      dE output rounding alone {rel(f16(g * de0), g * de0):.2e}")
        for scale, what in ((1.0, "grad_output 1"), (65536.0, "grad_output 2^16 (GradScaler)")):
            s = scale * g
            for name, gg in (("G exact", exact), ("G staged", staged)):
                gr = f16(gg)
                print(f"  {what:30} {name:8} → f16: dE {rel(f16(s * (gr @ c)), s * de0):.2e}"
                      f"  dC {rel(f16(s * (gr.T @ e)), s * dc0):.2e}", flush=True)
        del e, c, exact, staged, de0, dc0


if __name__ == "__main__":
    main()
