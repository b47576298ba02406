"""s48: the time of dE as one product over K = V into bf16 (the three-product pass's) against K in
chunks of ≤ 32,768 columns into an f32 accumulator (host β 1) and one α-rounding to bf16 (torch's
elementwise, as flce's round_scaled_into), at Gemma 2 / Llama 3 on a real G, interleaved, L2
flushed, medians of 8."""
import ctypes, statistics, sys
import torch
sys.path.insert(0, "benchmarks")
from suite import make_data

torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")
path = next(l.split()[-1] for l in open("/proc/self/maps") if "libcublas.so" in l and "Lt" not in l)
lib = ctypes.CDLL(path)
h = ctypes.c_void_p(torch.cuda.current_blas_handle())
BF16, F32, C32F = 14, 0, 68
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def gemm(alpha, a, b, c, ctype, m, n, k, lda, ldb, ldc, beta=0.0):
    al, be = ctypes.c_float(alpha), ctypes.c_float(beta)
    r = lib.cublasGemmEx(h, 0, 0, m, n, k, ctypes.byref(al), ctypes.c_void_p(a), BF16, lda, ctypes.c_void_p(b), BF16, ldb,
                         ctypes.byref(be), ctypes.c_void_p(c), ctype, ldc, C32F, -1)
    assert r == 0, r


for name, (n, d, v) in {"gemma2": (8192, 2304, 256000), "llama3": (8192, 4096, 128256)}.items():
    e, c, t = make_data(n, d, v, "peaky", 0, torch.bfloat16, "cuda")
    p = torch.softmax((e @ c.T).float(), dim=1)
    valid = t >= 0
    p[valid, t[valid]] -= 1.0
    g = p.bfloat16().contiguous()
    del p
    alpha = 1.0 / valid.sum().item()
    de = torch.empty(n, d, dtype=torch.bfloat16, device="cuda")
    acc = torch.empty(n, d, dtype=torch.float32, device="cuda")
    chunk = 32768
    ks = list(range(0, v, chunk))

    def one():
        gemm(alpha, c.data_ptr(), g.data_ptr(), de.data_ptr(), BF16, d, n, v, d, v, d)

    def chunked():
        for i, k0 in enumerate(ks):
            kk = min(chunk, v - k0)
            gemm(1.0, c.data_ptr() + k0 * d * 2, g.data_ptr() + k0 * 2, acc.data_ptr(), F32, d, n, kk, d, v, d,
                 beta=0.0 if i == 0 else 1.0)
        torch.mul(acc, alpha, out=acc)
        de.copy_(acc)

    res = {"one": [], "chunked": []}
    for rep in range(10):
        for k, f in (("one", one), ("chunked", chunked)):
            flush.zero_()
            s, f_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); f(); f_.record(); torch.cuda.synchronize()
            if rep >= 2:
                res[k].append(s.elapsed_time(f_))
    a, b = statistics.median(res["one"]), statistics.median(res["chunked"])
    print(f"{name}: dE one product {a:.3f} ms, {len(ks)} K-chunks into f32 + rounding {b:.3f} ms: {b / a:.4f}", flush=True)
    del e, c, t, g, de, acc
    torch.cuda.empty_cache()
