//! Small cases against the f64 oracle: every kernel family (and the three-product pass, see
//! step.rs) on the same inputs, outputs poisoned first, each run twice and compared bitwise.

use flce_core::cpu::reference;
use flce_core::testing::{to_f64, RandomProblem};
use flce_core::{DType, Element, GradOutput, Options, Reduction};
use flce_cuda::{
    BackwardConfig, BackwardMode, CudaLoss, DeviceBuffer, DeviceForwardOutputs, DeviceGradOutput, DeviceGrads,
    ForwardConfig, ForwardMode, UploadedInputs,
};

use crate::Case;

pub(crate) const POISON: u32 = 0x7FC0_7FC0; // NaN as bf16, f16 and f32

/// A device buffer of `bytes` filled with [`POISON`], so an output a kernel forgets stays NaN.
pub(crate) fn poisoned(bytes: usize) -> Result<DeviceBuffer, String> {
    let b = DeviceBuffer::new(bytes).map_err(|x| x.to_string())?;
    b.fill_u32(POISON).map_err(|x| x.to_string())?;
    Ok(b)
}

pub(crate) struct GpuRun<T> {
    pub loss: f32,
    pub accuracy: f32,
    pub lse: Vec<f32>,
    pub per_token: Vec<f32>,
    pub de: Vec<T>,
    pub dc: Vec<T>,
    pub db: Option<Vec<T>>,
}

pub(crate) fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::BF16 => 1.2e-2,
        DType::F16 => 2e-3,
        DType::F32 => 1e-4,
    }
}

pub(crate) fn check_finite(name: &str, xs: &[f64]) -> Result<(), String> {
    match xs.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(format!("{name}[{i}] = {} (unwritten or non-finite)", xs[i])),
        None => Ok(()),
    }
}

/// `go` (from [`go_for`]) on the device, as the backward's grad_output for `opts`' reduction.
pub(crate) fn go_on_device(opts: &Options, go: &[f32]) -> Result<(DeviceBuffer, DeviceGradOutput), String> {
    let go_d = DeviceBuffer::from_slice(go).map_err(|x| x.to_string())?;
    let gop = if opts.reduction == Reduction::None {
        DeviceGradOutput::PerToken(go_d.ptr())
    } else {
        DeviceGradOutput::Scalar(go_d.ptr())
    };
    Ok((go_d, gop))
}

pub(crate) fn go_for(opts: &Options, n: usize) -> Vec<f32> {
    match opts.reduction {
        Reduction::None => (0..n).map(|i| 0.5 + (i % 5) as f32 * 0.25).collect(),
        _ => vec![1.0],
    }
}

/// One forward + backward through the raw device-pointer API, every output poisoned first.
pub(crate) fn gpu_run<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    opts: &Options,
    go: &[f32],
    fconfig: ForwardConfig,
    config: BackwardConfig,
) -> Result<GpuRun<T>, String> {
    gpu_run_on(be, up, opts, go, fconfig, config, std::ptr::null_mut())
}

/// [`gpu_run`] on `stream` (the calling thread must have the backend's context current).
pub(crate) fn gpu_run_on<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    opts: &Options,
    go: &[f32],
    fconfig: ForwardConfig,
    config: BackwardConfig,
    stream: flce_cuda::Stream,
) -> Result<GpuRun<T>, String> {
    gpu_run_wanting::<T>(be, up, opts, go, fconfig, config, stream, true)
}

