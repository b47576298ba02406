"""Which allocations are alive at the peak of one flce_fast step at (1024, 4096, 128256)?"""
import sys
import torch
import flce

n, d, v = 1024, 4096, 128256
g = torch.Generator(device="cuda").manual_seed(0)
e = torch.randn(n, d, device="cuda", generator=g).to(torch.bfloat16).requires_grad_(True)
c = (torch.randn(v, d, device="cuda", generator=g) / 64).to(torch.bfloat16).requires_grad_(True)
t = torch.randint(0, v, (n,), device="cuda", generator=g)
for budget in ["fast", 4 << 30, None]:
    e.grad = c.grad = None
    flce.linear_cross_entropy(e, c, t, workspace_budget=budget).backward()  # warm-up
    e.grad = c.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=100000)
    flce.linear_cross_entropy(e, c, t, workspace_budget=budget).backward()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak = torch.cuda.max_memory_allocated() - base
    print(f"== budget {budget}: peak {peak / 2**20:.1f} MB over base; grads {(e.numel() + c.numel()) * 2 / 2**20:.1f} MB")
    live, cur, best, at_peak = {}, 0, -1, {}
    for ev in snap["device_traces"][0]:
        if ev["action"] == "alloc":
            live[ev["addr"]] = ev
            cur += ev["size"]
        elif ev["action"] in ("free_requested",) and ev["addr"] in live:
            cur -= live.pop(ev["addr"])["size"]
        if cur > best:
            best, at_peak = cur, dict(live)
    print(f"   traced peak {best / 2**20:.1f} MB; alive then (>= 1 MB):")
    for ev in sorted(at_peak.values(), key=lambda x: -x["size"]):
        if ev["size"] < 1 << 20:
            continue
        frames = [f"{f['filename'].split('/')[-1]}:{f['line']}:{f['name']}" for f in ev.get("frames", [])
                  if f["filename"].endswith(".py")][:6]
        print(f"   {ev['size'] / 2**20:9.1f} MB  " + " <- ".join(frames))
    sys.stdout.flush()
