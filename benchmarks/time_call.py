"""The call a user makes by default — ``flce.linear_cross_entropy`` forward and forward+backward
— timed as suite.py times it (same data, CUDA events, L2 flushed), without peers or references:
one JSON line per shape, for A/B runs of two wheels in one device call (scripts/gpu-ab-python.sh).

    PYTHONPATH=/tmp/site python3 benchmarks/time_call.py --shapes gemma2,llama3,qwen25
"""

import argparse
import json

import torch

from suite import SHAPES, make_data, measure, m_flce, timer  # benchmarks/ is first on sys.path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="gemma2,llama3,qwen25")
    ap.add_argument("--label", default="", help="copied into every row (which wheel ran)")
    args = ap.parse_args()
    bench = timer("cuda")
    for shape in args.shapes.split(","):
        n, d, v = SHAPES[shape]
        e, c, t = make_data(n, d, v, "peaky", 1234, torch.bfloat16, "cuda")
        res, _ = measure(m_flce, e, c, t, bench, "cuda")
        print(json.dumps(dict(label=args.label, shape=shape, **{k: round(res[k], 3) for k in
                                                                ("fwd_ms", "fb_ms", "fb_extra_mb")})), flush=True)
        del e, c, t


if __name__ == "__main__":
    main()
