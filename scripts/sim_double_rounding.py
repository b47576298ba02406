#!/usr/bin/env python3
"""CPU simulation: the trading passes (three-product, vocabulary slice) form the gradients in the
forward for grad_output 1, rounded to bf16, and the backward multiplies them by the grad_output that
comes — a second rounding unless it is a power of two. Hugging Face's Trainer brings 1 /
num_items_in_batch (flce.patch: the sum divided by it). This compares one rounding with two against
f64 on the suite's peaky data (its make_data and rel), a sum reduction with G rounded to bf16 as the
kernels do, f64 products.

    python3 scripts/sim_double_rounding.py        # torch, CPU, ~1 min

docs/perf-notes.md v54 records the output (benchmarks/h200-2026-12-04-s45/sim-double-rounding/)."""
import torch

from sim_f16_floor import logit_grad
from sim_row_reference import bf16, make, rel


def main():
    n, d, v = 512, 1024, 32000
    e, c, t = make(n, d, v, "peaky", 1)
    z = e @ c.T
    g0 = logit_grad(torch.exp(z - torch.logsumexp(z, 1, keepdim=True)), t, t >= 0)
    g = bf16(g0)  # G in bf16 (a sum: token scale 1)
    de1, dc1 = g @ c, g.T @ e
    print(f"N {n}, D {d}, V {v}, peaky; relative errors against f64")
    for k in (4096, 3000, 12345):
        s = 1.0 / k
        want_de, want_dc = (g0 @ c) * s, (g0.T @ e) * s
        once = rel(bf16(de1 * s), want_de), rel(bf16(dc1 * s), want_dc)
        twice = rel(bf16(bf16(de1) * s), want_de), rel(bf16(bf16(dc1) * s), want_dc)
        print(f"grad_output 1/{k}: rounded once dE {once[0]:.2e} dC {once[1]:.2e} | "
              f"twice dE {twice[0]:.2e} dC {twice[1]:.2e}")


if __name__ == "__main__":
    main()
