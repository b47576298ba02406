"""The benchmark suite's reports (benchmarks/suite.py): the markdown tables, the plots and the
rows rebuilt from a run's printed table — apart from the measurements, so that a run's output can
be reported again without a GPU (`suite.py --report results.json`, `--from-log suite.log`)."""

from __future__ import annotations

import math
import os

from suite_measure import SHAPES, floors, inputs_mb, shape_of


def flce_curve(rows, shape):
    """flce's points at one shape (bf16, peaky): the default, every budget, "fast" — by extra MB."""
    pts = [r for r in rows if r["shape"] == shape and r["dtype"] == "bf16" and r["data"] == "peaky"
           and (r["method"] in ("flce", "flce_fast") or r["method"].startswith("flce@"))]
    return sorted(pts, key=lambda r: r["fb_extra_mb"])


def plots(rows, out_dir):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if "error" not in r]
    sweep = [r for r in ok if r["shape"].startswith("llama3_n") and r["dtype"] == "bf16"]
    files = []
    if sweep:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for method in sorted({r["method"] for r in sweep}):
            pts = sorted((int(r["shape"][8:]), r["fb_ms"], r["fb_extra_mb"]) for r in sweep if r["method"] == method)
            axes[0].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=method)
            if not all(math.isnan(p[2]) for p in pts):
                axes[1].plot([p[0] for p in pts], [max(p[2], 0.1) for p in pts], marker="o", label=method)
        for ax, ylabel in zip(axes, ["forward+backward ms", "forward+backward peak MB beyond inputs + gradients"]):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("tokens N (Llama 3: D 4096, V 128256)")
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend()
        fig.tight_layout()
        path = os.path.join(out_dir, "sweep_llama3.png")
        fig.savefig(path, dpi=120)
        files.append(path)
    for shape in sorted({r["shape"] for r in ok if not r["shape"].startswith("llama3_n")}):
        sub = [r for r in ok if r["shape"] == shape and r["dtype"] == "bf16" and r["data"] == "peaky"]
        if not sub:
            continue
        fig, ax = plt.subplots(figsize=(8, 4))
        names = [r["method"] for r in sub]
        ax.bar(names, [r["fb_ms"] for r in sub], color="tab:blue", label="forward+backward")
        ax.bar(names, [r["fwd_ms"] for r in sub], color="tab:orange", label="forward")
        ax.set_ylabel("ms")
        ax.set_title(f"{shape} {shape_of(shape)}, bf16, peaky")
        ax.legend()
        fig.tight_layout()
        path = os.path.join(out_dir, f"bars_{shape}.png")
        fig.savefig(path, dpi=120)
        files.append(path)
    for shape in sorted({r["shape"] for r in ok if not r["shape"].startswith("llama3_n")}):
        curve = flce_curve(ok, shape)
        peers = [r for r in ok if r["shape"] == shape and r["dtype"] == "bf16" and r["data"] == "peaky"
                 and r not in curve and not math.isnan(r["fb_extra_mb"])]
        if len(curve) < 2:
            continue
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.plot([max(r["fb_extra_mb"], 1) for r in curve], [r["fb_ms"] for r in curve], marker="o", color="tab:red",
                label="flce over workspace budgets")
        for r in curve:
            ax.annotate(r["method"].replace("flce@", ""), (max(r["fb_extra_mb"], 1), r["fb_ms"]), fontsize=7,
                        textcoords="offset points", xytext=(3, 3))
        for r in peers:
            ax.scatter([max(r["fb_extra_mb"], 1)], [r["fb_ms"]], marker="s", label=r["method"])
        ax.set_xscale("log")
        ax.set_xlabel("forward+backward extra MB beyond inputs + gradients")
        ax.set_ylabel("forward+backward ms")
        ax.set_title(f"{shape} {shape_of(shape)}, bf16, peaky: time against memory (lower left is better)")
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(out_dir, f"tradeoff_{shape}.png")
        fig.savefig(path, dpi=120)
        files.append(path)
    plt.close("all")
    return files


