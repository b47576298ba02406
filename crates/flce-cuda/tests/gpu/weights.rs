//! Bad class weights on the device: the status word names the first bad class, and where no host
//! reads it every token's loss and gradient row is NaN (kernels/shared/prep.cu).

use flce_core::testing::{DataKind, RandomProblem};
use flce_core::{bf16, Options, Reduction, Shape};
use flce_cuda::{
    BackwardConfig, BackwardMode, CudaError, CudaLoss, DeviceBuffer, DeviceForwardOutputs, DeviceGradOutput,
    DeviceGrads, ForwardConfig, Wanted,
};

pub(crate) fn run_bad_weights(be: &CudaLoss) -> Result<String, String> {
    let c = |e: CudaError| e.to_string();
    let s = |e: flce_core::Error| e.to_string();
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
            let sc = DeviceBuffer::new(16).map_err(c)?;
            let st = DeviceBuffer::new(4).map_err(c)?;
            let plan = be.forward_plan(inputs.shape, inputs.dtype, ForwardConfig::default());
            let ws = DeviceBuffer::new(plan.workspace_bytes).map_err(c)?;
            let per_token_loss = (o.reduction == Reduction::None).then(|| per_token.ptr());
            let out = DeviceForwardOutputs { lse: lse.ptr(), per_token_loss, scalars: sc.ptr(), status: st.ptr() };
            unsafe { be.forward(&inputs, o, &out, ws.workspace(), &plan, std::ptr::null_mut()) }.map_err(s)?;
            be.context().synchronize().map_err(|e| format!("{e:?}"))?;
            let status: Vec<i32> = st.to_vec(1).map_err(c)?;
            match CudaError::from_status(status[0], v) {
                Some(CudaError::BadClassWeight { class }) if class == expect => {}
                other => return Err(format!("{:?}: status {} decodes to {other:?}", o.reduction, status[0])),
            }
            let loss = sc.to_vec::<f32>(4).map_err(c)?[0];
            if !loss.is_nan() {
                return Err(format!("{:?}: loss {loss} with a bad class weight (NaN expected)", o.reduction));
            }
        }
        let losses: Vec<f32> = per_token.to_vec(n).map_err(c)?;
        if !losses.iter().all(|l| l.is_nan()) {
            return Err(format!("per-token losses not all NaN: {losses:?}"));
        }
        for mode in [BackwardMode::Auto, BackwardMode::CublasLogits] {
            let config = BackwardConfig { mode, ..BackwardConfig::default() };
            let wanted = Wanted { de: true, dc: false, dbias: false };
            let plan = be.backward_plan(inputs.shape, inputs.dtype, wanted, config).map_err(s)?;
            let ws = DeviceBuffer::new(plan.workspace_bytes).map_err(c)?;
            let de = DeviceBuffer::new(n * d * 2).map_err(c)?;
            let go = DeviceBuffer::from_slice(&[1.0f32]).map_err(c)?;
            let grads = DeviceGrads { de: Some(de.ptr()), dc: None, dbias: None };
            let go = DeviceGradOutput::Scalar(go.ptr());
            unsafe { be.backward(&inputs, &opts, lse.ptr(), go, &grads, ws.workspace(), &plan, std::ptr::null_mut()) }
                .map_err(s)?;
            be.context().synchronize().map_err(|e| format!("{e:?}"))?;
            let rows: Vec<bf16> = de.to_vec(n * d).map_err(c)?;
            if !rows.iter().all(|x| x.to_f32().is_nan()) {
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
