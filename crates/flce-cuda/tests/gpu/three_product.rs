//! The three-product pass (`CudaLoss::forward_backward_three_product`, `plan::ThreeProductPlan`) against the f64 oracle
//! for grad_output 1: with one token chunk and with 128-token chunks (dC and db accumulated across
//! chunks), each run twice and compared bitwise, with the chunks' logits in f32 and, where the GPU
//! and the call allow it, in the sm90 forward's compact form (`plan::ThreeProductLogits`); for an expected
//! grad_output of 1/3 (mean and sum: the gradients formed for it, against the oracle at 1/3); with
//! dE in K-chunks summed in f32 (`plan::with_de_k_chunks`); and
//! `scale_gradients` by 0.5 (one rounding).

use flce_core::cpu::reference;
use flce_core::testing::{to_f64, RandomProblem};
use flce_core::{Element, Options};
use flce_cuda::plan::{
    three_product_plan, three_product_plan_with_chunk, with_de_k_chunks, ForwardBackwardPlan, MrefPlace, StatePlace,
    ThreeProductLogits, ThreeProductPlan, Wanted,
};
use flce_cuda::{CudaLoss, DeviceBuffer, DeviceForwardOutputs, DeviceGrads, UploadedInputs};

use crate::oracle::{bits, compare, poisoned, read_run, GpuRun, POISON};
use crate::Case;

pub(crate) fn three_product_run<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    c: &Case,
    plan: &ThreeProductPlan,
) -> Result<GpuRun<T>, String> {
    forward_backward_run(be, up, c, &ForwardBackwardPlan::ThreeProduct(plan.clone()))
}

/// Forward and gradients at once (`CudaLoss::forward_backward`: the three-product or the
/// vocabulary-slice pass), every output and the workspace poisoned first.
pub(crate) fn forward_backward_run<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    c: &Case,
    plan: &ForwardBackwardPlan,
) -> Result<GpuRun<T>, String> {
    forward_backward_run_at(be, up, c, plan, None)
}

/// [`forward_backward_run`] with the gradients formed for `grad_output` (None: 1).
pub(crate) fn forward_backward_run_at<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    c: &Case,
    plan: &ForwardBackwardPlan,
    grad_output: Option<f32>,
) -> Result<GpuRun<T>, String> {
    forward_backward_run_with(be, up, c, plan, grad_output, 0, Given::BOTH)
}

/// Which of lse and the status word a run gives the pass ([`forward_backward_run_with`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Given {
    pub lse: bool,
    pub status: bool,
}

impl Given {
    pub const BOTH: Given = Given { lse: true, status: true };
}

/// [`forward_backward_run_at`] with dC `dc_offset` bytes past its allocation's start (a whole number of
/// elements): a plan that keeps its per-token state in dC's buffer ([`StatePlace::DcBuffer`])
/// starts it at the buffer's first 256-byte boundary. Where `given` leaves lse or the status word
/// out the pass gets a null pointer for it: a one-chunk plan with its state in dC's buffer keeps
/// them there ([`ThreeProductPlan::lse`], [`ThreeProductPlan::status`]); a buffer the caller did not give must
/// stay poisoned (checked), and the run comes back with it.
pub(crate) fn forward_backward_run_with<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    c: &Case,
    plan: &ForwardBackwardPlan,
    grad_output: Option<f32>,
    dc_offset: usize,
    given: Given,
) -> Result<GpuRun<T>, String> {
    let s = up.inputs.shape;
    let go = grad_output.map(|g| DeviceBuffer::from_slice(&[g])).transpose().map_err(|e| e.to_string())?;
    let buf = poisoned;
    let es = std::mem::size_of::<T>();
    let (lse, ptl, scalars, status) = (buf(4 * s.n)?, buf(4 * s.n)?, buf(16)?, buf(4)?);
    let (de, dc_alloc) = (buf(s.n * s.d * es)?, buf(s.v * s.d * es + dc_offset)?);
    let db = if up.bias.is_some() { Some(buf(s.v * es)?) } else { None };
    let ws = buf(plan.workspace_bytes())?;
    let out = DeviceForwardOutputs {
        lse: if given.lse { lse.ptr() } else { 0 },
        per_token_loss: Some(ptl.ptr()),
        scalars: scalars.ptr(),
        status: if given.status { status.ptr() } else { 0 },
    };
    let dc_ptr = dc_alloc.ptr() + dc_offset as u64;
    let grads = DeviceGrads { de: Some(de.ptr()), dc: Some(dc_ptr), dbias: db.as_ref().map(|b| b.ptr()) };
    let go_ptr = go.as_ref().map(|b| b.ptr());
    unsafe {
        be.forward_backward(&up.inputs, &c.opts, &out, &grads, ws.workspace(), plan, go_ptr, std::ptr::null_mut())
    }
    .map_err(|e| e.to_string())?;
    be.context().synchronize().map_err(|x| format!("forward_backward ({}): {x:?}", plan.kind()))?;
    if !given.lse && !lse.to_vec::<u32>(s.n).map_err(|x| x.to_string())?.iter().all(|&w| w == POISON) {
        return Err("the pass wrote to an lse buffer it was not given".into());
    }
    let status_word = status.to_vec::<u32>(1).map_err(|x| x.to_string())?[0];
    match (given.status, status_word) {
        (false, POISON) => {}
        (false, w) => return Err(format!("the pass wrote {w:#x} to a status word it was not given")),
        (true, w) if w == i32::MAX as u32 => {}
        (true, w) => return Err(format!("status {w:#x} for good targets (i32::MAX expected)")),
    }
    if dc_offset == 0 {
        return read_run(s, [&scalars, &lse, &ptl, &de, &dc_alloc], db.as_ref());
    }
    // dC's elements from dc_offset on, as a buffer of their own for read_run
    let bytes = dc_alloc.to_vec::<u8>(s.v * s.d * es + dc_offset).map_err(|e| e.to_string())?;
    let dc = DeviceBuffer::from_slice(&bytes[dc_offset..]).map_err(|e| e.to_string())?;
    read_run(s, [&scalars, &lse, &ptl, &de, &dc], db.as_ref())
}

