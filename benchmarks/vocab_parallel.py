"""The vocabulary-parallel scaling measurement: flce.vocab_parallel.linear_cross_entropy across P GPUs (NCCL, one
process a GPU, NVLink multicast off), the classifier split by vocabulary rows.

Per P: forward+backward time per call (CUDA events, median, the same on every rank), the
collectives alone at the call's sizes (the forward's all-gathers of [N, 6] f64 partials and the
Σ w_j, the backward's all-gather of dE's [N, D] f32 shares), the bytes each rank receives, and for
P = 1 the single-GPU call (flce.linear_cross_entropy) as the reference. Weak scaling: N = 8192·P
tokens; strong: N = 8192. bf16, Llama 3's D and V, random data.

    python3 benchmarks/vocab_parallel.py --ranks 2 --out vocab_parallel.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

D, V = 4096, 128256


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def worker(rank, ranks, init, results, tokens_list, reps):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    import flce

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=init, rank=rank, world_size=ranks)
    dev = f"cuda:{rank}"
    rows = [V // ranks + (1 if k < V % ranks else 0) for k in range(ranks)]
    lo = sum(rows[:rank])
    out = []
    try:
        for mode, n in tokens_list:
            g = torch.Generator(device=dev).manual_seed(7)
            e = (torch.randn(n, D, device=dev, generator=g) / D ** 0.25).bfloat16()
            c_all = (torch.randn(V, D, device=dev, generator=g) / D ** 0.25).bfloat16()
            t = torch.randint(0, V, (n,), device=dev, generator=g)
            c = c_all[lo:lo + rows[rank]].clone()
            del c_all
            x, w = e.clone().requires_grad_(True), c.clone().requires_grad_(True)

            def step():
                x.grad = w.grad = None
                flce.vocab_parallel.linear_cross_entropy(x, w, t).backward()

            ms = timed(step, reps)
            part, de = torch.empty(n, 6, dtype=torch.float64, device=dev), torch.empty(n, D, device=dev)
            bufs_p = [torch.empty_like(part) for _ in range(ranks)]
            bufs_d = [torch.empty_like(de) for _ in range(ranks)]
            comm_fwd = timed(lambda: dist.all_gather(bufs_p, part), reps)
            comm_bwd = timed(lambda: dist.all_gather(bufs_d, de), reps)
            row = dict(mode=mode, ranks=ranks, tokens=n, fb_ms=ms, comm_fwd_ms=comm_fwd, comm_bwd_ms=comm_bwd,
                       recv_fwd_mb=(ranks - 1) * n * 6 * 8 / 2**20, recv_bwd_mb=(ranks - 1) * n * D * 4 / 2**20)
            if ranks == 1:
                xs, ws = e.clone().requires_grad_(True), c.clone().requires_grad_(True)

                def single():
                    xs.grad = ws.grad = None
                    flce.linear_cross_entropy(xs, ws, t).backward()

                row["single_gpu_ms"] = timed(single, reps)
            out.append(row)
            del e, c, x, w, part, de, bufs_p, bufs_d
            torch.cuda.empty_cache()
        if rank == 0:
            results[ranks] = out
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="1,2", help="process counts to run (each needs that many GPUs)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("vocab_parallel.py needs CUDA GPUs (NCCL)")
    results = mp.Manager().dict()
    for p in [int(x) for x in a.ranks.split(",")]:
        if p > torch.cuda.device_count():
            print(f"P = {p}: only {torch.cuda.device_count()} GPUs, skipped")
            continue
        tokens = [("weak", 8192 * p), ("strong", 8192)]
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(worker, args=(p, "file://" + os.path.join(tmp, "rdv"), results, tokens, a.reps), nprocs=p,
                     join=True)
    rows = [r for p in sorted(results.keys()) for r in results[p]]
    most = max(results.keys(), default=0)
    print(f"# {torch.cuda.get_device_name()} × up to {most}, Llama 3 (D {D}, V {V}), bf16")
    print("| mode | P | tokens | fwd+bwd ms | forward gathers ms (MB in) | backward gather ms (MB in) "
          "| single GPU ms |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        single = f"{r['single_gpu_ms']:.2f}" if "single_gpu_ms" in r else "—"
        print(f"| {r['mode']} | {r['ranks']} | {r['tokens']} | {r['fb_ms']:.2f} | {r['comm_fwd_ms']:.3f} "
              f"({r['recv_fwd_mb']:.1f}) | {r['comm_bwd_ms']:.2f} ({r['recv_bwd_mb']:.0f}) | {single} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
