"""s48: does cuBLAS's device pointer mode (α and β read from the device: the 'bx' nvjet kernels
flce's three-product pass runs for dE and dC) cost time against host mode (β = 0 known: 'bz')?
cublasGemmEx through ctypes on torch's own handle, dE = G·C and dC = Gᵀ·E at Gemma 2 / Llama 3 /
Qwen 2.5 on a real G (softmax − one-hot over the mean, bf16, the suite's peaky data), the modes
interleaved, CUDA events, L2 flushed before each product."""
import ctypes, sys, statistics
import torch
sys.path.insert(0, "benchmarks")
from suite import make_data

torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")
path = next(l.split()[-1] for l in open("/proc/self/maps") if "libcublas.so" in l and "Lt" not in l)
lib = ctypes.CDLL(path)
print("cublas:", path)
h = ctypes.c_void_p(torch.cuda.current_blas_handle())
BF16, F32, C32F, DEFAULT = 14, 0, 68, -1
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def gemm(mode, alpha, beta, opa, opb, m, n, k, a, lda, b, ldb, c, ldc):
    assert lib.cublasSetPointerMode_v2(h, mode) == 0
    r = lib.cublasGemmEx(h, opa, opb, m, n, k, alpha, ctypes.c_void_p(a), BF16, lda, ctypes.c_void_p(b), BF16, ldb,
                         beta, ctypes.c_void_p(c), BF16, ldc, C32F, DEFAULT)
    assert r == 0, r


for name, (n_, d, v) in {"gemma2": (8192, 2304, 256000), "llama3": (8192, 4096, 128256),
                         "qwen25": (8192, 3584, 152064)}.items():
    e, c, t = make_data(n_, d, v, "peaky", 0, torch.bfloat16, "cuda")
    p = torch.softmax((e @ c.T).float(), dim=1)
    valid = t >= 0
    p[valid, t[valid]] -= 1.0
    p[~valid] = 0
    g = (p / valid.sum()).bfloat16().contiguous()
    del p
    scale = 1.0 / 8192
    dev = torch.tensor([scale, 0.0, 1.0], dtype=torch.float32, device="cuda")
    a_dev = ctypes.c_void_p(dev.data_ptr())
    b_dev = ctypes.c_void_p(dev.data_ptr() + 4)
    ha, hb = ctypes.c_float(scale), ctypes.c_float(0.0)
    de = torch.empty(n_, d, dtype=torch.bfloat16, device="cuda")
    dc = torch.empty(v, d, dtype=torch.bfloat16, device="cuda")
    prods = {
        # dE [N, D] = G [N, V] · C [V, D]: column-major D×N = (C as D×V) · (G as V×N)
        "dE": lambda mode, al, be: gemm(mode, al, be, 0, 0, d, n_, v, c.data_ptr(), d, g.data_ptr(), v, de.data_ptr(), d),
        # dC [V, D] = Gᵀ [V, N] · E [N, D]: column-major D×V = (E as D×N) · (G as V×N)ᵀ
        "dC": lambda mode, al, be: gemm(mode, al, be, 0, 1, d, v, n_, e.data_ptr(), d, g.data_ptr(), v, dc.data_ptr(), d),
    }
    modes = {"host α, β 0 (bz)": (0, ctypes.byref(ha), ctypes.byref(hb)), "device α, β (bx)": (1, a_dev, b_dev)}
    res = {(pn, mn): [] for pn in prods for mn in modes}
    outs = {}
    for rep in range(12):
        for pn, pf in prods.items():
            for mn, (mode, al, be) in modes.items():
                flush.zero_()
                s, f = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); pf(mode, al, be); f.record(); torch.cuda.synchronize()
                if rep >= 2:
                    res[(pn, mn)].append(s.elapsed_time(f))
                if rep == 0:
                    outs[(pn, mn)] = (de if pn == "dE" else dc).clone()
    lib.cublasSetPointerMode_v2(h, 0)
    for pn in prods:
        same = torch.equal(*[outs[(pn, mn)] for mn in modes])
        ms = {mn: statistics.median(res[(pn, mn)]) for mn in modes}
        a, b = ms.values()
        print(f"{name} {pn}: " + "  ".join(f"{mn} {x:.3f} ms" for mn, x in ms.items()) + f"  bx/bz {b / a:.4f}  bitwise equal {same}")
    del e, c, t, g, de, dc
    torch.cuda.empty_cache()
