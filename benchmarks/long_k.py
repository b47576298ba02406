"""How much of an f32 sum cuBLAS's product keeps over a long K, against the f64 product of the same
16-bit operands — the question behind plan::with_de_k_chunks (docs/journal.md v57).

G = softmax − one-hot of the suite's peaky data (f16 or bf16, unscaled, as flce's passes form
it), α = 2^16/Σw for f16 (AMP's scale) or 1/Σw for bf16; each product through cublasGemmEx on
torch's handle (ctypes), column-major as flce's blas.rs calls it:
  dE = α·G·C [N, D], K = V (the three-product pass's one product), and
  dC = α·Gᵀ·E for the first `--dc-rows` vocabulary rows [rows, D], K = N (every plan's dC at
  large N; a slice of the rows keeps the f64 reference small),
each (a) as one product into the 16-bit type and (b) as K-chunks of `--k-chunk` summed in f32,
then α and one rounding — against the f64 product rounded once (the format's floor).

    python3 benchmarks/long_k.py --shapes gemma2,llama3 --dtype f16
    python3 benchmarks/long_k.py --shapes llama3_n65536 --dtype f16 --skip-de   # dC over K = 65,536
"""
import argparse
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite import make_data, shape_of  # noqa: E402

CUDA_TYPE = {torch.float16: 2, torch.bfloat16: 14}
F32, COMPUTE_32F = 0, 68


def cublas():
    torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")
    path = next(l.split()[-1] for l in open("/proc/self/maps") if "libcublas.so" in l and "Lt" not in l)
    return ctypes.CDLL(path), ctypes.c_void_p(torch.cuda.current_blas_handle())


def gemm(lib, h, alpha, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, in_type, out_type, beta=0.0):
    al, be = ctypes.c_float(alpha), ctypes.c_float(beta)
    assert lib.cublasSetPointerMode_v2(h, 0) == 0
    r = lib.cublasGemmEx(h, ta, tb, m, n, k, ctypes.byref(al), ctypes.c_void_p(a), in_type, lda, ctypes.c_void_p(b),
                         in_type, ldb, ctypes.byref(be), ctypes.c_void_p(c), out_type, ldc, COMPUTE_32F, -1)
    assert r == 0, r


def rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="gemma2,llama3")
    ap.add_argument("--dtype", default="f16", choices=["f16", "bf16"])
    ap.add_argument("--k-chunk", type=int, default=32768)
    ap.add_argument("--dc-rows", type=int, default=4096)
    ap.add_argument("--skip-de", action="store_true")
    a = ap.parse_args()
    dtype = torch.float16 if a.dtype == "f16" else torch.bfloat16
    lib, h = cublas()
    it, es = CUDA_TYPE[dtype], 2
    for name in a.shapes.split(","):
        n, d, v = shape_of(name)
        e, c, t = make_data(n, d, v, "peaky", 0, dtype, "cuda")
        # G in row blocks of tokens (the f32 softmax of all N × V at once would not fit at 65k)
        g = torch.empty(n, v, dtype=dtype, device="cuda")
        for r0 in range(0, n, 4096):
            p = torch.softmax(e[r0:r0 + 4096].float() @ c.float().T, dim=1)
            tt = t[r0:r0 + 4096]
            valid = tt >= 0
            p[valid.nonzero().squeeze(1), tt[valid]] -= 1.0
            p[~valid] = 0
            g[r0:r0 + 4096] = p.to(dtype)
            del p
        alpha = (65536.0 if dtype == torch.float16 else 1.0) / (t >= 0).sum().item()
        rows = []
        if not a.skip_de:
            # dE: column-major D×N = (C as D×V) · (G as V×N), K = V
            ref = (g.double() @ c.double()) * alpha
            one = torch.empty(n, d, dtype=dtype, device="cuda")
            gemm(lib, h, alpha, 0, 0, d, n, v, c.data_ptr(), d, g.data_ptr(), v, one.data_ptr(), d, it, it)
            acc = torch.empty(n, d, dtype=torch.float32, device="cuda")
            for i, k0 in enumerate(range(0, v, a.k_chunk)):
                kk = min(a.k_chunk, v - k0)
                gemm(lib, h, 1.0, 0, 0, d, n, kk, c.data_ptr() + k0 * d * es, d, g.data_ptr() + k0 * es, v,
                     acc.data_ptr(), d, it, F32, beta=0.0 if i == 0 else 1.0)
            rows.append(("dE", v, rel(one, ref), rel((acc * alpha).to(dtype), ref), rel(ref.to(dtype), ref)))
            del ref, one, acc
        # dC of the first rows: column-major D×rows = (E as D×N) · (G[:, :rows] as rows×N)ᵀ, K = N
        m = min(a.dc_rows, v)
        ref = (g[:, :m].double().T @ e.double()) * alpha
        one = torch.empty(m, d, dtype=dtype, device="cuda")
        gemm(lib, h, alpha, 0, 1, d, m, n, e.data_ptr(), d, g.data_ptr(), v, one.data_ptr(), d, it, it)
        acc = torch.empty(m, d, dtype=torch.float32, device="cuda")
        for i, k0 in enumerate(range(0, n, a.k_chunk)):
            kk = min(a.k_chunk, n - k0)
            gemm(lib, h, 1.0, 0, 1, d, m, kk, e.data_ptr() + k0 * d * es, d, g.data_ptr() + k0 * v * es, v,
                 acc.data_ptr(), d, it, F32, beta=0.0 if i == 0 else 1.0)
        rows.append((f"dC[:{m}]", n, rel(one, ref), rel((acc * alpha).to(dtype), ref), rel(ref.to(dtype), ref)))
        for what, k, one_e, chunk_e, floor in rows:
            print(f"{name} {a.dtype} {what}: K {k}: one product {one_e:.3e}, K-chunks of {a.k_chunk} in f32 "
                  f"{chunk_e:.3e}, the f64 product rounded {floor:.3e}", flush=True)
        del e, c, t, g, ref, one, acc
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
