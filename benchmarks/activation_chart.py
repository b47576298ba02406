"""A 10 GB card as one chart: Gemma-2-2B LoRA r 16 under a 10 GiB cap on the H200, peak
memory against tokens for each flce.patch memory option, the steps measured
(benchmarks/activation_memory.py's JSON) beside the planner's curve for the same setup
(activation_memory.plan_row: flce.plan with the mode's flce.patch options), and the card's size.

    python3 benchmarks/activation_chart.py --out benchmarks/results/2026-12-01-h200-planner-calibration/gemma2-10gib.png

Measured points are allocated peaks (torch.cuda.max_memory_allocated), compared with the plan's
peak less its CUDA context and allocator slack (the same quantity flce-memory's tests check); a
step that ran out of memory is an x at the cap. The planner's longest context for each option is
where its full peak (slack included) crosses the card. Writes the PNG and, beside it, the plotted
numbers as JSON.
"""
import argparse
import glob
import json
import os

from activation_memory import plan_row, planned_peak_mb  # benchmarks/ is first on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))
# the tiled modes of activation_memory.py (their options: activation_memory.patch_options) and a label each
MODES = {
    "offload_tiled": "offload + MLP tiles",
    "offload_tiled_norms": "offload + MLP and norm tiles",
    "offload_streamed": "offload + tiles + streamed weights",
}
C = "results/2026-12-01-h200-planner-calibration/"
DEFAULT_RUNS = [C + "gemma2-lora-10gib-longest/*.json", C + "norm-tiles/*.json", C + "norm-tiles-off/*.json",
                C + "streamed-weights/*.json"]


def measured_runs(patterns):
    """(mode, tiles, tokens, peak MB or None for out of memory, source) of the 10 GiB Gemma runs."""
    runs = []
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(HERE, pattern))):
            data = json.load(open(path))
            args = data.get("args", {})
            if args.get("model") != "Gemma-2-2B" or args.get("gpu_gb") != 10.0 or args.get("lora") != 16:
                continue
            for row in data["rows"]:
                if row["mode"] in MODES:
                    peak = None if row.get("error") else row["peak_mb"]
                    if row.get("error") and row["error"] != "out of memory":
                        continue  # a run that raised says nothing about memory
                    runs.append((row["mode"], args.get("tiles", 4), row["tokens"], peak,
                                 os.path.relpath(path, HERE)))
    return runs


def planned(mode, tiles, tokens):
    """The plan's flce + offload row at this many tokens: (allocated-comparable MB, full peak MB, longest)."""
    row = plan_row("Gemma-2-2B", tokens, mode, tiles, gpu_gb=10, lora=16)
    return planned_peak_mb(row), row["peak"] / 2**20, row["longest_seq"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="*", default=DEFAULT_RUNS, help="JSON globs under benchmarks/")
    ap.add_argument("--out", required=True, help="PNG path")
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = measured_runs(args.runs)
    series = sorted({(m, t) for m, t, *_ in runs}, key=lambda s: (list(MODES).index(s[0]), s[1]))
    grid = list(range(4096, 98_305, 2048))
    fig, ax = plt.subplots(figsize=(9, 5.5))
    cap = 10 * 1024
    ax.axhline(cap, color="k", lw=1)
    ax.text(grid[0], cap + 80, "10 GiB card (the cap)", fontsize=8)
    plotted = {"cap_mb": cap, "series": []}
    for i, (mode, tiles) in enumerate(series):
        color = f"C{i}"
        curve = [planned(mode, tiles, t) for t in grid]
        label = f"{MODES[mode]} ({tiles})"
        ax.plot(grid, [c[0] for c in curve], color=color, lw=1.2, label=f"{label}: plan")
        ax.plot(grid, [c[1] for c in curve], color=color, lw=0.8, ls=":")
        longest = curve[0][2]
        ax.axvline(longest, color=color, lw=0.6, ls="--")
        points = [(t, p, src) for m, k, t, p, src in runs if (m, k) == (mode, tiles)]
        ran = [(t, p) for t, p, _ in points if p is not None]
        oom = [t for t, p, _ in points if p is None]
        ax.scatter([t for t, _ in ran], [p for _, p in ran], color=color, zorder=3, label=f"{label}: ran")
        ax.scatter(oom, [cap] * len(oom), color=color, marker="x", s=60, zorder=3)
        plotted["series"].append(dict(mode=mode, tiles=tiles, plan_longest=longest,
                                      plan=[dict(tokens=t, allocated_mb=round(c[0]), peak_mb=round(c[1]))
                                            for t, c in zip(grid, curve)],
                                      measured=[dict(tokens=t, peak_mb=p, source=s) for t, p, s in points]))
    ax.set_xlabel("tokens (one sequence)")
    ax.set_ylabel("MB")
    ax.set_ylim(0, cap * 1.25)
    ax.set_title("Gemma-2-2B LoRA r 16, flce + checkpointing, H200 under a 10 GiB cap\n"
                 "solid: planned allocated peak; dotted: with allocator slack; dashed: planner's longest; "
                 "x: out of memory", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(plotted, f, indent=1)
    print(f"{args.out}: {len(runs)} measured steps, {len(series)} options")


if __name__ == "__main__":
    main()
