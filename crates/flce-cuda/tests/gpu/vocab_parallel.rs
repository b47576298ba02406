//! The vocabulary-parallel loss's steps on one GPU: the vocabulary cut into uneven slices (one of
//! a single row), each slice's partials, the merge in rank order, each slice's backward and dE's
//! shares summed in rank order — against the whole-vocabulary call on the same GPU. They may
//! differ only by the reordering of f32 sums (the bound: 1e-5 relative at f32; bf16 and
//! f16 within a rounding of their gradients).

use flce_core::cpu::vocab_parallel::VocabSlice;
use flce_core::testing::{rel_err, to_f64, DataKind, RandomProblem};
use flce_core::{DType, Element, Options, Shape};
use flce_cuda::plan::slice_backward_plan;
use flce_cuda::vocab_parallel::{slice_backward_workspace_bytes, RankPartials, SlicePartials, PARTIAL_FIELDS};
use flce_cuda::{
    BackwardConfig, BackwardMode, CudaLoss, DeviceForwardOutputs, DeviceGrads, DeviceInputs, ForwardConfig,
};

use crate::oracle::{go_for, go_on_device, gpu_run, poisoned};

/// The inputs of a rank holding rows [offset, offset + rows) of the classifier (and of the bias
/// and class weights), and every token.
pub(crate) fn rows_of(x: &DeviceInputs, offset: usize, rows: usize) -> DeviceInputs {
    let es = x.dtype.size_in_bytes();
    DeviceInputs {
        c: x.c + (offset * x.shape.d * es) as u64,
        bias: x.bias.map(|b| b + (offset * es) as u64),
        class_weights: x.class_weights.map(|w| w + 4 * offset as u64),
        shape: Shape::new(x.shape.n, x.shape.d, rows),
        ..*x
    }
}

/// Slices [cuts\[k\], cuts[k+1]) of the vocabulary, one of them a single row.
fn cuts(v: usize) -> Vec<usize> {
    let a = (v / 3 + 5).min(v - 2);
    vec![0, a, a + 1, v]
}