/// [`gpu_run_on`], asking for dC only if `want_dc` (otherwise the returned dC is the poisoned
/// buffer that was not given to the backward, read back to show it untouched).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gpu_run_wanting<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    opts: &Options,
    go: &[f32],
    fconfig: ForwardConfig,
    config: BackwardConfig,
    stream: flce_cuda::Stream,
    want_dc: bool,
) -> Result<GpuRun<T>, String> {
    let s = up.inputs.shape;
    let e = |x: flce_core::Error| x.to_string();
    let buf = poisoned;
    let lse = buf(4 * s.n)?;
    let ptl = buf(4 * s.n)?;
    let scalars = buf(16)?;
    let status = buf(4)?;
    let fplan = be.forward_plan(s, up.inputs.dtype, fconfig);
    let ws = buf(fplan.workspace_bytes)?;
    let out = DeviceForwardOutputs {
        lse: lse.ptr(),
        per_token_loss: Some(ptl.ptr()),
        scalars: scalars.ptr(),
        status: status.ptr(),
    };
    unsafe { be.forward(&up.inputs, opts, &out, ws.workspace(), &fplan, stream) }.map_err(e)?;
    be.context().synchronize().map_err(|x| format!("forward: {x:?}"))?;
    let st: Vec<i32> = status.to_vec(1).map_err(|x| x.to_string())?;
    if st[0] != flce_cuda::STATUS_OK {
        return Err(format!("status reports bad target at {}", st[0]));
    }
    let es = std::mem::size_of::<T>();
    let de = buf(s.n * s.d * es)?;
    let dc = buf(s.v * s.d * es)?;
    let db = if up.bias.is_some() { Some(buf(s.v * es)?) } else { None };
    let (_go_d, gop) = go_on_device(opts, go)?;
    let grads = DeviceGrads { de: Some(de.ptr()), dc: want_dc.then(|| dc.ptr()), dbias: db.as_ref().map(|b| b.ptr()) };
    let bplan = be.backward_plan(s, T::DTYPE, grads.wanted(), config).map_err(e)?;
    let ws2 = buf(bplan.workspace_bytes)?;
    unsafe { be.backward(&up.inputs, opts, lse.ptr(), gop, &grads, ws2.workspace(), &bplan, stream) }.map_err(e)?;
    be.context().synchronize().map_err(|x| format!("backward: {x:?}"))?;
    read_run(s, [&scalars, &lse, &ptl, &de, &dc], db.as_ref())
}

/// Copy a run's outputs back: [scalars, lse, per-token loss, dE, dC] and db.
pub(crate) fn read_run<T: Element>(
    s: flce_core::Shape,
    [scalars, lse, ptl, de, dc]: [&DeviceBuffer; 5],
    db: Option<&DeviceBuffer>,
) -> Result<GpuRun<T>, String> {
    let r = |x: flce_cuda::CudaError| x.to_string();
    let sc: Vec<f32> = scalars.to_vec(4).map_err(r)?;
    Ok(GpuRun {
        loss: sc[0],
        accuracy: sc[1],
        lse: lse.to_vec(s.n).map_err(r)?,
        per_token: ptl.to_vec(s.n).map_err(r)?,
        de: de.to_vec(s.n * s.d).map_err(r)?,
        dc: dc.to_vec(s.v * s.d).map_err(r)?,
        db: db.map(|b| b.to_vec(s.v)).transpose().map_err(r)?,
    })
}

pub(crate) fn bits<T: Element>(r: &GpuRun<T>) -> Vec<u64> {
    let mut v: Vec<u64> = vec![r.loss.to_bits() as u64, r.accuracy.to_bits() as u64];
    v.extend(r.lse.iter().chain(&r.per_token).map(|x| x.to_bits() as u64));
    v.extend(to_f64(&r.de).iter().chain(&to_f64(&r.dc)).map(|x| x.to_bits()));
    if let Some(db) = &r.db {
        v.extend(to_f64(db).iter().map(|x| x.to_bits()));
    }
    v
}

/// ‖got − want‖ ≤ tol·‖want‖ + floor; returns the relative error.
pub(crate) fn close(name: &str, got: &[f64], want: &[f64], tol: f64, floor: f64) -> Result<f64, String> {
    check_finite(name, got)?;
    let diff: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
    let norm: f64 = want.iter().map(|x| x * x).sum::<f64>().sqrt();
    if diff > tol * norm + floor {
        return Err(format!("{name}: rel err {:.2e} > {tol:.1e}", diff / norm));
    }
    Ok(if norm > 0.0 { diff / norm } else { diff })
}

