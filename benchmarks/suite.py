"""flce's benchmark suite: flce (Python and Rust paths) beside cuBLAS, torch eager,
torch.compile, Liger and CCE — tables, JSON and plots.

Grown from ../shared/peers/bench_peers.py (which produced DESIGN.md's peer table): same data
generator, reference and measurement method, plus flce, the cuBLAS floor, a token sweep, dtypes,
backward times and plots. Run on the GPU machine (scripts/gpu/suite.sh):

    python3 benchmarks/suite.py --out benchmarks/results            # the default set
    python3 benchmarks/suite.py --device cpu --shapes tiny --methods torch,flce --sweep none   # smoke test

Rows (JSON list; fields of bench_peers.py plus dtype, bwd_ms, fb_extra_mb):
  shape gemma2 | llama3 | qwen25 | llama3_n<N>; data flat | peaky; method flce (the default call) |
  flce_fast (workspace_budget="fast") | flce@<bytes> (workspace_budget=<bytes>, e.g. flce@4G: the
  points of flce's time-against-memory curve, --budgets) | flce_rust |
  cublas | torch | compile | liger | liger_sm90 (Liger's Hopper CuTe-DSL kernel) | cce | cce_nofilter |
  trl (TRL 1.16's chunked log-prob head, ignored rows dropped first) | flce_compile / flce_fast_compile
  (flce's call under torch.compile(fullgraph=True)) | flce_every_row (skip_ignored=False). For cublas
  (measure_cublas), fwd_ms is the logits GEMM, bwd_ms floor3 (logits + dE + dC products, each
  timed) and fb_ms floor4 (2·logits + dE + dC); every other row's printed x4 / x3 are its fb_ms
  over them. Times: medians of CUDA-event-timed calls, L2 flushed before each (see timer); with
  --rounds R each shape's methods are timed R times in turn (A B C A B C …) and the rows carry the
  median of the rounds (fwd_ms_rounds / fb_ms_rounds keep each round's): one pass moved equal
  plans ±4% between runs (journal v56), more than some targets' margins.
  Memory: peak allocation over the inputs (fb_mem_mb includes the gradients; fb_extra_mb is what
  remains after subtracting them).
Results: BENCHMARKS.md and benchmarks/results/2026-12-04-h200-suite/. Reports (tables, plots,
rows from a printed log): benchmarks/suite_report.py; the timer and the measurements:
benchmarks/suite_measure.py.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

# the shapes and the measurements live in suite_measure.py (re-exported: scripts import them from suite)
from suite_measure import (DTYPES, SHAPES, SWEEP, floors, inputs_mb, measure, measure_cublas,  # noqa: F401
                           peak_mb, shape_of, take_median_of_rounds, time_again, timer)



def make_data(n, d, v, mode, seed, dtype, device, prompt_fraction=None, seq_len=1024):
    """bench_peers.py's generator (flat or peaky, trained-like logits; 5% ignored tokens at random).
    With `prompt_fraction` f the ignored tokens are instead prompts, as completion-only training masks
    them: each sequence of `seq_len` tokens (the last one shorter) begins with round(f · its length)
    ignored targets, the rest counted."""
    g = torch.Generator(device=device).manual_seed(seed)
    c = torch.randn(v, d, device=device, generator=g) / math.sqrt(d)
    targets = torch.randint(0, v, (n,), device=device, generator=g)
    if mode == "flat":
        e = torch.randn(n, d, device=device, generator=g)
    else:
        head = torch.randint(0, min(1000, v), (n,), device=device, generator=g)
        unit = lambda x: x / x.norm(dim=1, keepdim=True).clamp_min(1e-6)  # noqa: E731
        conf = 6.0 + 14.0 * torch.rand(n, 1, device=device, generator=g)
        e = conf * unit(c[targets]) + 6.0 * unit(c[head]) + torch.randn(n, d, device=device, generator=g)
    ignore = torch.rand(n, device=device, generator=g) < 0.05
    if prompt_fraction is not None:
        pos = torch.arange(n, device=device)
        start = pos // seq_len * seq_len
        length = torch.clamp(n - start, max=seq_len)
        ignore = pos - start < torch.round(prompt_fraction * length)
    targets = torch.where(ignore, torch.full_like(targets, -100), targets)
    return e.to(dtype).contiguous(), c.to(dtype).contiguous(), targets


def reference(e, c, t, grad_scale=1.0):
    """fp32 loss and gradients (of grad_scale × the loss) from the same (low-precision) inputs,
    TF32 off."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    e32 = e.float().requires_grad_(True)
    c32 = c.float().requires_grad_(True)
    loss = F.cross_entropy(e32 @ c32.T, t, ignore_index=-100)
    (loss * grad_scale).backward()
    out = (loss.detach(), e32.grad.detach(), c32.grad.detach())
    torch.backends.cuda.matmul.allow_tf32 = prev
    return out


