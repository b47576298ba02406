"""s48 call: where flce "fast" and torch.compile spend a forward+backward at Gemma 2 and Llama 3
(peaky bf16, the suite's data), kernel by kernel (torch.profiler, one step after warm-ups, three
profiled steps each, the kernel sums averaged), beside cuBLAS's three products timed as the suite's
floors."""
import os, sys, time
import torch
import torch.nn.functional as F
import flce
sys.path.insert(0, "benchmarks")
from suite import make_data, m_compile
from suite_measure import measure_cublas, timer

SH = {"gemma2": (8192, 2304, 256000), "llama3": (8192, 4096, 128256)}
bench = timer("cuda", rep_ms=300)
for name, (n, d, v) in SH.items():
    e, c, t = make_data(n, d, v, "peaky", 0, torch.bfloat16, "cuda")
    fl = measure_cublas(e, c, bench)
    print(f"## {name}: cuBLAS logits {fl['fwd_ms']:.2f}  dE {fl['de_ms']:.2f}  dC {fl['dc_ms']:.2f}  floor3 {fl['floor3_ms']:.2f} ms")
    ex, cx = e.detach().clone().requires_grad_(True), c.detach().clone().requires_grad_(True)
    methods = {"fast": lambda: flce.linear_cross_entropy(ex, cx, t, workspace_budget="fast", out_dtype=torch.float32),
               "compile": lambda: m_compile(ex, cx, t)}
    for mname, fn in methods.items():
        def stepf():
            ex.grad = cx.grad = None
            fn().backward()
        for _ in range(3):
            stepf()
        torch.cuda.synchronize()
        ms = bench(stepf)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                stepf()
            torch.cuda.synchronize()
        rows = {}
        try:
            for ev in prof.events():
                if ev.device_type == torch.autograd.DeviceType.CUDA:
                    k = ev.name[:90]
                    tot, cnt = rows.get(k, (0.0, 0))
                    rows[k] = (tot + ev.device_time_total / 1000.0, cnt + 1)
        except Exception as x:  # noqa: BLE001
            print("events:", x)
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15))
            continue
        total = sum(v[0] for v in rows.values()) / 3
        print(f"### {name} {mname}: step {ms:.2f} ms timed; kernels {total:.2f} ms a step")
        for k, (tot, cnt) in sorted(rows.items(), key=lambda x: -x[1][0])[:12]:
            print(f"  {tot/3:8.3f} ms  x{cnt/3:5.1f}  {k}")
    del e, c, t, ex, cx
    torch._dynamo.reset()
    import suite; suite._compiled = None
    torch.cuda.empty_cache()