/// A compact plan with its per-tile maxima in dE's rows ([`MrefPlace::DeRows`]) given a dE 2 bytes
/// off a 4-byte boundary: a clear error before any kernel (lse keeps its poison).
pub(crate) fn misaligned_de_is_refused<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    c: &Case,
    plan: &ForwardBackwardPlan,
) -> Result<(), String> {
    let s = up.inputs.shape;
    let es = std::mem::size_of::<T>();
    let (lse, ptl, scalars, status) = (poisoned(4 * s.n)?, poisoned(4 * s.n)?, poisoned(16)?, poisoned(4)?);
    let (de, dc, ws) = (poisoned(s.n * s.d * es + 4)?, poisoned(s.v * s.d * es)?, poisoned(plan.workspace_bytes())?);
    let db = if up.bias.is_some() { Some(poisoned(s.v * es)?) } else { None };
    let out = DeviceForwardOutputs {
        lse: lse.ptr(),
        per_token_loss: Some(ptl.ptr()),
        scalars: scalars.ptr(),
        status: status.ptr(),
    };
    let grads = DeviceGrads { de: Some(de.ptr() + 2), dc: Some(dc.ptr()), dbias: db.as_ref().map(|b| b.ptr()) };
    let r = unsafe {
        be.forward_backward(&up.inputs, &c.opts, &out, &grads, ws.workspace(), plan, None, std::ptr::null_mut())
    };
    be.context().synchronize().map_err(|x| format!("after the misaligned dE: {x:?}"))?;
    let untouched = lse.to_vec::<u32>(s.n).map_err(|x| x.to_string())?.iter().all(|&w| w == POISON);
    match r {
        Err(e) if e.to_string().contains("4-byte aligned") && untouched => Ok(()),
        other => Err(format!("dE 2 bytes off: {:?}, lse untouched {untouched}", other.map_err(|e| e.to_string()))),
    }
}

