//! `flce bench`: the CUDA backend through the Rust API beside one cuBLAS logits GEMM of the same
//! shape (the floor: an exact forward + backward needs four such products), with the workspace
//! each call uses. Times are medians of CUDA-event-timed calls on resident data.

use clap::Args;
use flce::cuda::{BackwardConfig, DeviceBuffer, ForwardBackwardPlan, ForwardConfig};
use flce::testing::{DataKind, RandomProblem};
use flce::{bf16, f16, DType, Element, Options, Shape};

use crate::gpu_call::GpuCall;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Shapes: gemma2, llama3, qwen25 or N,D,V (comma-separated list of names; N,D,V one at a time).
    #[arg(long, default_value = "gemma2,llama3")]
    shapes: String,
    /// Input dtype.
    #[arg(long, default_value = "bf16")]
    dtype: DType,
    /// Timed iterations per measurement (median reported).
    #[arg(long, default_value_t = 10)]
    iters: usize,
    /// Backward workspace budget in MB (default: flce's default plan).
    #[arg(long)]
    budget_mb: Option<usize>,
    /// Also time the pass that computes the forward and the gradients at once (the three-product
    /// or the vocabulary-slice pass) with this workspace budget in MB; 0 skips it.
    #[arg(long, default_value_t = 4096)]
    workspace_budget_mb: usize,
    /// Forward: auto (the GPU's fastest: fused on Hopper, cublas elsewhere), cublas (cuBLAS chunks
    /// + reduction kernel), fused (the GPU's fastest fused tile kernel) or sm80 (the portable one).
    #[arg(long, default_value = "auto")]
    forward: String,
    /// Backward logits recompute: auto (the GPU's fastest: fused on Hopper, cublas elsewhere),
    /// cublas (cuBLAS product + elementwise kernel), fused (the GPU's fastest fused tile kernel)
    /// or sm80 (the portable one).
    #[arg(long, default_value = "auto")]
    backward: String,
    /// Loss options: plain (none), softcap (a logit softcap of 30 alone: Gemma 2's loss), bias (a
    /// linear bias alone), smoothing (label smoothing 0.1 alone), or all (softcap 30, label
    /// smoothing 0.1, z-loss 1e-4, a bias and class weights: what options cost).
    #[arg(long, default_value = "plain")]
    loss_options: String,
    /// Gradients the backward computes: both (dE and dC) or de (the classifier frozen, as with
    /// LoRA: dE only).
    #[arg(long, default_value = "both")]
    grads: String,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Also write the rows as JSON lines to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

fn parse_shapes(s: &str) -> Result<Vec<(String, Shape)>, String> {
    if s.split(',').count() == 3 && s.split(',').all(|x| x.trim().parse::<usize>().is_ok()) {
        let v: Vec<usize> = s.split(',').map(|x| x.trim().parse().unwrap()).collect();
        return Ok(vec![(format!("{}x{}x{}", v[0], v[1], v[2]), Shape::new(v[0], v[1], v[2]))]);
    }
    s.split(',')
        .map(|name| match name.trim() {
            "gemma2" => Ok(("gemma2".to_string(), Shape::new(8192, 2304, 256_000))),
            "llama3" => Ok(("llama3".to_string(), Shape::new(8192, 4096, 128_256))),
            "qwen25" => Ok(("qwen25".to_string(), Shape::new(8192, 3584, 152_064))),
            other => Err(format!("unknown shape '{other}' (gemma2, llama3, qwen25 or N,D,V)")),
        })
        .collect()
}

pub fn run(args: &BenchArgs) -> flce::Result<()> {
    let shapes = parse_shapes(&args.shapes).map_err(flce::Error::Unsupported)?;
    match args.dtype {
        DType::BF16 => run_typed::<bf16>(args, &shapes),
        DType::F16 => run_typed::<f16>(args, &shapes),
        DType::F32 => run_typed::<f32>(args, &shapes),
    }
}

/// Median CUDA-event time of `f` on the default stream (the stream every call here uses).
pub fn time_ms(warmup: usize, iters: usize, f: impl FnMut() -> flce::Result<()>) -> flce::Result<f32> {
    // SAFETY: the null stream is the default stream of the current context, always valid.
    unsafe { flce::cuda::bench::median_ms(std::ptr::null_mut(), warmup, iters, f) }
}

