"""One training step of a Llama-style Hugging Face model, end to end, with each loss a user would
pick: the plain HF loss, flce.patch (its default "peak", workspace_budget="min" as "flce@min",
"fast", a byte budget as "flce@1G", and with flce.offload's checkpointing: flce_offload), Liger's patch and
CCE's patch (where they import). Step time (CUDA events, median of --repeats after a warm-up)
and peak memory beyond the weights and optimizer states (the weights' gradients, the same for every
method, are inside it), and the losses, which must agree. The model is built from a config with random weights (no download).
--prompt-fraction f masks the first f of the tokens' labels (-100), as completion-only training
does: a loss that skips ignored rows pays for the rest only.

    python3 benchmarks/train_step.py --tokens 8192,16384 --out benchmarks/results/train_step.json
    python3 benchmarks/train_step.py --device cpu --tiny --tokens 256 --repeats 1     # smoke test
    python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G --profile 25   # where the step's GPU time goes
    python3 benchmarks/train_step.py --tokens 16384 --prompt-fraction 0.5 --methods hf,flce,flce_fast,liger --versus liger
    python3 benchmarks/train_step.py --tokens 16384 --methods liger,flce@2G --rounds 3 --versus liger
        # the methods in turn, three times (a fresh model each), every step pooled: a ratio that
        # drifts of the machine hit alike (single runs of Liger's 16k step ranged 167-176 ms)

Default model: 4 layers, hidden 2048, 16 heads (8 KV), intermediate 8192, vocab 128256 (Llama
3's), bf16, gradient checkpointing on, AdamW; batch 1 × tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch


def build(args, device):
    from transformers import LlamaConfig, LlamaForCausalLM

    if args.tiny:
        cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, vocab_size=1000, max_position_embeddings=4096)
    else:
        cfg = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=args.layers,
                          num_attention_heads=16, num_key_value_heads=8, vocab_size=128256,
                          max_position_embeddings=max(args.tokens_list) * 2)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    # initialised on the device (seconds on the CPU for a billion parameters, per method and size)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(dtype=dtype)
    if args.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model


def apply(method, model):
    import flce

    if method == "flce":
        return flce.patch(model)  # workspace_budget="peak", flce.patch's default
    if method == "flce@min":
        # the loss's own default budget ("min", a direct call's default)
        return flce.patch(model, workspace_budget="min")
    if method == "flce_fast":
        return flce.patch(model, workspace_budget="fast")
    if method == "flce@peak":
        # what the loss can take without raising the step's peak (the previous step's)
        return flce.patch(model, workspace_budget="peak")
    if method.startswith("flce@"):
        # a workspace budget in bytes: "flce@1G", "flce@512M" (what a user with that much to spare sets)
        size = method[5:]
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:].upper(), 1)
        return flce.patch(model, workspace_budget=int(float(size.rstrip("KMGkmg")) * scale))
    if method == "flce_offload":
        # flce's own checkpointing with the layer inputs in pinned host memory (flce.offload)
        return flce.patch(model, checkpoint=True, offload=True)
    if method == "liger":
        from liger_kernel.transformers import apply_liger_kernel_to_llama

        apply_liger_kernel_to_llama(model=model, rope=False, rms_norm=False, swiglu=False, cross_entropy=False,
                                    fused_linear_cross_entropy=True)
        return model
    if method == "cce":
        from cut_cross_entropy.transformers import cce_patch

        return cce_patch(model)
    return model  # "hf": the plain loss


def step_times(step, device, repeats):
    """Milliseconds of each of `repeats` calls of `step` (CUDA events on the GPU)."""
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def profile_step(step, label, top):
    """One more step under torch.profiler (CUDA activity): the step's kernel time against its wall
    time and its `top` kernels by GPU time, summed over launches (scripts/tools/profile_kernels.py's names)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from profile_kernels import kernel_times, timeline

    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        w0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - w0) * 1e3
    # (memcpy and memset included: the step's optimizer and zeroing are part of its GPU time)
    kernels, per, total = kernel_times(prof)
    span, gaps = timeline(kernels)
    print(f"\n## profile {label}: kernels {total:.2f} ms, first kernel start to last end {span:.2f} ms, "
          f"wall {wall:.2f} ms, GPU idle {sum(g[0] for g in gaps):.2f} ms over {len(gaps)} gaps")
    print("| kernel | launches | ms | share |")
    print("|---|---|---|---|")
    for name, (ms, cnt) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"| {name} | {cnt} | {ms:.2f} | {100 * ms / total:.1f}% |")
    return dict(kernel_ms=total, span_ms=span, wall_ms=wall,
                kernels={name: dict(ms=ms, launches=cnt) for name, (ms, cnt) in per.items()})


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(method, args, device, tokens, profile_top=0):
    model = apply(method, build(args, device))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), generator=g).to(device)
    labels = ids.clone()
    # completion-only training: the prompt's labels ignored (each sequence's first share; one sequence here)
    labels[:, :round(args.prompt_fraction * tokens)] = -100

    def step():
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    first = step()  # warm-up: kernels compiled, optimizer states allocated
    sync(device)
    base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = step_times(step, device, args.repeats)
    peak = (torch.cuda.max_memory_allocated(device) - base) / 2**20 if device.type == "cuda" else float("nan")
    profile = (profile_step(step, f"{method} at {tokens} tokens", profile_top)
               if profile_top and device.type == "cuda" else None)
    del model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()
    row = dict(method=method, tokens=tokens, step_ms=statistics.median(times), peak_extra_mb=peak,
               first_loss=float(first), step_ms_all=times)
    if profile:
        row["profile"] = profile
    return row


