//! The sm80 family's launchers: flce's mma.sync tile main loop (kernels/sm80/tile_gemm.cuh) with
//! a forward epilogue that folds logits into per-token statistics (forward_tiles.cu) and a
//! backward epilogue that forms G (grad_tiles.cu). No logits reach memory.

use flce_core::Result;

use crate::abi::{ForwardTilesParams, GradChunk, GradTilesParams};
use crate::launch::Call;
use crate::plan::{BackwardPlan, ForwardPlan};

/// Forward: `plan.splits` partials per token, one per vocabulary split of the grid.
///
/// # Safety
/// As for [`crate::CudaLoss::forward`], with `plan` checked against the call.
pub(crate) unsafe fn forward_partials(call: &Call<'_>, plan: &ForwardPlan) -> Result<()> {
    let params = ForwardTilesParams {
        lp: call.lp,
        tiles_per_split: plan.tiles_per_split as i32,
        partials: call.ws.at(plan.partials),
        target_logit: call.ws.at(plan.target_logit),
    };
    call.kernels.launch(call.x.dtype, &params, call.stream)?;
    Ok(())
}

/// Backward: G (and the db column sums) of one chunk, its logits recomputed in the tiles.
///
/// # Safety
/// As for [`crate::CudaLoss::backward`], with `plan` checked against the call.
pub(crate) unsafe fn grad_chunk(call: &Call<'_>, _plan: &BackwardPlan, chunk: GradChunk) -> Result<()> {
    call.kernels.launch(call.x.dtype, &GradTilesParams { lp: call.lp, chunk }, call.stream)?;
    Ok(())
}
