#!/usr/bin/env bash
# s47 call 11: memory beyond the gradients of "fast" at Llama 3 (8192, 4096, 128256), with and without return_lse
cp "$0" "$OUT/call.sh"
export PYTHONPATH=/tmp/site FLCE_CACHE_DIR=$(mktemp -d)
python3 - <<'PY' 2>&1 | tee "$OUT/lse-memory.txt"
import torch, flce
for (n, d, v) in [(8192, 4096, 128256), (16384, 4096, 128256), (1024, 4096, 128256)]:
    torch.manual_seed(0)
    e = (torch.randn(n, d, device="cuda") * 0.05).bfloat16().requires_grad_(True)
    c = (torch.randn(v, d, device="cuda") * 0.05).bfloat16().requires_grad_(True)
    t = torch.randint(0, v, (n,), device="cuda")
    grads = (e.numel() + c.numel()) * 2
    for ret in (True, False, True, False):
        e.grad = c.grad = None
        torch.cuda.synchronize(); torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = flce.linear_cross_entropy(e, c, t, workspace_budget="fast", return_lse=ret)
        loss = out[0] if ret else out
        loss.backward(); del out, loss
        torch.cuda.synchronize()
        extra = (torch.cuda.max_memory_allocated() - base - grads) / 2**20
        print(f"N {n}: return_lse={ret}: peak beyond the gradients {extra:.4f} MiB")
PY