def m_torch(e, c, t):
    return F.cross_entropy((e @ c.T).float(), t, ignore_index=-100)


_compiled = None


def m_compile(e, c, t):
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(m_torch)
    return _compiled(e, c, t)


def m_liger(e, c, t):
    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

    return LigerFusedLinearCrossEntropyLoss()(c, e, t)


def m_cce(e, c, t):
    from cut_cross_entropy import linear_cross_entropy

    return linear_cross_entropy(e, c, t)


def m_cce_nofilter(e, c, t):
    from cut_cross_entropy import linear_cross_entropy

    return linear_cross_entropy(e, c, t, filter_eps=None)


def m_flce(e, c, t):
    import flce

    # the call a user makes by default (check_targets reads the status word once per call)
    return flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32)


def m_flce_fast(e, c, t):
    import flce

    # workspace_budget="fast": the three-product pass when gradients are wanted
    return flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32, workspace_budget="fast")


def m_liger_sm90(e, c, t):
    # Liger's Hopper kernel (CuTe DSL; per-token NLL, bf16, no options): needs the
    # nvidia-cutlass-dsl wheels beside liger-kernel (see the brief's Machines section)
    from liger_kernel.ops.fused_linear_scaled_cross_entropy import LigerFusedLinearScaledCrossEntropyFunction

    nll = LigerFusedLinearScaledCrossEntropyFunction.apply(e, c, t)
    return nll.float().sum() / (t != -100).sum().clamp_min(1)


def _trl_kernel():
    # TRL 1.16's fused LM head (trl/kernels/chunked_logprob.py), what its trainers run through
    # add_fused_lm_head. Its backward imports trl.trainer.utils only for a ZeRO-3 gather context (a
    # null context otherwise): a stub stands in for it so that TRL's trainer dependencies (datasets)
    # need not be installed. The kernel itself is TRL's, unchanged (as ../shared/peers/bench_peers.py).
    import contextlib
    import types

    if "trl.trainer.utils" not in sys.modules:
        stub = types.ModuleType("trl.trainer.utils")
        stub.maybe_gather_lm_head_ctx = lambda *p: contextlib.nullcontext()
        sys.modules.setdefault("trl.trainer", types.ModuleType("trl.trainer"))
        sys.modules["trl.trainer.utils"] = stub
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    return ChunkedLogProbFunction


def m_trl(e, c, t):
    # as TRL's add_fused_lm_head calls it: the counted tokens compacted first, 32768-wide vocabulary tiles
    mask = t != -100
    lp = _trl_kernel().apply(e[mask], c, None, t[mask], 1.0, 32768, None, 1.0, ("log_probs",))[0]
    return -lp.float().sum() / mask.sum().clamp_min(1)


def m_flce_every_row(e, c, t):
    # skip_ignored=False: every row through the products, the ignored ones zeroed (what the default
    # costs without the counted rows' compaction)
    import flce

    return flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32, skip_ignored=False)


_compiled_flce = {}


def _flce_compiled(budget):
    """flce's call under torch.compile(fullgraph=True): the counted rows' number a dynamic size."""
    if budget not in _compiled_flce:
        import flce

        def call(e, c, t):
            return flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32, workspace_budget=budget)

        _compiled_flce[budget] = torch.compile(call, fullgraph=True)
    return _compiled_flce[budget]


