//! The vocabulary-parallel loss's steps on CUDA tensors, for `flce.vocab_parallel`: the device-pointer calls of
//! `flce::cuda::vocab_parallel` on the caller's stream. Partials travel as float64 [N, 6] tensors, as the
//! CPU steps' (vocab_parallel.rs), and each rank's Σ_j w_j as a float64 \[1\] tensor, so the ranks can
//! gather them with torch.distributed without a host round trip.

use flce::cpu::vocab_parallel::VocabSlice;
use flce::cuda::vocab_parallel::{slice_backward_workspace_bytes, RankPartials, SlicePartials};
use flce::cuda::{plan::slice_backward_plan, Wanted};
use pyo3::prelude::*;

use crate::plans::{Plan, PlanKind};
use crate::{device_grads, forward_outputs, on_cuda, to_py, to_workspace, DevicePtrs, ForwardPtrs, GradPtrs, Problem};

/// The backward plan of a vocabulary slice (`problem` has V = its rows) on `device`, and the
/// workspace bytes `cuda_phase_backward_slice` needs with it (more than the plan's own when class
/// weights are given).
#[pyfunction]
fn cuda_slice_backward_plan(
    problem: &Problem,
    device: usize,
    wants: (bool, bool, bool),
    class_weights: bool,
) -> PyResult<(Plan, usize)> {
    problem.no_f64_on_cuda()?;
    let _ = flce::cuda_backend(device).map_err(to_py)?;
    let wanted = Wanted { de: wants.0, dc: wants.1, dbias: wants.2 };
    let plan = slice_backward_plan(problem.shape, problem.dtype, wanted, None).map_err(to_py)?;
    let bytes = slice_backward_workspace_bytes(&plan, class_weights);
    Ok((Plan { device, plan: PlanKind::Backward(plan) }, bytes))
}

/// Phase 1 on this rank's rows [offset, offset + V) of a vocabulary of `total`: `out` = (rows
/// f64 [N, 6], Σ w_j f64 \[1\], status i32 \[1\]); `plan` the slice's forward plan.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn cuda_phase_forward_partials(
    py: Python<'_>,
    problem: &Problem,
    cuda: (usize, u64),
    inputs: DevicePtrs,
    offset: usize,
    total: usize,
    out: (u64, u64, u64),
    workspace: (u64, usize),
    plan: &Plan,
) -> PyResult<()> {
    let device = cuda.0;
    let plan = plan.forward(device)?;
    let x = problem.device_inputs(inputs);
    let out = SlicePartials { rows: out.0, class_weight_sum: out.1, status: out.2 };
    let ws = to_workspace(workspace);
    let slice = VocabSlice { offset, total };
    let opts = &problem.opts;
    on_cuda(py, cuda, move |be, stream| {
        // SAFETY: the Python caller passes data_ptr()s of live CUDA tensors of the validated
        // shapes and dtypes on `device`, and torch's stream handle.
        unsafe { be.forward_partials_slice(&x, opts, slice, &out, ws, plan, stream) }
    })
}

/// Phase 3: the gathered partials `parts` = (rows f64 [P, N, 6], Σ w_j f64 \[P\], P) merged in rank
/// order into the forward's outputs over the whole vocabulary (`problem` has V = total), and the
/// merged rows at `merged` (f64 [N, 6]); `targets` the given int64 targets; `workspace` 4·N bytes.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn cuda_phase_finish(
    py: Python<'_>,
    problem: &Problem,
    cuda: (usize, u64),
    targets: u64,
    parts: (u64, u64, usize),
    outputs: ForwardPtrs,
    merged: u64,
    workspace: (u64, usize),
) -> PyResult<()> {
    problem.no_f64_on_cuda()?;
    let parts = rank_partials(parts);
    let out = forward_outputs(outputs);
    let ws = to_workspace(workspace);
    let (shape, opts) = (problem.shape, &problem.opts);
    on_cuda(py, cuda, move |be, stream| {
        // SAFETY: as in cuda_phase_forward_partials.
        unsafe { be.finish_ranks(shape, opts, targets, &parts, &out, merged, ws, stream) }
    })
}

/// Phase 4 on this rank's slice: dC / db of its rows and dE's f32 share (`grads` = (dE share
/// f32 [N, D], dC, db), None where not wanted), from the whole vocabulary's lse, the merged rows
/// and the gathered Σ w_j; `plan` and the workspace's size from `cuda_slice_backward_plan`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn cuda_phase_backward_slice(
    py: Python<'_>,
    problem: &Problem,
    cuda: (usize, u64),
    inputs: DevicePtrs,
    offset: usize,
    total: usize,
    lse: u64,
    merged: u64,
    parts: (u64, u64, usize),
    grad_output: u64,
    grads: GradPtrs,
    workspace: (u64, usize),
    plan: &Plan,
) -> PyResult<()> {
    let device = cuda.0;
    let plan = plan.backward(device)?;
    let x = problem.device_inputs(inputs);
    let parts = rank_partials(parts);
    let go = problem.grad_output(grad_output);
    let grads = device_grads(grads);
    let ws = to_workspace(workspace);
    let slice = VocabSlice { offset, total };
    let opts = &problem.opts;
    on_cuda(py, cuda, move |be, stream| {
        // SAFETY: as in cuda_phase_forward_partials.
        unsafe { be.backward_slice(&x, opts, slice, lse, merged, &parts, go, &grads, ws, plan, stream) }
    })
}

/// The gathered partials as the Python side passes them: (rows f64 [P, N, 6], Σ w_j f64 \[P\], P).
fn rank_partials(parts: (u64, u64, usize)) -> RankPartials {
    RankPartials { rows: parts.0, class_weight_sums: parts.1, ranks: parts.2 }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cuda_slice_backward_plan, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_phase_forward_partials, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_phase_finish, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_phase_backward_slice, m)?)?;
    Ok(())
}
