"""The suite's ignored-fraction axis: forward + backward at the model shapes when a fraction f of
the tokens is ignored prompt (each 1024-token sequence begins with round(f · 1024) targets of -100,
as completion-only training masks them), flce beside the peers that skip or keep those rows.

    python3 benchmarks/ignored_tokens.py --out benchmarks/results/<date>-<gpu>-ignored-tokens
    python3 benchmarks/ignored_tokens.py --device cpu --shapes tiny --methods torch,flce,trl,cublas \\
        --out /tmp/ignored                                                            # smoke test

Methods are suite.py's (flce, flce_fast, flce_compile, flce_fast_compile — flce's call under
torch.compile(fullgraph=True) — flce_every_row, skip_ignored=False: every row through the
products, the cost without the skipping — compile, liger, cce, trl, torch) plus cublas: the four products
(suite_measure.measure_cublas) on the counted rows alone, the floor a call that skips the ignored
rows can reach. The data, timer and measurement are the suite's (make_data peaky, L2 flushed,
medians; --rounds R times every method R times in turn). Each row carries `fraction` and
`counted` (the rows that count); the table printed last gives, per shape, every method's fb_ms and
peak at each f, and for flce's methods fb(f) / ((1 − f) · fb(0)), the share of the f = 0 time a
skipping call keeps per counted row (1.00: it pays for the counted rows only).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite import environment, flce_plan, make_data, method_fn, reference, rel  # noqa: E402
from suite_measure import DTYPES, measure, measure_cublas, shape_of, take_median_of_rounds, time_again, timer  # noqa: E402

FLCE = ("flce", "flce_fast", "flce_compile", "flce_fast_compile")  # the targets; flce_every_row is the A/B
PEERS = ("compile", "liger", "cce", "trl")


def cublas_counted(e, c, t, bench):
    """The four products on the counted rows (the floor of a call that skips the rest)."""
    rows = (t != -100).nonzero().squeeze(1)
    return measure_cublas(e.index_select(0, rows), c, bench)


def measure_row(method, e, c, t, ref, bench, device):
    if method == "cublas":
        return cublas_counted(e, c, t, bench)
    res, out = measure(method_fn(method), e, c, t, bench, device)
    plan = flce_plan(method, e, c, t)
    if plan is not None:
        res["plan"] = plan
    if ref is not None:
        res["loss_rel"] = abs(out[0].item() - ref[0].item()) / abs(ref[0].item())
        res["de_rel"] = rel(out[1], ref[1])
        res["dc_rel"] = rel(out[2], ref[2])
    return res


def table(rows, fractions):
    """Per shape: fb_ms and peak MB at each fraction, flce's kept share, and the targets' verdicts."""
    out = []
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    at = {(r["shape"], r["method"], r["fraction"]): r for r in rows if "error" not in r}
    for shape in shapes:
        out.append(f"\n## {shape}: forward + backward ms (peak MB beyond the inputs and gradients)")
        out.append("| method | " + " | ".join(f"f={f:g}" for f in fractions) + " | fb(f) / ((1-f) fb(0)) |")
        out.append("|---|" + "---|" * (len(fractions) + 1))
        for m in methods:
            cells, kept = [], []
            for f in fractions:
                r = at.get((shape, m, f))
                cells.append(f"{r['fb_ms']:.2f} ({r['fb_extra_mb']:,.0f})" if r else "-")
                base = at.get((shape, m, fractions[0]))
                if r and base and f > 0 and fractions[0] == 0:
                    kept.append(f"{r['fb_ms'] / ((1 - f) * base['fb_ms']):.3f}")
            out.append(f"| {m} | " + " | ".join(cells) + " | " + " ".join(kept) + " |")
    verdicts = []
    for shape in shapes:
        for f in fractions:
            peers = [at[(shape, p, f)] for p in PEERS if (shape, p, f) in at]
            best = min(peers, key=lambda r: r["fb_ms"]) if peers else None
            comp = at.get((shape, "compile", f))
            for m in FLCE:
                r, base = at.get((shape, m, f)), at.get((shape, m, 0.0))
                if not r:
                    continue
                line = f"{shape:7} f={f:<4g} {m:18} fb {r['fb_ms']:8.2f} ms"
                if base and f > 0:
                    kept = r["fb_ms"] / ((1 - f) * base["fb_ms"])
                    line += f"  kept {kept:.3f} {'ok' if kept <= 1.03 else 'MISS'}"
                if best:
                    vs = r["fb_ms"] / best["fb_ms"]
                    line += f"  vs {best['method']} {vs:.3f} {'ok' if vs <= 0.95 else 'MISS'}"
                if comp:
                    line += f"  mem {r['fb_extra_mb']:,.0f} vs compile {comp['fb_extra_mb']:,.0f} " + (
                        "ok" if r["fb_extra_mb"] <= comp["fb_extra_mb"] else "MISS")
                if "de_rel" in r:
                    line += f"  dE {r['de_rel']:.1e} dC {r['dc_rel']:.1e}"
                verdicts.append(line)
    out.append("\n## targets: kept <= 1.03 (time at f within (1-f) x time at 0, +3%), <= 0.95x the fastest peer, "
               "memory <= torch.compile's")
    out += verdicts
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="gemma2,llama3,qwen25")
    ap.add_argument("--fractions", default="0,0.3,0.5,0.7")
    ap.add_argument("--methods", default="cublas,flce,flce_every_row,flce_fast,flce_compile,flce_fast_compile,compile,liger,"
                                         "cce,trl")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--data", default="peaky")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--errors", action=argparse.BooleanOptionalAction, default=True,
                    help="loss / dE / dC errors against an fp32 reference (an extra fp32 logits pass per case)")
    ap.add_argument("--rep-ms", type=float, default=200.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-minutes", type=float, default=8.0)
    ap.add_argument("--out", default="benchmarks/results/ignored-tokens")
    args = ap.parse_args()
    fractions = [float(x) for x in args.fractions.split(",")]
    methods = args.methods.split(",")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "meta.json"), "w") as fh:
        json.dump(environment(args.device), fh, indent=1)
    bench = timer(args.device, rep_ms=args.rep_ms)
    started, rows = time.time(), []

    def save():
        with open(os.path.join(args.out, "results.json"), "w") as fh:
            json.dump(rows, fh, indent=1)

    for shape in args.shapes.split(","):
        n, d, v = shape_of(shape)
        for f in fractions:
            if time.time() - started > 60 * args.max_minutes:
                rows += [dict(shape=shape, fraction=f, method=m, error="skipped: past --max-minutes") for m in methods]
                continue
            e, c, t = make_data(n, d, v, args.data, 1234, DTYPES[args.dtype], args.device, prompt_fraction=f)
            counted = int((t != -100).sum())
            ref = reference(e, c, t) if args.errors else None
            first = len(rows)
            for m in methods:
                t0 = time.time()
                try:
                    res = measure_row(m, e, c, t, ref, bench, args.device)
                except Exception as ex:  # report and go on
                    res = {"error": repr(ex)[:300]}
                res.update(shape=shape, fraction=f, counted=counted, method=m, dtype=args.dtype,
                           secs=round(time.time() - t0, 1))
                rows.append(res)
                print(json.dumps({k: res[k] for k in res if k not in ("fwd_ms_rounds", "fb_ms_rounds")}), flush=True)
                save()
                if args.device == "cuda":
                    torch.cuda.empty_cache()
            timed = [r for r in rows[first:] if "error" not in r]
            rounds = {id(r): [(r["fwd_ms"], r["fb_ms"])] for r in timed}
            for _ in range(args.rounds - 1):
                for r in timed:
                    if r["method"] == "cublas":
                        sub = (t != -100).nonzero().squeeze(1)
                        rounds[id(r)].append(time_again(None, e.index_select(0, sub), c, t, bench))
                    else:
                        rounds[id(r)].append(time_again(method_fn(r["method"]), e, c, t, bench))
                    if args.device == "cuda":
                        torch.cuda.empty_cache()
            if args.rounds > 1:
                for r in timed:
                    take_median_of_rounds(r, rounds[id(r)])
                save()
            del e, c, t, ref
            if args.device == "cuda":
                torch.cuda.empty_cache()
    save()
    print(table(rows, fractions))


if __name__ == "__main__":
    main()
