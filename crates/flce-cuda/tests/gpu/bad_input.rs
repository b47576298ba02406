//! Bad input on the device: out-of-range targets and bad class weights. The status word names the
//! first bad token or class, and where no host reads it the loss and gradient rows are NaN
//! (kernels/shared/prep.cu); the context stays usable.

use flce_core::testing::{DataKind, RandomProblem};
use flce_core::{bf16, Options, Reduction, Shape};
use flce_cuda::{
    BackwardConfig, BackwardMode, CudaError, CudaLoss, DeviceBuffer, DeviceForwardOutputs, DeviceGradOutput,
    DeviceGrads, DeviceInputs, ForwardConfig, Wanted,
};

fn c(e: CudaError) -> String {
    e.to_string()
}
fn s(e: flce_core::Error) -> String {
    e.to_string()
}

/// One forward under `o` into `lse` (and `per_token` for reduction none): (status word, loss). The
/// status-only call (`CudaLoss::target_status`) must give the forward's word.
fn forward_status(
    be: &CudaLoss,
    inputs: &DeviceInputs,
    o: &Options,
    lse: &DeviceBuffer,
    per_token: &DeviceBuffer,
) -> Result<(i32, f32), String> {
    let sc = DeviceBuffer::new(16).map_err(c)?;
    let st = DeviceBuffer::new(4).map_err(c)?;
    let plan = be.forward_plan(inputs.shape, inputs.dtype, ForwardConfig::default());
    let ws = DeviceBuffer::new(plan.workspace_bytes).map_err(c)?;
    let per_token_loss = (o.reduction == Reduction::None).then(|| per_token.ptr());
    let out = DeviceForwardOutputs { lse: lse.ptr(), per_token_loss, scalars: sc.ptr(), status: st.ptr() };
    unsafe { be.forward(inputs, o, &out, ws.workspace(), &plan, std::ptr::null_mut()) }.map_err(s)?;
    let (scratch, st_only) = (DeviceBuffer::new(4 * inputs.shape.n).map_err(c)?, DeviceBuffer::new(4).map_err(c)?);
    unsafe { be.target_status(inputs, o, scratch.ptr(), st_only.ptr(), std::ptr::null_mut()) }.map_err(s)?;
    be.context().synchronize().map_err(|e| format!("{e:?}"))?;
    let status: Vec<i32> = st.to_vec(1).map_err(c)?;
    let status_only: Vec<i32> = st_only.to_vec(1).map_err(c)?;
    if status_only != status {
        return Err(format!("target_status wrote {} where the forward wrote {}", status_only[0], status[0]));
    }
    Ok((status[0], sc.to_vec::<f32>(4).map_err(c)?[0]))
}

/// dE (bf16 [N, D]) of one backward with grad_output 1 (mean), in backward family `mode`.
fn backward_de(
    be: &CudaLoss,
    inputs: &DeviceInputs,
    opts: &Options,
    lse: &DeviceBuffer,
    mode: BackwardMode,
) -> Result<Vec<bf16>, String> {
    let Shape { n, d, .. } = inputs.shape;
    let config = BackwardConfig { mode, ..BackwardConfig::default() };
    let wanted = Wanted { de: true, dc: false, dbias: false };
    let plan = be.backward_plan(inputs.shape, inputs.dtype, wanted, config).map_err(s)?;
    let ws = DeviceBuffer::new(plan.workspace_bytes).map_err(c)?;
    let de = DeviceBuffer::new(n * d * 2).map_err(c)?;
    let go = DeviceBuffer::from_slice(&[1.0f32]).map_err(c)?;
    let grads = DeviceGrads { de: Some(de.ptr()), dc: None, dbias: None };
    let go = DeviceGradOutput::Scalar(go.ptr());
    unsafe { be.backward(inputs, opts, lse.ptr(), go, &grads, ws.workspace(), &plan, std::ptr::null_mut()) }
        .map_err(s)?;
    be.context().synchronize().map_err(|e| format!("{e:?}"))?;
    de.to_vec(n * d).map_err(c)
}

