//! The forward pass: effective targets, the plan's family's partial statistics, then the shared
//! finish step (lse, losses, scalars). Never synchronises the stream.

use flce_core::{Options, Result};

use crate::abi::FinishParams;
use crate::device::{DeviceForwardOutputs, DeviceInputs, Stream, Workspace};
use crate::family::{self, Family};
use crate::loss::CudaLoss;
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
        self.prep_targets(x, call.lp.k, targets, out.status, stream)?;
        match plan.family {
            Family::Cublas => family::cublas::forward_partials(&call, plan)?,
            Family::Sm80 => family::sm80::forward_partials(&call, plan)?,
        }
        let finish = FinishParams {
            k: call.lp.k,
            partials: ws.at(plan.partials),
            target_logit: ws.at(plan.target_logit),
            targets,
            class_w: call.lp.class_w,
            splits: plan.splits as i32,
            partials_ld: x.shape.n as i32,
            lse: out.lse,
            per_token_loss: out.per_token_loss.unwrap_or(0),
            out_scalars: out.scalars,
        };
        self.kernels.launch(x.dtype, &finish, stream)?;
        Ok(())
    }
}
