#!/usr/bin/env python3
"""CPU simulation: could the fast path drop its G pass by storing q against one reference a row?

The three-product pass stores q = exp(z − m_t) in f16 against each (token, 256-column tile) max
m_t, and its G pass (flce_grad_from_compact) rewrites q as G = f·q·exp(m_t − lse) − y in bf16
before cuBLAS's dE = G·C and dC = Gᵀ·E (docs/perf-notes.md v51, v52). With one reference a row
(q = exp(z − r_n) in bf16, r_n fixed before the forward, out-of-window tiles patched), G would be
diag(f)·Q' (Q' = Q with each target entry patched to G_t / f_n) and no G pass: dE = diag(f)·(Q'·C)
(the factor on the output, exact) but dC = Q'ᵀ·(diag(f)·E), where f·E must be rounded to bf16 —
the factor varies along dC's k (the tokens), so it cannot go on the output.

This compares the two roundings against an f64 reference (f64 products: only the roundings
differ) on bench_peers.py's data: `python3 scripts/sim_row_reference.py` (torch, CPU, ~1 min).

`--scale`: the same question for the mean's uniform factor g = 1/Σw: inside G before its bf16
rounding (what flce does) or as the products' α, applied to the f32 sum before the one rounding
(built and measured on the H200 in s44, benchmarks/h200-2026-12-04-s44/alpha.patch: suite errors
2.45–2.62e-3 → 2.07–2.11e-3; reverted for cuBLAS's device-pointer-mode cost at 65k tokens), at
several token counts.

perf-notes v53 records both outputs.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from suite import make_data, rel  # noqa: E402  (bench_peers.py's data; ‖a − b‖ / ‖b‖)


def make(n, d, v, mode, seed):
    """The suite's data on the CPU, its bf16 values held in f64."""
    e, c, t = make_data(n, d, v, mode, seed, torch.bfloat16, "cpu")
    return e.double(), c.double(), t


def bf16(x):
    return x.bfloat16().double()


def f16(x):
    return x.half().double()


def main():
    seed = 0
    print("data  N,D,V            | dE: G pass  row ref | dC: G pass  row ref | dC before its output rounding")
    for mode in ("peaky", "flat"):
        for n, d, v in ((1024, 512, 16384), (512, 1024, 32000), (4096, 256, 16384)):
            seed += 1
            e, c, t = make(n, d, v, mode, seed)
            z = e @ c.T
            valid = t >= 0
            rows = valid.nonzero()[:, 0]
            count = valid.sum().item()
            lse = torch.logsumexp(z, 1, keepdim=True)
            y = torch.zeros_like(z)
            y[rows, t[rows]] = 1.0
            g = (torch.exp(z - lse) - y) * valid[:, None].double() / count  # mean over valid tokens
            de, dc = g @ c, g.T @ e
            g_t = (torch.exp(z[rows, t[rows]] - lse[rows, 0]) - 1.0) / count  # exact target entry

            # today: q in f16 against each 256-column tile's max, G rounded once to bf16
            zt = z.view(n, v // 256, 256)
            m = zt.max(2, keepdim=True).values
            q = f16(torch.exp(zt - m))
            G = (q * torch.exp(m - lse.view(n, 1, 1))).view(n, v) * valid[:, None].double() / count
            G[rows, t[rows]] = g_t
            G = bf16(G)
            de_a, dc_a = bf16(G @ c), bf16(G.T @ e)

            # one reference a row (r = 0: every logit here is within bf16's window), target patched
            f = (valid.double() / count)[:, None] * torch.exp(-lse)
            Q = torch.exp(z)
            Q[rows, t[rows]] = g_t / f[rows, 0]
            Q[~valid] = 0.0
            Q = bf16(Q)
            e_scaled = bf16(f * e)
            de_b, dc_b = bf16(f * (Q @ c)), bf16(Q.T @ e_scaled)
            print(f"{mode:5} {n},{d},{v:<9} |   {rel(de_a, de):.3e} {rel(de_b, de):.3e} |"
                  f"   {rel(dc_a, dc):.3e} {rel(dc_b, dc):.3e} |   {rel(G.T @ e, dc):.3e} {rel(Q.T @ e_scaled, dc):.3e}")


def scale_main():
    n, d, v = 2048, 256, 16384
    e, c, t = make(n, d, v, "peaky", 1)
    z = e @ c.T
    valid = t >= 0
    rows = valid.nonzero()[:, 0]
    y = torch.zeros_like(z)
    y[rows, t[rows]] = 1.0
    g0 = (torch.exp(z - torch.logsumexp(z, 1, keepdim=True)) - y) * valid[:, None].double()
    de0, dc0 = g0 @ c, g0.T @ e
    print("Σw (the mean's 1/g) | dE: g in G  g as α | dC: g in G  g as α")
    for count in (4096, 3891, 3900, 3950, 4000, 7795, 12345, 15565, 15600, 16384):
        g = 1.0 / count
        de, dc = de0 * g, dc0 * g
        inside = bf16(g0 * g)
        outside = bf16(g0)
        print(f"{count:19} |   {rel(bf16(inside @ c), de):.3e} {rel(bf16(g * (outside @ c)), de):.3e} |"
              f"   {rel(bf16(inside.T @ e), dc):.3e} {rel(bf16(g * (outside.T @ e)), dc):.3e}")


if __name__ == "__main__":
    scale_main() if "--scale" in sys.argv[1:] else main()
