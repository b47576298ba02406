"""What a step's allocated peak is made of: a replay of PyTorch's CUDA allocator history.

`torch.cuda.memory._record_memory_history(stacks="python")` before a step and
`torch.cuda.memory._snapshot()` after it give every allocation and free of the step with the
Python frames that made it (`snapshot["device_traces"][device]`). `peak_composition` replays that
trace, finds the moment the allocated bytes were highest and groups what was live then by the
code that allocated it — the terms a memory planner has to count. benchmarks/activation_memory.py
uses it with `--peak-report`; the planner's remaining misses (crates/flce-memory/src/tests.rs:
Gemma-2-2B ~11 KB a token under) are what it is for. Pure Python: no torch needed to analyse.

    python3 benchmarks/memory_trace.py --self-test
"""
import argparse

# a block leaves "allocated" when its free completes: a block used on a side stream
# (record_stream) is freed only once that stream's work is done ("free_requested" before)
_FREE = "free_completed"


def where(frames, keep=("transformers", "flce", "peft", "activation_memory", "torch/nn"), depth=3):
    """The innermost `depth` frames of a stack that belong to the model's code (else the innermost
    ones), as file:line:function."""
    mine = [f for f in frames if any(k in f.get("filename", "") for k in keep)] or frames
    return " < ".join(f"{f['filename'].rsplit('/', 1)[-1]}:{f['line']}:{f['name']}" for f in mine[:depth]) or "?"


def peak_composition(trace, top=12, site=where):
    """The trace's highest allocated bytes (above what was allocated when recording began), the
    event index where it happened, and what was live then: the `top` largest blocks and the bytes
    by allocating site (largest first). Allocations whose free is in the trace but whose alloc is
    not (made before recording) are ignored."""
    frees = _FREE if any(e.get("action") == _FREE for e in trace) else "free_requested"
    total = peak = 0
    peak_at = -1
    live = {}
    for i, e in enumerate(trace):
        action = e.get("action")
        if action == "alloc":
            live[e["addr"]] = e["size"]
            total += e["size"]
            if total > peak:
                peak, peak_at = total, i
        elif action == frees and e["addr"] in live:
            total -= live.pop(e["addr"])
    # the live set at the peak: replay up to it
    live = {}
    for e in trace[: peak_at + 1]:
        if e.get("action") == "alloc":
            live[e["addr"]] = e
        elif e.get("action") == frees:
            live.pop(e["addr"], None)
    blocks = sorted(live.values(), key=lambda e: -e["size"])
    by_site = {}
    for e in blocks:
        s = site(e.get("frames", []))
        by_site[s] = by_site.get(s, 0) + e["size"]
    mb = 2**20
    return dict(peak_mb=round(peak / mb, 1), event=peak_at, events=len(trace),
                largest=[dict(mb=round(e["size"] / mb, 1), at=site(e.get("frames", []))) for e in blocks[:top]],
                by_site_mb={k: round(v / mb, 1) for k, v in sorted(by_site.items(), key=lambda x: -x[1])[:top]})


def self_test():
    """A synthetic trace with a known peak and composition (CI runs this)."""
    f = lambda name: [dict(filename=f"/x/transformers/{name}.py", line=1, name=name)]  # noqa: E731
    trace = [
        dict(action="alloc", addr=1, size=100 << 20, frames=f("mlp")),
        dict(action="alloc", addr=2, size=50 << 20, frames=f("attn")),
        dict(action="free_requested", addr=1, size=100 << 20),  # still allocated: side-stream use
        dict(action="alloc", addr=3, size=30 << 20, frames=f("norm")),  # the peak: 180 MB
        dict(action="free_completed", addr=1, size=100 << 20),
        dict(action="alloc", addr=4, size=60 << 20, frames=f("mlp")),  # 140 MB
        dict(action="free_completed", addr=9, size=5 << 20),  # allocated before recording: ignored
    ]
    r = peak_composition(trace)
    assert (r["peak_mb"], r["event"], r["events"]) == (180.0, 3, 7), r
    assert r["by_site_mb"] == {"mlp.py:1:mlp": 100.0, "attn.py:1:attn": 50.0, "norm.py:1:norm": 30.0}, r
    assert [b["mb"] for b in r["largest"]] == [100.0, 50.0, 30.0], r
    # without free_completed events (no side streams) free_requested frees: the first block goes
    # at once, and the peak is the first two (150 MB, event 1)
    r = peak_composition([e for e in trace if e["action"] != "free_completed"])
    assert (r["peak_mb"], r["event"]) == (150.0, 1) and r["by_site_mb"]["mlp.py:1:mlp"] == 100.0, r
    assert peak_composition([])["peak_mb"] == 0
    print("memory_trace self-test ok")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--self-test", action="store_true")
    if ap.parse_args().self_test:
        self_test()
