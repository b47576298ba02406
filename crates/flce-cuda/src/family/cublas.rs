//! The cuBLAS family's launchers: cuBLAS writes a chunk of f32 logits, flce's kernels in
//! kernels/cublas consume it (stats.cu in the forward, grad_from_logits.cu in the backward).

use flce_core::{Error, Result};

use crate::abi::{GradChunk, GradLogitsParams, StatsParams};
use crate::blas::{Alpha, BoundBlas, Elem, Gemm, Mat};
use crate::launch::Call;
use crate::plan::{BackwardPlan, ForwardPlan, Region};

/// The plan's f32 logits region (every cuBLAS-family plan the planner makes has one).
fn logits_region(r: Option<Region>) -> Result<Region> {
    r.ok_or(Error::InvalidOption {
        name: "plan",
        value: "logits: None".into(),
        reason: "a cuBLAS-family plan needs a logits region",
    })
}

/// `logits (vlen × nlen, column-major, ld) = C[v0..]ᵀ · E[n0..]`: the f32 logits of a chunk,
/// row-major [nlen, ld] as the kernels read them.
///
/// # Safety
/// `logits` holds nlen × ld f32; the inputs as for the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn chunk_logits(
    call: &Call<'_>,
    blas: &BoundBlas<'_>,
    v0: usize,
    vlen: usize,
    n0: usize,
    nlen: usize,
    logits: u64,
    ld: usize,
) -> Result<()> {
    let (d, s) = (call.x.shape.d, call.x.dtype.size_in_bytes() as u64);
    let input = Elem::Input(call.x.dtype);
    Gemm {
        m: vlen,
        n: nlen,
        k: d,
        a: Mat::new(call.x.c + v0 as u64 * d as u64 * s, input, d).t(),
        b: Mat::new(call.x.e + n0 as u64 * d as u64 * s, input, d),
        alpha: Alpha::One,
        beta: 0.0,
        out: Mat::new(logits, Elem::F32, ld),
    }
    .run(blas)?;
    Ok(())
}

/// Forward: for each vocabulary chunk, its logits for every token, folded into one running
/// partial per token (in chunk order: deterministic).
///
/// # Safety
/// As for [`crate::CudaLoss::forward`], with `plan` checked against the call.
pub(crate) unsafe fn forward_partials(call: &Call<'_>, plan: &ForwardPlan) -> Result<()> {
    let logits = call.ws.at(logits_region(plan.logits)?);
    let blas = call.blas.bind(call.stream)?;
    let n = call.x.shape.n;
    for chunk in 0..plan.vocab_chunks() {
        let vocab = plan.vocab_range(chunk);
        chunk_logits(call, &blas, vocab.start, vocab.len(), 0, n, logits, plan.vocab_chunk)?;
        let stats = StatsParams {
            lp: call.lp,
            logits,
            ldl: plan.vocab_chunk as i32,
            v0: vocab.start as i32,
            v_end: vocab.end as i32,
            seg_cols: vocab.len() as i32,
            partials_ld: n as i32,
            first_chunk: (chunk == 0) as i32,
            partials: call.ws.at(plan.partials),
            target_logit: call.ws.at(plan.target_logit),
        };
        call.kernels.launch(call.x.dtype, &stats, call.stream)?;
    }
    Ok(())
}

/// Backward: G (and the db column sums) of one chunk from its recomputed f32 logits.
///
/// # Safety
/// As for [`crate::CudaLoss::backward`], with `plan` checked against the call.
pub(crate) unsafe fn grad_chunk(
    call: &Call<'_>,
    blas: &BoundBlas<'_>,
    plan: &BackwardPlan,
    chunk: GradChunk,
) -> Result<()> {
    let logits = call.ws.at(logits_region(plan.logits)?);
    let (v0, n0) = (chunk.v0 as usize, chunk.n0 as usize);
    let (vlen, nlen) = ((chunk.v_end - chunk.v0) as usize, (chunk.n_end - chunk.n0) as usize);
    chunk_logits(call, blas, v0, vlen, n0, nlen, logits, plan.ldg)?;
    let params = GradLogitsParams { lp: call.lp, chunk, logits, ldl: plan.ldg as i32 };
    call.kernels.launch(call.x.dtype, &params, call.stream)?;
    Ok(())
}
