"""s45 call 5: where the 16k training step's peak is, for Liger's patch and flce.patch ("peak"),
and which budget flce's "peak" resolves to at each step. Per step: the peak since the step began
(MB beyond the post-warm-up base) at three points — after the forward, after backward, after
the optimizer — and with the harness's single reset (benchmarks/train_step.py) the running peak."""
import argparse, sys, types
import torch
sys.path.insert(0, "benchmarks")
import train_step as ts
import flce, flce.step as fstep

budgets = []
orig = fstep.peak_budget
def logged(e, c):
    b = orig(e, c)
    head = torch.cuda.max_memory_allocated(e.device) - torch.cuda.memory_allocated(e.device)
    budgets.append((b >> 20, head >> 20))
    return b
fstep.peak_budget = logged

args = types.SimpleNamespace(tiny=False, layers=4, tokens_list=[16384], checkpointing=True)
dev = torch.device("cuda")
for method in ("liger", "flce", "liger", "flce"):
    model = ts.apply(method, ts.build(args, dev))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (1, 16384), generator=g).to(dev)
    def step(marks):
        loss = model(input_ids=ids, labels=ids).loss
        torch.cuda.synchronize(); marks.append(torch.cuda.max_memory_allocated())
        loss.backward()
        torch.cuda.synchronize(); marks.append(torch.cuda.max_memory_allocated())
        opt.step(); opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize(); marks.append(torch.cuda.max_memory_allocated())
    step([]); torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    budgets.clear()
    torch.cuda.reset_peak_memory_stats()
    rows = []
    for i in range(6):
        m = []
        step(m)
        rows.append([(x - base) / 2**20 for x in m])
    print(f"{method}: harness-style (one reset), running peak after fwd / bwd / opt, MB beyond base:")
    for i, r in enumerate(rows):
        print(f"  step {i}: " + " / ".join(f"{x:,.1f}" for x in r) + (f"   flce budget MB, headroom MB: {budgets[i]}" if i < len(budgets) else ""))
    budgets.clear()
    rows = []
    for i in range(4):
        torch.cuda.reset_peak_memory_stats()
        m = []
        step(m)
        rows.append([(x - base) / 2**20 for x in m])
    print(f"{method}: a reset before each step, the step's own peak after fwd / bwd / opt:")
    for i, r in enumerate(rows):
        print(f"  step {i}: " + " / ".join(f"{x:,.1f}" for x in r) + (f"   flce budget MB, headroom MB: {budgets[i]}" if i < len(budgets) else ""))
    del model, opt
    torch.cuda.empty_cache()