def m_flce_compile(e, c, t):
    return _flce_compiled(None)(e, c, t)


def m_flce_fast_compile(e, c, t):
    return _flce_compiled("fast")(e, c, t)


METHODS = {"flce": m_flce, "flce_fast": m_flce_fast, "flce_compile": m_flce_compile,
           "flce_fast_compile": m_flce_fast_compile, "flce_every_row": m_flce_every_row, "torch": m_torch, "compile": m_compile, "liger": m_liger,
           "liger_sm90": m_liger_sm90, "cce": m_cce, "cce_nofilter": m_cce_nofilter, "trl": m_trl}

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def budget_bytes(label):
    """'256M', '4G', '1048576' → bytes."""
    label = label.strip().upper()
    return int(float(label[:-1]) * _UNITS[label[-1]]) if label[-1:] in _UNITS else int(label)


def method_fn(name):
    """A method by name; flce@<budget> is flce's default call with workspace_budget=<budget>."""
    if name.startswith("flce@"):
        budget = budget_bytes(name[5:])

        def m_flce_budget(e, c, t):
            import flce

            return flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32, workspace_budget=budget)

        return m_flce_budget
    return METHODS[name]


def flce_plan(method, e, c, t=None):
    """The plan an flce method's call with gradients takes on CUDA (flce.forward_backward_plan, of
    the rows `t` counts when given): "three_product <family> chunk <tokens> <MB> MB" (the token chunk
    and workspace), "vocab_slice <family> head <rows> <MB> MB" (the rows of C that take three
    products) or "recomputing"; None for other methods and on the CPU. Planned at the free memory of
    the moment, as the call plans."""
    if not method.startswith("flce") or method == "flce_rust" or e.device.type != "cuda":
        return None
    import flce

    budget = ("fast" if method.startswith("flce_fast") else budget_bytes(method[5:]) if method.startswith("flce@")
              else None)
    p = flce.forward_backward_plan(e, c, workspace_budget=budget, target=None if method == "flce_every_row" else t)
    if p is None:
        return "recomputing"
    what = f"head {p.chunks[1]}" if p.kind == "vocab_slice" else f"chunk {p.chunks[0]}"
    return f"{p.kind} {p.family} {what} {p.workspace_bytes / 2**20:.0f} MB"


