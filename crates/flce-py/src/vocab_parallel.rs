//! The vocabulary-parallel loss's steps on CPU tensors (`flce.vocab_parallel`): each rank
//! holds rows [offset, offset + rows) of the classifier. Partials travel as float64 [N, 6]
//! tensors — (max, Σexp, Σw·z, argmax, target logit, target weight), every value exact in f64 —
//! and Σ_j w_j of the slice as a float.

use flce::cpu::vocab_parallel::{backward_slice, finish, forward_partials, Partials, SliceGradBuffers, VocabSlice};
use flce::spec::RowStats;
use flce::{bf16, effective_targets, f16, DType, Element, ForwardBuffers, GradOutput, Reduction};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::{to_py, DevicePtrs, HostPtrs, Problem};

const FIELDS: usize = 6;

fn encode(p: &Partials, out: &mut [f64]) {
    for (i, row) in out.chunks_exact_mut(FIELDS).enumerate() {
        let st = p.stats[i];
        row.copy_from_slice(&[
            st.max as f64,
            st.sum_exp as f64,
            st.weighted_logit_sum,
            st.argmax as f64,
            p.target_logit[i] as f64,
            p.target_weight[i] as f64,
        ]);
    }
}

fn decode(rows: &[f64], class_weight_sum: f64) -> Partials {
    let n = rows.len() / FIELDS;
    let mut p = Partials::empty(n);
    for (i, r) in rows.chunks_exact(FIELDS).enumerate() {
        p.stats[i] = RowStats { max: r[0] as f32, sum_exp: r[1] as f32, weighted_logit_sum: r[2], argmax: r[3] as u32 };
        p.target_logit[i] = r[4] as f32;
        p.target_weight[i] = r[5] as f32;
    }
    p.class_weight_sum = class_weight_sum;
    p
}

fn cpu_only(problem: &Problem) -> PyResult<()> {
    if problem.f64 {
        return Err(PyTypeError::new_err("the vocabulary-parallel loss takes bfloat16, float16 or float32 inputs"));
    }
    Ok(())
}

/// Phase 1 on this rank's slice: writes [N, 6] partials at `out` (f64), returns Σ_j w_j of the
/// slice. `problem` has V = the slice's rows.
#[pyfunction]
fn phase_forward_partials(
    py: Python<'_>,
    problem: &Problem,
    inputs: DevicePtrs,
    offset: usize,
    total: usize,
    out: usize,
) -> PyResult<f64> {
    cpu_only(problem)?;
    let p = HostPtrs::from(inputs);
    let slice = VocabSlice { offset, total };
    let n = problem.shape.n;
    py.detach(move || {
        // SAFETY: the Python caller passes data_ptr()s of live contiguous CPU tensors of the
        // problem's shape and dtype; `out` holds N·6 f64.
        unsafe {
            let part = match problem.dtype {
                DType::BF16 => forward_partials(&problem.host_inputs::<bf16>(&p), slice, &problem.opts),
                DType::F16 => forward_partials(&problem.host_inputs::<f16>(&p), slice, &problem.opts),
                DType::F32 => forward_partials(&problem.host_inputs::<f32>(&p), slice, &problem.opts),
            }?;
            encode(&part, std::slice::from_raw_parts_mut(out as *mut f64, n * FIELDS));
            Ok(part.class_weight_sum)
        }
    })
    .map_err(to_py)
}

