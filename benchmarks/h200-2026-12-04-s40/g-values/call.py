"""s40 call 4: does the G that dE = G.C and dC = G^T.E multiply change cuBLAS's time?
suite.py's measure_cublas times them with G = the logits ("values do not change a GEMM's time");
call 2 found the backward ~6 ms faster with G never written (zeros). Here, per model shape
(peaky bf16 data, suite.make_data), cuBLAS's dE and dC with G = the logits, G = the loss's real
gradient (softmax - one-hot, mean-scaled, ignored rows 0, in bf16) and G = zeros; two rounds,
suite.timer (L2 flushed, median)."""
import sys, torch
sys.path.insert(0, "benchmarks")
import suite

torch.backends.cuda.matmul.allow_tf32 = False
DEV = "cuda" if torch.cuda.is_available() else "cpu"
bench = suite.timer(DEV, rep_ms=400.0)
if DEV == "cpu":
    suite.SHAPES = {k: (64, 32, 300) for k in suite.SHAPES}
print("| shape | round | G | logits ms | dE ms | dC ms | dE+dC ÷ (G = logits) |")
print("|---|---|---|---|---|---|---|")
for name in ["gemma2", "llama3", "qwen25"]:
    n, d, v = suite.shape_of(name) if hasattr(suite, "shape_of") else suite.SHAPES[name]
    e, c, t = suite.make_data(n, d, v, "peaky", 0, suite.DTYPES["bf16"], DEV)
    logits = e @ c.T
    valid = t >= 0
    p = torch.softmax(logits.float(), dim=1)
    p[valid, t[valid]] -= 1.0
    p[~valid] = 0.0
    real = (p / valid.sum()).to(torch.bfloat16)
    del p
    frac0 = (real == 0).float().mean().item()
    gs = {"logits": logits, "real": real, "zeros": torch.zeros_like(logits)}
    for rnd in (1, 2):
        base = None
        lg = bench(lambda: e @ c.T)
        for gname, g in gs.items():
            de = bench(lambda: g @ c)
            dc = bench(lambda: g.T @ e)
            base = base or de + dc
            print(f"| {name} | {rnd} | {gname} | {lg:.2f} | {de:.2f} | {dc:.2f} | {(de + dc) / base:.3f} |", flush=True)
    print(f"<!-- {name}: real G exact zeros {100 * frac0:.1f}% -->", flush=True)
    del gs, logits, real, e, c
    torch.cuda.empty_cache()