def pooled(runs):
    """One row per (tokens, method) over the rounds: the median of every timed step of every round
    (`step_ms`), each round's median (`step_ms_rounds`), the highest peak, the first round's loss
    (every round starts from the same seed: the losses agree)."""
    rows = []
    for r in runs:
        if any(x["tokens"] == r["tokens"] and x["method"] == r["method"] for x in rows):
            continue
        same = [x for x in runs if x["tokens"] == r["tokens"] and x["method"] == r["method"] and "error" not in x]
        if not same:
            rows.append({k: v for k, v in r.items() if k != "round"})
            continue
        steps = [t for x in same for t in x["step_ms_all"]]
        row = dict(same[0], step_ms=statistics.median(steps), step_ms_all=steps,
                   step_ms_rounds=[x["step_ms"] for x in same], peak_extra_mb=max(x["peak_extra_mb"] for x in same))
        row.pop("round", None)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="8192,16384")
    ap.add_argument("--methods", default="hf,flce,flce_fast,flce_offload,liger,cce")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--prompt-fraction", type=float, default=0.0,
                    help="this share of the tokens (the sequence's start) is prompt, its labels -100, "
                         "as completion-only training masks them")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-checkpointing", dest="checkpointing", action="store_false")
    ap.add_argument("--tiny", action="store_true", help="a tiny model (smoke test)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the methods in turn this many times (a fresh model each) and pool their steps")
    ap.add_argument("--versus", default=None, metavar="METHOD",
                    help="a column of each method's pooled step time over this method's (e.g. liger)")
    ap.add_argument("--profile", type=int, default=0, metavar="TOP",
                    help="after the timed steps, profile one more (torch.profiler, CUDA) and list its TOP kernels")
    args = ap.parse_args()
    args.tokens_list = [int(x) for x in args.tokens.split(",")]
    device = torch.device(args.device)
    runs = []
    for tokens in args.tokens_list:
        for rnd in range(args.rounds):
            for method in args.methods.split(","):
                try:
                    # (the first round's step is the one profiled)
                    row = run(method, args, device, tokens, profile_top=args.profile if rnd == 0 else 0)
                except ImportError as e:
                    row = dict(method=method, tokens=tokens, error=f"not installed: {e}")
                except torch.cuda.OutOfMemoryError:
                    row = dict(method=method, tokens=tokens, error="out of memory")
                    torch.cuda.empty_cache()
                row["round"] = rnd
                runs.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
    rows = pooled(runs)
    versus = f" | vs {args.versus} (pooled steps)" if args.versus else ""
    print("\n| tokens | method | step ms | peak MB beyond weights + AdamW states (gradients included) | loss | vs hf loss"
          f"{versus} |")
    print("|---|---|---|---|---|---|" + ("---|" if args.versus else ""))
    for r in rows:
        if "error" in r:
            print(f"| {r['tokens']} | {r['method']} | {r['error']} | | | |" + (" |" if args.versus else ""))
            continue
        ref = next((x for x in rows if x["tokens"] == r["tokens"] and x["method"] == "hf" and "error" not in x), None)
        diff = f"{abs(r['first_loss'] - ref['first_loss']) / abs(ref['first_loss']):.1e}" if ref else "-"
        vs = ""
        if args.versus:
            other = next((x for x in rows if x["tokens"] == r["tokens"] and x["method"] == args.versus
                          and "error" not in x), None)
            vs = f" | {r['step_ms'] / other['step_ms']:.3f}" if other else " | -"
        rounds = f" (rounds {', '.join(f'{m:.1f}' for m in r['step_ms_rounds'])})" if len(r["step_ms_rounds"]) > 1 else ""
        print(f"| {r['tokens']} | {r['method']} | {r['step_ms']:.1f}{rounds} | {r['peak_extra_mb']:,.0f} | "
              f"{r['first_loss']:.5f} | {diff}{vs} |")
    if args.out:
        import os

        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                           torch=torch.__version__, rows=rows, runs=runs, args=vars(args)), f, indent=1)


if __name__ == "__main__":
    main()
