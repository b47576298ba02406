"""CPU error model (f64 reference, torch) of a forward whose fold runs off the MMA warpgroups on
f16-staged logits — the structure of Liger's SM90 fused scaled CE forward (linkedin/Liger-Kernel
PR 1334: a third warpgroup consumes a padded FP16 shared-memory logits tile, so the online softmax
overlaps the next tile's wgmma), which flce's sm90 forward cannot copy as it is: its fold runs on
the f32 accumulators, in the MMA warpgroups, while the tensor cores idle (docs/perf-notes.md
v32–v38: 6% of a tile at D 2048).

The variant modelled keeps what must stay exact in f32 on the MMA side — each 256-column tile's
row max (FMNMX over the accumulators, ~15% of today's fold) and the target's logit — and stages
d = f16(z − tile_max) ≤ 0 for the other warpgroup, which forms the running max (from the exact
tile maxima), Σ exp and the compact forward's q = f16(exp(d + tile_max − m_run)) in f32 from d.
So the only new rounding is d's: |error| ≤ 2⁻¹¹·|z − tile_max|, small where p is large.

Measured against f64 on flat and planted-outlier ("peaky") data, beside today's fold (exact f32
statistics; q rounded to f16 once): the loss, lse, and dE / dC of the three-product pass (G from
q and lse, the target's G exact, bf16 output rounding as the GPU tests measure) and of the
four-product default (G recomputed from the exact logits with the staged fold's lse). A second
table: the four-product backward's G kernel staged the same way (g_variants).

    python3 scripts/model_f16_fold.py        # ~1 min on 2 cores
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_g_fold import bf, case, f16, rel  # noqa: E402  (the same data and rounding as its sibling)


def grads(p_like, lse, z, t, c, e, exact_target):
    """dE, dC (bf16-rounded G, mean reduction) from G = p_like − y, the target's G from its exact logit."""
    n = z.shape[0]
    ar = torch.arange(n)
    g = p_like.clone()
    g[ar, t] = torch.exp(z[ar, t] - lse) - 1 if exact_target else g[ar, t] - 1
    g = bf(g / n)
    return bf(g @ c), bf(g.T @ e)


def variants(e, c, t):
    n, v = e.shape[0], c.shape[0]
    ar = torch.arange(n)
    z = e @ c.T  # the f32 accumulators (f64 here: their own rounding is the same in every variant)
    lse = torch.logsumexp(z, 1)
    p = torch.exp(z - lse[:, None])
    y = torch.zeros_like(p)
    y[ar, t] = 1
    g_exact = (p - y) / n
    de_ref, dc_ref = g_exact @ c, g_exact.T @ e
    loss_ref = (lse - z[ar, t]).mean()
    zt = z.view(n, v // 256, 256)
    tile_max = zt.max(2).values
    m_run = torch.cummax(tile_max, 1).values
    out = {}
    # today: exact statistics; q = f16(exp(z − m_run)) for the three-product pass
    q = f16(torch.exp(zt - m_run[:, :, None]))
    scale = torch.exp(m_run - lse[:, None])[:, :, None]
    de3, dc3 = grads((q * scale).view(n, v), lse, z, t, c, e, True)
    de4, dc4 = grads(p, lse, z, t, c, e, True)
    out["today (f32 fold)"] = (0.0, 0.0, rel(de3, de_ref), rel(dc3, dc_ref), rel(de4, de_ref), rel(dc4, dc_ref))
    # staged: d = f16(z − tile_max); the fold and q from d in f32
    dst = f16(zt - tile_max[:, :, None])
    ex = torch.exp(dst + (tile_max - m_run)[:, :, None])  # exp(z − m_run) from the staged value
    m_fin = m_run[:, -1]
    lse_s = m_fin + torch.log((ex * torch.exp(m_run - m_fin[:, None])[:, :, None]).sum((1, 2)))
    loss_s = (lse_s - z[ar, t]).mean()
    q_s = f16(ex)
    scale_s = torch.exp(m_run - lse_s[:, None])[:, :, None]
    de3s, dc3s = grads((q_s * scale_s).view(n, v), lse_s, z, t, c, e, True)
    p4 = torch.exp(z - lse_s[:, None])
    de4s, dc4s = grads(p4, lse_s, z, t, c, e, True)
    out["staged f16(z − tile max)"] = (abs((loss_s - loss_ref) / loss_ref).item(), (lse_s - lse).abs().max().item(),
                                       rel(de3s, de_ref), rel(dc3s, dc_ref), rel(de4s, de_ref), rel(dc4s, dc_ref))
    return out


def g_variants(e, c, t):
    """The four-product backward's G kernel (flce_sm90_grad) with its epilogue off the MMA
    warpgroups the same way: the consumers stage a 16-bit d per logit, other warps form
    G = exp(d + shift − lse) − y from it (the target's G from its exact logit, as today) and store
    it in bf16. dE / dC relative errors against f64 of: today (G from the f32 logits), d =
    f16(z − lse) (one FADD a logit on the MMA side), d = f16(z − tile max) (the forward's staging:
    an FMNMX pass more, d = 0 exactly at each tile's largest logit), and d = bf16(z − lse)."""
    n, v = e.shape[0], c.shape[0]
    z = e @ c.T
    lse = torch.logsumexp(z, 1)
    p = torch.exp(z - lse[:, None])
    ar = torch.arange(n)
    y = torch.zeros_like(p)
    y[ar, t] = 1
    g_exact = (p - y) / n
    de_ref, dc_ref = g_exact @ c, g_exact.T @ e
    zt = z.view(n, v // 256, 256)
    tile_max = zt.max(2).values[:, :, None]
    staged = {
        "today (f32 logits)": p,
        "f16(z − lse)": torch.exp(f16(z - lse[:, None])),
        "f16(z − tile max)": torch.exp(f16(zt - tile_max) + tile_max - lse[:, None, None]).view(n, v),
        "bf16(z − lse)": torch.exp(bf(z - lse[:, None])),
    }
    out = {}
    for name, p_like in staged.items():
        de, dc = grads(p_like, lse, z, t, c, e, True)
        out[name] = (rel(de, de_ref), rel(dc, dc_ref))
    return out


def main():
    print("| data | (N, D, V) | variant | loss rel | lse max abs | 3-product dE / dC | 4-product dE / dC |")
    print("|---|---|---|---|---|---|---|")
    for peaky in (False, True):
        for n, d, v in [(512, 256, 8192), (256, 1024, 16384), (1024, 128, 4096)]:
            for name, r in variants(*case(n, d, v, peaky, 1)).items():
                print(f"| {'peaky' if peaky else 'flat'} | ({n}, {d}, {v}) | {name} | {r[0]:.1e} | {r[1]:.1e} | "
                      f"{r[2]:.2e} / {r[3]:.2e} | {r[4]:.2e} / {r[5]:.2e} |")
    print("\nThe four-product backward's G staged (g_variants): dE / dC relative error against f64\n")
    names = None
    for peaky in (False, True):
        for n, d, v in [(512, 256, 8192), (256, 1024, 16384), (1024, 128, 4096)]:
            r = g_variants(*case(n, d, v, peaky, 1))
            if names is None:
                names = list(r)
                print("| data | (N, D, V) | " + " | ".join(names) + " |")
                print("|---|---|" + "---|" * len(names))
            cells = " | ".join(f"{r[k][0]:.2e} / {r[k][1]:.2e}" for k in names)
            print(f"| {'peaky' if peaky else 'flat'} | ({n}, {d}, {v}) | {cells} |")


if __name__ == "__main__":
    main()
