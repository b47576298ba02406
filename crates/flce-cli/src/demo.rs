//! `flce demo`: the main job on an embedded default problem.

use std::time::Instant;

use crate::bench::time_ms;
use clap::Args;
use flce::cuda::DeviceBuffer;
use flce::testing::{rel_err, to_f64, DataKind, RandomProblem};
use flce::{bf16, cpu, f16, DType, Device, Element, GradOutput, Options, Shape};
use indicatif::{ProgressBar, ProgressStyle};

use crate::alloc;
use crate::gpu_call::GpuCall;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Tokens (N).
    #[arg(long, default_value_t = 64)]
    tokens: usize,
    /// Hidden size (D); Llama 3 8B uses 4096.
    #[arg(long, default_value_t = 4096)]
    hidden: usize,
    /// Vocabulary (V); Llama 3 uses 128256.
    #[arg(long, default_value_t = 128_256)]
    vocab: usize,
    /// Input dtype: bf16, f16 or f32.
    #[arg(long, default_value = "bf16")]
    dtype: DType,
    /// Label smoothing ε.
    #[arg(long, default_value_t = 0.0)]
    label_smoothing: f32,
    /// Logit softcap (Gemma 2 uses 30).
    #[arg(long)]
    softcap: Option<f32>,
    /// Skip the naive materialised comparison.
    #[arg(long)]
    no_naive: bool,
    /// Seed of the random problem.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where to run: auto (a GPU when there is one), cpu or cuda.
    #[arg(long, default_value = "auto")]
    device: String,
}

pub fn run(args: &DemoArgs) -> flce::Result<()> {
    match args.dtype {
        DType::BF16 => run_typed::<bf16>(args),
        DType::F16 => run_typed::<f16>(args),
        DType::F32 => run_typed::<f32>(args),
    }
}

fn mb(bytes: usize) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.2} MB", bytes as f64 / (1u64 << 20) as f64)
    }
}

