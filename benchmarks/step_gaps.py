"""Where a forward + backward's event-timed milliseconds go on the GPU: kernels, or idle time between
them. The suite's timer (suite_measure.timer: L2 flushed by a 256 MB int8 fill, then CUDA events
around the step) is replayed under torch.profiler; the trace's kernels, memsets and copies are cut
into steps at the flush's fill kernel, and each step reports:

  event   the CUDA-event time of the step (as the suite times it, in the same profiled run)
  span    first GPU activity of the step to its last
  busy    the union of the step's GPU intervals (kernels, memsets, copies)
  idle    span - busy: the GPU waiting between the step's own launches
  lead    event - span: from the start event to the first activity and from the last to the end
          event (launch latency, or host work the GPU waits for)

with the largest idle gaps named by the activities on either side. Medians over the profiled
steps. Usage (GPU machine, flce installed):
  python3 benchmarks/step_gaps.py [--shapes gemma2,llama3] [--methods flce_fast,compile] [--steps 5]
"""
import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite  # noqa: E402
from suite import make_data, method_fn, shape_of  # noqa: E402

GPU_CATS = ("kernel", "gpu_memset", "gpu_memcpy")
FLUSH = "FillFunctor<signed char>"


def method(name):
    """A suite method, or flce_fast_nocheck / flce_nocheck: the same call with check_targets=False."""
    if name.endswith("_nocheck"):
        import flce

        budget = "fast" if name.startswith("flce_fast") else None
        return lambda e, c, t: flce.linear_cross_entropy(e, c, t, out_dtype=torch.float32, workspace_budget=budget,
                                                         check_targets=False)
    return method_fn(name)


def gpu_activities(trace_path):
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    acts = [(float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0)), ev["name"]) for ev in events
            if ev.get("ph") == "X" and ev.get("cat") in GPU_CATS]
    return sorted(acts)


def steps_of(acts):
    """The activities between consecutive flush fills (the flushes themselves left out)."""
    steps, cur, seen_flush = [], [], False
    for a in acts:
        if FLUSH in a[2]:
            if seen_flush and cur:
                steps.append(cur)
            cur, seen_flush = [], True
        elif seen_flush:
            cur.append(a)
    if cur:
        steps.append(cur)
    return steps


def step_stats(acts):
    span = acts[-1][1] - acts[0][0]
    busy, gaps = 0.0, []
    cur_s, cur_e, prev_name = acts[0][0], acts[0][1], acts[0][2]
    for s, e, name in acts[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            gaps.append((s - cur_e, prev_name, name))
            cur_s = s
        if e > cur_e:
            cur_e, prev_name = e, name
    busy += cur_e - cur_s
    return span / 1e3, busy / 1e3, sorted(gaps, reverse=True)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def profile_method(fn, e, c, t, n_steps):
    ex = e.detach().clone().requires_grad_(True)
    cx = c.detach().clone().requires_grad_(True)
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")

    def step():
        ex.grad = cx.grad = None
        fn(ex, cx, t).backward()

    for _ in range(3):
        flush.zero_()
        step()
    torch.cuda.synchronize()
    marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n_steps)]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for s, en in marks:
            flush.zero_()
            s.record()
            step()
            en.record()
        flush.zero_()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        steps = steps_of(gpu_activities(path))
    event_ms = [s.elapsed_time(en) for s, en in marks]
    return event_ms, [step_stats(a) for a in steps]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="gemma2,llama3")
    ap.add_argument("--methods", default="flce_fast,flce_fast_nocheck,compile")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--gaps", type=int, default=4, help="largest gaps to name per method")
    args = ap.parse_args()
    rows = []
    for shape in args.shapes.split(","):
        n, d, v = shape_of(shape)
        e, c, t = make_data(n, d, v, "peaky", 0, torch.bfloat16, "cuda")
        for m in args.methods.split(","):
            event_ms, stats = profile_method(method(m), e, c, t, args.steps)
            if len(stats) != len(event_ms):
                print(f"{shape} {m}: {len(stats)} traced steps for {len(event_ms)} timed ones", flush=True)
            ev, span = median(event_ms), median([s[0] for s in stats])
            busy = median([s[1] for s in stats])
            rows.append((shape, m, ev, span, busy, span - busy, ev - span))
            print(f"### {shape} {m}: event {ev:.3f}  span {span:.3f}  busy {busy:.3f}  idle {span - busy:.3f}  "
                  f"lead {ev - span:.3f} ms (medians of {len(stats)} steps)", flush=True)
            mid = stats[len(stats) // 2][2]
            for gap, before, after in mid[:args.gaps]:
                print(f"    gap {gap:8.1f} us  after {before[:60]}  before {after[:60]}")
        del e, c, t
        torch._dynamo.reset()
        suite._compiled = None
        torch.cuda.empty_cache()
    print("\n| shape | method | event ms | span | busy | idle in span | lead |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.3f} | {r[6]:.3f} |")


if __name__ == "__main__":
    main()