fn mb(b: usize) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn run_typed<T: Element>(args: &BenchArgs, shapes: &[(String, Shape)]) -> flce::Result<()> {
    let be = flce::cuda_backend(args.device)?;
    be.warm_up(T::DTYPE)?;
    println!(
        "flce bench on {} ({}, {} SMs), {}, median of {} CUDA-event-timed calls",
        be.device_name(),
        be.arch().0,
        be.sm_count(),
        T::DTYPE,
        args.iters
    );
    let (opts, bias, weights) = match args.loss_options.as_str() {
        "plain" => (Options::default(), false, false),
        "softcap" => (Options { softcap: Some(30.0), ..Options::default() }, false, false),
        "bias" => (Options::default(), true, false),
        "smoothing" => (Options { label_smoothing: 0.1, ..Options::default() }, false, false),
        "all" => {
            let o = Options { softcap: Some(30.0), label_smoothing: 0.1, z_loss: 1e-4, ..Options::default() };
            (o, true, true)
        }
        other => {
            return Err(flce::Error::Unsupported(format!(
                "--loss-options '{other}': expected plain, softcap, bias, smoothing or all"
            )))
        }
    };
    let want_dc = match args.grads.as_str() {
        "both" => true,
        "de" => false,
        other => return Err(flce::Error::Unsupported(format!("--grads '{other}': expected both or de"))),
    };
    // the products an exact forward + backward needs: the logits, their recompute, dE, dC
    let products = 3.0 + want_dc as u8 as f32;
    let mut rows = vec![];
    let mut json = String::new();
    for (name, shape) in shapes {
        let p = RandomProblem::<T>::new(*shape, 1, DataKind::Peaky, 0.05, &opts, bias, weights);
        let up = be.upload(&p.inputs(), &opts)?;
        let Shape { n, d, v } = *shape;
        let es = std::mem::size_of::<T>();
        let stream = std::ptr::null_mut();
        let logits = DeviceBuffer::new(n * v * es)?;
        let err = |e: String| flce::Error::Unsupported(e);
        let fconfig = ForwardConfig { budget: None, mode: args.forward.parse().map_err(err)? };
        let config =
            BackwardConfig { budget: args.budget_mb.map(|m| m << 20), mode: args.backward.parse().map_err(err)? };
        let mut call = GpuCall::new::<T>(&be, &up, &opts, fconfig, config, want_dc)?;
        if args.workspace_budget_mb > 0 {
            call = call.with_forward_backward::<T>(args.workspace_budget_mb << 20)?;
        }
        let (fplan, bplan, fws, bws) = (&call.fplan, &call.bplan, &call.fws, &call.bws);
        let x = up.inputs;
        // SAFETY: the buffer is live and sized for the product; median_ms synchronises.
        let gemm_ms = time_ms(3, args.iters, || unsafe { be.logits_gemm(&x, logits.ptr(), stream) })?;
        drop(logits);
        let fwd_ms = time_ms(3, args.iters, || call.forward())?;
        let fb_ms = time_ms(2, args.iters, || {
            call.forward()?;
            call.backward()
        })?;
        // (the three-product pass: its token chunk; the vocabulary-slice pass: N and its head's rows)
        let forward_backward = match &call.forward_backward {
            Some((plan, ws)) => {
                let ms = time_ms(2, args.iters, || call.forward_backward())?;
                let (chunk, storage, head) = match plan {
                    ForwardBackwardPlan::ThreeProduct(p) => (p.token_chunk, p.storage.name(), 0),
                    ForwardBackwardPlan::VocabSlice(p) => (p.shape.n, "compact", p.head_rows),
                };
                Some((ms, ws.bytes(), chunk, storage, plan.kind(), head))
            }
            None => None,
        };
        let fb_plan_col = forward_backward.map_or("-".into(), |(ms, bytes, chunk, storage, _, head)| {
            let ratio = ms / (3.0 * gemm_ms);
            let what = if head > 0 {
                format!("vocabulary slice: head of {head} rows")
            } else {
                format!("{chunk}-token chunks")
            };
            format!("{ms:.2} ({ratio:.2}x of 3; {:.0} MB, {what}, {storage} logits)", mb(bytes))
        });
        let fb_plan_json = forward_backward.map_or(String::new(), |(ms, bytes, chunk, storage, kind, head)| {
            format!(
                ", \"forward_backward_ms\": {ms:.3}, \"forward_backward_ws_mb\": {:.3}, \"forward_backward_token_chunk\": {chunk}, \"forward_backward_logits\": \"{storage}\", \"forward_backward_kind\": \"{kind}\", \"forward_backward_head_rows\": {head}",
                mb(bytes)
            )
        });
        let fwd_extra = fws.bytes() + 4 * n + 16 + 4;
        let grad_bytes = (n + want_dc as usize * v) * d * es;
        rows.push(format!(
            "| {name} ({n}, {d}, {v}) | {gemm_ms:.2} | {fwd_ms:.2} ({:.2}x) | {fb_ms:.2} ({:.2}x of {products}) | {fb_plan_col} | {:.2} | {:.1} ({:.1}% of grads) | fwd {:?} (splits {}, slots {}{}, chunk {}), bwd {:?} chunk {}x{}{}{} |",
            fwd_ms / gemm_ms,
            fb_ms / (products * gemm_ms),
            mb(fwd_extra),
            mb(bws.bytes()),
            100.0 * bws.bytes() as f64 / grad_bytes as f64,
            fplan.family,
            fplan.splits,
            fplan.token_slots,
            if fplan.cluster > 1 { format!(" in clusters of {}", fplan.cluster) } else { String::new() }
                + &if fplan.band_tiles > 0 { format!(", launches of {} token tiles", fplan.band_tiles) } else { String::new() }
                + &fplan.sm90_grid.and_then(|g| g.rest).map_or(String::new(), |r| {
                    format!(", rest {} slots x {} splits of {} tiles", r.slots, r.splits, r.tiles_per_split)
                }),
            fplan.vocab_chunk,
            bplan.family,
            bplan.token_chunk,
            bplan.vocab_chunk,
            bplan.dc_tail().map_or(String::new(), |t| {
                let spill = if t.overflow_rows > 0 { format!(", {} rows in the workspace", t.overflow_rows) } else { String::new() };
                format!(
                    ", dE acc in dC tail (tail pass rows {}.., {:.0}% of V, {} recomputed; {} rows in dE{spill})",
                    t.first_row,
                    100.0 * (v - t.first_row) as f64 / v as f64,
                    bplan.tail_recomputed_rows(),
                    t.rows_in_de
                )
            }),
            if bplan.token_outer { ", token chunks outer".to_string() } else { String::new() }
                + &bplan.de_pass.as_deref().map_or(String::new(), |de| {
                    format!(", then dE in a pass of its own, token chunks outer {}x{}", de.token_chunk, de.vocab_chunk)
                }),
        ));
        json.push_str(&format!(
            "{{\"shape\": \"{name}\", \"loss_options\": \"{}\", \"n\": {n}, \"d\": {d}, \"v\": {v}, \"dtype\": \"{}\", \"method\": \"flce_rust\", \"grads\": \"{}\", \"cublas_ms\": {gemm_ms:.3}, \"fwd_ms\": {fwd_ms:.3}, \"fb_ms\": {fb_ms:.3}, \"fwd_mem_mb\": {:.3}, \"fb_mem_mb\": {:.3}, \"device\": \"{}\"{fb_plan_json}}}\n",
            args.loss_options,
            args.grads,
            T::DTYPE,
            mb(fwd_extra),
            mb(fwd_extra.max(bws.bytes()) + grad_bytes),
            be.device_name()
        ));
        println!("{}", rows.last().unwrap());
    }
    println!("\n| shape (N, D, V) | cuBLAS logits GEMM ms | flce fwd ms | flce fwd+bwd ms | three-product fwd+bwd ms | fwd extra MB | bwd workspace MB | plan |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!("{r}");
    }
    if let Some(path) = &args.json {
        std::fs::write(path, json).map_err(|e| flce::Error::Unsupported(format!("writing {}: {e}", path.display())))?;
    }
    Ok(())
}