pub(crate) fn check_three_product<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    c: &Case,
    p: &RandomProblem<T>,
    oracle: &reference::Reference,
    go: &[f32],
) -> Result<String, String> {
    let s = up.inputs.shape;
    let wanted = Wanted { de: true, dc: true, dbias: up.bias.is_some() };
    let here = be.three_product_logits(s, T::DTYPE, &c.opts);
    let storages = if here == ThreeProductLogits::F32 { vec![here] } else { vec![ThreeProductLogits::F32, here] };
    // a call with a softcap and label smoothing given a compact plan (which the planner never
    // makes for it): a clear error
    let without_softcap = be.three_product_logits(s, T::DTYPE, &Options { softcap: None, ..c.opts.clone() });
    if c.opts.softcap.is_some() && c.opts.label_smoothing > 0.0 && without_softcap != ThreeProductLogits::F32 {
        let plan = three_product_plan(s, T::DTYPE, wanted, usize::MAX, without_softcap).map_err(|e| e.to_string())?;
        match three_product_run::<T>(be, up, c, &plan) {
            Err(e) if e.contains("softcap") => {}
            other => return Err(format!("a compact plan with a softcap: {:?}", other.map(|_| "ran"))),
        }
    }
    let mut report = String::new();
    let mut chunked = None;
    for storage in storages {
        let name = storage.name();
        let one_chunk = three_product_plan(s, T::DTYPE, wanted, usize::MAX, storage).map_err(|e| e.to_string())?;
        // 128-token chunks: dC (and db) accumulated across chunks in f32
        let small = three_product_plan_with_chunk(s, T::DTYPE, wanted, 128, storage);
        if small.token_chunk != s.n.min(128) || small.storage != storage {
            return Err(format!("{name}: 128-token plan has chunks of {} ({:?})", small.token_chunk, small.storage));
        }
        if (small.token_chunks() > 1) != small.dc_acc.is_some() && T::DTYPE != flce_core::DType::F32 {
            return Err(format!("{name}: {} chunks with accumulator {:?}", small.token_chunks(), small.dc_acc));
        }
        // one chunk and 128-token chunks, each also with dE in K-chunks of 128 columns summed in f32
        // (plan::with_de_k_chunks: the accumulator in dC's buffer beside the state, or the
        // workspace); each twice bitwise, against the oracle
        let k_chunked = [&one_chunk, &small].map(|plan| with_de_k_chunks(plan.clone(), 128));
        let plans = [one_chunk.clone(), small.clone()]
            .into_iter()
            .chain(k_chunked.into_iter().filter(|k| k.de_k_chunks.is_some()));
        for plan in plans {
            let a = three_product_run::<T>(be, up, c, &plan)?;
            let b = three_product_run::<T>(be, up, c, &plan)?;
            let chunks = plan.token_chunks();
            // (one chunk keeps its per-token state in dC's buffer where it fits: StatePlace)
            let state = if plan.token_state == StatePlace::DcBuffer { ", state in dC" } else { "" };
            let de = plan.de_k_chunks.map_or(String::new(), |k| format!(", dE in K-chunks of 128 ({:?})", k.place));
            if bits(&a) != bits(&b) {
                return Err(format!("{name}, {chunks} token chunks{de}: results differ between two identical runs"));
            }
            let m = compare(c, p, oracle, go, &a)
                .map_err(|e| format!("three-product {name}, {chunks} chunks{state}{de}: {e}"))?;
            let sep = if report.is_empty() { "" } else { "; " };
            report.push_str(&format!("{sep}{name} {chunks} chunk(s){state}{de}: {m}"));
        }
        if one_chunk.token_state == StatePlace::DcBuffer {
            // dC one element off its allocation's 256-byte boundary: the state then starts at the
            // next one, 256 − one element into the buffer (the planner keeps 255 bytes spare)
            let es = std::mem::size_of::<T>();
            let plan = ForwardBackwardPlan::ThreeProduct(one_chunk.clone());
            let a = forward_backward_run_with::<T>(be, up, c, &plan, None, es, Given::BOTH)?;
            let m = compare(c, p, oracle, go, &a).map_err(|e| format!("{name}, dC {es} bytes off: {e}"))?;
            report.push_str(&format!("; dC {es} bytes off: {m}"));
            // no lse buffer, no status word, neither: the pass keeps them in dC's state, every
            // output bitwise as with both (the buffers not given stay poisoned: forward_backward_run_with)
            let with = forward_backward_run_with::<T>(be, up, c, &plan, None, 0, Given::BOTH)?;
            for given in [(false, true), (true, false), (false, false)].map(|(lse, status)| Given { lse, status }) {
                let mut without = forward_backward_run_with::<T>(be, up, c, &plan, None, 0, given)?;
                without.lse = with.lse.clone();
                if bits(&without) != bits(&with) {
                    return Err(format!("{name}, one chunk given {given:?}: outputs differ from the run with both"));
                }
            }
            report.push_str("; without lse / status: bitwise");
        }
        // several chunks keep no lse or status of their own: a null one is refused before any kernel
        if small.token_chunks() > 1 {
            let plan = ForwardBackwardPlan::ThreeProduct(small.clone());
            for (given, says) in [
                (Given { lse: false, status: true }, "keeps no lse"),
                (Given { lse: true, status: false }, "keeps no status"),
            ] {
                match forward_backward_run_with::<T>(be, up, c, &plan, None, 0, given) {
                    Err(e) if e.contains(says) => {}
                    other => {
                        return Err(format!("{name}: given {given:?} with several chunks: {:?}", other.map(|_| "ran")))
                    }
                }
            }
        }
        if one_chunk.m_ref == Some(MrefPlace::DeRows) {
            misaligned_de_is_refused::<T>(be, up, c, &ForwardBackwardPlan::ThreeProduct(one_chunk.clone()))?;
        }
        chunked = Some(small);
    }
    let chunked = chunked.expect("at least the f32 storage");
    // the gradients formed for an expected grad_output that is no power of two (Hugging Face's
    // 1 / num_items_in_batch): against the oracle at it, one chunk and 128-token chunks (dC's f32
    // accumulator rounded with the α it carries)
    if c.opts.reduction != flce_core::Reduction::None {
        let third = 1.0f32 / 3.0;
        let oracle = reference::evaluate(&p.inputs(), &c.opts, flce_core::GradOutput::Scalar(third))
            .map_err(|e| e.to_string())?;
        let one_chunk =
            three_product_plan(s, T::DTYPE, wanted, usize::MAX, chunked.storage).map_err(|e| e.to_string())?;
        for plan in [&one_chunk, &chunked] {
            let a =
                forward_backward_run_at::<T>(be, up, c, &ForwardBackwardPlan::ThreeProduct(plan.clone()), Some(third))?;
            let chunks = plan.token_chunks();
            let m = compare(c, p, &oracle, &[third], &a)
                .map_err(|e| format!("expected grad_output 1/3, {chunks} chunks: {e}"))?;
            report.push_str(&format!("; at 1/3, {chunks} chunk(s): {m}"));
        }
    }
    // the backward of the pass: gradients times grad_output, here 0.5 (exact in every dtype)
    let a = three_product_run::<T>(be, up, c, &chunked)?;
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
