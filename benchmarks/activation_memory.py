"""What checkpointing with offload (flce.offload) and tiled MLPs
(flce.tiled_mlp) save in one training step of a real-shaped model, against checkpointing alone,
and what flce's planner predicted.

Per mode and context length: the activation memory held between forward and backward (allocated
after the forward minus before it; "of it, blocks": what the decoder blocks hold, allocated when
the final norm starts less the last block's output: the loss's saved tensors aside), the step's peak (torch.cuda.max_memory_allocated), the step
time (CUDA events, median of --repeats after a warm-up step), the loss and the gradient norm of the
warm-up step (before any update: the same weights in every mode; the loss must equal
checkpointing-alone's bitwise, the gradients within the GPU's nondeterministic attention
backward, tiled MLPs aside), and the planner's
(flce.plan) activations and peak for the same setup. Random weights from the model's config (no
download), bf16, AdamW (or LoRA r --lora on q/k/v/o through peft), batch 1.

    python3 benchmarks/activation_memory.py --model Llama-3.2-1B --tokens 16384,32768,65536
    python3 benchmarks/activation_memory.py --model Llama-3.2-1B --fused-adamw   # the backward sets the peak
    python3 benchmarks/activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 --tokens 65536
    python3 benchmarks/activation_memory.py --tiny --device cpu --tokens 128 --repeats 1   # smoke test
    # why a run runs out of memory: its row gets the largest live allocations and their sources
    python3 benchmarks/activation_memory.py --model Gemma-2-2B --lora 16 --gpu-gb 10 --tokens 16384 --oom-report
    # what a step's peak is made of, by allocating code (the planner's terms): --peak-report

Modes: ckpt (flce.patch(checkpoint=True)), offload (+ offload=True), offload_tiled (+ mlp_tiles=4),
offload_tiled_norms (+ norm_tiles=4), offload_streamed (+ stream_weights=True: the layers' frozen
weights from pinned host memory, flce.weights); --tiles sets the tile counts (4); the planner's
column is of the same options.

Each (tokens, mode) runs in a process of its own (--in-process: all in this one), under the same
--gpu-gb cap: what a user's training process sees. In one process, an out-of-memory run left
enough behind that every later run ran out as well (seen on the H200: Gemma 2 at 16k tokens with
offload fits 10 GiB alone, not after checkpointing-alone's out-of-memory at the same length).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys

import torch

import flce
from memory_trace import peak_composition, where
from train_step import step_times  # benchmarks/ is the script's directory, first on sys.path

CONFIGS = {
    # (hidden, intermediate, layers, heads, kv heads, vocab, family)
    "Llama-3.2-1B": (2048, 8192, 16, 32, 8, 128256, "llama"),
    "Gemma-2-2B": (2304, 9216, 26, 8, 4, 256000, "gemma2"),
    "Qwen2.5-1.5B": (1536, 8960, 28, 12, 2, 151936, "qwen2"),
}


def build(args, device, tokens):
    import transformers

    if args.tiny:
        cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                       num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
                                       max_position_embeddings=tokens * 2)
        cls = transformers.LlamaForCausalLM
    else:
        h, i, layers, heads, kv, v, family = CONFIGS[args.model]
        common = dict(hidden_size=h, intermediate_size=i, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv, vocab_size=v, max_position_embeddings=tokens * 2)
        if family == "gemma2":
            cfg, cls = transformers.Gemma2Config(head_dim=256, **common), transformers.Gemma2ForCausalLM
        elif family == "qwen2":
            # Qwen 2.5: q/k/v with biases (Qwen2Attention's own), tied embeddings at this size
            cfg, cls = transformers.Qwen2Config(tie_word_embeddings=True, **common), transformers.Qwen2ForCausalLM
        else:
            # Llama 3.2 1B ties its embeddings (its config.json; LlamaConfig's default does not:
            # the calibration's llama1b-untied runs measured an untied model)
            cfg, cls = transformers.LlamaConfig(tie_word_embeddings=True, **common), transformers.LlamaForCausalLM
    cfg._attn_implementation = args.attn
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    # initialised on the device in its dtype (seconds per mode on the CPU; an f32 copy would not fit
    # the --gpu-gb cap)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = cls(cfg)
    finally:
        torch.set_default_dtype(default)
    if args.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=args.lora, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
        model = model.base_model.model  # flce.patch wants the causal LM itself; the adapters stay inside
    model.train()
    return model


def patch_options(mode, tiles):
    """flce.patch's options of a mode (`tiles`: the tiled modes' MLP and norm tile count)."""
    options = {
        "ckpt": dict(checkpoint=True),
        "offload": dict(checkpoint=True, offload=True),
        "offload_tiled": dict(checkpoint=True, offload=True, mlp_tiles=tiles),
        "offload_tiled_norms": dict(checkpoint=True, offload=True, mlp_tiles=tiles, norm_tiles=tiles),
        "offload_streamed": dict(checkpoint=True, offload=True, mlp_tiles=tiles, norm_tiles=tiles, stream_weights=True),
    }
    if mode not in options:
        raise ValueError(f"unknown mode {mode!r}")
    return options[mode]


def patch(model, mode, tiles=4):
    return flce.patch(model, **patch_options(mode, tiles))


def allocated(device):
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    return torch.cuda.memory_allocated(device)


def run(mode, args, device, tokens):
    model = patch(build(args, device, tokens), mode, args.tiles)
    params = [p for p in model.parameters() if p.requires_grad]
    # fused: one kernel updates each parameter in place; the default foreach step makes a
    # moment-sized temporary list (_foreach_sqrt), which sets a full fine-tune's peak at 16k tokens
    opt = torch.optim.AdamW(params, lr=1e-4, fused=args.fused_adamw and device.type == "cuda")
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), generator=g).to(device)
    measured = {}
    # what the blocks hold: allocated when the final norm starts (every block has run; the last
    # block's output, its input, is the only activation after them), less that output
    at_norm = []
    hidden_bytes = tokens * model.config.hidden_size * 2
    hook = model.model.norm.register_forward_pre_hook(lambda mod, args: at_norm.append(allocated(device)))

    def step(record_memory=False, record_result=False):
        before = allocated(device)
        at_norm.clear()
        loss = model(input_ids=ids, labels=ids).loss
        if record_memory:
            measured["held_mb"] = (allocated(device) - before) / 2**20
            measured["blocks_held_mb"] = (at_norm[0] - before - hidden_bytes) / 2**20 if device.type == "cuda" else 0.0
        loss.backward()
        if record_result:
            measured["grad_norm"] = float(sum(p.grad.double().square().sum() for p in params)) ** 0.5
            measured["loss"] = float(loss.detach())
        opt.step()
        opt.zero_grad(set_to_none=True)

    # warm-up: kernels compiled, optimizer states allocated, pinned pool filled; the loss and
    # gradients of every mode come from this step, before any update (the same weights)
    step(record_result=True)
    tracing = args.peak_report and device.type == "cuda"
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        if tracing:  # only the measured step's allocations, with the Python frames that made them
            measured["trace_base_mb"] = allocated(device) / 2**20
            torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    step(record_memory=True)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else float("nan")
    if tracing:
        index = device.index if device.index is not None else torch.cuda.current_device()
        trace = torch.cuda.memory._snapshot(device)["device_traces"][index]
        torch.cuda.memory._record_memory_history(enabled=None)
        # what the peak is made of, by the code that allocated it (base + peak_mb ≈ peak_mb of the row)
        measured["peak_report"] = peak_composition(trace, top=16)
        del trace
    # what the caching allocator held at the peak: what a per-process cap (--gpu-gb) counts
    reserved = torch.cuda.max_memory_reserved(device) / 2**20 if device.type == "cuda" else float("nan")
    times = step_times(step, device, args.repeats)
    stats = model._flce_offloader.stats() if getattr(model, "_flce_offloader", None) else {}
    streamer = getattr(model, "_flce_streamer", None)
    # pinned host memory: the offloaded inputs' pool and the streamed weights' copies
    pinned = stats.get("pinned_bytes", 0) + (streamer.stats()["pinned_bytes"] if streamer is not None else 0)
    hook.remove()
    del model, opt, params
    gc.collect()  # HF models hold reference cycles: without this the next mode's peak counts this model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return dict(mode=mode, tokens=tokens, step_ms=statistics.median(times), peak_mb=peak, peak_reserved_mb=reserved,
                pinned_mb=pinned / 2**20, **measured)


def oom_report(device, err, top=12):
    """What the memory held when an allocation failed: the failing call's frames in the model's
    code and the largest live allocations with the frames that made them (from the allocator's
    history, recorded with --oom-report)."""
    import traceback

    tb = [dict(filename=f.filename, line=f.lineno, name=f.name) for f in traceback.extract_tb(err.__traceback__)]
    report = dict(failed_at=where(list(reversed(tb))), allocated_mb=torch.cuda.memory_allocated(device) / 2**20)
    try:
        snap = torch.cuda.memory._snapshot(device)
    except Exception as e:  # noqa: BLE001 (a report of a report: never hide the OOM itself)
        report["snapshot_error"] = repr(e)
        return report
    blocks = [(b["size"], where(b.get("frames", []))) for seg in snap.get("segments", []) for b in seg.get("blocks", [])
              if b.get("state") == "active_allocated"]
    blocks.sort(key=lambda x: -x[0])
    report["largest"] = [dict(mb=round(size / 2**20, 1), at=site) for size, site in blocks[:top]]
    by_site = {}
    for size, site in blocks:
        by_site[site] = by_site.get(site, 0) + size
    report["by_site_mb"] = {k: round(v / 2**20, 1) for k, v in sorted(by_site.items(), key=lambda x: -x[1])[:top]}
    return report


def plan_row(model, tokens, mode, tiles, gpu_gb, lora, attn="flex_attention", fused_adamw=False):
    """flce.plan's row for a mode's setup: flce's loss, checkpointing (ckpt) or checkpointing +
    offload, with the mode's tiles and streamed weights."""
    activations = "checkpointing" if mode == "ckpt" else "checkpointing + offload"
    options = patch_options(mode, tiles)
    # torch.optim.AdamW keeps its moments in the parameters' dtype: bf16 for a full fine-tune here,
    # f32 for peft's adapters (peft keeps them in f32)
    rows = flce.plan(model, gpu_gb=gpu_gb, seq=tokens, lora_rank=lora, print_table=False,
                     attention="sdpa" if attn == "sdpa" else "flash",
                     optimizer=("adamw" if lora else "adamw-bf16") + ("-fused" if fused_adamw else ""),
                     mlp_tiles=options.get("mlp_tiles", 1), norm_tiles=options.get("norm_tiles", 1),
                     stream_weights=options.get("stream_weights", False))
    return next(x for x in rows if x["loss"] == "flce" and x["activations"] == activations)