/// Merge P ranks' partials ([P, N, 6] f64, rank order) and finish: writes lse \[N\] (and the
/// per-token loss), returns (loss, accuracy) and the merged partials at `merged` ([N, 6]).
/// `problem` has V = the whole vocabulary; `targets` are the given (i64) targets.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn phase_finish(
    py: Python<'_>,
    problem: &Problem,
    partials: usize,
    ranks: usize,
    class_weight_sum: f64,
    targets: usize,
    lse: usize,
    per_token_loss: Option<usize>,
    merged: usize,
) -> PyResult<(f64, Option<f64>)> {
    let n = problem.shape.n;
    py.detach(move || {
        // SAFETY: as above; `partials` holds P·N·6 f64, `merged` N·6, `lse` and the per-token
        // loss N f32, `targets` N i64.
        unsafe {
            let all = std::slice::from_raw_parts(partials as *const f64, ranks * n * FIELDS);
            let mut m = decode(&all[..n * FIELDS], 0.0);
            for k in 1..ranks {
                m.merge(&decode(&all[k * n * FIELDS..(k + 1) * n * FIELDS], 0.0))?;
            }
            m.class_weight_sum = class_weight_sum;
            let t = effective_targets(
                std::slice::from_raw_parts(targets as *const i64, n),
                problem.shape.v,
                &problem.opts,
            )?;
            let out = ForwardBuffers {
                lse: std::slice::from_raw_parts_mut(lse as *mut f32, n),
                per_token_loss: per_token_loss.map(|q| std::slice::from_raw_parts_mut(q as *mut f32, n)),
            };
            let s = finish(&m, &t, problem.shape.v, &problem.opts, out)?;
            encode(&m, std::slice::from_raw_parts_mut(merged as *mut f64, n * FIELDS));
            Ok((s.loss as f64, s.accuracy.map(|a| a as f64)))
        }
    })
    .map_err(to_py)
}

/// The backward on this rank's slice from the whole vocabulary's lse and merged partials: dE's
/// share (f32 [N, D], to be summed over ranks and rounded once), the slice's dC and db.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn phase_backward_slice(
    py: Python<'_>,
    problem: &Problem,
    inputs: DevicePtrs,
    offset: usize,
    total: usize,
    lse: usize,
    merged: usize,
    class_weight_sum: f64,
    grad_output: usize,
    grads: (Option<usize>, Option<usize>, Option<usize>),
) -> PyResult<()> {
    cpu_only(problem)?;
    let p = HostPtrs::from(inputs);
    let slice = VocabSlice { offset, total };
    py.detach(move || {
        // SAFETY: as above; gradient pointers hold [N, D] f32, [rows, D] and [rows] of the dtype.
        unsafe { run_backward(problem, &p, slice, lse, merged, class_weight_sum, grad_output, grads) }
    })
    .map_err(to_py)
}

#[allow(clippy::too_many_arguments)]
unsafe fn run_backward(
    problem: &Problem,
    p: &HostPtrs,
    slice: VocabSlice,
    lse: usize,
    merged: usize,
    class_weight_sum: f64,
    grad_output: usize,
    grads: (Option<usize>, Option<usize>, Option<usize>),
) -> flce::Result<()> {
    let flce::Shape { n, d, v } = problem.shape;
    let m = decode(std::slice::from_raw_parts(merged as *const f64, n * FIELDS), class_weight_sum);
    let lse = std::slice::from_raw_parts(lse as *const f32, n);
    let go = if problem.opts.reduction == Reduction::None {
        GradOutput::PerToken(std::slice::from_raw_parts(grad_output as *const f32, n))
    } else {
        GradOutput::Scalar(*(grad_output as *const f32))
    };
    fn typed<T: Element>(
        problem: &Problem,
        p: &HostPtrs,
        slice: VocabSlice,
        lse: &[f32],
        m: &Partials,
        go: GradOutput<'_>,
        grads: (Option<usize>, Option<usize>, Option<usize>),
        (n, d, v): (usize, usize, usize),
    ) -> flce::Result<()> {
        // SAFETY: as in phase_backward_slice.
        unsafe {
            let out = SliceGradBuffers {
                de_partial: grads.0.map(|q| std::slice::from_raw_parts_mut(q as *mut f32, n * d)),
                dc: grads.1.map(|q| std::slice::from_raw_parts_mut(q as *mut T, v * d)),
                dbias: grads.2.map(|q| std::slice::from_raw_parts_mut(q as *mut T, v)),
            };
            backward_slice(&problem.host_inputs::<T>(p), slice, &problem.opts, lse, m, go, out)
        }
    }
    match problem.dtype {
        DType::BF16 => typed::<bf16>(problem, p, slice, lse, &m, go, grads, (n, d, v)),
        DType::F16 => typed::<f16>(problem, p, slice, lse, &m, go, grads, (n, d, v)),
        DType::F32 => typed::<f32>(problem, p, slice, lse, &m, go, grads, (n, d, v)),
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(phase_forward_partials, m)?)?;
    m.add_function(wrap_pyfunction!(phase_finish, m)?)?;
    m.add_function(wrap_pyfunction!(phase_backward_slice, m)?)?;
    Ok(())
}