def rows_from_log(path):
    """Rows parsed back from the table a run printed (for a run whose JSON did not come back):
    the same fields, at the printed precision, without `secs`."""
    rows, in_table = [], False
    names = ["fwd_ms", "bwd_ms", "fb_ms", "fwd_mem_mb", "fb_mem_mb", "loss_rel", "de_rel", "dc_rel"]
    for line in open(path):
        f = line.split()
        if f[:4] == ["shape", "data", "dt", "method"]:
            in_table = True
            continue
        if in_table and f[:1] == ["wrote"]:
            break  # (the targets' table follows)
        if not in_table or len(f) < 5:
            continue
        row = dict(shape=f[0], data=f[1], dtype=f[2], method=f[3])
        if f[4] == "ERROR":
            row["error"] = line.split("ERROR", 1)[1].strip()
        else:
            row.update(zip(names, map(float, f[4:12])))
            row["fb_extra_mb"] = row["fb_mem_mb"] - inputs_mb(*shape_of(row["shape"]), row["dtype"])
            if row["method"] == "cublas":
                # measure_cublas's row: bwd_ms is floor3, fb_ms floor4 (suite.floors reads these)
                row["floor3_ms"], row["floor4_ms"] = row["bwd_ms"], row["fb_ms"]
        rows.append(row)
    return rows


def find_row(among, shape, data, dt, method):
    """The row of (shape, data, dtype, method) among `among`, or None."""
    key = (shape, data, dt, method)
    return next((r for r in among if (r["shape"], r["data"], r["dtype"], r["method"]) == key), None)


