"""The call a user makes by default — ``flce.linear_cross_entropy`` forward and forward+backward
— timed as suite.py times it (same data, CUDA events, L2 flushed), without peers or references:
one JSON line per shape, for A/B runs of two wheels in one device call (scripts/tools/ab-python.sh).

    PYTHONPATH=/tmp/site python3 benchmarks/time_call.py --shapes gemma2,llama3,qwen25
    PYTHONPATH=/tmp/site python3 benchmarks/time_call.py --method flce_fast --shapes llama3_n1024,llama3
(``--method`` any of suite.py's methods or flce@<budget>; shapes by suite.py's names, the Llama 3
sweep's points as llama3_n<N>.)
"""

import argparse
import json

import torch

from suite import make_data, measure, method_fn, shape_of, timer  # benchmarks/ is first on sys.path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="gemma2,llama3,qwen25")
    ap.add_argument("--method", default="flce", help="a suite.py method (default: the call a user makes by default)")
    ap.add_argument("--label", default="", help="copied into every row (which wheel ran)")
    args = ap.parse_args()
    bench = timer("cuda")
    for shape in args.shapes.split(","):
        n, d, v = shape_of(shape)
        e, c, t = make_data(n, d, v, "peaky", 1234, torch.bfloat16, "cuda")
        res, _ = measure(method_fn(args.method), e, c, t, bench, "cuda")
        print(json.dumps(dict(label=args.label, method=args.method, shape=shape, **{k: round(res[k], 3) for k in
                                                                ("fwd_ms", "fb_ms", "fb_extra_mb")})), flush=True)
        del e, c, t


if __name__ == "__main__":
    main()