pub(crate) fn run_oracle<T: Element>(be: &CudaLoss, c: &Case) -> Result<String, String> {
    let p = RandomProblem::<T>::new(c.shape, 0x5eed ^ c.name.len() as u64, c.kind, 0.2, &c.opts, c.bias, c.weights);
    let host = p.inputs();
    let go = go_for(&c.opts, c.shape.n);
    let go_host =
        if c.opts.reduction == Reduction::None { GradOutput::PerToken(&go) } else { GradOutput::Scalar(go[0]) };
    let oracle = reference::evaluate(&host, &c.opts, go_host).map_err(|e| e.to_string())?;
    let up = be.upload(&host, &c.opts).map_err(|e| e.to_string())?;
    let mut report = String::new();
    // Every kernel family: cuBLAS chunks + elementwise kernels, and flce's fused tile kernels.
    // A small forward budget makes the cuBLAS forward take several vocabulary chunks.
    let families = [
        (
            ForwardConfig {
                budget: Some(40 * c.shape.n * 128 + 64 * c.shape.n + 4096),
                mode: ForwardMode::CublasChunks,
            },
            BackwardMode::CublasLogits,
        ),
        // the GPU's fastest fused family (sm90 on Hopper for 16-bit inputs with 16-byte rows)
        (ForwardConfig { budget: None, mode: ForwardMode::Fused }, BackwardMode::FusedTiles),
        // and the portable one, kept correct where a faster one exists
        (ForwardConfig { budget: None, mode: ForwardMode::FusedSm80 }, BackwardMode::FusedSm80),
    ];
    for (fconfig, mode) in families.into_iter().filter(|&(_, mode)| crate::mode_selected(mode)) {
        let config = BackwardConfig { budget: c.budget, mode };
        let a = gpu_run::<T>(be, &up, &c.opts, &go, fconfig, config)?;
        let b = gpu_run::<T>(be, &up, &c.opts, &go, fconfig, config)?;
        if bits(&a) != bits(&b) {
            return Err(format!("{mode:?}: results differ between two identical runs (race?)"));
        }
        let m = compare(c, &p, &oracle, &go, &a).map_err(|e| format!("{mode:?}: {e}"))?;
        if report.is_empty() {
            report = m;
        } else {
            report.push_str(" | fused kernels ok");
        }
    }
    // the three-product pass gives the gradients for grad_output 1 (all ones for reduction none)
    let ones = vec![1.0f32; if c.opts.reduction == Reduction::None { c.shape.n } else { 1 }];
    let ones_oracle = match c.opts.reduction {
        Reduction::None => {
            reference::evaluate(&host, &c.opts, GradOutput::PerToken(&ones)).map_err(|e| e.to_string())?
        }
        _ => oracle,
    };
    let m = crate::three_product::check_three_product::<T>(be, &up, c, &p, &ones_oracle, &ones)?;
    report.push_str(&format!(" | three-product {m}"));
    let m = crate::vocab_slice::check_vocab_slice::<T>(be, &up, c, &p, &ones_oracle, &ones)?;
    report.push_str(&format!(" | slice {m}"));
    Ok(report)
}

pub(crate) fn compare<T: Element>(
    c: &Case,
    p: &RandomProblem<T>,
    oracle: &reference::Reference,
    go: &[f32],
    a: &GpuRun<T>,
) -> Result<String, String> {
    compare_wanted(c, p, oracle, go, a, true)
}

