"""Print the PyTorch numbers pinned in crates/flce-core/tests/pytorch_parity.rs.

The inputs are closed-form (no RNG), so the Rust test rebuilds them exactly:
    e[i, k] = sin(0.37 * (i * D + k) + 0.1)          (N = 4, D = 3)
    c[j, k] = 0.5 * cos(0.91 * (j * D + k))          (V = 5)
    w[j]    = 0.5 + 0.25 * (j % 3)
    targets = [0, 4, IGNORE, 2]
computed in float64 with F.cross_entropy on the logits e @ c.T. Run with any torch >= 2.0:
    python3 scripts/tools/pytorch_expected.py
"""
import math
import torch
import torch.nn.functional as F

N, D, V = 4, 3, 5
e = torch.tensor([[math.sin(0.37 * (i * D + k) + 0.1) for k in range(D)] for i in range(N)], dtype=torch.float64)
c = torch.tensor([[0.5 * math.cos(0.91 * (j * D + k)) for k in range(D)] for j in range(V)], dtype=torch.float64)
w = torch.tensor([0.5 + 0.25 * (j % 3) for j in range(V)], dtype=torch.float64)


def case(name, targets, **kw):
    ee = e.clone().requires_grad_(True)
    cc = c.clone().requires_grad_(True)
    loss = F.cross_entropy(ee @ cc.T, torch.tensor(targets), **kw)
    out = loss.sum() if loss.dim() else loss
    if torch.isfinite(out):
        (loss * torch.arange(1, loss.numel() + 1, dtype=torch.float64).reshape(loss.shape)).sum().backward()
    vals = loss.detach().reshape(-1).tolist()
    print(f"// {name}: loss {kw}")
    print(f"{name}_loss = {vals!r}")
    if ee.grad is not None:
        print(f"{name}_de = {ee.grad.reshape(-1).tolist()!r}")
        print(f"{name}_dc = {cc.grad.reshape(-1).tolist()!r}")


print("torch", torch.__version__)
case("weighted_smoothed_mean", [0, 4, -100, 2], weight=w, label_smoothing=0.2)
case("weighted_mean", [0, 4, -100, 2], weight=w)
case("weighted_smoothed_sum", [0, 4, -100, 2], weight=w, label_smoothing=0.2, reduction="sum")
case("weighted_smoothed_none", [0, 4, -100, 2], weight=w, label_smoothing=0.2, reduction="none")
case("smoothed_mean", [0, 4, -100, 2], label_smoothing=0.3)
case("custom_ignore", [0, 3, 3, 2], weight=w, label_smoothing=0.1, ignore_index=3)
case("all_ignored_mean", [-100, -100, -100, -100])
case("all_ignored_sum", [-100, -100, -100, -100], reduction="sum")