def rel(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def flce_rust_rows(flce_bin, n, d, v, dtype):
    """The Rust API through `flce bench` (times on resident data, CUDA events)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.jsonl")
        cmd = [flce_bin, "bench", "--shapes", f"{n},{d},{v}", "--dtype", dtype, "--json", out]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()[-200:]}")
        with open(out) as f:
            r = json.loads(f.readline())
    return {"fwd_ms": r["fwd_ms"], "fb_ms": r["fb_ms"], "bwd_ms": r["fb_ms"] - r["fwd_ms"],
            "fwd_mem_mb": r["fwd_mem_mb"], "fb_mem_mb": r["fb_mem_mb"],
            "fb_extra_mb": r["fb_mem_mb"] - inputs_mb(n, d, v, dtype)}


def environment(device):
    """What produced the rows: date, GPU, versions, command line."""
    from importlib import metadata

    def version(pkg):
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None

    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "cuda": torch.version.cuda,
        "command": " ".join(["python3"] + sys.argv),
        "versions": {p: version(p) for p in ["flce", "torch", "triton", "liger-kernel", "cut-cross-entropy"]},
    }


def main():
    # the reports import this module's shapes: imported here, not at the top (no import cycle)
    from suite_report import targets, markdown, plots, rows_from_log  # benchmarks/ is first on sys.path

    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="gemma2,llama3,qwen25")
    ap.add_argument("--sweep", default=",".join(str(n) for n in SWEEP),
                    help="token counts at the Llama 3 shape, or 'none'")
    ap.add_argument("--data", default="peaky,flat")
    ap.add_argument("--methods",
                    default="flce,flce_fast,flce_rust,cublas,torch,compile,liger,liger_sm90,cce,cce_nofilter")
    ap.add_argument("--budgets", default="1G,4G,16G",
                    help="workspace budgets for flce's time-against-memory curve at the model shapes "
                         "(methods flce@<budget>; bf16 peaky only), or 'none'")
    ap.add_argument("--sweep-methods", default="flce,flce_fast,cublas,liger,cce,compile")
    ap.add_argument("--dtypes", default="bf16", help="dtypes for every shape")
    ap.add_argument("--extra-dtypes", default="f16,f32", help="dtypes for the first shape only")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--grad-scale", type=float, default=1.0,
                    help="the gradient errors' backward takes grad_scale × the loss, as AMP's loss scale does "
                         "(f16: a mean's dE over thousands of tokens is mostly f16 subnormals at 1, where the "
                         "output's rounding alone costs ~1e-2: journal v54); timings use 1")
    ap.add_argument("--flce-bin", default="gpu-bundle/flce")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--rep-ms", type=float, default=200.0,
                    help="timed calls per measurement: as many as fill this many ms (at least 3, at most 100); "
                         "200 gives ~4 calls of a 50 ms forward+backward, ~±5%% between equal plans")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time each shape's methods this many times in turn and report the medians "
                         "(memory and errors come from the first round)")
    ap.add_argument("--max-minutes", type=float, default=9.0,
                    help="stop starting new measurements after this long (the rest become 'skipped' rows)")
    ap.add_argument("--report", metavar="JSON", help="no measurements: print BENCHMARKS.md's tables of a run")
    ap.add_argument("--from-log", metavar="LOG",
                    help="no measurements: rebuild the rows (results_from_log.json) and the plots in --out "
                         "from a run's printed table")
    args = ap.parse_args()
    if args.report:
        print(markdown(json.load(open(args.report))))
        return
    if args.from_log:
        os.makedirs(args.out, exist_ok=True)
        rows = rows_from_log(args.from_log)
        # beside a run's own results.json, never over it (the raw output keeps every field)
        with open(os.path.join(args.out, "results_from_log.json"), "w") as f:
            json.dump(rows, f, indent=1)
        print(f"{len(rows)} rows from {args.from_log}; plots: {', '.join(plots(rows, args.out))}")
        print(targets(rows))
        return
    started = time.time()
    skipped = f"skipped: past --max-minutes {args.max_minutes}"

    def over_time():
        return time.time() - started > 60 * args.max_minutes
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(environment(args.device), f, indent=1)
    bench = timer(args.device, rep_ms=args.rep_ms)
    plan = []  # (shape, data, dtype, methods, with_reference)
    shapes = [s for s in args.shapes.split(",") if s]
    for i, shape in enumerate(shapes):
        dts = args.dtypes.split(",") + (args.extra_dtypes.split(",") if i == 0 and args.extra_dtypes else [])
        for dt in dts:
            for data in args.data.split(",") if dt == "bf16" else ["peaky"]:
                curve = [f"flce@{b}" for b in args.budgets.split(",") if b and args.budgets != "none"]
                extra = curve if (dt, data) == ("bf16", "peaky") else []
                plan.append((shape, data, dt, args.methods.split(",") + extra, True))
    if args.sweep != "none":
        for n in args.sweep.split(","):
            plan.append((f"llama3_n{n}", "peaky", "bf16", args.sweep_methods.split(","), int(n) <= 16384))
    # `flce bench` generates its own (peaky) data: one flce_rust row per shape and dtype
    plan = [(s, d, dt, [m for m in ms if m != "flce_rust" or d == "peaky"], r) for s, d, dt, ms, r in plan]
    total = sum(len(p[3]) for p in plan)
    try:
        from tqdm import tqdm

        bar = tqdm(total=total, file=sys.stderr)
    except ImportError:  # pragma: no cover
        bar = None
    rows = []
    for shape, data, dt, methods, with_ref in plan:
        n, d, v = shape_of(shape)
        if over_time():
            rows += [dict(shape=shape, data=data, dtype=dt, method=m, error=skipped) for m in methods]
            continue
        e, c, t = make_data(n, d, v, data, 1234, DTYPES[dt], args.device)
        ref = reference(e, c, t, args.grad_scale) if with_ref else None
        for method in methods:
            if bar:
                bar.set_description(f"{shape} {data} {dt} {method}")
            t0 = time.time()
            try:
                if over_time():
                    raise TimeoutError(skipped)
                if method == "cublas":
                    res = measure_cublas(e, c, bench)
                elif method == "flce_rust":
                    res = flce_rust_rows(args.flce_bin, n, d, v, dt)
                else:
                    res, out = measure(method_fn(method), e, c, t, bench, args.device, args.grad_scale)
                    plan = flce_plan(method, e, c, t)
                    if plan is not None:
                        res["plan"] = plan
                    if ref is not None:
                        res["loss_rel"] = abs(out[0].item() - ref[0].item()) / abs(ref[0].item())
                        res["de_rel"] = rel(out[1], ref[1])
                        res["dc_rel"] = rel(out[2], ref[2])
                    del out
                res.setdefault("loss_rel", float("nan"))
                res.setdefault("de_rel", float("nan"))
                res.setdefault("dc_rel", float("nan"))
            except Exception as ex:  # report and go on
                res = {"error": repr(ex)[:300]}
            res.update(shape=shape, data=data, dtype=dt, method=method, secs=round(time.time() - t0, 1))
            rows.append(res)
            with open(os.path.join(args.out, "results.json"), "w") as f:  # after every row: a killed run keeps them
                json.dump(rows, f, indent=1)
            if bar:
                bar.update(1)
            if args.device == "cuda":
                torch.cuda.empty_cache()
        # rounds after the first: the times again, method after method (drift hits all alike)
        timed = [r for r in rows[len(rows) - len(methods):] if "error" not in r and r["method"] != "flce_rust"]
        rounds = {id(r): [(r["fwd_ms"], r["fb_ms"])] for r in timed}
        for _ in range(args.rounds - 1):
            for r in timed:
                if over_time():
                    break
                try:
                    fn = None if r["method"] == "cublas" else method_fn(r["method"])
                    rounds[id(r)].append(time_again(fn, e, c, t, bench))
                except Exception as ex:  # a later round failing keeps the rounds it has
                    r["rounds_error"] = repr(ex)[:300]
                if args.device == "cuda":
                    torch.cuda.empty_cache()
        if args.rounds > 1:
            for r in timed:
                take_median_of_rounds(r, rounds[id(r)])
            with open(os.path.join(args.out, "results.json"), "w") as f:
                json.dump(rows, f, indent=1)
        del e, c, t, ref
        if args.device == "cuda":
            torch.cuda.empty_cache()
    if bar:
        bar.close()
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    files = plots(rows, args.out)
    hdr = (f"{'shape':13} {'data':5} {'dt':4} {'method':13} {'fwd_ms':>8} {'bwd_ms':>8} {'fb_ms':>8} {'fwd_MB':>8} "
           f"{'fb_MB':>9} {'loss_rel':>9} {'dE_rel':>9} {'dC_rel':>9} {'x4':>5} {'x3':>5}")
    print(hdr)
    floor_of = {(r["shape"], r["data"], r["dtype"]): floors(r) for r in rows
                if r["method"] == "cublas" and "error" not in r}
    for r in rows:
        if "error" in r:
            print(f"{r['shape']:13} {r['data']:5} {r['dtype']:4} {r['method']:13} ERROR {r['error'][:70]}")
            continue
        f4, f3 = floor_of.get((r["shape"], r["data"], r["dtype"]), (float("nan"), float("nan")))
        print(f"{r['shape']:13} {r['data']:5} {r['dtype']:4} {r['method']:13} {r['fwd_ms']:8.2f} {r['bwd_ms']:8.2f} "
              f"{r['fb_ms']:8.2f} {r['fwd_mem_mb']:8.1f} {r['fb_mem_mb']:9.1f} {r['loss_rel']:9.2e} "
              f"{r['de_rel']:9.2e} {r['dc_rel']:9.2e} {r['fb_ms'] / f4:5.2f} {r['fb_ms'] / f3:5.2f}  {r.get('plan', '')}")
    print(f"wrote {os.path.join(args.out, 'results.json')} and {', '.join(files) or 'no plots'}")
    print(targets(rows))


if __name__ == "__main__":
    main()