/// [`compare`], with dC compared only if `dc_wanted`.
pub(crate) fn compare_wanted<T: Element>(
    c: &Case,
    p: &RandomProblem<T>,
    oracle: &reference::Reference,
    go: &[f32],
    a: &GpuRun<T>,
    dc_wanted: bool,
) -> Result<String, String> {
    let t = tol(c.dtype);
    let loss_err = if oracle.loss.is_nan() {
        if !a.loss.is_nan() {
            return Err(format!("loss {} where PyTorch gives NaN", a.loss));
        }
        0.0
    } else {
        let e = (a.loss as f64 - oracle.loss).abs() / oracle.loss.abs().max(1e-3);
        if e > 1e-4 {
            return Err(format!("loss {} vs {} (rel {e:.2e})", a.loss, oracle.loss));
        }
        e
    };
    if c.opts.return_accuracy && !oracle.accuracy.is_nan() && a.accuracy as f64 != oracle.accuracy {
        // only tokens whose two largest logits nearly tie may be counted differently
        let (ties, active) = near_ties(p, &c.opts)?;
        let differing = (a.accuracy as f64 - oracle.accuracy).abs() * active as f64;
        if differing > ties as f64 + 1e-3 {
            return Err(format!(
                "accuracy {} vs {}: {differing:.1} tokens differ, {ties} near-ties among {active}",
                a.accuracy, oracle.accuracy
            ));
        }
    }
    let lse: Vec<f64> = a.lse.iter().map(|&x| x as f64).collect();
    let lse_err = close("lse", &lse, &oracle.lse, 1e-5, 1e-5)?;
    let ptl: Vec<f64> = a.per_token.iter().map(|&x| x as f64).collect();
    close("per-token loss", &ptl, &oracle.per_token_loss, 1e-4, 1e-5)?;
    let norm = |x: &[T]| to_f64(x).iter().map(|v| v * v).sum::<f64>().sqrt();
    let g_max = go.iter().fold(0.0f64, |m, &x| m.max(x.abs() as f64))
        / if c.opts.reduction == Reduction::Mean {
            oracle.per_token_loss.iter().filter(|&&x| x != 0.0).count().max(1) as f64
        } else {
            1.0
        };
    let floor = t * 1e-3 * g_max * 2.0 * (norm(&p.e) + norm(&p.c) + 1.0);
    let de = close("dE", &to_f64(&a.de), &oracle.de, t, floor)?;
    let dc = match dc_wanted {
        true => format!("{:.1e}", close("dC", &to_f64(&a.dc), &oracle.dc, t, floor)?),
        false => "-".into(),
    };
    let db = match &a.db {
        Some(db) => format!("{:.1e}", close("db", &to_f64(db), &oracle.dbias, t, floor)?),
        None => "-".into(),
    };
    Ok(format!("loss {loss_err:.1e}  lse {lse_err:.1e}  dE {de:.1e}  dC {dc}  db {db}"))
}

/// (active tokens whose two largest f64 logits are within 1e-4 relative of each other, active
/// tokens): the only tokens whose argmax the GPU's f32 products may order differently from the
/// f64 oracle. Every other token's accuracy must agree, N = 1 included.
fn near_ties<T: Element>(p: &RandomProblem<T>, opts: &Options) -> Result<(usize, usize), String> {
    let prep = p.inputs().prepare(opts).map_err(|e| e.to_string())?;
    let flce_core::Shape { n, d, v } = p.shape;
    let (mut ties, mut active) = (0, 0);
    for i in (0..n).filter(|&i| prep.targets[i] >= 0) {
        active += 1;
        let (mut best, mut second) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
        for j in 0..v {
            let mut z: f64 = (0..d).map(|k| p.e[i * d + k].to_f64() * p.c[j * d + k].to_f64()).sum();
            if let Some(b) = &p.bias {
                z += b[j].to_f64();
            }
            if let Some(cap) = opts.softcap {
                z = cap as f64 * (z / cap as f64).tanh();
            }
            if z > best {
                second = best;
                best = z;
            } else if z > second {
                second = z;
            }
        }
        if best - second <= 1e-4 * (1.0 + best.abs()) {
            ties += 1;
        }
    }
    Ok((ties, active))
}