def planned_peak_mb(row):
    """A plan row's peak as torch.cuda.max_memory_allocated counts it: less the CUDA context and
    the allocator's slack (what flce-memory's tests compare)."""
    return (row["peak"] - row["cuda_context"] - row["allocator_slack"]) / 2**20


def predicted(args, tokens, mode):
    if args.tiny:
        return {}
    r = plan_row(args.model, tokens, mode, args.tiles, args.gpu_gb, args.lora, args.attn, args.fused_adamw)
    return dict(plan_held_mb=r["activations_held"] / 2**20, plan_peak_mb=planned_peak_mb(r),
                plan_longest=r["longest_seq"])


def run_in_child(args, cap_gb, tokens, mode):
    """One (tokens, mode) in a fresh process with the same options: its row, or the error it died
    of (the last lines of its output)."""
    cmd = [sys.executable, __file__, "--child", "--model", args.model, "--tokens", str(tokens), "--modes", mode,
           "--lora", str(args.lora), "--repeats", str(args.repeats), "--device", args.device, "--attn", args.attn,
           "--tiles", str(args.tiles)]
    cmd += ["--gpu-gb", str(cap_gb)] if cap_gb else []
    cmd += ["--tiny"] if args.tiny else []
    cmd += ["--fused-adamw"] if args.fused_adamw else []
    cmd += ["--oom-report"] if args.oom_report else []
    cmd += ["--peak-report"] if args.peak_report else []
    done = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(done.stderr[-4000:] if done.returncode else "")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("ROW "):
            return json.loads(line[4:])
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return dict(mode=mode, tokens=tokens, error=f"child exited {done.returncode}: {tail[:200]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="Llama-3.2-1B", choices=sorted(CONFIGS))
    ap.add_argument("--tokens", default="16384,32768,65536")
    ap.add_argument("--modes", default="ckpt,offload,offload_tiled")
    ap.add_argument("--lora", type=int, default=0, help="LoRA rank on q/k/v/o (peft); 0: full fine-tune")
    ap.add_argument("--gpu-gb", type=float, default=None,
                    help="cap this process's GPU memory (torch.cuda.set_per_process_memory_fraction)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tiles", type=int, default=4, help="MLP (and norm) token tiles of the tiled modes")
    ap.add_argument("--tiny", action="store_true", help="a tiny Llama (smoke test)")
    ap.add_argument("--fused-adamw", action="store_true",
                    help="torch.optim.AdamW(fused=True) (CUDA): no moment-sized temporaries in the step, so the "
                         "backward, not the optimizer step, sets a full fine-tune's peak")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=None)
    ap.add_argument("--oom-report", action="store_true",
                    help="record the allocator's history (python stacks) and, when a run runs out of memory, put "
                         "the largest live allocations and where they were made into its row")
    ap.add_argument("--peak-report", action="store_true",
                    help="record the measured step's allocations (python stacks) and put what was live at its "
                         "allocated peak, by the code that allocated it, into its row (benchmarks/memory_trace.py)")
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "flex_attention", "flash_attention_2"],
                    help="Hugging Face's attention implementation (Gemma 2 with sdpa: transformers <= 5.17, "
                         "which runs it without the attention softcap; later versions refuse sdpa for Gemma 2)")
    ap.add_argument("--in-process", action="store_true",
                    help="run every (tokens, mode) in this process (default: a child process each)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.oom_report and args.peak_report:
        ap.error("--oom-report and --peak-report each record the allocator's history: one at a time")
    cap_gb = args.gpu_gb
    device = torch.device(args.device)
    if args.gpu_gb and device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        index = device.index if device.index is not None else torch.cuda.current_device()
        torch.cuda.set_per_process_memory_fraction(min(1.0, args.gpu_gb * 2**30 / total), index)
    args.gpu_gb = args.gpu_gb or (torch.cuda.get_device_properties(device).total_memory / 2**30
                                  if device.type == "cuda" else 10.0)
    rows = []
    for tokens in [int(x) for x in args.tokens.split(",")]:
        for mode in args.modes.split(","):
            if not (args.in_process or args.child):
                row = run_in_child(args, cap_gb, tokens, mode)
                row.update(predicted(args, tokens, mode))
                rows.append(row)
                print(json.dumps(row), flush=True)
                continue
            history = args.oom_report and device.type == "cuda"
            if history:
                torch.cuda.memory._record_memory_history(max_entries=200_000, stacks="python")
            try:
                row = run(mode, args, device, tokens)
            except torch.cuda.OutOfMemoryError as err:
                row = dict(mode=mode, tokens=tokens, error="out of memory")
                if history:
                    row["oom"] = oom_report(device, err)
                del err
                gc.collect()
                torch.cuda.empty_cache()
            finally:
                if history:
                    torch.cuda.memory._record_memory_history(enabled=None)
            if args.child:
                print("ROW " + json.dumps(row), flush=True)
                continue
            row.update(predicted(args, tokens, mode))
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.child:
        return
    print(f"\n{args.model if not args.tiny else 'tiny'}, LoRA r {args.lora or '-'}, GPU cap {args.gpu_gb:.0f} GiB"
          f"{', fused AdamW' if args.fused_adamw else ''}")
    print("| tokens | mode | step ms | held MB (plan) | of it, blocks MB | peak MB (plan) | peak reserved MB | pinned MB "
          "| loss | loss = ckpt's | gradient norm vs ckpt's |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['tokens']} | {r['mode']} | {r['error']} | | | | | | | | |")
            continue
        ref = next((x for x in rows if x["tokens"] == r["tokens"] and x["mode"] == "ckpt" and "error" not in x), None)
        def versus(key):
            if ref is None:
                return "-"
            if r[key] == ref[key]:
                return "bitwise"
            return f"{abs(r[key] - ref[key]) / max(abs(ref[key]), 1e-30):.1e}"
        plan = lambda k: f" ({r[k]:,.0f})" if k in r else ""  # noqa: E731
        print(f"| {r['tokens']} | {r['mode']} | {r['step_ms']:.1f} | {r['held_mb']:,.0f}{plan('plan_held_mb')} | "
              f"{r['blocks_held_mb']:,.0f} | "
              f"{r['peak_mb']:,.0f}{plan('plan_peak_mb')} | {r.get('peak_reserved_mb', float('nan')):,.0f} | "
              f"{r['pinned_mb']:,.0f} | {r['loss']:.5f} | {versus('loss')} | "
              f"{versus('grad_norm')} |")
    if args.out:
        import os

        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                           torch=torch.__version__, args=vars(args), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
