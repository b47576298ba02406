//! The forward pass: effective targets, the plan's family's partial statistics, then the shared
//! finish step (lse, losses, scalars). Never synchronises the stream.

use flce_core::{Options, Result};

use crate::abi::{DevPtr, FinishParams, FinishScalarsParams, LossConstants};
use crate::context::BoundContext;
use crate::device::{DeviceForwardOutputs, DeviceInputs, Stream, Workspace};
use crate::family;
use crate::launch::Call;
use crate::loss::CudaLoss;
use crate::modes::Family;
use crate::plan::ForwardPlan;

impl CudaLoss {
    /// The fused forward: lse, loss and the optional outputs, on `stream`, as `plan` says (made by
    /// [`CudaLoss::forward_plan`] for this shape and dtype; `ws` holds its workspace bytes).
    ///
    /// # Safety
    /// Every pointer must be device memory of this backend's device, valid for the shapes and
    /// dtypes given, and stay valid until the work queued on `stream` has finished. Outputs must
    /// not overlap inputs or the workspace. `plan` must be one this backend's planner made (its
    /// shape, dtype and family are checked; its regions and chunk sizes are trusted).
    pub unsafe fn forward(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        out: &DeviceForwardOutputs,
        ws: Workspace,
        plan: &ForwardPlan,
        stream: Stream,
    ) -> Result<()> {
        x.validate(opts)?;
        out.check(x.shape.n, opts)?;
        self.check_plan(x, plan.shape, plan.dtype, plan.family)?;
        ws.check(plan.workspace_bytes)?;
        let targets = ws.at(plan.targets);
        let call = self.call(x, opts, targets, ws, stream)?;
        self.check_pointers(x.pointers().into_iter().chain(out.pointers()).chain([ws.pointer()]))?;
        self.prep_targets(x, call.lp.k, targets, out.status, stream)?;
        self.family_partials(&call, plan)?;
        let partials = Partials::new(ws.at(plan.partials), ws.at(plan.target_logit), plan.splits);
        self.finish(&call, partials, ws.at(plan.finish_sums), out)
    }

    /// The status word alone, as every call's first kernels compute it (effective targets into
    /// `scratch` \[N\] i32, then the first bad class weight or out-of-range target in `status`, or
    /// INT_MAX: common/types.cuh), on `stream`, without a plan or workspace. For a caller that
    /// checks its input on the host without waiting for a whole call: queue this, copy `status`
    /// to the host behind an event, queue the call, then wait for the event — the GPU has the
    /// call to run meanwhile (the Python binding's check of calls without a recomputing
    /// backward: flce/_common.py target_status, ops.py).
    ///
    /// # Safety
    /// As for [`CudaLoss::forward`]: `scratch` holds N i32 and `status` one, on this device.
    pub unsafe fn target_status(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        scratch: DevPtr,
        status: DevPtr,
        stream: Stream,
    ) -> Result<()> {
        x.validate(opts)?;
        let _bound = BoundContext::bind(self.context())?;
        let outputs = [("scratch", Some(scratch)), ("status", Some(status))];
        self.check_pointers(x.pointers().into_iter().chain(outputs))?;
        self.prep_targets(x, LossConstants::new(x.shape, opts), scratch, status, stream)
    }

    /// The plan's family writes each token's partial statistics (splits × N) and target logits
    /// into the workspace.
    ///
    /// # Safety
    /// As for [`CudaLoss::forward`], with the call's targets prepared.
    pub(crate) unsafe fn family_partials(&self, call: &Call<'_>, plan: &ForwardPlan) -> Result<()> {
        match plan.family {
            Family::Cublas => family::cublas::forward_partials(call, plan),
            Family::Sm80 => family::sm80::forward_partials(call, plan),
            // TMA needs 16-byte aligned rows: other pointers take the portable kernel, same layout
            Family::Sm90 if !call.x.rows_aligned() => family::sm80::forward_partials(call, plan),
            Family::Sm90 => family::sm90::forward_partials(call, plan),
        }
    }

    /// The shared finish step over all N tokens: merge the partials per token into lse and
    /// losses, each block's sums into `block_sums` ([`crate::geometry::finish_sums_bytes`] of
    /// workspace), then those into the scalars.
    ///
    /// # Safety
    /// The partials and target logits were written by a family's forward on the call's stream.
    pub(crate) unsafe fn finish(
        &self,
        call: &Call<'_>,
        partials: Partials,
        block_sums: DevPtr,
        out: &DeviceForwardOutputs,
    ) -> Result<()> {
        let per_token_loss = out.per_token_loss.unwrap_or(0);
        self.merge_partials(call, call.lp.k, call.lp.targets, partials, out.lse, per_token_loss, block_sums)?;
        let scalars = FinishScalarsParams {
            k: call.lp.k,
            class_w: call.lp.class_w,
            block_sums,
            blocks: crate::geometry::finish_blocks(call.x.shape.n) as i32,
            out_scalars: out.scalars,
        };
        self.kernels.launch(call.x.dtype, &scalars, call.stream)?;
        Ok(())
    }

    /// flce_forward_finish over the `k.n` tokens whose effective targets are at `targets`: their
    /// partials (ld N, the call's tokens) merged into lse (and per-token losses, and the blocks'
    /// sums, where those pointers are not 0). [`Self::finish`] runs it over every token; the
    /// three-product pass over each chunk's, lse only.
    ///
    /// # Safety
    /// As for [`Self::finish`]; `lse` (and `per_token_loss`) hold `k.n` f32, `block_sums`
    /// [`crate::geometry::finish_sums_bytes`]`(k.n)` bytes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn merge_partials(
        &self,
        call: &Call<'_>,
        k: LossConstants,
        targets: DevPtr,
        partials: Partials,
        lse: DevPtr,
        per_token_loss: DevPtr,
        block_sums: DevPtr,
    ) -> Result<()> {
        let merge = FinishParams {
            k,
            partials: partials.stats,
            target_logit: partials.target_logit,
            targets,
            class_w: call.lp.class_w,
            splits: partials.splits as i32,
            partials_ld: call.x.shape.n as i32,
            lse,
            per_token_loss,
            block_sums,
            offset_split: partials.offset_split as i32,
            argmax_offset: partials.argmax_offset as i32,
        };
        self.kernels.launch(call.x.dtype, &merge, call.stream)?;
        Ok(())
    }
}

/// A family's per-token partial statistics in the workspace: `splits` rows of N packed RowStats
/// (split k at `stats` + 16·N·k) and the target logits \[N\]; the splits from `offset_split` on
/// count their argmax from vocabulary row `argmax_offset` (the vocabulary-slice pass's rest;
/// 0 and 0: every split counts from row 0).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Partials {
    pub stats: DevPtr,
    pub target_logit: DevPtr,
    pub splits: usize,
    pub offset_split: usize,
    pub argmax_offset: usize,
}

impl Partials {
    /// Splits whose argmax counts from row 0.
    pub(crate) fn new(stats: DevPtr, target_logit: DevPtr, splits: usize) -> Self {
        Partials { stats, target_logit, splits, offset_split: 0, argmax_offset: 0 }
    }
}
