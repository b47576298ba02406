"""s33 one-off: what workspace_budget="peak" resolves to in benchmarks/train_step.py's step, step by
step: the headroom under the peak so far, the gradients subtracted, the budget, and the
three-product plan it buys (token chunk, workspace), beside the plan at 2 GiB."""
import sys, types, torch
sys.path.insert(0, "benchmarks")
import train_step as ts
import flce, flce.step as st

for tokens in (16384, 8192):
    args = types.SimpleNamespace(tiny=False, layers=4, tokens_list=[tokens], checkpointing=True)
    dev = torch.device("cuda")
    model = ts.apply("flce@peak", ts.build(args, dev))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(1)).to(dev)
    orig = st.peak_budget
    def logged(e, c):
        head = torch.cuda.max_memory_allocated(e.device) - torch.cuda.memory_allocated(e.device)
        grads = (e.numel() + c.numel()) * e.element_size()
        b = orig(e, c)
        o = st.LossOptions(workspace_budget=b)
        plan = st.step_plan_for(e, c, o, (True, True, False)) if b else None
        o2 = st.LossOptions(workspace_budget=2 << 30)
        plan2 = st.step_plan_for(e, c, o2, (True, True, False))
        print(f"{tokens}: head {head / 2**20:.0f} MB, grads {grads / 2**20:.0f} MB, head-grads {(head - grads) / 2**20:.0f} MB, "
              f"budget {b / 2**20:.0f} MB -> {plan}; at 2 GiB -> {plan2}", flush=True)
        return b
    st.peak_budget = logged
    base = None
    for i in range(4):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i == 0:
            base = torch.cuda.memory_allocated(); torch.cuda.reset_peak_memory_stats()
        print(f"  step {i}: peak beyond base {(torch.cuda.max_memory_allocated() - base) / 2**20:.0f} MB, "
              f"reserved {torch.cuda.memory_reserved() / 2**20:.0f} MB", flush=True)
    st.peak_budget = orig
    del model, opt; torch.cuda.empty_cache()