def markdown(rows):
    """BENCHMARKS.md's tables from a run's rows: per shape (bf16, peaky), the token sweep, the
    dtypes, with ratios to the cuBLAS floors (floor4 = 2·logits + dE + dC, floor3 = logits + dE +
    dC, each product timed: suite.measure_cublas) and to CCE."""
    ok = [r for r in rows if "error" not in r]
    out = []

    def get(shape, data, dt, method):
        return find_row(ok, shape, data, dt, method)

    def failed(shape, data, dt, method):
        return find_row([r for r in rows if "error" in r], shape, data, dt, method)

    def num(x, fmt):
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)

    for shape in [s for s in SHAPES if s != "tiny"]:
        floor, cce, cce_nf = (get(shape, "peaky", "bf16", m) for m in ["cublas", "cce", "cce_nofilter"])
        if floor is None:
            continue
        out += [f"#### {shape} {shape_of(shape)}, bf16, peaky", "",
                "| method | fwd ms | bwd ms | fwd+bwd ms | / floor4 | / floor3 | fwd+bwd / CCE | / CCE no filter "
                "| extra MB beyond grads | dE rel err | dC rel err |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        floor4, floor3 = floors(floor)
        curve = [r["method"] for r in flce_curve(ok, shape) if r["method"].startswith("flce@")]
        for m in ["flce", "flce_fast", *curve, "flce_rust", "cublas", "torch", "compile", "liger", "liger_sm90", "cce",
                  "cce_nofilter"]:
            r = get(shape, "peaky", "bf16", m)
            if r is None:
                continue
            name = {"cublas": "cuBLAS products (logits / floor3 / floor4)"}.get(m, m)
            out.append(f"| {'**' + name + '**' if m == 'flce' else name} | {r['fwd_ms']:.2f} | {r['bwd_ms']:.2f} | "
                       f"{r['fb_ms']:.2f} | {r['fb_ms'] / floor4:.2f}× | {r['fb_ms'] / floor3:.2f}× | "
                       f"{num(cce and r['fb_ms'] / cce['fb_ms'], '.2f')}× | "
                       f"{num(cce_nf and r['fb_ms'] / cce_nf['fb_ms'], '.2f')}× | {num(r['fb_extra_mb'], ',.0f')} | "
                       f"{num(r['de_rel'], '.1e')} | {num(r['dc_rel'], '.1e')} |")
        out.append("")
    sweep = sorted({r["shape"] for r in rows if r["shape"].startswith("llama3_n")}, key=lambda s: int(s[8:]))
    if sweep:
        methods = [m for m in ["flce", "flce_fast", "cublas", "liger", "cce", "compile"] if any(r["method"] == m for r in rows)]
        out += ["#### Token sweep at Llama 3 (D 4096, V 128256), bf16, peaky: fwd+bwd ms (extra MB beyond grads)", "",
                "| N | " + " | ".join(methods) + " | flce / floor4 | flce_fast / floor3 | flce / CCE |",
                "|---|" + "---|" * (len(methods) + 3)]
        for shape in sweep:
            cells = []
            for m in methods:
                r = get(shape, "peaky", "bf16", m)
                bad = failed(shape, "peaky", "bf16", m)
                if r is None:
                    cells.append("OOM" if bad and "OutOfMemory" in bad["error"] else "—")
                elif m == "cublas":
                    cells.append(f"{r['fb_ms']:.1f}")
                else:
                    cells.append(f"{r['fb_ms']:.1f} ({num(r['fb_extra_mb'], ',.0f')})")
            f, fast, c, cc = (get(shape, "peaky", "bf16", m) for m in ["flce", "flce_fast", "cublas", "cce"])
            ratio = lambda a, b: f"{a['fb_ms'] / b:.2f}×" if a and b else "—"  # noqa: E731
            f4, f3 = floors(c) if c else (None, None)
            out.append(f"| {int(shape[8:]):,} | " + " | ".join(cells)
                       + f" | {ratio(f, f4)} | {ratio(fast, f3)} | {ratio(f, cc and cc['fb_ms'])} |")
        out.append("")
    dts = [dt for dt in ["f16", "f32"] if any(r["dtype"] == dt for r in rows)]
    if dts:
        shape = next(r["shape"] for r in rows if r["dtype"] in dts)
        out += [f"#### Other dtypes at {shape}, peaky: fwd+bwd ms (dE / dC rel err)", "",
                "| method | " + " | ".join(["bf16"] + dts) + " |", "|---|" + "---|" * (len(dts) + 1)]
        for m in ["flce", "cublas", "torch", "compile", "liger", "cce"]:
            cells = []
            for dt in ["bf16"] + dts:
                r = get(shape, "peaky", dt, m)
                bad = failed(shape, "peaky", dt, m)
                cells.append(f"{r['fb_ms']:.1f} ({num(r['de_rel'], '.1e')} / {num(r['dc_rel'], '.1e')})" if r else
                             ("unsupported" if bad else "—"))
            out.append(f"| {m} | " + " | ".join(cells) + " |")
        out.append("")
    out.append(targets(rows))
    return "\n".join(out)


PEERS = ["compile", "liger", "liger_sm90", "cce"]


def targets(rows):
    """The project's speed, memory and precision targets against one run (bf16, peaky; every model
    shape and sweep point with a cuBLAS row): flce by default ÷ floor4 (target ≤ 1.0) and ÷
    Liger's Hopper kernel (≤ 0.95); flce "fast" ÷ floor3 (≤ 1.0 at the model shapes) and ÷ the
    fastest peer that ran (≤ 0.95), its extra memory against torch.compile's (≤), and the worse
    of its dE / dC errors (≤ 2.6e-3). A ✓ marks a target met."""
    ok = [r for r in rows if "error" not in r and r["data"] == "peaky" and r["dtype"] == "bf16"]

    def get(shape, method):
        return find_row(ok, shape, "peaky", "bf16", method)

    def mark(x, limit, fmt=".3f"):
        return "—" if x is None or math.isnan(x) else f"{x:{fmt}}{' ✓' if x <= limit else ''}"

    shapes = [s for s in dict.fromkeys(r["shape"] for r in ok) if get(s, "cublas")]
    out = ["#### Targets in this run (bf16, peaky; ✓ met)", "",
           "| shape | flce ÷ floor4 (≤ 1.0) | flce ÷ Liger Hopper (≤ 0.95) | fast ÷ floor3 (≤ 1.0) "
           "| fast ÷ fastest peer (≤ 0.95) | fast extra MB − torch.compile's (≤ 0) | fast dE / dC err (≤ 2.6e-3) |",
           "|---|---|---|---|---|---|---|"]
    for shape in shapes:
        f4, f3 = floors(get(shape, "cublas"))
        flce, fast, sm90, comp = (get(shape, m) for m in ["flce", "flce_fast", "liger_sm90", "compile"])
        peers = [r for r in (get(shape, m) for m in PEERS) if r]
        best = min(peers, key=lambda r: r["fb_ms"]) if peers else None
        cells = [mark(flce and flce["fb_ms"] / f4, 1.0), mark(flce and sm90 and flce["fb_ms"] / sm90["fb_ms"], 0.95),
                 mark(fast and fast["fb_ms"] / f3, 1.0)]
        cells.append(f"{mark(fast['fb_ms'] / best['fb_ms'], 0.95)} ({best['method']})" if fast and best else "—")
        # (MiB to the KiB near zero: flce "fast" and torch.compile hold the same logits' bytes, and
        # what differs is a few small buffers; a rounded "+0.0" would hide a miss)
        extra = fast and comp and fast["fb_extra_mb"] - comp["fb_extra_mb"]
        cells.append(mark(extra, 0.0, "+.3f" if extra is not None and abs(extra) < 10 else "+,.1f"))
        cells.append(mark(fast and max(fast["de_rel"], fast["dc_rel"]), 2.6e-3, ".2e"))
        out.append(f"| {shape} | " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)