fn run_typed<T: Element>(args: &DemoArgs) -> flce::Result<()> {
    let shape = Shape::new(args.tokens, args.hidden, args.vocab);
    let opts = Options {
        label_smoothing: args.label_smoothing,
        softcap: args.softcap,
        return_accuracy: true,
        ..Options::default()
    };
    let device = match args.device.as_str() {
        "auto" => flce::available_devices()[0],
        "cpu" => Device::Cpu,
        "cuda" => Device::Cuda(0),
        other => return Err(flce::Error::Unsupported(format!("--device {other}: expected auto, cpu or cuda"))),
    };
    if let Device::Cuda(ordinal) = device {
        return run_cuda::<T>(args, shape, &opts, ordinal);
    }
    let steps = if args.no_naive { 3 } else { 4 };
    let bar = ProgressBar::new(steps).with_style(
        ProgressStyle::with_template("{spinner} [{bar:20}] {pos}/{len} {msg}").unwrap().progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    println!("flce demo: N {} · D {} · V {}, {}, on {device}", shape.n, shape.d, shape.v, T::DTYPE);

    bar.set_message("generating a random problem (peaky trained-like logits, 10% ignored tokens)");
    let p = RandomProblem::<T>::new(shape, args.seed, DataKind::Peaky, 0.1, &opts, false, false);
    bar.inc(1);

    bar.set_message("fused forward");
    let t0 = Instant::now();
    let (fwd, fwd_peak) = alloc::peak_during(|| cpu::forward(&p.inputs(), &opts));
    let fwd = fwd?;
    let fwd_s = t0.elapsed().as_secs_f64();
    bar.inc(1);

    bar.set_message("fused backward");
    let t0 = Instant::now();
    let grad_bytes = (shape.n + shape.v) * shape.d * std::mem::size_of::<T>();
    let (grads, bwd_peak) = alloc::peak_during(|| cpu::backward(&p.inputs(), &opts, &fwd.lse, GradOutput::Scalar(1.0)));
    let grads = grads?;
    let bwd_s = t0.elapsed().as_secs_f64();
    bar.inc(1);

    let naive = if args.no_naive {
        None
    } else {
        bar.set_message("naive materialised forward + backward");
        let t0 = Instant::now();
        let (r, peak) =
            alloc::peak_during(|| cpu::materialized::loss_and_grads(&p.inputs(), &opts, GradOutput::Scalar(1.0)));
        let r = r?;
        bar.inc(1);
        Some((r, peak, t0.elapsed().as_secs_f64()))
    };
    bar.finish_and_clear();

    let extra_bwd = bwd_peak.saturating_sub(grad_bytes);
    println!(
        "  fused : loss {:.6}  accuracy {:.3}  forward {:.2} s  backward {:.2} s",
        fwd.loss,
        fwd.accuracy.unwrap_or(f32::NAN),
        fwd_s,
        bwd_s
    );
    println!(
        "          peak extra memory: forward {}, backward {} beyond the {} of gradients",
        mb(fwd_peak),
        mb(extra_bwd),
        mb(grad_bytes)
    );
    if let Some(((nf, ng), peak, secs)) = naive {
        println!("  naive : loss {:.6}  forward + backward {:.2} s", nf.loss, secs);
        println!(
            "          peak extra memory: {} beyond the gradients (logits and their gradient materialised)",
            mb(peak.saturating_sub(grad_bytes))
        );
        println!(
            "  agreement: |Δloss| {:.1e}, dE rel {:.1e}, dC rel {:.1e}",
            (fwd.loss - nf.loss).abs(),
            rel_err(&to_f64(&grads.de), &to_f64(&ng.de)),
            rel_err(&to_f64(&grads.dc), &to_f64(&ng.dc))
        );
    }
    let (gn, gv) = (8192usize, 256_000usize);
    println!(
        "  at Gemma 2 scale (N {gn}, D 2304, V {gv}) the f32 logits and their gradient alone take {}; \
the fused path keeps {} of per-token state.",
        mb(gn * gv * 8),
        mb(gn * 4 * 4)
    );
    Ok(())
}

/// The GPU path: the fused loss and gradients through the CUDA backend on resident data, beside
/// one cuBLAS logits GEMM (the first step of the naive computation, which would then hold the
/// N×V logits).
fn run_cuda<T: Element>(args: &DemoArgs, shape: Shape, opts: &Options, ordinal: usize) -> flce::Result<()> {
    // A GPU wants a realistic batch: 8192 tokens unless asked otherwise.
    let shape = if args.tokens == 64 { Shape::new(8192, shape.d, shape.v) } else { shape };
    let be = flce::cuda_backend(ordinal)?;
    let cached = be.warm_up(T::DTYPE)?;
    println!(
        "flce demo: N {} · D {} · V {}, {}, on {} ({}, CUDA path; {} of 5 kernel files already compiled)",
        shape.n,
        shape.d,
        shape.v,
        T::DTYPE,
        be.device_name(),
        be.arch().0,
        cached
    );
    let p = RandomProblem::<T>::new(shape, args.seed, DataKind::Peaky, 0.1, opts, false, false);
    let up = be.upload(&p.inputs(), opts)?;
    let f = be.forward_uploaded(&up, opts)?;
    let Shape { n, d, v } = shape;
    let es = std::mem::size_of::<T>();
    let stream = std::ptr::null_mut();
    let x = up.inputs;
    let call = GpuCall::new::<T>(&be, &up, opts, Default::default(), Default::default(), true)?;
    let (fws, bws) = (&call.fws, &call.bws);
    let fwd_ms = time_ms(2, 5, || call.forward())?;
    let fb_ms = time_ms(1, 5, || {
        call.forward()?;
        call.backward()
    })?;
    let logits = DeviceBuffer::new(n * v * es)?;
    let gemm_ms = time_ms(2, 5, || unsafe { be.logits_gemm(&x, logits.ptr(), stream) })?;
    let grad_bytes = (n + v) * d * es;
    println!(
        "  fused : loss {:.6}  accuracy {:.3}  forward {fwd_ms:.2} ms  forward+backward {fb_ms:.2} ms",
        f.loss,
        f.accuracy.unwrap_or(f32::NAN)
    );
    println!(
        "          extra memory: forward {} (workspace + lse), backward workspace {} beside the {} of gradients",
        mb(fws.bytes() + 4 * n),
        mb(bws.bytes()),
        mb(grad_bytes)
    );
    println!(
        "  naive : the logits GEMM alone takes {gemm_ms:.2} ms (cuBLAS) and holds {} of logits; with their f32 copy and gradient \
PyTorch's plain loss needs about {}",
        mb(n * v * es),
        mb(n * v * (es + 8))
    );
    Ok(())
}
