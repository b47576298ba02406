//! The three-product pass (`CudaLoss::forward_backward`, `plan::StepPlan`) against the f64 oracle
//! for grad_output 1: with one token chunk and with 128-token chunks (dC and db accumulated across
//! chunks), each run twice and compared bitwise; and `scale_gradients` by 0.5 (one rounding).

use flce_core::cpu::reference;
use flce_core::testing::{to_f64, RandomProblem};
use flce_core::Element;
use flce_cuda::plan::{step_plan, StepPlan, Wanted};
use flce_cuda::{CudaLoss, DeviceBuffer, DeviceForwardOutputs, DeviceGrads, UploadedInputs};

use crate::oracle::{bits, compare, poisoned, read_run, GpuRun};
use crate::Case;

pub(crate) fn step_run<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    c: &Case,
    plan: &StepPlan,
) -> Result<GpuRun<T>, String> {
    let s = up.inputs.shape;
    let buf = poisoned;
    let es = std::mem::size_of::<T>();
    let (lse, ptl, scalars, status) = (buf(4 * s.n)?, buf(4 * s.n)?, buf(16)?, buf(4)?);
    let (de, dc) = (buf(s.n * s.d * es)?, buf(s.v * s.d * es)?);
    let db = if up.bias.is_some() { Some(buf(s.v * es)?) } else { None };
    let ws = buf(plan.workspace_bytes)?;
    let out = DeviceForwardOutputs {
        lse: lse.ptr(),
        per_token_loss: Some(ptl.ptr()),
        scalars: scalars.ptr(),
        status: status.ptr(),
    };
    let grads = DeviceGrads { de: Some(de.ptr()), dc: Some(dc.ptr()), dbias: db.as_ref().map(|b| b.ptr()) };
    unsafe { be.forward_backward(&up.inputs, &c.opts, &out, &grads, ws.workspace(), plan, std::ptr::null_mut()) }
        .map_err(|e| e.to_string())?;
    be.context().synchronize().map_err(|x| format!("forward_backward: {x:?}"))?;
    read_run(s, [&scalars, &lse, &ptl, &de, &dc], db.as_ref())
}

pub(crate) fn check_step<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    c: &Case,
    p: &RandomProblem<T>,
    oracle: &reference::Reference,
    go: &[f32],
) -> Result<String, String> {
    let s = up.inputs.shape;
    let wanted = Wanted { de: true, dc: true, dbias: up.bias.is_some() };
    let one_chunk = step_plan(s, T::DTYPE, wanted, usize::MAX).map_err(|e| e.to_string())?;
    // the smallest budget with a plan: 128-token chunks (where one chunk needs no f32 dC
    // accumulator, the chunked plan does, so it is not one chunk's bytes less 128 tokens' rows)
    let (mut lo, mut hi) = (0usize, one_chunk.workspace_bytes);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if step_plan(s, T::DTYPE, wanted, mid).is_ok() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let small = lo;
    let chunked = step_plan(s, T::DTYPE, wanted, small).map_err(|e| e.to_string())?;
    if chunked.token_chunk != s.n.min(128) {
        return Err(format!("budget {small} gave token chunks of {}", chunked.token_chunk));
    }
    let mut report = String::new();
    for plan in [&one_chunk, &chunked] {
        let a = step_run::<T>(be, up, c, plan)?;
        let b = step_run::<T>(be, up, c, plan)?;
        if bits(&a) != bits(&b) {
            return Err(format!("{} token chunks: results differ between two identical runs", plan.token_chunks()));
        }
        let m =
            compare(c, p, oracle, go, &a).map_err(|e| format!("three-product, {} chunks: {e}", plan.token_chunks()))?;
        report = format!("{} chunk(s): {m}", plan.token_chunks());
    }
    // the backward of the pass: gradients times grad_output, here 0.5 (exact in every dtype)
    let a = step_run::<T>(be, up, c, &chunked)?;
    let dc = DeviceBuffer::from_slice(&a.dc).map_err(|e| e.to_string())?;
    let half = DeviceBuffer::from_slice(&[0.5f32]).map_err(|e| e.to_string())?;
    unsafe { be.scale_gradients(T::DTYPE, dc.ptr(), a.dc.len(), half.ptr(), std::ptr::null_mut()) }
        .map_err(|e| e.to_string())?;
    let scaled: Vec<T> = dc.to_vec(a.dc.len()).map_err(|e| e.to_string())?;
    // x·0.5 rounded once to the dtype (exact except for f16 subnormals, which it rounds)
    let want: Vec<f64> = a.dc.iter().map(|x| T::from_f32(x.to_f32() * 0.5).to_f64()).collect();
    if to_f64(&scaled) != want {
        return Err("scale_gradients(0.5) differs from the correctly rounded product".into());
    }
    Ok(report)
}