/// A target outside [0, V) is reported through the status word, the token's loss and dE row are
/// NaN, and the context stays usable.
pub(crate) fn run_bad_target(be: &CudaLoss) -> Result<String, String> {
    let (n, d, v) = (40, 64, 300);
    let opts = Options::default();
    let p = RandomProblem::<bf16>::new(Shape::new(n, d, v), 3, DataKind::Planted, 0.0, &opts, false, false);
    let up = be.upload(&p.inputs(), &opts).map_err(s)?;
    let mut bad = p.targets.clone();
    bad[5] = 300;
    let t = DeviceBuffer::from_slice(&bad).map_err(c)?;
    let mut inputs = up.inputs;
    inputs.targets = t.ptr();
    // forward, mean and none: the status word names token 5, the mean is NaN, and so is token 5's
    // loss (only it)
    let none = Options { reduction: Reduction::None, ..opts.clone() };
    let lse = DeviceBuffer::new(4 * n).map_err(c)?;
    let per_token = DeviceBuffer::new(4 * n).map_err(c)?;
    let mut scalars = Vec::new();
    for o in [&opts, &none] {
        let (status, loss) = forward_status(be, &inputs, o, &lse, &per_token)?;
        if status != 5 {
            return Err(format!("{:?}: status {} instead of 5", o.reduction, status));
        }
        scalars.push(loss);
    }
    if !scalars[0].is_nan() {
        return Err(format!("mean loss {} with an out-of-range target (NaN expected)", scalars[0]));
    }
    let losses: Vec<f32> = per_token.to_vec(n).map_err(c)?;
    if !losses[5].is_nan() || losses.iter().enumerate().any(|(i, l)| i != 5 && !l.is_finite()) {
        return Err(format!("per-token losses: token 5 {} (NaN expected), others finite: {:?}", losses[5], losses));
    }
    // backward, both logits families: dE's row 5 is NaN, every other row finite
    for mode in [BackwardMode::Auto, BackwardMode::CublasLogits] {
        let rows = backward_de(be, &inputs, &opts, &lse, mode)?;
        let row_nan = |i: usize| rows[i * d..(i + 1) * d].iter().all(|x| x.to_f32().is_nan());
        let row_finite = |i: usize| rows[i * d..(i + 1) * d].iter().all(|x| x.to_f32().is_finite());
        if !row_nan(5) || !(0..n).filter(|&i| i != 5).all(row_finite) {
            return Err(format!("{mode:?} backward: dE row 5 not all NaN or another row not finite"));
        }
    }
    // the context still works
    let f = be.forward_uploaded(&up, &opts).map_err(s)?;
    if !f.loss.is_finite() {
        return Err("loss not finite after a bad-target call".into());
    }
    // and the owned API reports the bad target as a typed error before touching the GPU
    let err = be.forward_host(&flce_core::HostInputs { targets: &bad, ..p.inputs() }, &opts).unwrap_err();
    if !err.to_string().contains("target[5] = 300") {
        return Err(format!("unexpected error: {err}"));
    }
    Ok("status word = 5, NaN loss (mean; token 5 under none), NaN dE row 5 (both families), context usable, host check typed".into())
}

/// A class weight that is negative or not finite: the status word names the first bad class, every
/// token's loss and dE row is NaN, and good weights work after it.
pub(crate) fn run_bad_weights(be: &CudaLoss) -> Result<String, String> {
    let (n, d, v) = (40, 64, 300);
    let opts = Options::default();
    let p = RandomProblem::<bf16>::new(Shape::new(n, d, v), 4, DataKind::Planted, 0.1, &opts, false, true);
    let up = be.upload(&p.inputs(), &opts).map_err(s)?;
    let good_w = p.class_weights.clone().ok_or("the problem has no class weights")?;
    let mut report = vec![];
    // a negative weight on the last class, then a NaN before it: the status names the first bad one
    for (bad, expect) in [(vec![(299usize, -1.0f32)], 299usize), (vec![(299, -1.0), (17, f32::NAN)], 17)] {
        let mut w = good_w.clone();
        for &(j, x) in &bad {
            w[j] = x;
        }
        let wbuf = DeviceBuffer::from_slice(&w).map_err(c)?;
        let mut inputs = up.inputs;
        inputs.class_weights = Some(wbuf.ptr());
        let none = Options { reduction: Reduction::None, ..opts.clone() };
        let lse = DeviceBuffer::new(4 * n).map_err(c)?;
        let per_token = DeviceBuffer::new(4 * n).map_err(c)?;
        for o in [&opts, &none] {
            let (status, loss) = forward_status(be, &inputs, o, &lse, &per_token)?;
            match CudaError::from_status(status, v) {
                Some(CudaError::BadClassWeight { class }) if class == expect => {}
                other => return Err(format!("{:?}: status {} decodes to {other:?}", o.reduction, status)),
            }
            if !loss.is_nan() {
                return Err(format!("{:?}: loss {loss} with a bad class weight (NaN expected)", o.reduction));
            }
        }
        let losses: Vec<f32> = per_token.to_vec(n).map_err(c)?;
        if !losses.iter().all(|l| l.is_nan()) {
            return Err(format!("per-token losses not all NaN: {losses:?}"));
        }
        for mode in [BackwardMode::Auto, BackwardMode::CublasLogits] {
            if !backward_de(be, &inputs, &opts, &lse, mode)?.iter().all(|x| x.to_f32().is_nan()) {
                return Err(format!("{mode:?} backward: dE not all NaN with a bad class weight"));
            }
        }
        report.push(format!("class {expect}"));
    }
    // good weights on the same context: finite, and the status word clear
    let f = be.forward_uploaded(&up, &opts).map_err(s)?;
    if !f.loss.is_finite() {
        return Err("loss not finite after the bad-weight calls".into());
    }
    Ok(format!(
        "status names {} (negative, then NaN before it), NaN loss (mean, none) and dE (both families), then fine",
        report.join(", ")
    ))
}