pub(crate) fn run_vocab_parallel<T: Element>(
    be: &CudaLoss,
    shape: Shape,
    opts: &Options,
    bias: bool,
    weights: bool,
) -> Result<String, String> {
    let s = |e: flce_core::Error| e.to_string();
    let c = |e: flce_cuda::CudaError| e.to_string();
    let Shape { n, d, v } = shape;
    let es = std::mem::size_of::<T>();
    let p = RandomProblem::<T>::new(shape, 21, DataKind::Planted, 0.1, opts, bias, weights);
    let up = be.upload(&p.inputs(), opts).map_err(s)?;
    let go = go_for(opts, n);
    let config = BackwardConfig { mode: BackwardMode::CublasLogits, ..BackwardConfig::default() };
    let whole = gpu_run::<T>(be, &up, opts, &go, ForwardConfig::default(), config)?;

    let cuts = cuts(v);
    let ranks = cuts.len() - 1;
    let rows = poisoned(ranks * n * PARTIAL_FIELDS * 8)?;
    let sums = poisoned(ranks * 8)?;
    let status = poisoned(4)?;
    let slice_inputs = |k: usize| rows_of(&up.inputs, cuts[k], cuts[k + 1] - cuts[k]);
    // phase 1 on every slice
    for (k, &offset) in cuts[..ranks].iter().enumerate() {
        let x = slice_inputs(k);
        let plan = be.forward_plan(x.shape, x.dtype, ForwardConfig::default());
        let ws = poisoned(plan.workspace_bytes)?;
        let out = SlicePartials {
            rows: rows.ptr() + (k * n * PARTIAL_FIELDS * 8) as u64,
            class_weight_sum: sums.ptr() + 8 * k as u64,
            status: status.ptr(),
        };
        let slice = VocabSlice { offset, total: v };
        unsafe { be.forward_partials_slice(&x, opts, slice, &out, ws.workspace(), &plan, std::ptr::null_mut()) }
            .map_err(s)?;
    }
    // phase 3: the merge
    let (lse, ptl, sc, st) = (poisoned(4 * n)?, poisoned(4 * n)?, poisoned(16)?, poisoned(4)?);
    let merged = poisoned(n * PARTIAL_FIELDS * 8)?;
    let fws = poisoned(4 * n)?;
    let parts = RankPartials { rows: rows.ptr(), class_weight_sums: sums.ptr(), ranks };
    let out =
        DeviceForwardOutputs { lse: lse.ptr(), per_token_loss: Some(ptl.ptr()), scalars: sc.ptr(), status: st.ptr() };
    unsafe {
        be.finish_ranks(
            shape,
            opts,
            up.inputs.targets,
            &parts,
            &out,
            merged.ptr(),
            fws.workspace(),
            std::ptr::null_mut(),
        )
    }
    .map_err(s)?;
    // phase 4 on every slice: dC / db rows in place, dE's f32 shares side by side
    let dc = poisoned(v * d * es)?;
    let db = if bias { Some(poisoned(v * es)?) } else { None };
    let shares = poisoned(ranks * n * d * 4)?;
    let (_go_d, gop) = go_on_device(opts, &go)?;
    for (k, &offset) in cuts[..ranks].iter().enumerate() {
        let x = slice_inputs(k);
        let grads = DeviceGrads {
            de: Some(shares.ptr() + (k * n * d * 4) as u64),
            dc: Some(dc.ptr() + (offset * d * es) as u64),
            dbias: db.as_ref().map(|b| b.ptr() + (offset * es) as u64),
        };
        let plan = slice_backward_plan(x.shape, x.dtype, grads.wanted(), None).map_err(s)?;
        let ws = poisoned(slice_backward_workspace_bytes(&plan, weights))?;
        let slice = VocabSlice { offset, total: v };
        unsafe {
            be.backward_slice(
                &x,
                opts,
                slice,
                lse.ptr(),
                merged.ptr(),
                &parts,
                gop,
                &grads,
                ws.workspace(),
                &plan,
                std::ptr::null_mut(),
            )
        }
        .map_err(s)?;
    }
    be.context().synchronize().map_err(|e| format!("{e:?}"))?;

    let statuses: Vec<i32> = st.to_vec(1).map_err(c)?;
    if statuses[0] != flce_cuda::STATUS_OK {
        return Err(format!("status {} with valid targets", statuses[0]));
    }
    let scalars: Vec<f32> = sc.to_vec(4).map_err(c)?;
    let lse_s: Vec<f32> = lse.to_vec(n).map_err(c)?;
    let ptl_s: Vec<f32> = ptl.to_vec(n).map_err(c)?;
    let share: Vec<f32> = shares.to_vec(ranks * n * d).map_err(c)?;
    let de: Vec<T> =
        (0..n * d).map(|j| T::from_f32((0..ranks).fold(0.0f32, |acc, k| acc + share[k * n * d + j]))).collect();
    let dc_s: Vec<T> = dc.to_vec(v * d).map_err(c)?;
    let loss_rel = ((scalars[0] - whole.loss) as f64).abs() / (whole.loss as f64).abs().max(1e-30);
    let lse_rel = rel_err(&lse_s, &whole.lse);
    let ptl_rel = rel_err(&ptl_s, &whole.per_token);
    let de_rel = rel_err(&to_f64(&de), &to_f64(&whole.de));
    let dc_rel = rel_err(&to_f64(&dc_s), &to_f64(&whole.dc));
    let db_rel = match (&db, &whole.db) {
        (Some(b), Some(w)) => rel_err(&to_f64(&b.to_vec::<T>(v).map_err(c)?), &to_f64(w)),
        _ => 0.0,
    };
    let (stats_tol, grad_tol) = match T::DTYPE {
        DType::F32 => (1e-5, 1e-5),
        DType::BF16 => (1e-5, 8e-3),
        DType::F16 => (1e-5, 2e-3),
    };
    let report = format!(
        "{ranks} slices: loss {loss_rel:.1e}, lse {lse_rel:.1e}, per-token {ptl_rel:.1e}, dE {de_rel:.1e}, dC {dc_rel:.1e}, db {db_rel:.1e}"
    );
    let bad = loss_rel > stats_tol || lse_rel > stats_tol || ptl_rel > stats_tol;
    if bad || de_rel > grad_tol || dc_rel > grad_tol || db_rel > grad_tol || !scalars[0].is_finite() {
        return Err(format!("{report} (bounds {stats_tol:.0e} / {grad_tol:.0e} against the whole vocabulary)"));
    }
    Ok(report)
}
