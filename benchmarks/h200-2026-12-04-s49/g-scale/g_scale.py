"""s49 probe: does G's scale change cuBLAS's dE / dC time? flce's three-product pass forms G for
grad_output 1 (softmax − one-hot, values up to 1) and puts grad_output/N in the GEMM's α;
torch.compile's G carries the mean's 1/N. In s48's profile the same nvjet kernels ran 0.3–0.5 ms
faster in torch.compile's step at Llama 3. Time G·C and Gᵀ·E with both Gs (and α = 1/N on the
unscaled one through torch.addmm's alpha... not exposed for mm: α folded is the question), three
alternating rounds, L2 flushed; count G's exact zeros and bf16 subnormals."""
import sys
import torch
import torch.nn.functional as F
sys.path.insert(0, "benchmarks")
from suite import make_data
from suite_measure import timer

bench = timer("cuda", rep_ms=400)
for name, (n, d, v) in {"llama3": (8192, 4096, 128256), "gemma2": (8192, 2304, 256000)}.items():
    e, c, t = make_data(n, d, v, "peaky", 0, torch.bfloat16, "cuda")
    logits = (e @ c.T).float()
    p = torch.softmax(logits, dim=1)
    del logits
    valid = t >= 0
    p[valid, t[valid]] -= 1.0
    p[~valid] = 0.0
    gs = {"unscaled": p.to(torch.bfloat16), "scaled_1/N": (p / valid.sum()).to(torch.bfloat16)}
    del p
    for k, g in gs.items():
        z = (g == 0).float().mean().item()
        sub = ((g != 0) & (g.float().abs() < 2.0 ** -126)).float().mean().item()
        print(f"{name} {k:11s} zeros {z:.4f} subnormals {sub:.4f}", flush=True)
    for rnd in range(3):
        for k, g in gs.items():
            de = bench(lambda: g @ c)
            dc = bench(lambda: g.T @ e)
            print(f"{name} round {rnd} {k:11s} dE {de:6.2f} dC {dc:6.2f} sum {de + dc:6.2f} ms", flush=True)
    del gs, e, c, t
    torch.cuda.empty_cache()
